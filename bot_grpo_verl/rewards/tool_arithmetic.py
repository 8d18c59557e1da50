r"""Reward of the calculator task (``demo/tool_arithmetic.py``): the outcome, and one value per assistant turn.

Use with verl's ``tool_agent`` loop and the calculator tool (``bot_grpo_verl/rewards/calculator.py``)::

    reward.custom_reward_function.path=bot_grpo_verl/rewards/tool_arithmetic.py
    +reward.custom_reward_function.reward_kwargs.score=turn_min      # what the score is (see ToolArithmeticConfig)

A row carries the problem's answer (``ground_truth``) and the value after each of its operations
(``extra_info["values"]``). In a session:

- a **tool call** (a ``<tool_call>`` block verl's ``hermes`` parser accepts) *progresses* when its expression's exact
  value is the problem's value after a later operation than any call before it reached: 1 if it does, else 0
  (a malformed expression, a wrong number copied, a repeated call);
- the **outcome** is 1 when the assistant's text after the last tool call boxes the answer (``\boxed{n}``), else 0;
- the **turn values**: with the ``bot_token`` manager (``extra_info["turn_spans"]``, ``["call_spans"]``), one per
  assistant turn, returned as ``turn_rewards``: the smallest progress of the turn's calls, or the outcome for a turn
  without a call. From the text alone (verl's ``naive`` manager: the outcome baselines), one per call and the
  outcome: the same values when every turn makes one call and the last makes none, as verl's ``tool_agent`` loop
  runs it with ``multi_turn.max_parallel_calls=1``.

Only the policy's text counts: calls and boxes inside a tool's response are not the policy's (a calculator error
quotes the expression it got, verl's "Unknown function" quotes the name, so a response can carry a ``<tool_call>``
block the policy never made). With the manager's spans the assistant turns are verl's (its response mask); from the
text alone they are the text outside the tool responses, which the chat template frames (``tool_open`` ...
``tool_close``). Those markers must frame exactly as many responses as verl executed calls (``extra_info
["tool_rewards"]``, one per call, which verl's naive manager passes on) and alternate: extra markers (written into a
response, or by the policy) make the frame untrustworthy, and then each of verl's calls counts as not progressing.

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
MARKERS = ("tool_open", "tool_close")
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
        tool_open (`str`, *optional*, defaults to `"\\ntool\\n"`):
            The text that opens a tool's response in a session as verl's naive manager decodes it (special tokens
            skipped): the demo's chat template; Qwen2.5's is ``"\\nuser\\n<tool_response>\\n"``. Read without the
            manager's spans only.
        tool_close (`str`, *optional*, defaults to `"\\nassistant\\n"`):
            The text that closes a tool's response and opens the next assistant turn: the demo's chat template;
            Qwen2.5's is ``"\\n</tool_response>\\nassistant\\n"``. Read without the manager's spans only.
    """

    score: str = "answer"
    tool_open: str = "\ntool\n"
    tool_close: str = "\nassistant\n"

    def __post_init__(self):
        markers = {name: isinstance(getattr(self, name), str) and getattr(self, name) for name in MARKERS}
        check_option_values(self, "", choices={"score": SCORES}, ranges=markers, requirement="must be a non-empty str")

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


def outcome(text: str, spans, start: int, answer: str) -> float:
    """1.0 when the last ``\\boxed{integer}`` of the assistant's text (``spans``: its ``[start, end)`` character
    spans in ``text``, in order) from ``start`` on is ``answer``, else 0.0."""
    boxed = [value for first, end in spans for value in BOXED_INTEGER.findall(text, max(first, start), end)]
    return float(bool(boxed) and int(boxed[-1]) == int(answer))


def text_calls(text: str, spans) -> list[re.Match]:
    """The tool call blocks that verl's ``hermes`` parser accepts inside the ``[start, end)`` character ``spans`` of
    ``text``, in order."""
    return [found for start, end in spans for found in TOOL_CALL.finditer(text, start, end) if is_tool_call(found[1])]


def occurrences(text: str, marker: str) -> list[int]:
    """Where ``marker`` starts in ``text``, overlapping occurrences included, in order."""
    found, at = [], text.find(marker)
    while at != -1:
        found.append(at)
        at = text.find(marker, at + 1)
    return found


def assistant_spans(text: str, executed: int | None, config: ToolArithmeticConfig) -> list[tuple[int, int]] | None:
    """The assistant turns of a session's text: ``[start, end)`` character spans outside the tool responses, each
    response ``config.tool_open`` ... ``config.tool_close`` (the last may run to the end of the text). None when the
    markers do not alternate, or frame other than ``executed`` responses (verl's count of executed calls; None: not
    checked)."""
    opens, closes = occurrences(text, config.tool_open), occurrences(text, config.tool_close)
    if len(closes) not in (len(opens), len(opens) - 1) or executed not in (None, len(opens)):
        return None
    bounds = [0]
    for number, start in enumerate(opens):
        if start < bounds[-1] or (number < len(closes) and closes[number] < start + len(config.tool_open)):
            return None
        bounds += [start, closes[number] + len(config.tool_close)] if number < len(closes) else [start, start]
    spans = list(zip(bounds[::2], [*bounds[1::2], len(text)], strict=True))
    return spans if len(closes) == len(opens) else spans[:-1]


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
    executed = extra_info.get("tool_rewards")
    if "call_spans" in extra_info:
        spans = extra_info["turn_spans"] if "turn_spans" in extra_info else [(0, len(solution_str))]
        calls = [
            (start, end, TOOL_CALL.fullmatch(solution_str[start:end])[1]) for start, end in extra_info["call_spans"]
        ]
    else:
        spans = assistant_spans(solution_str, None if executed is None else len(executed), config)
        calls = [(call.start(), call.end(), call[1]) for call in text_calls(solution_str, spans or [])]
    tail_start = calls[-1][1] if calls else 0
    if spans is None:  # an untrustworthy frame: no call of the text counts, and each of verl's calls fails
        moves, answered = [0.0] * len(executed or []), 0.0
    else:
        moves = progress([body for _, _, body in calls], values)
        answered = outcome(solution_str, spans, tail_start, ground_truth)
    result = {"acc": answered, "calls": len(moves), "calls_progressing": sum(moves)}
    if "turn_spans" in extra_info:
        result["turn_rewards"] = turn_values(extra_info["turn_spans"], extra_info["call_spans"], moves, answered)
        turns = result["turn_rewards"] or [answered]
    else:
        turns = [*moves, answered]
    score = {"answer": answered, "turn_mean": sum(turns) / len(turns), "turn_min": min(turns)}[config.score]
    return {"score": score, **result}
