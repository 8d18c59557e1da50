"""Alignment of character spans of a decoded response to the generated tokens that produced them.

Offsets come from the generated ids themselves by incremental decoding (the method vLLM's detokenizer
uses), never by re-tokenising the text, so they hold for byte-level BPE (characters split across
tokens, multi-byte UTF-8), SentencePiece leading-space markers, special tokens dropped by
``skip_special_tokens`` and a trailing EOS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bot_grpo_verl.token_rewards import Span

REPLACEMENT_CHARACTER = "\ufffd"


def token_char_ranges(tokenizer, token_ids: Sequence[int]) -> tuple[str, np.ndarray]:
    """Decode ``token_ids`` as verl does and give each token the characters it produced.

    Args:
        tokenizer: a Hugging Face tokenizer (fast or slow).
        token_ids: the valid response token ids, shape (L,).

    Returns:
        text: ``tokenizer.decode(token_ids, skip_special_tokens=True)``, the ``solution_str`` that
            verl passes to reward functions.
        ranges: int64 array of shape (L, 2), token k produced ``text[ranges[k, 0]:ranges[k, 1]]``.
            Special tokens dropped by the decoder get an empty range. Tokens that hold only the first
            bytes of a character share the characters completed by the token that finishes it.

    Raises:
        ValueError: if the incremental pieces do not add up to the full decode (a decoder that
            rewrites earlier text), rather than returning shifted offsets.
    """
    token_ids = [int(token) for token in token_ids]
    special = set(tokenizer.all_special_ids)
    ranges = np.zeros((len(token_ids), 2), dtype=np.int64)
    pieces: list[str] = []
    cursor = prefix_offset = read_offset = 0
    for position, token in enumerate(token_ids):
        if token in special:
            ranges[position] = cursor
            if read_offset == position:
                read_offset = position + 1
            continue
        prefix_text = tokenizer.decode(token_ids[prefix_offset:read_offset], skip_special_tokens=True)
        window_text = tokenizer.decode(token_ids[prefix_offset : position + 1], skip_special_tokens=True)
        if window_text.endswith(REPLACEMENT_CHARACTER):
            continue  # an incomplete UTF-8 sequence: its characters arrive with a later token
        new_text = window_text[len(prefix_text) :]
        pending = [k for k in range(read_offset, position + 1) if token_ids[k] not in special]
        ranges[pending] = (cursor, cursor + len(new_text))
        if new_text:  # a token that decodes to nothing (a stripped leading space marker) keeps the window
            pieces.append(new_text)
            cursor += len(new_text)
            prefix_offset = read_offset
        read_offset = position + 1
    text = tokenizer.decode(token_ids, skip_special_tokens=True)
    # Tokens still pending hold a character cut off at the end (the decode shows it as U+FFFD).
    ranges[[k for k in range(read_offset, len(token_ids)) if token_ids[k] not in special]] = (cursor, len(text))
    if "".join(pieces) != text[:cursor]:
        raise ValueError(
            "incremental decoding does not reproduce tokenizer.decode(ids, skip_special_tokens=True) "
            f"({len(''.join(pieces))} vs {len(text)} characters): this tokenizer's decoder rewrites earlier "
            "text, so character spans cannot be mapped to tokens safely; return 'token_rewards' instead"
        )
    return text, ranges


def token_values_from_spans(ranges: np.ndarray, spans: Sequence[Span], default: float, text_length: int) -> np.ndarray:
    """Value of each token from character spans.

    A token takes the value of the span that covers most of its characters (ties: the span listed
    later); tokens whose characters are mostly covered by no span, and tokens without characters,
    take ``default`` (the outcome score). Where spans overlap, the span listed later owns the shared
    characters.

    Args:
        ranges: (L, 2) character ranges of the tokens, from :func:`token_char_ranges`.
        spans: ``(char_start, char_end, value)`` triples, already checked to lie in ``[0, text_length]``.
        default: value for uncovered tokens.
        text_length: length of the decoded text.

    Returns:
        float64 array of shape (L,).
    """
    owner = np.full(text_length, -1, dtype=np.int64)
    for number, (start, end, _) in enumerate(spans):
        owner[start:end] = number
    values = np.append(np.array([value for _, _, value in spans], dtype=np.float64), default)

    # Count, for every token, how many of its characters each owner holds: (L, len(spans) + 1).
    lengths = ranges[:, 1] - ranges[:, 0]
    token_of_char = np.repeat(np.arange(len(ranges)), lengths)
    first_of_token = np.repeat(np.cumsum(lengths) - lengths, lengths)
    char_index = np.repeat(ranges[:, 0], lengths) + np.arange(lengths.sum()) - first_of_token
    counts = np.zeros((len(ranges), len(spans) + 1), dtype=np.int64)
    np.add.at(counts, (token_of_char, owner[char_index]), 1)  # owner -1 lands in the last column
    if not spans:
        return np.full(len(ranges), float(default))
    uncovered, per_span = counts[:, -1], counts[:, :-1]
    best = len(spans) - 1 - np.argmax(per_span[:, ::-1], axis=1)  # the last span among equals
    covered_wins = per_span[np.arange(len(ranges)), best] > uncovered
    return np.where(covered_wins & (lengths > 0), values[best], default)
