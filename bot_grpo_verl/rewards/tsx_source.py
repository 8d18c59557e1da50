"""Where the code of a response lies and where its errors are: the fenced code blocks of a response
(:func:`extract_blocks`), the worker's diagnostic positions (esbuild: a line and a UTF-8 byte column; TypeScript:
UTF-16 offsets) as Python string indices (:class:`CodeMap`), a diagnostic's error region (``"token"``, ``"line"``
or ``"element"``, :func:`error_regions`), and the spans that tile a block (:func:`block_spans`).

Every scan here is linear in the response, plus O(log n) per diagnostic: no input shape (one huge line, thousands
of diagnostics or nested elements) makes one quadratic.
"""

import bisect
import functools
import itertools
import re
from collections.abc import Callable

from bot_grpo_verl.rewards.react_options import ReactTsxConfig

CODE_LANGUAGES = ("tsx", "jsx", "typescript", "ts", "javascript", "js", "")

Span = tuple[int, int, float]

# ---------------------------------------------------------------------------------------------------
# Code extraction

_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$", re.MULTILINE)
_LANGUAGE = re.compile(r"[A-Za-z0-9_+-]*")


@functools.lru_cache(maxsize=64)
def _closing_fence(fence: str) -> re.Pattern:
    """A line closing a block opened by ``fence``: the same character, at least as many, nothing else."""
    return re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t\r]*$", re.MULTILINE)


def extract_blocks(text: str, blocks: str = "all") -> list[tuple[int, int]]:
    """Character ranges ``[start, end)`` of ``text`` that hold the code to check.

    Returns the code-language fenced blocks (all, or the last one), ``[(0, len(text))]`` when ``text``
    has no fence at all, and ``[]`` when there is no code (blank text, or fences of other languages only).
    Blocks that hold only whitespace are dropped.
    """
    if not text.strip():
        return []
    found, fenced, position = [], False, 0
    while (opening := _FENCE.search(text, position)) is not None:
        fenced = True
        fence = opening.group("fence")
        start = min(opening.end() + 1, len(text))
        closed = _closing_fence(fence).search(text, start)
        end = closed.start() if closed else len(text)
        language = _LANGUAGE.match(opening.group("info").strip()).group(0).lower()
        if language in CODE_LANGUAGES and text[start:end].strip():
            found.append((start, end))
        position = closed.end() if closed else len(text)
    if not fenced:
        return [(0, len(text))]
    return found[-1:] if blocks == "last" else found


# ---------------------------------------------------------------------------------------------------
# Diagnostic positions -> str indices
#
# Everything here is built once per block in O(n) (:class:`CodeMap`); each diagnostic then costs O(log n),
# so no input shape (one huge line, thousands of diagnostics or nested elements) makes a scan quadratic.

# esbuild's line terminators (internal/logger: computeLineAndColumn).
_LINE_BREAK = re.compile("\r\n|[\r\n\u2028\u2029]")


def line_starts(code: str) -> list[int]:
    """Start index of every line of ``code``, lines ending where esbuild ends them."""
    return [0, *(match.end() for match in _LINE_BREAK.finditer(code))]


def longest_line(code: str) -> int:
    """Characters in the longest line of ``code`` (terminators excluded)."""
    return max(map(len, _LINE_BREAK.split(code)))


def line_of(starts: list[int], index: int) -> int:
    """0-based line that holds str index ``index`` (``starts`` from :func:`line_starts`)."""
    return bisect.bisect_right(starts, index) - 1


def _utf8_width(character: str) -> int:
    """UTF-8 bytes of one character (a surrogate counts 3: the worker gets U+FFFD in its place)."""
    return 1 if character < "\x80" else 2 if character < "\u0800" else 3 if character < "\U00010000" else 4


def _utf16_width(character: str) -> int:
    return 2 if character > "\uffff" else 1


class CodeUnits:
    """Offsets in the code units of one encoding of a code (UTF-8 bytes, UTF-16 units) to and from str
    indices; ``width`` gives a character's units, None when every character is one unit."""

    def __init__(self, code: str, width: Callable[[str], int] | None):
        self.length = len(code)
        self.ends = None if width is None else list(itertools.accumulate(map(width, code)))

    def index(self, offset: int) -> int:
        """str index of the character holding unit ``offset``; ``length`` at or past the end."""
        if self.ends is None:
            return min(max(offset, 0), self.length)
        return bisect.bisect_right(self.ends, max(offset, 0))

    def offset(self, index: int) -> int:
        """Units before str index ``index``."""
        if self.ends is None or index <= 0:
            return max(index, 0)
        return self.ends[min(index, self.length) - 1]


def utf8_units(code: str) -> CodeUnits:
    return CodeUnits(code, None if code.isascii() else _utf8_width)


def utf16_units(code: str) -> CodeUnits:
    return CodeUnits(code, None if code.isascii() or max(code) <= "\uffff" else _utf16_width)


