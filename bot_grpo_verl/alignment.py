"""Alignment of character spans of a decoded response to the generated tokens that produced them.

Offsets come from the generated ids themselves, never from re-tokenising the text, so they hold for
byte-level BPE (characters split across tokens, multi-byte UTF-8), SentencePiece leading-space markers
and byte fallback, special tokens dropped by ``skip_special_tokens`` and a trailing EOS.

What a token owns is defined by incremental decoding, the method of vLLM's detokenizer
(:func:`incremental_char_ranges`, the reference): a token owns the characters that appear when it is
appended, and a token whose decode ends inside a character (U+FFFD at the end) shares the characters
of the token that completes it. That method decodes a window per token: tens of decodes of the
response, and a window that grows without bound over ids that never complete a character.

:func:`token_char_ranges` gives the same ranges in time linear in the response for the fast tokenizers
whose decoder it models exactly, byte-level BPE (GPT-2, Qwen, Llama 3) and SentencePiece byte
fallback (Llama 2, Mistral, Gemma): each token's bytes come from a table built once per tokenizer
(:func:`byte_decoder`), the response's bytes are decoded once, and every token's end byte is mapped to
a character offset. Other tokenizers, and any response whose text the table does not reproduce
exactly, take the reference.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot_grpo_verl.token_rewards import Span

REPLACEMENT_CHARACTER = "\ufffd"
_SENTENCEPIECE_STEPS = [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
]
_STRIP_ONE_SPACE = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
# Bounds of the byte after each lead byte of a valid UTF-8 sequence (Unicode table 3-7).
_SECOND_BYTE_LOW = np.full(256, 0x80)
_SECOND_BYTE_LOW[[0xE0, 0xF0]] = [0xA0, 0x90]
_SECOND_BYTE_HIGH = np.full(256, 0xBF)
_SECOND_BYTE_HIGH[[0xED, 0xF4]] = [0x9F, 0x8F]
_BYTE_TOKEN = re.compile(r"<0x(\+[0-9A-Fa-f]|[0-9A-Fa-f]{2})>")  # what the ByteFallback decoder reads as a byte


def incremental_char_ranges(tokenizer, token_ids: Sequence[int]) -> tuple[str, np.ndarray]:
    """Decode ``token_ids`` as verl does and give each token the characters it produced (the reference).

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


@dataclass(frozen=True)
class ByteDecoder:
    """A fast tokenizer's decoder as the bytes each id adds to ``decode(ids, skip_special_tokens=True)``.

    Attributes:
        pieces: object array of bytes, shape (V + 1,): empty for special tokens the decoder skips and, in
            the last entry (where every id past the vocabulary is sent), for ids the decoder drops.
        lengths: int64, shape (V + 1,), ``len(pieces[id])``.
        byte_fallback: bool, shape (V + 1,), the ``<0xNN>`` ids that SentencePiece decodes run by run (a
            run that is not valid UTF-8 becomes one U+FFFD per byte); None for byte-level BPE.
        strips_leading_space: the decoder removes one leading space of the text (SentencePiece ``Strip``).
    """

    pieces: np.ndarray
    lengths: np.ndarray
    byte_fallback: np.ndarray | None
    strips_leading_space: bool


_BYTE_DECODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BYTE_DECODERS_LOCK = threading.Lock()


def byte_decoder(tokenizer, check_size: bool = False) -> ByteDecoder | None:
    """The tokenizer's :class:`ByteDecoder`, built once per tokenizer (a second or less for a 150k
    vocabulary) and again, when ``check_size``, if tokens were added since; None for a slow tokenizer or a
    decoder other than byte-level BPE and SentencePiece byte fallback. (``len(tokenizer)`` costs tens of
    milliseconds for a large vocabulary, hence checked only on request.)"""
    with _BYTE_DECODERS_LOCK:
        size, decoder = _BYTE_DECODERS.get(tokenizer, (None, None))
        if size is None or (check_size and size != len(tokenizer)):
            size, decoder = len(tokenizer), _build_byte_decoder(tokenizer)
            _BYTE_DECODERS[tokenizer] = (size, decoder)
    return decoder


