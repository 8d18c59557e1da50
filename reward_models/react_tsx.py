"""React / TSX compile reward with token-level spans, for verl's ``custom_reward_function``.

Use it from any verl recipe::

    reward.custom_reward_function.path=reward_models/react_tsx.py
    reward.custom_reward_function.name=compute_score          # or compute_score_async
    +reward.custom_reward_function.reward_kwargs.level=types  # options below, each optional

verl merges ``reward_kwargs`` into every call (``verl.trainer.ppo.reward.get_custom_reward_fn``). The
function needs no ground truth: ``data_source``, ``ground_truth`` and ``extra_info`` are ignored.

What it does to one response (``solution_str``):

1. Extract the code. Fenced blocks whose language tag is one of :data:`CODE_LANGUAGES` (or that have no
   tag) are the code; ```` ``` ```` and ``~~~`` fences are recognised, an unclosed fence runs to the end
   of the response (a truncated generation). With ``blocks="all"`` every such block is checked, each as
   its own module; with ``blocks="last"`` only the last one (the model's final answer). A response
   without any fence is checked whole. Fences of other languages only (bash, css, ...) mean "no code".
   Every block is checked as TSX, the task's language (plain JS and JSX parse as TSX too).
2. Check every block in the shared long-lived Node worker (``tsx/worker.mjs``, one per process,
   started on first use, restarted when it dies or hangs; the code is parsed and type-checked, never
   executed). ``level="syntax"``: esbuild's TSX parser. ``level="types"``: that, then TypeScript's type
   checker against ``@types/react`` (settings of a Vite React-TS tsconfig; imports other than ``react``
   are typed ``any``). TypeScript runs in a thread of its own in the worker, where one sample that
   crashes or hangs it fails alone (see "Bad input" below).
3. Score it. Value scheme (every value lies in ``[-1, 1]``):

   ============================================  =====================================
   tokens                                        value
   ============================================  =====================================
   every token of a response that compiles       ``score`` = 1.0 (no spans returned)
   code of a response that fails: clean code     ``clean_value`` (default 0.0)
   code of a response that fails: error region   ``error_value`` (default -1.0)
   outside the checked code (prose, fences)      ``score`` = 0.0 (not covered by spans)
   no code / oversized / checker error           ``score`` = 0.0 (no spans)
   ============================================  =====================================

   A response compiles when every checked block has no error at the configured level. The error region
   of a diagnostic (option ``region``): ``"token"``: the characters the compiler points at (at least
   one; a diagnostic at the end of the code, like "unexpected end of file", marks the whole code: an
   unfinished component, e.g. cut by the length budget, must not look like one local slip, or the policy
   learns to never finish); ``"line"``: the whole line(s) of that range, newline included;
   ``"element"``: the innermost JSX element or fragment that contains the diagnostic's first character
   in TypeScript's error-tolerant parse (the line when none does, or when that parse fails on
   nesting too deep for it). Overlapping regions are merged.
   esbuild stops at its first syntax error in most cases, so a broken block usually has one region.

The returned dict always has the same keys (verl collects them per sample)::

    {"score": 1.0 | 0.0, "spans": [(char_start, char_end, value), ...], "compiled": 0 | 1,
     "no_code": 0 | 1, "num_diagnostics": int, "num_blocks": int, "oversized": 0 | 1, "checker_error": 0 | 1}

Bad input. Every response gets a defined result in bounded time, and no response changes another's
(``tests/test_adversarial_tsx.py``):

- Empty or whitespace-only response, or no code: ``no_code=1``, score 0.
- Code longer than ``max_code_chars`` in total, or with a line longer than ``max_line_chars``: not
  checked, ``oversized=1``, score 0. The two bound esbuild's cost, whose error report is superlinear:
  each error copies its line and is located by a scan of the code (16,000 redeclarations in 100 kB take
  ~5 s; one 100 kB line of 50,000 errors makes a report too large for Node, and the worker dies).
- A type check TypeScript cannot finish: its parser or checker throws (a stack overflow: 1,000 nested
  arrays or 3,000 nested JSX elements fail within milliseconds), it runs longer than ``timeout / 3`` seconds (its
  checker is superlinear in recursive type instantiations: ~15 s for 300 of 1,000 steps), or it kills the type-check
  thread (2 GB heap cap): ``checker_error=1``, score 0, for that response only. The samples checked
  with it get their real result, and the worker process lives on (the thread is replaced). With
  ``checker="tsc7"`` the check runs in a Go process instead, killed on the time limit or past its memory
  bound (and replaced); code nested deeper than 500 levels is refused unchecked.
- Deeply nested valid code compiles at ``level="syntax"`` (score 1, any ``region``) in milliseconds:
  20,000 nested blocks, 2,000 nested functions, 10,000 nested JSX elements (130 kB: ``max_code_chars``
  raised). The element region of an error that deep is its line (TypeScript's parse for element
  ranges fails on it).
- The worker process dying, answering with an error, or not answering within ``timeout``:
  ``checker_error=1``, score 0; a hung worker is killed (its other responses in flight get
  ``checker_error=1`` too), both are logged as warnings, and the next call starts a fresh worker.
- A huge single line, unterminated strings, template literals, comments, regexes or JSX, NUL bytes,
  lone surrogates (sent as U+FFFD), a BOM, CRLF or lone CR, U+2028/U+2029, right-to-left text and
  controls, combining marks and ZWJ emoji are ordinary input: checked, spans mapped exactly. Every scan
  in this file is linear in the response, plus O(log n) per diagnostic.
- A ``solution_str`` that is not a ``str``: ``TypeError``. A worker that cannot start at all (``node``
  missing, ``npm ci`` not run): :class:`CheckerSetupError`, a broken installation, not a bad sample.

Render and requirements. ``render=True`` renders a compiled response's last block in headless Chromium
(:mod:`bot_grpo_verl.rewards.react_render`), in a worker without network (its own network namespace, see
``render_isolation``): a blank page, a runtime error (its line marked when its position maps back) or a timeout
scores 0. Each response keeps its own render result: its page's time limit counts from when a page starts it, not
while it queues behind others (eight endless loops scored beside four correct components leave the four at 1); a
failure of the render machinery (its worker or browser died, hung or answered an error) is retried once, then the
response gets ``checker_error=1`` (score 0, every render flag 0, logged), never a render status.
A row whose ``extra_info["react_spec"]`` states the request's requirements
(:mod:`bot_grpo_verl.rewards.react_requirements`) is checked against them: a violation with a place is an error span,
any violation scores 0 (or lowers the score to the share of requirements that hold, ``requirements_score``). The
result then also carries ``rendered``, ``render_blank``, ``render_error``, ``render_timeout``, ``render_elements``
(with ``render=True``) and ``requirements_met``, ``requirements_unmet``, ``requirements_share`` (with a spec).

Options (``reward_kwargs``; an unknown name or a bad value raises ``ValueError`` naming it, before any
check: bools, strings, ``None``, ``inf`` or ``nan`` for a number, a float for an int, anything but the
listed strings for a choice; numpy scalars are accepted and used as plain Python numbers):

- ``level`` (``str``, default ``"syntax"``): ``"syntax"`` (esbuild, ~2 ms for a 100-line component,
  many in parallel) or ``"types"`` (also TypeScript's type check against React's typings; checks queued
  together run as one program of separate modules, ~15 ms of CPU per 100-line component with ``tsc7``,
  ~50-100 ms with ``tsc6``, once warm; a new worker spends its first few seconds loading TypeScript).
- ``checker`` (``str``, default ``"tsc7"``): the type checker of ``level="types"``: ``"tsc7"``, TypeScript 7
  (the Go port, in a Go process of the worker's type-check thread: a virtual file system of the samples,
  React's typings and the lib files only; killed and replaced on the time limit, past its memory bound
  (2 GB resident, ``BOT_GRPO_VERL_TSC7_MEMORY_MB``) or when it dies; code nested deeper than 500 levels
  is refused with ``checker_error=1``), or ``"tsc6"``, TypeScript 6 in the thread (the reference: the same
  diagnostics on the test corpora, ``tests/test_react_tsx.py``, ``tests/test_adversarial_tsx.py``).
- ``region`` (``str``, default ``"token"``): ``"token"``, ``"line"`` or ``"element"``, see above.
- ``blocks`` (``str``, default ``"all"``): ``"all"`` or ``"last"`` fenced code blocks, see above.
- ``clean_value`` (``float``, default ``0.0``, in ``[0, 1]``): value of clean code tokens of a response
  that fails. The default gives them the outcome (0), so the token reward is the outcome plus a local
  penalty on the errors: it never pays for failing code. Values above 0 pay for it, and on the CPU demo
  (``clean_value=0.5``) the policy learned to write long code that never finishes, whose only error is
  the last character, rather than code that compiles (the paper's "clean, bounded, stable" lesson).
- ``error_value`` (``float``, default ``-1.0``, in ``[-1, 0)``): value of the error-region tokens.
- ``timeout`` (``float``, default ``30.0``, in ``(0, 86400]``): seconds one response may wait for its
  answers, queueing in the worker included. One sample's type check may run ``timeout / 3`` seconds
  (:data:`TYPE_TIMEOUT_SHARE`): past that the worker replaces its TypeScript thread and fails that sample
  alone, so the samples checked with it still answer within ``timeout``. A response not answered within
  ``timeout`` means the worker hung: it is killed, and the other responses it was checking get
  ``checker_error=1`` too.
- ``max_code_chars`` (``int``, default ``100_000``, > 0): larger code is not checked (``oversized=1``).
- ``max_line_chars`` (``int``, default ``2_000``, > 0): code with a longer line (lines end at ``\n``,
  ``\r``, U+2028, U+2029) is not checked (``oversized=1``). esbuild copies a line into each of its
  errors, so a line of length L with one error every few characters costs O(L^2); at the defaults
  the worst case is ~10^8 copied characters (~2 s).
- ``max_diagnostics`` (``int``, default ``20``, > 0): diagnostics the worker sends per block (and that
  get error regions); ``num_diagnostics`` still counts all of them.
- ``render`` (``bool``, default ``False``): render a compiled response in headless Chromium; it scores 1 only
  if it shows something (above). Each page may take ``timeout / 2`` seconds from when a page starts it; the render
  worker is killed as hung when a started render outlives ``timeout``, or when it starts and answers nothing for
  ``timeout`` while renders wait.
- ``render_isolation`` (``str``, default ``"namespace"``): how the render worker (Node and its Chromium, where model
  code runs) is kept off the network. ``"namespace"``: in a network namespace of its own without interfaces
  (``unshare --net`` as root, ``unshare --user --map-root-user --net`` otherwise), so no browser API can send a
  packet; where it cannot be made, ``CheckerSetupError`` in one line says what is needed. ``"flags_only"``: no
  namespace, only Chromium's flags (WebRTC without UDP, no host name resolves, a proxy that goes nowhere) and the
  page's request rules, a weaker isolation for machines without namespaces, with a warning in the log. The
  TypeScript worker runs no model code (it parses and type-checks) and runs without a namespace.
- ``requirements`` (``bool``, default ``True``): check a row's ``extra_info["react_spec"]`` (above); ``False``
  ignores it, scoring compilation (and the render) only, e.g. as the compile-only arm of a comparison on rows
  that carry specs.
- ``requirements_score`` (``str``, default ``"all"``): how a spec's unmet requirements lower the score of a
  response that compiles (and renders): ``"all"``, any unmet requirement scores 0 (issue 26's composed reward);
  ``"fraction"``, the score is multiplied by the share of the spec's requirements that hold (``requirements_share``
  is logged), a graded outcome that a policy far from the spec can climb (from the demo's warm start the
  all-or-nothing outcome is 0 for 97-99% of samples, docs/benchmarks.md); the clean code tokens carry that
  outcome (or ``clean_value``, whichever is larger); ``"fraction_named"``, the same share, but only when the
  requested component is there (exported under the spec's name), else 0: a fixed template under a name of its
  own collects nothing for the cheap requirements it meets (the collapse DAPO found under ``"fraction"``,
  docs/benchmarks.md). The error spans of violations with a place are the same under all three.
- ``judge_endpoint`` (``str``, default ``""``: off), ``judge_model`` (``str``), ``judge_weight`` (``float``, default
  ``0.5``, in ``[0, 1]``), ``judge_samples`` (``int``, default ``1``), ``judge_request_key`` (``str``, default
  ``"instruction"``): with an OpenAI-compatible endpoint, a response that compiles, renders (``render=True`` is
  required) and meets its spec is judged against ``extra_info[judge_request_key]``
  (:mod:`bot_grpo_verl.rewards.react_judge`, the ``[judge]`` extra): its score is ``(1 - w) + w * mean(judgments)``;
  ``judged``, ``judge_score``, ``judge_spread`` (max - min of the judgments: the judge's noise) and
  ``judge_no_judgment`` are logged.
- ``judge_mode`` (``str``, default ``"text"``): ``"text"``, the judge sees the code; ``"vision"``, the code and a
  screenshot of the render (a vision model, checked once with a blank image).
- ``judge_deadline`` (``float``, default ``None``: ``timeout``, in ``(0, 86400]``): seconds the judge may take for
  one response, all its judgments and retries included.
- ``judge_api_key_env`` (``str``, default ``"OPENAI_API_KEY"``): the environment variable holding the judge's API key.
- ``judge_fallback`` (``float``, default ``0.0``, in ``[0, 1]``), ``judge_on_failure`` (``str``, default
  ``"fallback"``): a judgment without a usable answer within the deadline counts as ``judge_fallback`` (counted in
  ``judge_no_judgment``), or, with ``"raise"``, raises. A wrong configuration (model not served, key or image
  refused) always raises.
"""