class CodeMap:
    """Position lookups into one block's code; the code-unit tables are built on first use."""

    def __init__(self, code: str):
        self.code = code
        self.length = len(code)
        self.content_end = len(code.rstrip())  # a diagnostic at or past it is at the end of the code
        self.starts = line_starts(code)

    @functools.cached_property
    def utf8(self) -> CodeUnits:
        return utf8_units(self.code)

    @functools.cached_property
    def utf16(self) -> CodeUnits:
        return utf16_units(self.code)


def utf8_column_to_index(positions: CodeMap, line: int, byte_column: int) -> int:
    """str index of esbuild's (1-based ``line``, UTF-8 ``byte_column``); a byte inside a character maps to
    that character's start, a column past the line's end to the line's end."""
    starts = positions.starts
    row = min(max(line, 1), len(starts)) - 1
    end = starts[row + 1] if row + 1 < len(starts) else positions.length
    return min(positions.utf8.index(positions.utf8.offset(starts[row]) + max(byte_column, 0)), end)


def diagnostic_range(positions: CodeMap, diagnostic: dict) -> tuple[int, int]:
    """``[start, end)`` str indices into the code of one worker diagnostic (see ``tsx/worker.mjs``)."""
    if "offset_utf16" in diagnostic:
        offset = diagnostic["offset_utf16"]
        return positions.utf16.index(offset), positions.utf16.index(offset + diagnostic["length"])
    line, column = diagnostic["line"], diagnostic["column"]
    return (
        utf8_column_to_index(positions, line, column),
        utf8_column_to_index(positions, line, column + diagnostic["length"]),
    )


# ---------------------------------------------------------------------------------------------------
# Error regions


def token_region(positions: CodeMap, start: int, end: int) -> tuple[int, int]:
    """The diagnostic's own characters, at least one; at the end of the code (an unfinished component:
    "unexpected end of file", a response cut by the length budget) the whole code, so that stopping
    early is never cheaper than one local mistake."""
    if start >= positions.content_end:
        return 0, positions.length
    return start, min(max(end, start + 1), positions.length)


def line_region(positions: CodeMap, start: int, end: int) -> tuple[int, int]:
    """The whole lines (terminators included) that ``[start, end)`` touches."""
    starts = positions.starts
    first, last = line_of(starts, start), line_of(starts, max(end - 1, start))
    return starts[first], starts[last + 1] if last + 1 < len(starts) else positions.length


def innermost_elements(elements: list[tuple[int, int]], points: list[int]) -> dict[int, tuple[int, int] | None]:
    """For each of ``points``, the innermost of the nested-or-disjoint ``[start, end)`` ``elements`` that
    holds it (None when none does), in one sweep over both sorted lists."""
    upcoming = iter(sorted(elements, key=lambda element: (element[0], -element[1])))
    following = next(upcoming, None)
    holding: list[tuple[int, int]] = []  # open elements, each inside the one below it
    found = {}
    for point in sorted(set(points)):
        while following is not None and following[0] <= point:
            while holding and holding[-1][1] <= following[0]:
                holding.pop()
            holding.append(following)
            following = next(upcoming, None)
        while holding and holding[-1][1] <= point:
            holding.pop()
        found[point] = holding[-1] if holding else None
    return found


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted ``[start, end)`` ranges with overlapping or touching ones merged."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def error_regions(code: str, answer: dict, region: str) -> list[tuple[int, int]]:
    """Merged, sorted ``[start, end)`` error regions of one block's worker answer. ``"element"`` regions
    use the answer's ``elements`` (UTF-16 ranges); without them (null, absent) every region is a line."""
    positions = CodeMap(code)
    ranges = [token_region(positions, *diagnostic_range(positions, d)) for d in answer["diagnostics"]]
    if region == "line":
        ranges = [line_region(positions, start, end) for start, end in ranges]
    elif region == "element":
        to_index = positions.utf16.index
        elements = [(to_index(first), to_index(last)) for first, last in answer.get("elements") or []]
        holding = innermost_elements(elements, [start for start, _ in ranges])
        ranges = [holding[start] or line_region(positions, start, end) for start, end in ranges]
    return merge_ranges(ranges)


def block_spans(
    block_start: int, block_end: int, regions: list[tuple[int, int]], options: ReactTsxConfig, outcome: float = 0.0
) -> list[Span]:
    """Spans tiling one block of the response: ``error_value`` on its regions (block-relative), else the
    response's ``outcome`` or ``clean_value``, whichever is larger (a graded outcome reaches its clean code)."""
    clean = max(options.clean_value, outcome)
    spans, cursor = [], block_start
    for start, end in regions:
        if block_start + start > cursor:
            spans.append((cursor, block_start + start, clean))
        spans.append((block_start + start, block_start + end, options.error_value))
        cursor = block_start + end
    if cursor < block_end:
        spans.append((cursor, block_end, clean))
    return spans


_SURROGATE = re.compile("[\ud800-\udfff]")


def code_for_worker(code: str) -> str:
    """``code`` as the worker gets it: surrogate code points become U+FFFD, one character for one (JavaScript
    would join a high and a low one into a single character, and every position after them would shift)."""
    return _SURROGATE.sub("\ufffd", code)