def _build_byte_decoder(tokenizer) -> ByteDecoder | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.decoder is None:
        return None
    steps = json.loads(backend.decoder.__getstate__())
    if steps.get("type") == "ByteLevel":
        to_bytes, byte_fallback, strips = _byte_level_bytes, None, False
    elif steps.get("type") == "Sequence" and steps["decoders"][:3] == _SENTENCEPIECE_STEPS:
        if steps["decoders"][3:] not in ([], [_STRIP_ONE_SPACE]):
            return None
        to_bytes, byte_fallback, strips = _sentencepiece_bytes, [], len(steps["decoders"]) == 4
    else:
        return None
    vocab = backend.get_vocab(with_added_tokens=True)
    tokens = [""] * (max(vocab.values(), default=-1) + 2)
    for token, index in vocab.items():
        tokens[index] = token
    for index, added in backend.get_added_tokens_decoder().items():
        if added.special:
            tokens[index] = ""  # skipped by skip_special_tokens=True
    pieces = np.empty(len(tokens), dtype=object)
    pieces[:] = [to_bytes(token) for token in tokens]
    if byte_fallback is not None:
        byte_fallback = np.array([_BYTE_TOKEN.fullmatch(token) is not None for token in tokens])
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    return ByteDecoder(pieces, lengths, byte_fallback, strips)