# No ``from __future__ import annotations``: verl loads this file without registering it in sys.modules,
# and dataclasses cannot resolve string annotations there.
import asyncio
import bisect
import functools
import itertools
import logging
import math
import numbers
import re
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields

from bot_grpo_verl.options import options_from_kwargs
from bot_grpo_verl.rewards.node_worker import ISOLATIONS, CheckerError, CheckerSetupError, WorkerClient, shared  # noqa: F401  (the errors are this reward's API)
from bot_grpo_verl.rewards.react_judge import MODES as JUDGE_MODES
from bot_grpo_verl.rewards.react_judge import ON_FAILURE as JUDGE_ON_FAILURE
from bot_grpo_verl.rewards.react_judge import JudgeClient, JudgeConfig, require_openai
from bot_grpo_verl.rewards.react_render import render_flags, screenshot_png, shared_renderer
from bot_grpo_verl.rewards.react_requirements import ReactSpec, check_requirements, export_key, spec_from_reference

logger = logging.getLogger(__name__)

CODE_LANGUAGES = ("tsx", "jsx", "typescript", "ts", "javascript", "js", "")
LEVELS = ("syntax", "types")
CHECKERS = ("tsc7", "tsc6")
REGIONS = ("token", "line", "element")
BLOCK_CHOICES = ("all", "last")
REQUIREMENT_SCORES = ("all", "fraction", "fraction_named")
MAX_TIMEOUT = 86_400.0
# Share of ``timeout`` one TypeScript batch may run in the worker before its thread is replaced.
TYPE_TIMEOUT_SHARE = 1 / 3
# Tries of one render while the render machinery fails (its worker or browser died, an error answer, a hung worker):
# our failure, retried once, then the response's ``checker_error``, never its render status.
RENDER_TRIES = 2

