"""The turns and tool calls of a multi-turn response, as character spans of ``solution_str``.

verl's tool agent loop returns one response per session: the assistant's turns with the tool output and chat
template tokens between them, marked by ``response_mask`` (1 on the tokens the policy generated, 0 on the rest)::

    responses:     | assistant turn 1 | tool output | assistant turn 2 | ...
    response_mask: | 1, 1, ..., 1, 1  | 0, ..., 0   | 1, 1, ..., 1, 1  | ...

An **assistant turn** is a maximal run of mask-1 tokens; its span is the characters of ``solution_str`` that its
tokens produced (:func:`bot_grpo_verl.reward.alignment.token_char_ranges`). A **tool call** is a hermes-style block
``<tool_call>...</tool_call>`` inside an assistant turn (verl's default ``multi_turn.format=hermes``) that verl's
parser accepts and its tool agent loop executes (at most ``max_parallel_calls`` per turn), in order: one entry of
verl's ``tool_rewards`` each. A reward function's
``turn_rewards`` (:mod:`bot_grpo_verl.reward.token_rewards`) go on every token of their turn (its EOS included) and
``call_rewards`` become spans over the calls, reaching the tokens exactly as spans do; the ``bot_token`` manager
then zeroes every mask-0 token.
"""

from __future__ import annotations

import json
import re

import numpy as np

from bot_grpo_verl.reward.token_rewards import Span

RESPONSE_MASK_KEY = "bot_grpo_response_mask"
"""The reward worker's input column that holds the final output's ``response_mask`` (written by
:mod:`bot_grpo_verl.verl_compat.agent_loop` for the runs that use the plugin, read by the ``bot_token`` manager)."""

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
"""A hermes-style tool call block, as verl's ``hermes`` tool parser finds it."""


def assistant_turns(assistant: np.ndarray) -> np.ndarray:
    """The token ranges of the assistant turns: the maximal runs of True in ``assistant``.

    Args:
        assistant: bool, shape (L,), True on the tokens the policy generated (``response_mask``).

    Returns:
        int64, shape (T, 2): turn k is tokens ``[turns[k, 0], turns[k, 1])``, in order.
    """
    edges = np.diff(np.concatenate(([0], np.asarray(assistant, dtype=np.int8), [0])))
    return np.stack((np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)), axis=1).astype(np.int64)


def turn_char_spans(turns: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """The characters each turn's tokens produced.

    Args:
        turns: int64 (T, 2) token ranges (:func:`assistant_turns`).
        ranges: int64 (L, 2), each token's characters in ``solution_str``.

    Returns:
        int64, shape (T, 2): turn k produced ``solution_str[spans[k, 0]:spans[k, 1]]`` (empty when its tokens
        produce no characters).
    """
    if not len(turns):
        return np.zeros((0, 2), dtype=np.int64)
    starts = ranges[turns[:, 0], 0]
    return np.stack((starts, np.maximum(starts, ranges[turns[:, 1] - 1, 1])), axis=1)


def is_tool_call(body: str) -> bool:
    """Whether verl's ``hermes`` parser makes a call of a block's ``body``: a JSON object with a string ``name``
    and ``arguments`` (it skips any other block, and the tool agent loop calls nothing for it)."""
    try:
        call = json.loads(body)
    except ValueError:
        return False
    return isinstance(call, dict) and isinstance(call.get("name"), str) and "arguments" in call


def tool_call_spans(text: str, turn_spans: np.ndarray, per_turn: int | None = None) -> list[tuple[int, int]]:
    """The character ranges of the tool calls inside the assistant turns, in order: the :data:`TOOL_CALL` blocks
    that verl calls (:func:`is_tool_call`), at most ``per_turn`` per turn (verl's ``multi_turn.max_parallel_calls``;
    None: all)."""
    spans = []
    for start, end in turn_spans.tolist():
        calls = [found.span() for found in TOOL_CALL.finditer(text, start, end) if is_tool_call(found[1])]
        spans += calls[:per_turn]
    return spans


def turn_of_token(turns: np.ndarray, length: int) -> np.ndarray:
    """int64 (L,): the turn (a row of ``turns``, int64 (T, 2) token ranges) that holds each token, -1 for none."""
    starts = np.zeros(length, dtype=np.int64)
    starts[turns[:, 0]] = 1
    inside = np.zeros(length + 1, dtype=np.int64)
    inside[turns[:, 0]] += 1
    inside[turns[:, 1]] -= 1
    return np.where(np.cumsum(inside[:-1]) > 0, np.cumsum(starts) - 1, -1)


def value_spans(char_spans, values: np.ndarray) -> tuple[Span, ...]:
    """``(char_start, char_end, value)`` spans giving ``char_spans[k]`` the value ``values[k]``."""
    return tuple((int(start), int(end), float(value)) for (start, end), value in zip(char_spans, values, strict=True))
