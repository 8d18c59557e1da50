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
a character offset. The text decoded from those bytes is ``tokenizer.decode(ids, skip_special_tokens=True)``
itself wherever that call is the backend decoder's output unchanged (:func:`decodes_as_its_backend`): then
no tokenizer decode runs at all, and the alignment costs less than the plain decode that verl's ``naive``
manager does. Elsewhere one decode checks the text. Other tokenizers, and any response whose text the
table does not reproduce exactly, take the reference.
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
from transformers import PreTrainedTokenizerFast

from bot_grpo_verl.reward.token_rewards import Span

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
        data: uint8, every id's bytes end to end: none for special tokens the decoder skips nor, in the
            last id (where every id past the vocabulary is sent), for ids the decoder drops.
        starts: int64, shape (V + 1,), where each id's bytes start in ``data``.
        lengths: int64, shape (V + 1,), how many bytes each id has.
        byte_fallback: bool, shape (V + 1,), the ``<0xNN>`` ids that SentencePiece decodes run by run (a
            run that is not valid UTF-8 becomes one U+FFFD per byte); None for byte-level BPE.
        strips_leading_space: the decoder removes one leading space of the text (SentencePiece ``Strip``).
    """

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    byte_fallback: np.ndarray | None
    strips_leading_space: bool


_BYTE_DECODERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BYTE_DECODERS_LOCK = threading.Lock()


def byte_decoder(tokenizer, check_size: bool = False) -> ByteDecoder | None:
    """The tokenizer's :class:`ByteDecoder`, built once per tokenizer (a second or less for a 150k
    vocabulary) and again if its backend's decoder was replaced or, when ``check_size``, tokens were added
    since; None for a slow tokenizer or a decoder other than byte-level BPE and SentencePiece byte fallback.
    (``len(tokenizer)`` costs tens of milliseconds for a large vocabulary, hence checked only on request.)"""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    steps = None if backend is None or backend.decoder is None else backend.decoder.__getstate__()  # ~1 us
    with _BYTE_DECODERS_LOCK:
        size, built_for, decoder = _BYTE_DECODERS.get(tokenizer, (None, None, None))
        if size is None or built_for != steps or (check_size and size != len(tokenizer)):
            decoder = None if steps is None else _build_byte_decoder(backend, steps)
            size, built_for = len(tokenizer), steps
            _BYTE_DECODERS[tokenizer] = (size, built_for, decoder)
    return decoder


def decodes_as_its_backend(tokenizer) -> bool:
    """Whether ``tokenizer.decode(ids, skip_special_tokens=True)`` (as verl's reward managers call it) is its
    fast backend's decode unchanged, which :class:`ByteDecoder` models: transformers' own ``decode`` and
    ``_decode``, overridden by no subclass nor instance, and no clean-up of tokenization spaces (which
    rewrites ``' .'``, say)."""
    return (
        getattr(tokenizer.decode, "__func__", None) is PreTrainedTokenizerFast.decode
        and getattr(tokenizer._decode, "__func__", None) is PreTrainedTokenizerFast._decode
        and not getattr(tokenizer, "clean_up_tokenization_spaces", True)
    )


def _build_byte_decoder(backend, decoder_state: bytes) -> ByteDecoder | None:
    """The table of a fast tokenizer's ``backend`` whose decoder serialises to ``decoder_state``."""
    steps = json.loads(decoder_state)
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
    pieces = [to_bytes(token) for token in tokens]
    if byte_fallback is not None:
        byte_fallback = np.array([_BYTE_TOKEN.fullmatch(token) is not None for token in tokens])
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    return ByteDecoder(data, np.cumsum(lengths) - lengths, lengths, byte_fallback, strips)


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


def token_char_ranges(tokenizer, token_ids: Sequence[int]) -> tuple[str, np.ndarray]:
    """:func:`incremental_char_ranges`'s result in one pass over the response's bytes, with no decode by the
    tokenizer where :func:`decodes_as_its_backend`, else one, to check the text.

    Args:
        tokenizer: a Hugging Face tokenizer (fast or slow).
        token_ids: the valid response token ids, shape (L,): a sequence, an array or a CPU tensor.

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
        given = np.minimum(given, len(decoder.lengths) - 1)  # past the vocabulary: dropped by the decoder
    given = given.astype(np.int64, copy=False)
    lengths = decoder.lengths[given]
    special = np.isin(given, tokenizer.all_special_ids)
    if lengths[special].any():  # a special token that the decoder keeps: the reference decides
        return incremental_char_ranges(tokenizer, token_ids)
    ends = np.cumsum(lengths)
    data = decoder.data[np.repeat(decoder.starts[given] - (ends - lengths), lengths) + np.arange(ends[-1:].sum())]
    data = data.tobytes()  # the response's bytes: each token's, gathered from the table
    try:
        text = data.decode("utf-8")
        boundary, characters, replaced = _valid_utf8_offsets(data, text)
    except UnicodeDecodeError:
        byte_tokens = None if decoder.byte_fallback is None else decoder.byte_fallback[given]
        text, boundary, characters, replaced = _invalid_utf8_offsets(
            data, lengths, byte_tokens, decoder.strips_leading_space
        )
    stripped = int(decoder.strips_leading_space and text.startswith(" "))
    text = text[stripped:]
    if not decodes_as_its_backend(tokenizer) and text != tokenizer.decode(token_ids, skip_special_tokens=True):
        return incremental_char_ranges(tokenizer, token_ids)  # a decode step the table does not model
    if stripped:
        characters = np.maximum(characters - 1, 0)
    return text, _ranges_from_offsets(lengths, special, boundary, characters, replaced, len(text))


def _valid_utf8_offsets(data: bytes, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte offsets of valid UTF-8 ``data`` (decoded: ``text``) against its characters.

    Returns:
        boundary: bool (N + 1,), offsets where a character starts or the data ends.
        characters: int64 (N + 1,), characters before each offset (meaningful at boundaries).
        replaced: bool (N + 1,), offsets right after a literal U+FFFD.
    """
    boundary = np.append((np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80, True)  # not a continuation byte
    characters = np.concatenate(([0], np.cumsum(boundary[:-1])))
    replaced = np.zeros(len(data) + 1, dtype=bool)
    if REPLACEMENT_CHARACTER in text:
        replaced[[match.end() for match in re.finditer(REPLACEMENT_CHARACTER.encode(), data)]] = True
    return boundary, characters, replaced


def _invalid_utf8_offsets(data: bytes, lengths, byte_tokens, strips_leading_space):
    """:func:`_valid_utf8_offsets` for data with invalid UTF-8, whose units are characters and invalid
    subsequences (SentencePiece: broken byte runs, see :func:`_broken_runs_as_units`).

    Args:
        data: the response's bytes (N,); lengths: int64 (L,), bytes of each token; byte_tokens: bool
            (L,), its ``<0xNN>`` tokens, or None for byte-level BPE; strips_leading_space: as the decoder.

    Returns:
        text, and ``boundary``, ``characters``, ``replaced`` of shape (N + 1,) as :func:`_valid_utf8_offsets`
        gives them, a boundary being where a unit ends.
    """
    text, widths, invalid, replaced = _utf8_units(data)
    characters = np.ones(len(widths), dtype=np.int64)
    if byte_tokens is not None:
        text, widths, characters, replaced = _broken_runs_as_units(
            text, widths, invalid, replaced, lengths, byte_tokens, strips_leading_space
        )
    ends = np.cumsum(widths)
    boundary = np.zeros(len(data) + 1, dtype=bool)
    boundary[np.append(ends, 0)] = True
    characters_before = np.zeros(len(data) + 1, dtype=np.int64)
    characters_before[ends] = np.cumsum(characters)
    replaced_before = np.zeros(len(data) + 1, dtype=bool)
    replaced_before[ends] = replaced
    return text, boundary, characters_before, replaced_before


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


def _ranges_from_offsets(lengths, special, boundary, characters, replaced, text_length) -> np.ndarray:
    """Incremental decoding's ranges, from where each token's bytes end in the decoded bytes.

    A token is complete when its bytes end on a unit boundary after a unit that is not U+FFFD: the
    reference's window decode then ends with a character, not U+FFFD. Special tokens never are. A token
    owns the characters from the last complete token before it to the first complete token at or after
    it (to the end of the text if there is none); a special token owns none.

    Args:
        lengths: int64 (L,), bytes each token adds to the decoded bytes (N in all).
        special: bool (L,), the tokenizer's special ids.
        boundary, characters, replaced: shape (N + 1,), per byte offset: a unit of the text ends there,
            the characters of the text before it, the unit ending there is U+FFFD.
        text_length: characters of the text.

    Returns:
        int64 array of shape (L, 2).
    """
    token_ends = np.cumsum(lengths)
    complete = ~special & boundary[token_ends] & ~replaced[token_ends]
    cuts = np.concatenate(([0], characters[token_ends[complete]], [text_length]))  # characters at each complete token
    before = np.cumsum(complete) - complete  # complete tokens before each token
    starts = cuts[before]
    return np.stack([starts, np.where(special, starts, cuts[before + 1])], axis=1)


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
    values = np.array([value for _, _, value in spans] + [default], dtype=np.float64)
    cuts, owners = _owner_segments(spans, text_length)
    starts, ends = ranges[:, 0], ranges[:, 1]
    first = np.searchsorted(cuts, starts, "right") - 1  # the segment of a token's first character
    last = np.searchsorted(cuts, ends, "left") - 1  # ... and of its last
    token_owner = np.where(ends > starts, owners[first], -1)
    mixed = np.flatnonzero(last > first)  # tokens across a segment edge
    if len(mixed):
        segment_ends = np.append(cuts[1:], text_length)
        token_owner[mixed] = _majority_owners(
            starts[mixed], ends[mixed], first[mixed], last[mixed], cuts, segment_ends, owners
        )
    return values[token_owner]


def _owner_segments(spans: Sequence[Span], text_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The text cut into segments of one owner: the last span covering them, or -1 (no span).

    Returns:
        cuts: int64 (G,), increasing, ``cuts[0] == 0``: segment g starts at ``cuts[g]`` and ends at the next cut
            (the last at ``text_length``).
        owners: int64 (G,), each segment's span index, -1 where no span covers it.
    """
    pieces = np.array(_painted_pieces(spans), dtype=np.int64).reshape(-1, 3)  # (start, end, span), disjoint
    cuts = np.unique(np.concatenate(([0], pieces[:, 0], pieces[:, 1])))
    cuts = cuts[(cuts < text_length) | (cuts == 0)]
    owners = np.full(len(cuts), -1, dtype=np.int64)
    owners[np.searchsorted(cuts, pieces[:, 0])] = pieces[:, 2]
    return cuts, owners


def _painted_pieces(spans: Sequence[Span]) -> list[tuple[int, int, int]]:
    """Disjoint, non-empty ``(start, end, span index)`` pieces of the characters each span owns, later
    spans owning what they share with earlier ones.

    Spans that do not overlap own all their characters. Otherwise they are taken from the last, each
    taking only what later spans left (the taken stretches kept merged as sorted bounds): every
    character is taken once, so the cost is linear in the spans however they nest.
    """
    if all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False)):
        return [(start, end, number) for number, (start, end, _) in enumerate(spans) if start < end]
    pieces = []
    taken: list[int] = []  # start, end, start, end, ... of the disjoint stretches already taken
    for number in range(len(spans) - 1, -1, -1):
        start, end = spans[number][:2]
        if start == end:
            continue
        first, last = bisect.bisect_left(taken, start), bisect.bisect_right(taken, end)
        gaps = [start] * (first % 2 == 0) + taken[first:last] + [end] * (last % 2 == 0)
        pieces += [(gap_start, gap_end, number) for gap_start, gap_end in zip(gaps[::2], gaps[1::2], strict=True)]
        merged = [taken[first - 1] if first % 2 else start, taken[last] if last % 2 else end]
        taken[first - first % 2 : last + last % 2] = merged
    return [piece for piece in pieces if piece[0] < piece[1]]


def _majority_owners(starts, ends, first, last, cuts, segment_ends, owners) -> np.ndarray:
    """Owner of most characters of each token whose characters lie in several segments: the span holding
    most (ties: the later span), or -1 where the characters no span covers are at least as many.

    Args:
        starts, ends: int64 (M,), the tokens' character ranges.
        first, last: int64 (M,), the segments of each token's first and last characters.
        cuts, segment_ends, owners: int64 (G,), each segment's first character, end and owner.

    Returns:
        int64 (M,).
    """
    pieces = last - first + 1
    token = np.repeat(np.arange(len(starts)), pieces)
    segment = first[token] + np.arange(len(token)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    held_by_piece = np.minimum(segment_ends[segment], ends[token]) - np.maximum(cuts[segment], starts[token])
    spans = int(owners.max()) + 2
    keys, slot = np.unique(token * spans + owners[segment] + 1, return_inverse=True)
    held = np.bincount(slot, weights=held_by_piece).astype(np.int64)
    key_token, key_owner = keys // spans, keys % spans - 1
    uncovered = np.zeros(len(starts), dtype=np.int64)
    uncovered[key_token[key_owner < 0]] = held[key_owner < 0]
    order = np.lexsort((key_owner, held, key_token))  # per token, its best span comes last
    best = order[np.r_[key_token[order][1:] != key_token[order][:-1], True]]
    result = np.full(len(starts), -1, dtype=np.int64)
    wins = (key_owner[best] >= 0) & (held[best] > uncovered[key_token[best]])
    result[key_token[best][wins]] = key_owner[best][wins]
    return result