Span = tuple[int, int, float]


# ---------------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Options:
    """The reward's options; see the module docstring for each one's meaning."""

    level: str = "syntax"
    checker: str = "tsc7"
    region: str = "token"
    blocks: str = "all"
    clean_value: float = 0.0
    error_value: float = -1.0
    timeout: float = 30.0
    max_code_chars: int = 100_000
    max_line_chars: int = 2_000
    max_diagnostics: int = 20
    render: bool = False
    render_isolation: str = "namespace"
    requirements: bool = True
    requirements_score: str = "all"
    judge_endpoint: str = ""
    judge_model: str = ""
    judge_weight: float = 0.5
    judge_samples: int = 1
    judge_request_key: str = "instruction"
    judge_mode: str = "text"
    judge_deadline: float | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    judge_fallback: float = 0.0
    judge_on_failure: str = "fallback"


def _check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {allowed}")


def _check_number(
    name: str, value, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} must be a finite number")
    if value < low or value > high or (low_open and value == low) or (high_open and value == high):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name}={value!r} must lie in {interval}")


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive integer")


def parse_options(kwargs: dict) -> Options:
    """Build :class:`Options` from a reward function's keyword arguments (verl's ``reward_kwargs``).

    Keys verl passes on its own are ignored; any other unknown key raises.
    """
    options = options_from_kwargs(Options, kwargs, "react_tsx")
    _check_choice("level", options.level, LEVELS)
    _check_choice("checker", options.checker, CHECKERS)
    _check_choice("region", options.region, REGIONS)
    _check_choice("blocks", options.blocks, BLOCK_CHOICES)
    _check_choice("requirements_score", options.requirements_score, REQUIREMENT_SCORES)
    _check_choice("render_isolation", options.render_isolation, ISOLATIONS)
    _check_number("clean_value", options.clean_value, 0.0, 1.0)
    _check_number("error_value", options.error_value, -1.0, 0.0, high_open=True)
    _check_number("timeout", options.timeout, 0.0, MAX_TIMEOUT, low_open=True)
    _check_positive_int("max_code_chars", options.max_code_chars)
    _check_positive_int("max_line_chars", options.max_line_chars)
    _check_positive_int("max_diagnostics", options.max_diagnostics)
    for name in ("render", "requirements"):
        if not isinstance(getattr(options, name), bool):
            raise ValueError(f"{name}={getattr(options, name)!r} must be a bool")
    _check_number("judge_weight", options.judge_weight, 0.0, 1.0)
    _check_positive_int("judge_samples", options.judge_samples)
    _check_choice("judge_mode", options.judge_mode, JUDGE_MODES)
    _check_choice("judge_on_failure", options.judge_on_failure, JUDGE_ON_FAILURE)
    _check_number("judge_fallback", options.judge_fallback, 0.0, 1.0)
    if options.judge_deadline is not None:
        _check_number("judge_deadline", options.judge_deadline, 0.0, MAX_TIMEOUT, low_open=True)
    if options.judge_endpoint and not (options.render and options.judge_model):
        raise ValueError(
            "judge_endpoint needs render=True (the judge scores only components that compile and render) and "
            "judge_model (the served model name)"
        )
    if options.judge_endpoint:
        require_openai()
    # Plain Python values: numpy scalars pass the checks, and the worker's requests are JSON.
    return Options(**{field.name: _plain(getattr(options, field.name), field.type) for field in fields(Options)})