def _gpt2_byte_characters() -> dict[str, int]:
    """The printable character GPT-2's byte-level alphabet uses for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [byte for byte in range(256) if byte not in printable]
    return {chr(byte): byte for byte in printable} | {chr(256 + k): byte for k, byte in enumerate(shifted)}


# str.translate table to latin-1 characters; characters outside the alphabet below 256 map past latin-1
# so that encoding fails and the token keeps its own UTF-8 bytes, as the ByteLevel decoder does.
_TO_LATIN1 = {ord(char): byte for char, byte in _gpt2_byte_characters().items()} | {
    byte: 0x110000 - 1 for byte in range(256) if chr(byte) not in _gpt2_byte_characters()
}


def _byte_level_bytes(token: str) -> bytes:
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:  # a character outside the byte alphabet (an added token): its own bytes
        return token.encode("utf-8")


def _sentencepiece_bytes(token: str) -> bytes:
    byte = _BYTE_TOKEN.fullmatch(token)
    return bytes([int(byte[1], 16)]) if byte else token.replace("\u2581", " ").encode("utf-8")


def token_char_ranges(tokenizer, token_ids: Sequence[int], decoded: str | None = None) -> tuple[str, np.ndarray]:
    """:func:`incremental_char_ranges`'s result in one pass over the response's bytes.

    Args:
        tokenizer: a Hugging Face tokenizer (fast or slow).
        token_ids: the valid response token ids, shape (L,).
        decoded: ``tokenizer.decode(token_ids, skip_special_tokens=True)``, when the caller has it (saves
            one decode).

    Returns:
        text, ranges: as :func:`incremental_char_ranges`, whose result this is wherever it returns one.
        Where it raises for a SentencePiece byte run that starts with complete characters and then
        breaks (its decoder shows the whole run as U+FFFD, so the characters the run gave earlier are
        rewritten), the run is one block shared by its tokens and the token that closes it.
    """
    decoder = byte_decoder(tokenizer)
    given = np.asarray(token_ids)
    if decoder is None or given.ndim != 1 or (given.size and (given.dtype.kind not in "iu" or given.min() < 0)):
        return incremental_char_ranges(tokenizer, token_ids)
    if given.size and given.max() >= len(decoder.lengths) - 1:  # past the table: tokens added since it was built?
        decoder = byte_decoder(tokenizer, check_size=True)
    ids = np.minimum(given, len(decoder.lengths) - 1).astype(np.int64)  # past the vocabulary: dropped
    lengths = decoder.lengths[ids]
    special = np.isin(ids, tokenizer.all_special_ids)
    if lengths[special].any():  # a special token that the decoder keeps: the reference decides
        return incremental_char_ranges(tokenizer, token_ids)
    text, widths, invalid, replaced = _utf8_units(b"".join(decoder.pieces[ids]))
    characters = np.ones(len(widths), dtype=np.int64)
    if decoder.byte_fallback is not None and invalid.any():
        text, widths, characters, replaced = _broken_runs_as_units(
            text, widths, invalid, replaced, lengths, decoder.byte_fallback[ids], decoder.strips_leading_space
        )
    stripped = int(decoder.strips_leading_space and text.startswith(" "))
    text = text[stripped:]
    if text != (tokenizer.decode(given, skip_special_tokens=True) if decoded is None else decoded):
        return incremental_char_ranges(tokenizer, token_ids)  # a decoder step the table does not model
    return text, _ranges_from_units(lengths, special, widths, characters, replaced, stripped, len(text))


def _utf8_units(data: bytes) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """Decode ``data`` as the tokenizers' decoders do (one U+FFFD per maximal invalid subsequence, as
    Rust's ``from_utf8_lossy`` and Python's ``errors="replace"``) and cut it into units, each a character
    or an invalid subsequence.

    Returns:
        text: the decoded text, one character per unit (U = len(text)).
        widths: int64 (U,), the bytes of ``data`` each unit came from.
        invalid: bool (U,), the invalid subsequences.
        replaced: bool (U,), units shown as U+FFFD (invalid subsequences and literal U+FFFD).
    """
    escaped = data.decode("utf-8", "surrogateescape")  # an invalid byte b becomes U+DC00 + b
    points = np.array([escaped]).view(np.uint32).astype(np.int64)[: len(escaped)]  # code points, surrogates kept
    invalid = (points >= 0xDC80) & (points <= 0xDCFF)
    widths = np.where(invalid, 1, 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000))
    if not invalid.any():
        return escaped, widths, invalid, points == 0xFFFD
    first = ~_continues_invalid_subsequence(points - 0xDC00, invalid)
    unit_ends = np.cumsum(widths)[np.r_[first[1:], True]]
    points = np.where(invalid, 0xFFFD, points)[first]
    text = points.astype("<u4").tobytes().decode("utf-32-le")
    return text, np.diff(np.r_[0, unit_ends]), invalid[first], points == 0xFFFD


def _continues_invalid_subsequence(byte: np.ndarray, invalid: np.ndarray) -> np.ndarray:
    """Which invalid bytes continue the maximal invalid subsequence of the byte before them (Unicode's
    maximal subpart: the truncated start of a valid 3- or 4-byte sequence).

    Args:
        byte: int64 (N,), the byte at each invalid position (ignored elsewhere).
        invalid: bool (N,), positions that are invalid bytes; consecutive invalid positions are adjacent
            bytes of the input.

    Returns:
        bool (N,).
    """
    previous = np.where(np.r_[False, invalid[:-1]], np.r_[0, byte[:-1]], 0)  # 0 where no invalid byte before
    second = invalid & (previous >= 0xE0) & (previous <= 0xF4)
    second &= (_SECOND_BYTE_LOW[previous] <= byte) & (byte <= _SECOND_BYTE_HIGH[previous])
    third = invalid & np.r_[False, second[:-1]] & (np.r_[0, previous[:-1]] >= 0xF0) & (byte >= 0x80) & (byte <= 0xBF)
    return second | third


def _broken_runs_as_units(text, widths, invalid, replaced, lengths, byte_tokens, strips_leading_space):
    """Units of a SentencePiece decode: a run of ``<0xNN>`` tokens that is not valid UTF-8 decodes to one
    U+FFFD per byte, all of them one unit.

    Args:
        text, widths, invalid, replaced: from :func:`_utf8_units` on the response's bytes, shape (U,).
        lengths: int64 (L,), bytes of each token; byte_tokens: bool (L,), its ``<0xNN>`` tokens.
        strips_leading_space: the decoder strips one leading space. A broken run that opens the text
            with a space byte then decodes that byte alone first (to nothing): it is a unit of its own.

    Returns:
        text, widths, characters, replaced: the merged units, shape (U',); ``characters`` counts the
        characters of ``text`` in each unit.
    """
    kept = lengths > 0  # the decoder never sees skipped tokens: runs continue across them
    in_run = byte_tokens[kept]
    token_ends = np.cumsum(lengths[kept])
    run_starts = (token_ends - lengths[kept])[in_run & ~np.r_[False, in_run[:-1]]]
    run_ends = token_ends[in_run & ~np.r_[in_run[1:], False]]
    unit_starts = np.cumsum(widths) - widths
    run = np.searchsorted(run_starts, unit_starts, side="right") - 1  # ordinary tokens are valid UTF-8
    broken = np.isin(run, run[invalid]) & (unit_starts < run_ends[run])
    first = broken & ~np.r_[False, broken[:-1]]
    run_bytes = (run_ends - run_starts)[run]
    blocks = np.flatnonzero(np.diff(np.r_[False, broken, False]))  # first and end unit of each broken run
    kept_text = [text[start:end] for start, end in np.r_[0, blocks, len(text)].reshape(-1, 2)]
    fills = [REPLACEMENT_CHARACTER * int(size) for size in run_bytes[first]]
    merged_text = "".join(part + fill for part, fill in zip(kept_text, [*fills, ""], strict=True))
    keep = ~broken | first
    widths, characters, replaced = (
        np.where(first, run_bytes, widths)[keep],
        np.where(first, run_bytes, 1)[keep],
        (replaced | first)[keep],
    )
    if strips_leading_space and first[0] and text[0] == " ":
        return merged_text, np.r_[1, widths[0] - 1, widths[1:]], np.r_[0, characters], np.r_[False, replaced]
    return merged_text, widths, characters, replaced


def _ranges_from_units(lengths, special, widths, characters, replaced, stripped, text_length) -> np.ndarray:
    """Incremental decoding's ranges, from where each token's bytes end among the units of the text.

    A token is complete when its bytes end on a unit boundary after a unit that is not U+FFFD: the
    reference's window decode then ends with a character, not U+FFFD. Special tokens never are. A token
    owns the characters from the last complete token before it to the first complete token at or after
    it (to the end of the text if there is none); a special token owns none.

    Args:
        lengths: int64 (L,), bytes each token adds to the decoded bytes.
        special: bool (L,), the tokenizer's special ids.
        widths, characters, replaced: shape (U,), each unit's bytes, its characters in the unstripped
            text, and whether it ends with U+FFFD.
        stripped: characters the decoder removed from the front of the text (0 or 1).
        text_length: characters of the text.

    Returns:
        int64 array of shape (L, 2).
    """
    unit_ends = np.r_[0, np.cumsum(widths)]
    characters_before = np.maximum(np.r_[0, np.cumsum(characters)] - stripped, 0)
    token_ends = np.cumsum(lengths)
    unit = np.searchsorted(unit_ends, token_ends, side="right") - 1  # the last unit the token's bytes finish
    complete = ~special & (unit_ends[unit] == token_ends) & ~np.r_[False, replaced][unit]
    positions = np.arange(len(lengths))
    offsets = np.r_[0, characters_before[unit]]  # offsets[k + 1]: characters once token k is decoded
    last_complete = np.maximum.accumulate(np.where(complete, positions, -1))
    starts = np.r_[0, offsets[last_complete + 1]][: len(lengths)]
    next_complete = np.minimum.accumulate(np.where(complete, positions, len(lengths))[::-1])[::-1]
    ends = np.r_[offsets[1:], text_length][next_complete]
    return np.stack([starts, np.where(special, starts, ends)], axis=1).astype(np.int64)


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
    owner = _span_owners(spans, text_length)
    values = np.append(np.array([value for _, _, value in spans], dtype=np.float64), default)
    starts, ends = ranges[:, 0], ranges[:, 1]
    changes = np.flatnonzero(owner[1:-1] != owner[:-2]) + 1  # characters whose owner differs from the last
    first_change, end_change = np.searchsorted(changes, starts, "right"), np.searchsorted(changes, ends, "left")
    token_owner = np.where(ends > starts, owner[starts], -1)  # one owner: all but tokens across a span edge
    mixed = np.flatnonzero(end_change > first_change)
    if len(mixed):
        token_owner[mixed] = _majority_owners(
            starts[mixed], ends[mixed], first_change[mixed], end_change[mixed], owner, changes
        )
    return values[token_owner]


def _span_owners(spans: Sequence[Span], text_length: int) -> np.ndarray:
    """The last span covering each character, -1 where none does, and -1 at ``text_length`` (one more
    entry, read for tokens without characters).

    Spans are taken from the last, each writing only the characters later spans left (the written
    stretches are kept merged as sorted bounds), so each character is written once: linear in the text
    plus the spans, however the spans nest.

    Returns:
        int64 array of shape (text_length + 1,).
    """
    owner = np.full(text_length + 1, -1, dtype=np.int64)
    written: list[int] = []  # start, end, start, end, ... of the disjoint stretches already written
    for number in range(len(spans) - 1, -1, -1):
        start, end = spans[number][:2]
        if start == end:
            continue
        first, last = bisect.bisect_left(written, start), bisect.bisect_right(written, end)
        gaps = [start] * (first % 2 == 0) + written[first:last] + [end] * (last % 2 == 0)
        for gap_start, gap_end in zip(gaps[::2], gaps[1::2], strict=True):
            owner[gap_start:gap_end] = number
        merged = [written[first - 1] if first % 2 else start, written[last] if last % 2 else end]
        written[first - first % 2 : last + last % 2] = merged
    return owner


def _majority_owners(starts, ends, first_change, end_change, owner, changes) -> np.ndarray:
    """Owner of most characters of each token whose characters have several owners: the span holding most
    (ties: the later span), or -1 where the characters no span covers are at least as many.

    Args:
        starts, ends: int64 (M,), the tokens' character ranges.
        first_change, end_change: int64 (M,), the tokens' owner changes are ``changes[first:end]``.
        owner: int64 (text_length + 1,), owner of each character (-1: no span).
        changes: int64 (C,), the characters whose owner differs from the previous character's.

    Returns:
        int64 (M,).
    """
    pieces = end_change - first_change + 1  # stretches of one owner within each token
    token = np.repeat(np.arange(len(starts)), pieces)
    rank = np.arange(len(token)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    inner = changes[np.minimum(first_change[token] + rank, len(changes) - 1)]
    piece_start = np.where(rank == 0, starts[token], changes[np.maximum(first_change[token] + rank - 1, 0)])
    piece_end = np.where(rank == pieces[token] - 1, ends[token], inner)
    spans = int(owner.max()) + 2
    keys, slot = np.unique(token * spans + owner[piece_start] + 1, return_inverse=True)
    held = np.bincount(slot, weights=piece_end - piece_start).astype(np.int64)
    key_token, key_owner = keys // spans, keys % spans - 1
    uncovered = np.zeros(len(starts), dtype=np.int64)
    uncovered[key_token[key_owner < 0]] = held[key_owner < 0]
    order = np.lexsort((key_owner, held, key_token))  # per token, its best span comes last
    best = order[np.r_[key_token[order][1:] != key_token[order][:-1], True]]
    result = np.full(len(starts), -1, dtype=np.int64)
    wins = (key_owner[best] >= 0) & (held[best] > uncovered[key_token[best]])
    result[key_token[best][wins]] = key_owner[best][wins]
    return result
