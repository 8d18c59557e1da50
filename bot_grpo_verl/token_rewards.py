"""The token-level reward contract that users' reward functions write against.

A verl custom reward function (``compute_score(data_source, solution_str, ground_truth, extra_info,
**kwargs)``, sync or async) returns either

- a float: the outcome score only (BoT-GRPO then reduces to GRPO), or
- a dict with ``"score"`` (float, the outcome) plus at most one of
  - ``"token_rewards"``: one value per response token (the response's valid tokens, in order);
  - ``"spans"``: ``(char_start, char_end, value)`` triples over ``solution_str``, half-open
    ``[char_start, char_end)``; tokens that no span covers get the outcome score;
  and any other scalar keys, which are logged like verl's ``reward_extra_info``.

:func:`line_spans`, :func:`step_spans` and :func:`split_steps` turn per-line and per-step values into
spans, the form that compilers, parsers and PRM step splitters naturally produce.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Span = tuple[int, int, float]

RESERVED_KEYS = ("score", "token_rewards", "spans")


@dataclass(frozen=True)
class TokenRewardResult:
    """A reward function's return value, checked and normalised.

    Attributes:
        score: the outcome score.
        spans: ``(char_start, char_end, value)`` over the response text, or None.
        token_rewards: one value per valid response token, or None.
        extra: the other scalar keys of the returned dict (logged, never used as rewards).
    """

    score: float
    spans: tuple[Span, ...] | None = None
    token_rewards: tuple[float, ...] | None = None
    extra: dict[str, float] = field(default_factory=dict)


def _finite(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is not finite: {number}")
    return number


def parse_reward_result(result, text_length: int) -> TokenRewardResult:
    """Check a reward function's return value against the contract; raise ``ValueError`` naming the problem.

    ``text_length`` is ``len(solution_str)``: spans must lie within it.
    """
    if not isinstance(result, Mapping):
        if isinstance(result, bool) or not isinstance(result, int | float):
            raise ValueError(
                f"a reward function must return a float or a dict with 'score', got {type(result).__name__}"
            )
        return TokenRewardResult(score=_finite(result, "score"))
    if "score" not in result:
        raise ValueError(f"the returned dict has no 'score' key (keys: {sorted(result)})")
    score = _finite(result["score"], "score")
    if result.get("spans") is not None and result.get("token_rewards") is not None:
        raise ValueError("return either 'spans' or 'token_rewards', not both")

    spans = None
    if result.get("spans") is not None:
        spans = []
        for number, span in enumerate(result["spans"]):
            if not isinstance(span, Sequence) or len(span) != 3:
                raise ValueError(f"span {number} must be (char_start, char_end, value), got {span!r}")
            start, end, value = span
            if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool):
                raise ValueError(f"span {number} {span!r}: char_start and char_end must be integers")
            if not 0 <= start <= end <= text_length:
                raise ValueError(
                    f"span {number} {span!r} is out of range or reversed: need 0 <= start <= end <= {text_length}"
                )
            spans.append((start, end, _finite(value, f"span {number} value")))
        spans = tuple(spans)

    token_rewards = None
    if result.get("token_rewards") is not None:
        token_rewards = tuple(
            _finite(value, f"token_rewards[{number}]") for number, value in enumerate(result["token_rewards"])
        )

    extra = {}
    for key, value in result.items():
        if key in RESERVED_KEYS:
            continue
        if not isinstance(value, numbers.Real):
            raise ValueError(f"extra key {key!r} must be a scalar number (verl averages it), got {value!r}")
        extra[key] = float(value)
    return TokenRewardResult(score=score, spans=spans, token_rewards=token_rewards, extra=extra)


def split_steps(text: str, separator: str = "\n\n") -> list[tuple[int, int]]:
    """Character ranges ``[start, end)`` of the steps of ``text`` split by ``separator``.

    A step's range includes the separator run that follows it, and blank steps are joined to the next
    step (or the last one at the end), so the ranges tile the whole text and every character, hence
    every token, belongs to exactly one step.
    """
    if not separator:
        raise ValueError("the step separator must be a non-empty string")
    ranges: list[tuple[int, int]] = []
    start = 0
    for run in re.finditer(f"(?:{re.escape(separator)})+", text):
        if text[start : run.start()].strip():
            ranges.append((start, run.end()))
            start = run.end()
    if start < len(text):
        if text[start:].strip() or not ranges:
            ranges.append((start, len(text)))
        else:
            ranges[-1] = (ranges[-1][0], len(text))
    return ranges


def step_spans(text: str, values: Sequence[float], separator: str = "\n\n") -> list[Span]:
    """Spans giving step k of ``text`` (split as by :func:`split_steps`) the value ``values[k]``."""
    ranges = split_steps(text, separator)
    if len(values) != len(ranges):
        raise ValueError(f"got {len(values)} step values for {len(ranges)} steps split by {separator!r}")
    return [(start, end, float(value)) for (start, end), value in zip(ranges, values, strict=True)]


def line_spans(text: str, values: Sequence[float]) -> list[Span]:
    """Spans giving line k of ``text`` (its characters and its newline) the value ``values[k]``."""
    lines = text.splitlines(keepends=True)
    if len(values) != len(lines):
        raise ValueError(f"got {len(values)} line values for {len(lines)} lines")
    spans, start = [], 0
    for line, value in zip(lines, values, strict=True):
        spans.append((start, start + len(line), float(value)))
        start += len(line)
    return spans