def _plain(value, annotation):
    """``value`` as the plain Python value of its field's type (``annotation``, or its one type besides None)."""
    kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)] or [annotation]
    return None if value is None else kinds[0](value)


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
    block_start: int, block_end: int, regions: list[tuple[int, int]], options: Options, outcome: float = 0.0
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


# ---------------------------------------------------------------------------------------------------
# Results


def _result(score: float = 0.0, spans=(), *, num_diagnostics=0, num_blocks=0, **flags) -> dict:
    result = {
        "score": score,
        "spans": list(spans),
        "compiled": int(score == 1.0),
        "no_code": 0,
        "num_diagnostics": num_diagnostics,
        "num_blocks": num_blocks,
        "oversized": 0,
        "checker_error": 0,
    }
    result.update(flags)
    return result


def precheck(text: str, options: Options) -> tuple[list[tuple[int, int]], dict | None]:
    """The blocks of ``text`` to check, or the final result when none needs checking."""
    if not isinstance(text, str):
        raise TypeError(f"solution_str must be a str, got {type(text).__name__}")
    blocks = extract_blocks(text, options.blocks)
    if not blocks:
        return blocks, _result(no_code=1)
    too_long = sum(end - start for start, end in blocks) > options.max_code_chars
    if too_long or max(longest_line(text[start:end]) for start, end in blocks) > options.max_line_chars:
        return blocks, _result(num_blocks=len(blocks), oversized=1)
    return blocks, None


