"""verl's agent loop and the ``bot_token`` manager: the response mask in, dense token rewards out.

verl 0.9.1 has no extension point for either (``verl/experimental/agent_loop/agent_loop.py``):

- ``AgentLoopWorker._compute_score`` hands the streaming reward worker the outputs' token ids but not their
  ``response_mask``, so a reward manager cannot tell the assistant's turns from tool output. For the runs that
  use the plugin, the wrapper adds the final output's mask as one more input column
  (:data:`~bot_grpo_verl.reward.turns.RESPONSE_MASK_KEY`); reward functions never see it (verl's managers pass them
  only ``extra_info`` and the ``tool_extra_fields``).
- ``AgentLoopOutput.as_dict`` writes a sample's reward on its last response token. The wrapper writes the
  token rewards of a :class:`~bot_grpo_verl.reward.manager.TokenRewardScore` instead (streaming reward path
  of the V1 trainer, training and validation). Only the ``bot_token`` manager (or a subclass) returns such a
  score, so a run that does not select it is left as verl made it.

``patches/verl-0.9.1/0001-agent-loop-token-level-rewards.patch`` and ``0002-agent-loop-response-mask-to-reward-worker``
would make both wrappers unnecessary (``docs/verl-seams.md``).
"""

from __future__ import annotations

import inspect

from bot_grpo_verl.reward.turns import RESPONSE_MASK_KEY
from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once


def adapt_agent_loop_output() -> None:
    """Make ``AgentLoopOutput.as_dict`` write a ``TokenRewardScore``'s token rewards as ``rm_scores``."""
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    require(
        {"reward_score", "response_ids", "response_mask"} <= set(AgentLoopOutput.model_fields)
        and hasattr(AgentLoopOutput, "as_dict"),
        "verl.experimental.agent_loop.agent_loop.AgentLoopOutput",
        "it has the fields reward_score, response_ids, response_mask and the method as_dict",
    )

    def make_wrapper(as_dict):
        def dense_as_dict(self):
            output = as_dict(self)
            token_rewards = getattr(self.reward_score, "token_rewards", None)
            # Earlier outputs of a multi-output session share the final output's score: they keep
            # verl's last-token reward, as with any other reward manager.
            if token_rewards is not None and len(token_rewards) == len(self.response_ids):
                output["rm_scores"] = torch.tensor(token_rewards, dtype=torch.float32)
            return output

        return dense_as_dict

    wrap_once(AgentLoopOutput, "as_dict", make_wrapper)


def adapt_reward_inputs(selects) -> None:
    """Give the reward worker each session's final ``response_mask`` (:data:`RESPONSE_MASK_KEY`) in the runs
    that ``selects(config, reward_manager_cls)`` (:data:`~bot_grpo_verl.verl_compat.metrics.RunSelector`).

    ``@ray.remote`` copies every method of an actor class into a class of its own when the class is decorated (for
    Ray's tracing), and a class decorated by value travels to the workers with those copies. So the wrapper is set
    before anything here imports a module that decorates a subclass (verl's V1 ``AgentLoopWorkerTQ``), the copies
    of the subclasses decorated earlier are wrapped too, and the wrapper keeps its per-worker decision on the worker
    (a closure over a weak dictionary could not be pickled with the class).
    """
    import numpy as np
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    require(
        list(inspect.signature(AgentLoopWorker._compute_score).parameters)[:3] == ["self", "outputs", "kwargs"]
        and "**{k: np.array([v] * n) for k, v in kwargs.items()}" in source_of(AgentLoopWorker._compute_score),
        "verl.experimental.agent_loop.agent_loop.AgentLoopWorker._compute_score",
        "it is (self, outputs, kwargs) and repeats each of kwargs as a reward input column",
    )

    def make_wrapper(compute_score):
        async def with_response_mask(self, outputs, kwargs, *args, **more):  # more: Ray's tracing context
            if not hasattr(self, DECISION):
                from verl.trainer.ppo.reward import resolve_reward_manager_cls

                setattr(self, DECISION, selects(self.config, resolve_reward_manager_cls(self.config)))
            if getattr(self, DECISION):
                kwargs = {**kwargs, RESPONSE_MASK_KEY: np.asarray(outputs[-1].response_mask, dtype=np.int8)}
            return await compute_score(self, outputs, kwargs, *args, **more)

        return with_response_mask

    for owner in (AgentLoopWorker, *subclasses(AgentLoopWorker)):
        if "_compute_score" in vars(owner):
            wrap_once(owner, "_compute_score", make_wrapper)


DECISION = "_bot_grpo_uses_plugin"
"""The attribute of an agent-loop worker that holds whether its run uses the plugin (decided at its first score)."""


def subclasses(cls: type) -> list[type]:
    """Every subclass of ``cls``, at any depth."""
    found = []
    for subclass in cls.__subclasses__():
        found += [subclass, *subclasses(subclass)]
    return found
