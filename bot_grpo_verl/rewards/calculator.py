"""A calculator tool for verl's tool agent loop: exact arithmetic on integers, with a reward per call.

verl loads it by path (its ``@function_tool`` registers it there; importing it twice by two names would register
it twice, which verl refuses)::

    actor_rollout_ref.rollout.multi_turn.enable=true
    actor_rollout_ref.rollout.multi_turn.function_tool_path=$(bot-grpo-verl reward-path calculator)
    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent

A call returns the value (a fraction in lowest terms when it is not an integer) and the reward 1.0, or an
error message and the reward 0.0; verl collects the rewards of a rollout's calls in its ``tool_rewards``, which
``reward.bot_token.verl_values=tool_rewards`` places on the calls' tokens.
"""

from __future__ import annotations

from verl.tools.function_tool import function_tool

from bot_grpo_verl.rewards.exact_arithmetic import answer


@function_tool
def calculator(expression: str) -> tuple[str, float]:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: integers with + - * / and parentheses, such as "(12 + 30) / 2".
    """
    return answer(expression)