def score_answers(text: str, blocks: list[tuple[int, int]], answers: list[dict], options: Options) -> dict:
    """The reward of ``text`` from the worker's answers for its ``blocks`` (see the module docstring)."""
    num_diagnostics = sum(answer["total"] for answer in answers)
    if all(answer["ok"] for answer in answers):
        return _result(1.0, num_blocks=len(blocks))
    spans = []
    for (start, end), answer in zip(blocks, answers, strict=True):
        regions = error_regions(text[start:end], answer, options.region)
        spans.extend(block_spans(start, end, regions, options))
    return _result(0.0, spans, num_diagnostics=num_diagnostics, num_blocks=len(blocks))


# ---------------------------------------------------------------------------------------------------
# The worker client


class TsxChecker(WorkerClient):
    """The compile checker's client (``tsx/worker.mjs``): ``check`` / ``check_async`` send a batch of code
    strings and return the worker's answers in order. The worker bounds its own TypeScript batches
    (``timeout * TYPE_TIMEOUT_SHARE`` each) and answers a sample it cannot check with an error, which fails
    that sample alone; one that does not answer within ``timeout`` is killed (see :class:`WorkerClient`)."""

    name = "TSX worker"
    script_name = "worker.mjs"

    def requests(
        self,
        codes: list[str],
        level: str,
        elements: bool,
        max_diagnostics: int,
        timeout: float,
        outline: bool = False,
        checker: str = "tsc7",
    ):
        return [
            {
                "code": code,
                "outline": outline,
                "level": level,
                "checker": checker,
                "elements": elements,
                "max_diagnostics": max_diagnostics,
                "type_timeout": timeout * TYPE_TIMEOUT_SHARE,
            }
            for code in codes
        ]

    def check(
        self,
        codes: list[str],
        level: str,
        elements: bool,
        max_diagnostics: int,
        timeout: float,
        outline: bool = False,
        checker: str = "tsc7",
    ) -> list[dict]:
        """The worker's answers for ``codes``, in order (with an ``outline`` of each code that passes, when asked),
        type-checked (``level="types"``) by ``checker``; raises :class:`CheckerError`."""
        return self.request(self.requests(codes, level, elements, max_diagnostics, timeout, outline, checker), timeout)

    async def check_async(
        self, codes, level, elements, max_diagnostics, timeout, outline=False, checker="tsc7"
    ) -> list[dict]:
        """:meth:`check` for an event loop: waits without blocking the loop."""
        requests = self.requests(codes, level, elements, max_diagnostics, timeout, outline, checker)
        return await self.request_async(requests, timeout)


