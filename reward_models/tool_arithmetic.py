r"""Reward of the calculator task (``demo/tool_arithmetic.py``): the outcome, and one value per assistant turn.

Use with verl's ``tool_agent`` loop and the calculator tool (``reward_models/calculator.py``)::

    reward.custom_reward_function.path=reward_models/tool_arithmetic.py
    +reward.custom_reward_function.reward_kwargs.score=turn_min      # what the score is (see ToolArithmeticConfig)

A row carries the problem's answer (``ground_truth``) and the value after each of its operations
(``extra_info["values"]``). In a session:

- a **tool call** (a ``<tool_call>`` block verl's ``hermes`` parser accepts) *progresses* when its expression's exact
  value is the problem's value after a later operation than any call before it reached: 1 if it does, else 0
  (a malformed expression, a wrong number copied, a repeated call);
- the **outcome** is 1 when the text after the last tool call (the tool's answer, then the final assistant turn)
  boxes the answer (``\boxed{n}``), else 0;
- the **turn values**: with the ``bot_token`` manager (``extra_info["turn_spans"]``, ``["call_spans"]``), one per
  assistant turn, returned as ``turn_rewards``: the smallest progress of the turn's calls, or the outcome for a turn
  without a call. From the text alone (verl's ``naive`` manager: the outcome baselines), one per call and the
  outcome: the same values when every turn makes one call and the last makes none, as verl's ``tool_agent`` loop
  runs it with ``multi_turn.max_parallel_calls=1``.

Returned: ``score`` (see :class:`ToolArithmeticConfig`), ``acc`` (the outcome), ``calls``, ``calls_progressing`` and,
with turn spans, ``turn_rewards``.
"""

# No ``from __future__ import annotations``: verl's loader does not register this module in sys.modules,
# and dataclasses look string annotations up there.
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot_grpo_verl.options import check_option_values, options_from_kwargs
from bot_grpo_verl.reward.turns import TOOL_CALL, is_tool_call
from bot_grpo_verl.rewards.exact_arithmetic import evaluate

SCORES = ("answer", "turn_mean", "turn_min")
BOXED_INTEGER = re.compile(r"\\boxed\{\s*(-?\d{1,30})\s*\}")


@dataclass(frozen=True)
class ToolArithmeticConfig:
    """Options of :func:`compute_score`, passed as ``+reward.custom_reward_function.reward_kwargs.<name>=<value>``.

    Parameters:
        score (`str`, *optional*, defaults to `"answer"`):
            What the ``score`` is: ``"answer"``, the outcome; ``"turn_mean"`` or ``"turn_min"``, the mean or the
            smallest of the turn values. The last two let an outcome-level algorithm (GRPO) use the per-turn
            information BoT-GRPO gets, scalarised by its mean or by its minimum (PRM-min, as in PURE,
            arXiv:2504.15275): the same-information baselines of issue 27.
    """

    score: str = "answer"

    def __post_init__(self):
        check_option_values(self, "", choices={"score": SCORES})

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> "ToolArithmeticConfig":
        """The config from ``compute_score``'s keyword arguments; an unknown name raises ``ValueError``."""
        return options_from_kwargs(cls, kwargs, "tool_arithmetic")


def call_value(body: str):
    """The exact value of a tool call's ``arguments.expression`` (``body``: the JSON inside the block), None when
    the call has no expression string or the calculator refuses it."""
    arguments = json.loads(body).get("arguments")
    expression = arguments.get("expression") if isinstance(arguments, dict) else None
    if not isinstance(expression, str):
        return None
    try:
        return evaluate(expression)
    except ValueError:
        return None


def progress(bodies: list[str], values: list[int]) -> list[float]:
    """1.0 for each call (``bodies``, in order) whose value is ``values[k]`` for a ``k`` beyond every ``k`` an
    earlier call reached, else 0.0."""
    reached, result = -1, []
    for body in bodies:
        value = call_value(body)
        later = [k for k, expected in enumerate(values) if k > reached and value == expected]
        reached = later[0] if later else reached
        result.append(1.0 if later else 0.0)
    return result


def outcome(text: str, answer: str) -> float:
    """1.0 when the last ``\\boxed{integer}`` of ``text`` is ``answer``, else 0.0."""
    boxed = BOXED_INTEGER.findall(text)
    return float(bool(boxed) and int(boxed[-1]) == int(answer))


def text_calls(text: str) -> list[re.Match]:
    """The tool call blocks of ``text`` that verl's ``hermes`` parser accepts, in order."""
    return [found for found in TOOL_CALL.finditer(text) if is_tool_call(found[1])]


def turn_values(turn_spans, call_spans, moves: list[float], answered: float) -> list[float]:
    """One value per assistant turn: the smallest progress (``moves``, one per call of ``call_spans``) of the turn's
    calls, ``answered`` (the outcome) for a turn without one."""
    values = []
    for start, end in turn_spans:
        inside = [move for (call_start, _), move in zip(call_spans, moves, strict=True) if start <= call_start < end]
        values.append(min(inside) if inside else answered)
    return values


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Score one session (see the module docstring); ``extra_info["values"]``: the problem's value after each
    operation."""
    config = ToolArithmeticConfig.from_kwargs(kwargs)
    extra_info = extra_info or {}
    values = [int(value) for value in extra_info["values"]]
    if "call_spans" in extra_info:
        bodies = [solution_str[start:end] for start, end in extra_info["call_spans"]]
        bodies = [TOOL_CALL.fullmatch(body)[1] for body in bodies]
        tail_start = extra_info["call_spans"][-1][1] if extra_info["call_spans"] else 0
    else:
        calls = text_calls(solution_str)
        bodies = [call[1] for call in calls]
        tail_start = calls[-1].end() if calls else 0
    moves = progress(bodies, values)
    answered = outcome(solution_str[tail_start:], ground_truth)
    result = {"acc": answered, "calls": len(bodies), "calls_progressing": sum(moves)}
    if "turn_spans" in extra_info:
        result["turn_rewards"] = turn_values(extra_info["turn_spans"], extra_info["call_spans"], moves, answered)
        turns = result["turn_rewards"] or [answered]
    else:
        turns = [*moves, answered]
    score = {"answer": answered, "turn_mean": sum(turns) / len(turns), "turn_min": min(turns)}[config.score]
    return {"score": score, **result}
