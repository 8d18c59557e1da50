"""The token-level reward contract that users' reward functions write against.

A verl custom reward function (``compute_score(data_source, solution_str, ground_truth, extra_info,
**kwargs)``, sync or async) returns either

- a number: the outcome score only (BoT-GRPO then reduces to GRPO), or
- a dict with ``"score"`` (the outcome) plus at most one of
  - ``"token_rewards"``: one value per response token: the response's valid tokens in order, EOS
    included when the policy generated it;
  - ``"spans"``: ``(char_start, char_end, value)`` triples over ``solution_str``, half-open
    ``[char_start, char_end)``; tokens that no span covers get the outcome score, or ``"uncovered"``
    where the dict gives it (a number, only beside ``spans``): the value of a token that has no characters
    to span, such as the EOS, when its own correctness is known (e.g. "stopped at the right length");
  - ``"turn_rewards"``: one value per assistant turn of a multi-turn response, in order (a single-turn
    response is one turn); the ``bot_token`` manager places each on its turn's characters;
  - ``"call_rewards"``: one value per tool call, in order; placed on the call's characters
    (:mod:`bot_grpo_verl.reward.turns`);
  and any other keys with scalar values, which are logged like verl's ``reward_extra_info``.

What is accepted (anything else raises ``ValueError`` naming the key, span or index; the ``bot_token``
manager adds the sample's uid and data source and the run stops rather than train on a guess):

- Numbers (the score, span values, token rewards): ``int``, ``float`` and NumPy scalars such as
  ``np.float32``, finite and within float32's range (about 3.4e38: rewards are stored as float32).
  Refused: ``bool``, strings such as ``"0.5"``, arrays and tensors (call
  ``.item()``), NaN and infinities.
- Span bounds: ``int`` or NumPy integers (not ``bool``) with ``0 <= char_start <= char_end <=
  len(solution_str)``. An empty span covers nothing; where spans overlap, the one listed later owns the
  shared characters. ``spans`` is any sequence or iterable of such triples (not a string or a dict).
- ``token_rewards``, ``turn_rewards``, ``call_rewards``: a list or tuple of numbers, or a 1-D integer or
  float array (NumPy, or a CPU tensor), with exactly as many values as the response has tokens, assistant
  turns, tool calls.
- A key whose value is None counts as absent; two of them present is an error; an empty ``spans`` gives
  every token the score (``uncovered``, where given). ``uncovered`` without ``spans`` is an error.
- Extra keys: numbers or bools (logged as 0 or 1), finite. Reserved: ``score``, ``spans`` and
  ``token_rewards`` (this contract), ``token_reward_mean`` and ``span_coverage`` (the manager logs them
  itself; a function that returns them gets an error naming them).

Edge cases with a defined result: an empty response (no valid token) takes ``token_rewards=[]`` and
spans ``(0, 0, v)`` only, and gets no token rewards; a response whose text is empty (only special
tokens, such as a lone EOS) gives every token the score; U+FFFD in ``solution_str`` (ids that decode to
invalid UTF-8) is a character like any other for spans.

:func:`line_spans`, :func:`step_spans` and :func:`split_steps` turn per-line and per-step values into
spans, the form that compilers, parsers and PRM step splitters naturally produce.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Span = tuple[int, int, float]

TOKEN_VALUE_KEYS = ("spans", "token_rewards", "turn_rewards", "call_rewards")
"""The keys that give tokens their values; a result holds at most one of them."""
RESERVED_KEYS = ("score", "uncovered", *TOKEN_VALUE_KEYS)
LARGEST_STORABLE = float(np.finfo(np.float32).max)  # rewards are stored as float32 (rm_scores)
MANAGER_LOG_KEYS = ("token_reward_mean", "span_coverage")  # logged by the bot_token manager itself


@dataclass(frozen=True)
class TokenRewardResult:
    """A reward function's return value, checked and normalised.

    Attributes:
        score: the outcome score.
        spans: ``(char_start, char_end, value)`` over the response text, or None.
        uncovered: the value of the tokens no span covers (None: the score); only with ``spans``.
        token_rewards: float64 array of shape (L,), one value per valid response token, or None.
        turn_rewards: float64 array of shape (T,), one value per assistant turn, or None.
        call_rewards: float64 array of shape (C,), one value per tool call, or None.
        extra: the other scalar keys of the returned dict (logged, never used as rewards).
    """

    score: float
    spans: tuple[Span, ...] | None = None
    uncovered: float | None = None
    token_rewards: np.ndarray | None = None
    turn_rewards: np.ndarray | None = None
    call_rewards: np.ndarray | None = None
    extra: dict[str, float] = field(default_factory=dict)


def _shown(value) -> str:
    return f"{type(value).__name__} {reprlib.repr(value)}"


def _bool_hint(value) -> str:
    """The fix for a bool where a number belongs (a reward written as ``correct`` instead of ``float(correct)``)."""
    return ": a bool is no reward, return float(...)" if isinstance(value, bool | np.bool_) else ""


def _is_number_type(kind: type) -> bool:
    return kind is float or kind is int or (issubclass(kind, numbers.Real) and not issubclass(kind, bool | np.bool_))


def _is_number(value) -> bool:
    return _is_number_type(type(value))


def _number(value, what: str, *where) -> float:
    """``value`` as a finite float, or ``ValueError`` naming ``what.format(*where)`` (formatted on error only:
    this runs for every span)."""
    if not _is_number(value):
        raise ValueError(
            f"{what.format(*where)} must be a number (int, float or NumPy scalar), got {_shown(value)}"
            + _bool_hint(value)
        )
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{what.format(*where)} is too large for a float: {reprlib.repr(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what.format(*where)} is not finite: {number}")
    if abs(number) > LARGEST_STORABLE:
        raise ValueError(
            f"{what.format(*where)} = {number:.4g} is beyond float32's range (rewards are stored as float32)"
        )
    return number


def _index(value, what: str, *where) -> int:
    if type(value) is not int and (isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral)):
        raise ValueError(f"{what.format(*where)} must be an integer (int or NumPy integer), got {_shown(value)}")
    return int(value)


def parse_reward_result(
    result,
    text_length: int,
    token_count: int | None = None,
    turn_count: int | None = None,
    call_count: int | None = None,
) -> TokenRewardResult:
    """Check a reward function's return value against the contract; raise ``ValueError`` naming the problem.

    Args:
        result: what the reward function returned.
        text_length: ``len(solution_str)``: spans must lie within it.
        token_count: the response's valid tokens, which ``token_rewards`` must match (None: not checked).
        turn_count: the response's assistant turns, which ``turn_rewards`` must match (None: not checked).
        call_count: the response's tool calls, which ``call_rewards`` must match (None: not checked).
    """
    if not isinstance(result, Mapping):
        if not _is_number(result):
            raise ValueError(
                f"a reward function must return a number or a dict with 'score', got {_shown(result)}"
                + _bool_hint(result)
            )
        return TokenRewardResult(score=_number(result, "score"))
    if "score" not in result:
        raise ValueError(f"the returned dict has no 'score' key (keys: {sorted(map(str, result))})")
    score = _number(result["score"], "score")
    clashes = [key for key in MANAGER_LOG_KEYS if key in result]
    if clashes:
        raise ValueError(f"keys {clashes} are reserved: the bot_token manager logs its own {list(MANAGER_LOG_KEYS)}")
    given = [key for key in TOKEN_VALUE_KEYS if result.get(key) is not None]
    if len(given) > 1:
        raise ValueError(f"return at most one of {list(TOKEN_VALUE_KEYS)}, got {given}")
    spans = None if result.get("spans") is None else _parse_spans(result["spans"], text_length)
    uncovered = None if result.get("uncovered") is None else _number(result["uncovered"], "uncovered")
    if uncovered is not None and spans is None:
        raise ValueError("'uncovered' is the value of the tokens no span covers: return it beside 'spans'")
    counts = {"token_rewards": (token_count, "response tokens"), "turn_rewards": (turn_count, "assistant turns")}
    counts["call_rewards"] = (call_count, "tool calls")
    values = {key: None if result.get(key) is None else _parse_values(result[key], key, *counts[key]) for key in counts}
    extra = {key: _extra_value(key, value) for key, value in result.items() if key not in RESERVED_KEYS}
    return TokenRewardResult(score, spans, uncovered, **values, extra=extra)


def _parse_spans(spans, text_length: int) -> tuple[Span, ...]:
    if isinstance(spans, str | bytes | Mapping) or not isinstance(spans, Iterable):
        raise ValueError(f"'spans' must be a list of (char_start, char_end, value) triples, got {_shown(spans)}")
    parsed = []
    for number, span in enumerate(spans):
        if type(span) not in (tuple, list) and (isinstance(span, str | bytes) or not isinstance(span, Sequence)):
            raise ValueError(f"span {number} must be (char_start, char_end, value), got {_shown(span)}")
        if len(span) != 3:
            raise ValueError(f"span {number} must be (char_start, char_end, value), got {_shown(span)}")
        start = _index(span[0], "span {} char_start", number)
        end = _index(span[1], "span {} char_end", number)
        if not 0 <= start <= end <= text_length:
            raise ValueError(
                f"span {number} {span!r} is out of range or reversed: need 0 <= start <= end <= {text_length} "
                "(character offsets into the decoded response string, not byte or token offsets)"
            )
        parsed.append((start, end, _number(span[2], "span {} value", number)))
    return tuple(parsed)


def _parse_values(values, key: str, count: int | None, what: str) -> np.ndarray:
    """``values`` (the result's ``key``) as a float64 array of shape (count,): one value per token, turn or call."""
    if isinstance(values, list | tuple):
        wrong = {kind for kind in set(map(type, values)) if not _is_number_type(kind)}
        if wrong:
            number, value = next((number, value) for number, value in enumerate(values) if type(value) in wrong)
            raise ValueError(f"{key}[{number}] must be a number (int, float or NumPy scalar), got {_shown(value)}")
        try:
            array = np.array(values, dtype=np.float64)
        except OverflowError:
            raise ValueError(f"{key!r} holds an integer too large for a float") from None
    else:
        try:
            array = np.asarray(values)
        except (TypeError, ValueError, RuntimeError) as error:  # a GPU tensor, a ragged nesting
            raise ValueError(f"{key!r} must be a list of numbers or a 1-D array: {error}") from None
        if array.ndim != 1 or array.dtype.kind not in "iuf":
            raise ValueError(
                f"{key!r} must be a list of numbers or a 1-D integer or float array, got "
                f"{type(values).__name__} of shape {array.shape} and dtype {array.dtype}"
            )
        array = array.astype(np.float64)
    not_finite = np.flatnonzero(~np.isfinite(array))
    if not_finite.size:
        raise ValueError(f"{key}[{not_finite[0]}] is not finite: {array[not_finite[0]]}")
    too_large = np.flatnonzero(np.abs(array) > LARGEST_STORABLE)
    if too_large.size:
        raise ValueError(
            f"{key}[{too_large[0]}] = {array[too_large[0]]:.4g} is beyond float32's range (rewards are stored "
            "as float32)"
        )
    if count is not None and len(array) != count:
        raise ValueError(f"{key!r} has {len(array)} values for {count} {what}")
    return array


def _extra_value(key, value) -> float:
    """A logged key's value: a finite number, or a bool logged as 0 or 1."""
    if isinstance(value, bool | np.bool_):
        return float(value)
    if not _is_number(value):
        raise ValueError(f"extra key {key!r} must be a number or a bool (verl averages it), got {_shown(value)}")
    return _number(value, "extra key {!r}", key)


def split_steps(text: str, separator: str = "\n\n") -> list[tuple[int, int]]:
    """Character ranges ``[start, end)`` of the steps of ``text`` split by ``separator``.

    A step's range includes the separator run that follows it, and blank steps are joined to the next
    step (or the last one at the end), so the ranges tile the whole text and every character, hence
    every token, belongs to exactly one step.
    """
    if not separator:
        raise ValueError("the step separator must be a non-empty string")
    ranges: list[tuple[int, int]] = []
    start = previous = 0
    pending = False  # whether text[start:previous] (the step being gathered) holds a non-blank character
    for run in re.finditer(f"(?:{re.escape(separator)})+", text):
        if pending or text[previous : run.start()].strip():
            ranges.append((start, run.end()))
            start, pending = run.end(), False
        else:  # a blank step: it and this separator run join the next step
            pending = bool(separator.strip())
        previous = run.end()
    if start < len(text):
        if pending or text[previous:].strip() or not ranges:
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