shared_checker = shared(TsxChecker)
"""The process's shared :class:`TsxChecker` (a forked child gets its own)."""


# ---------------------------------------------------------------------------------------------------
# verl entry points


_SURROGATE = re.compile("[\ud800-\udfff]")


def _request_args(text: str, blocks: list[tuple[int, int]], options: Options, spec) -> tuple:
    # Surrogate code points become U+FFFD, one character for one: JavaScript would join a high and a low
    # one into a single character, and every position after them would shift.
    codes = [_SURROGATE.sub("\ufffd", text[start:end]) for start, end in blocks]
    elements = options.region == "element"
    return codes, options.level, elements, options.max_diagnostics, options.timeout, spec is not None, options.checker


def with_render(result: dict, answer: dict | None, positions: "CodeMap", options: Options) -> tuple[dict, list]:
    """``result`` with the render check applied (``render=True``), and the error regions it adds to the last
    block: a compiled response passes only when its last block renders something; a blank page, a runtime
    error or a timeout scores 0, and a runtime error whose position maps back to the code marks its line.
    Every result of such a run carries the render keys (:func:`react_render.render_flags`)."""
    if not options.render:
        return result, []
    result = {**result, **render_flags(answer)}
    if answer is None or answer["status"] == "renders":
        return result, []
    result["score"] = 0.0
    offset = (answer.get("exception") or {}).get("offset_utf16")
    if offset is None:
        return result, []
    index = positions.utf16.index(offset)
    return result, [line_region(positions, index, index + 1)]


def with_requirements(result: dict, spec, outline, page, positions: "CodeMap", options: Options) -> tuple[dict, list]:
    """``result`` with the spec's requirements checked (a row with ``extra_info["react_spec"]``) against the source's
    ``outline`` and the rendered ``page`` (the render's answer with ``render=True``, else None), and the error regions
    of the violations that have a place; a violation scores 0 or the share of requirements that hold
    (``options.requirements_score``; ``requirements_unmet`` counts the violations)."""
    if spec is None:
        return result, []
    found = check_requirements(spec, outline, positions.code, page)
    share = found.met / found.checked if found.checked else 1.0
    result = {
        **result,
        "requirements_met": int(not found.unmet),
        "requirements_unmet": len(found.unmet),
        "requirements_share": share,
    }
    how = options.requirements_score
    graded = how == "fraction" or (how == "fraction_named" and found.named)
    if found.unmet:
        result["score"] = result["score"] * share if graded else 0.0
    index = positions.utf16.index
    return result, [(index(start), max(index(end), index(start) + 1)) for start, end in found.places]


def finish(text: str, blocks, answers, render_answer, spec, options: Options) -> dict:
    """The reward once the blocks are compiled and (for a compiled response, ``render=True``) rendered: the
    compile result, then the render and the requirement gates on the last block (the answer)."""
    result = score_answers(text, blocks, answers, options)
    if not result["compiled"]:
        return unchecked(blocks, result, spec, options)
    start, end = blocks[-1]
    positions = CodeMap(text[start:end])
    result, render_regions = with_render(result, render_answer, positions, options)
    page = render_answer if options.render else None
    result, requirement_regions = with_requirements(result, spec, answers[-1].get("outline"), page, positions, options)
    regions = merge_ranges(render_regions + requirement_regions)
    if regions:
        result["spans"] = block_spans(start, end, regions, options, outcome=result["score"])
    return result


def unchecked(blocks, result: dict, spec, options: Options) -> dict:
    """A result decided before any check (no code, oversized, checker error), with the keys of its run."""
    result, _ = with_render(result, None, None, options)
    if spec is None:
        return result
    return {**result, "requirements_met": 0, "requirements_unmet": 0, "requirements_share": 0.0}


def unrendered(blocks, spec, options: Options) -> dict:
    """The result of a response that compiled but that the render machinery failed on every try: score 0,
    ``checker_error=1``, every render flag 0 (nothing is known of its page)."""
    return unchecked(blocks, _result(num_blocks=len(blocks), compiled=1, checker_error=1), spec, options)


def _render_try_failed(error: CheckerError, attempt: int) -> None:
    outcome = "retrying" if attempt < RENDER_TRIES else "the response gets checker_error=1"
    logger.warning(
        "react_tsx: the render machinery failed (try %d of %d, %s): %s", attempt, RENDER_TRIES, outcome, error
    )


def render_tried(code: str, options: Options, export: str | None) -> dict | None:
    """The render worker's answer for ``code`` rendering its export ``export``, tried :data:`RENDER_TRIES` times
    while the machinery fails (each failure logged); None when every try failed."""
    for attempt in range(1, RENDER_TRIES + 1):
        try:
            renderer = shared_renderer(options.render_isolation)
            return renderer.render([code], options.timeout, wants_screenshot(options), export)[0]
        except CheckerError as error:
            _render_try_failed(error, attempt)
    return None


async def render_tried_async(code: str, options: Options, export: str | None) -> dict | None:
    """:func:`render_tried` for an event loop."""
    for attempt in range(1, RENDER_TRIES + 1):
        try:
            renderer = shared_renderer(options.render_isolation)
            return (await renderer.render_async([code], options.timeout, wants_screenshot(options), export))[0]
        except CheckerError as error:
            _render_try_failed(error, attempt)
    return None


_judges: dict[JudgeConfig, JudgeClient] = {}
_judges_lock = threading.Lock()


@functools.cache
def _say_the_judge_is_off() -> None:
    logger.warning("react_tsx: no judge_endpoint: the judge is off (compile, render and requirements only)")


def judge_for(options: Options) -> JudgeClient | None:
    """The process's judge client for the options' judge settings (None without an endpoint, which a
    ``render=True`` run says once in its log); its deadline is ``judge_deadline``, else ``timeout``."""
    if not options.judge_endpoint:
        if options.render:
            _say_the_judge_is_off()
        return None
    config = JudgeConfig(
        options.judge_endpoint,
        options.judge_model,
        mode=options.judge_mode,
        deadline_s=options.timeout if options.judge_deadline is None else options.judge_deadline,
        api_key_env=options.judge_api_key_env,
        fallback=options.judge_fallback,
        on_failure=options.judge_on_failure,
    )
    with _judges_lock:
        if config not in _judges:
            _judges[config] = JudgeClient(config)
        return _judges[config]


def wants_screenshot(options: Options) -> bool:
    """Whether the render keeps a screenshot: for a judge in vision mode."""
    return bool(options.judge_endpoint) and options.judge_mode == "vision"


def with_judge(result: dict, extra_info, code: str | None, screenshot: bytes | None, options: Options) -> dict:
    """``result`` with the judge's score mixed in (``judge_endpoint`` set): only a response that scores 1 (it
    compiles, renders and meets its spec) is judged, ``judge_samples`` times; its score becomes ``(1 - w) + w *
    mean`` with ``w = judge_weight``, a missing judgment counted as ``judge_fallback`` (``judge_no_judgment``
    counts them), and ``judge_spread`` (max - min of the judgments) logs the judge's noise."""
    judge = judge_for(options)
    if judge is None:
        return result
    result = {**result, "judged": 0, "judge_score": 0.0, "judge_spread": 0.0, "judge_no_judgment": 0}
    if result["score"] != 1.0:
        return result
    request = (extra_info or {}).get(options.judge_request_key)
    if not isinstance(request, str) or not request:
        raise ValueError(f"the judge needs the request in extra_info[{options.judge_request_key!r}], got {request!r}")
    verdict = judge.judge(request, code, screenshot, options.judge_samples)
    score = (1 - options.judge_weight) + options.judge_weight * verdict.score
    return {
        **result,
        "score": score,
        "judged": int(bool(verdict.scores)),
        "judge_score": verdict.score,
        "judge_spread": verdict.spread,
        "judge_no_judgment": verdict.missing,
    }


def compute_score(data_source, solution_str: str, ground_truth=None, extra_info=None, **kwargs) -> dict:
    """The TSX compile reward of ``solution_str`` (a dict, see the module docstring); thread-safe."""
    options = parse_options(kwargs)
    spec = ReactSpec.from_extra_info(extra_info) if options.requirements else None
    blocks, final = precheck(solution_str, options)
    if final is not None:
        return with_judge(unchecked(blocks, final, spec, options), extra_info, None, None, options)
    codes, *settings = _request_args(solution_str, blocks, options, spec)
    try:
        answers = shared_checker().check(codes, *settings)
    except CheckerError:
        result = unchecked(blocks, _result(num_blocks=len(blocks), checker_error=1), spec, options)
        return with_judge(result, extra_info, None, None, options)
    render_answer = None
    if options.render and all(answer["ok"] for answer in answers):
        export = export_key(spec, answers[-1].get("outline"))
        render_answer = render_tried(codes[-1], options, export)
        if render_answer is None:
            return with_judge(unrendered(blocks, spec, options), extra_info, None, None, options)
    result = finish(solution_str, blocks, answers, render_answer, spec, options)
    return with_judge(result, extra_info, codes[-1], render_answer and screenshot_png(render_answer), options)


def reference_spec(reference: str) -> dict:
    """The ``react_spec`` of a reference solution: :func:`spec_from_reference` of its outline (TypeScript's parse);
    ``ValueError`` if it does not compile."""
    answer = shared_checker().check([reference], "syntax", False, 20, 60.0, outline=True)[0]
    if not answer["ok"] or answer.get("outline") is None:
        raise ValueError(f"the reference solution does not compile: {reference[:120]!r}")
    return spec_from_reference(answer["outline"])


async def compute_score_async(data_source, solution_str: str, ground_truth=None, extra_info=None, **kwargs) -> dict:
    """:func:`compute_score` for verl's event loop (``name=compute_score_async``); never blocks the loop
    except for the first call of a process, which starts the worker."""
    options = parse_options(kwargs)
    spec = ReactSpec.from_extra_info(extra_info) if options.requirements else None
    blocks, final = precheck(solution_str, options)
    judged = functools.partial(with_judge, extra_info=extra_info, options=options)
    loop = asyncio.get_running_loop()
    if final is not None:
        return await loop.run_in_executor(
            None, lambda: judged(unchecked(blocks, final, spec, options), code=None, screenshot=None)
        )
    codes, *settings = _request_args(solution_str, blocks, options, spec)
    try:
        answers = await shared_checker().check_async(codes, *settings)
    except CheckerError:
        result = unchecked(blocks, _result(num_blocks=len(blocks), checker_error=1), spec, options)
        return await loop.run_in_executor(None, lambda: judged(result, code=None, screenshot=None))
    render_answer = None
    if options.render and all(answer["ok"] for answer in answers):
        export = export_key(spec, answers[-1].get("outline"))
        render_answer = await render_tried_async(codes[-1], options, export)
        if render_answer is None:
            result = unrendered(blocks, spec, options)
            return await loop.run_in_executor(None, lambda: judged(result, code=None, screenshot=None))
    result = finish(solution_str, blocks, answers, render_answer, spec, options)
    screenshot = render_answer and screenshot_png(render_answer)
    return await loop.run_in_executor(None, lambda: judged(result, code=codes[-1], screenshot=screenshot))
