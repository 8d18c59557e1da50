"""React / TSX compile reward with token-level spans, for verl's ``custom_reward_function``.

Use it from any verl recipe::

    reward.custom_reward_function.path=bot_grpo_verl/rewards/react_tsx.py
    reward.custom_reward_function.name=compute_score          # or compute_score_async
    +reward.custom_reward_function.reward_kwargs.level=types  # options below, each optional

verl merges ``reward_kwargs`` into every call (``verl.trainer.ppo.reward.get_custom_reward_fn``). The
function needs no ground truth: ``data_source``, ``ground_truth`` and ``extra_info`` are ignored.

What it does to one response (``solution_str``):

1. Extract the code. Fenced blocks whose language tag is one of :data:`tsx_source.CODE_LANGUAGES` (or that have no
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

Options (``reward_kwargs``): :class:`bot_grpo_verl.rewards.react_options.ReactTsxConfig`, whose table is in
docs/reward-models.md; an unknown name or a bad value raises ``ValueError`` naming it, before any check.

The parts, one concept each: :mod:`~bot_grpo_verl.rewards.react_options` (the options),
:mod:`~bot_grpo_verl.rewards.tsx_source` (code blocks, positions, error regions, spans),
:mod:`~bot_grpo_verl.rewards.tsx_checker` (the compile worker's client), :mod:`~bot_grpo_verl.rewards.react_gates`
(render, requirements, judge); this file holds the one scoring path, :func:`score` (async), which
:func:`compute_score_async` awaits and :func:`compute_score` runs on a private event loop.
"""

# No ``from __future__ import annotations``: verl loads this file without registering it in sys.modules,
# and dataclasses cannot resolve string annotations there.
import asyncio
import concurrent.futures
import typing

from bot_grpo_verl.rewards.node_worker import CheckerError, CheckerSetupError  # noqa: F401  (this reward's API)
from bot_grpo_verl.rewards.react_gates import (
    render_tried_async,
    unchecked,
    with_judge_async,
    with_render,
    with_requirements,
)
from bot_grpo_verl.rewards.react_options import ReactTsxConfig
from bot_grpo_verl.rewards.react_render import screenshot_png
from bot_grpo_verl.rewards.react_requirements import ReactSpec, export_key, spec_from_reference
from bot_grpo_verl.rewards.tsx_checker import shared_checker
from bot_grpo_verl.rewards.tsx_source import (
    CodeMap,
    block_spans,
    code_for_worker,
    error_regions,
    extract_blocks,
    longest_line,
    merge_ranges,
)

parse_options = ReactTsxConfig.from_kwargs


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


def precheck(text: str, options: ReactTsxConfig) -> tuple[list[tuple[int, int]], dict | None]:
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


def score_answers(text: str, blocks: list[tuple[int, int]], answers: list[dict], options: ReactTsxConfig) -> dict:
    """The reward of ``text`` from the worker's answers for its ``blocks`` (see the module docstring)."""
    num_diagnostics = sum(answer["total"] for answer in answers)
    if all(answer["ok"] for answer in answers):
        return _result(1.0, num_blocks=len(blocks))
    spans = []
    for (start, end), answer in zip(blocks, answers, strict=True):
        regions = error_regions(text[start:end], answer, options.region)
        spans.extend(block_spans(start, end, regions, options))
    return _result(0.0, spans, num_diagnostics=num_diagnostics, num_blocks=len(blocks))


def finish(text: str, blocks, answers, render_answer, spec, options: ReactTsxConfig) -> dict:
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


def unrendered(blocks, spec, options: ReactTsxConfig) -> dict:
    """The result of a response that compiled but that the render machinery failed on every try: score 0,
    ``checker_error=1``, every render flag 0 (nothing is known of its page)."""
    return unchecked(blocks, _result(num_blocks=len(blocks), compiled=1, checker_error=1), spec, options)


# ---------------------------------------------------------------------------------------------------
# The scoring path and verl's entry points


async def score(solution_str: str, extra_info, options: ReactTsxConfig) -> dict:
    """The reward of ``solution_str`` (a dict, see the module docstring): compile its blocks, then for a compiled
    response the render (``render=True``), requirement (a row's spec) and judge (``judge_endpoint``) gates."""
    spec = ReactSpec.from_extra_info(extra_info) if options.requirements else None
    blocks, final = precheck(solution_str, options)
    if final is not None:
        return await with_judge_async(unchecked(blocks, final, spec, options), extra_info, None, None, options)
    codes = [code_for_worker(solution_str[start:end]) for start, end in blocks]
    elements = options.region == "element"
    settings = (options.level, elements, options.max_diagnostics, options.timeout, spec is not None, options.checker)
    try:
        answers = await shared_checker().check_async(codes, *settings)
    except CheckerError:
        result = unchecked(blocks, _result(num_blocks=len(blocks), checker_error=1), spec, options)
        return await with_judge_async(result, extra_info, None, None, options)
    render_answer = None
    if options.render and all(answer["ok"] for answer in answers):
        export = export_key(spec, answers[-1].get("outline"))
        render_answer = await render_tried_async(codes[-1], options, export)
        if render_answer is None:
            return await with_judge_async(unrendered(blocks, spec, options), extra_info, None, None, options)
    result = finish(solution_str, blocks, answers, render_answer, spec, options)
    screenshot = render_answer and screenshot_png(render_answer)
    return await with_judge_async(result, extra_info, codes[-1], screenshot, options)


async def compute_score_async(data_source, solution_str: str, ground_truth=None, extra_info=None, **kwargs) -> dict:
    """The TSX compile reward of ``solution_str`` for verl's event loop (``name=compute_score_async``; a dict, see
    the module docstring); never blocks the loop except for the first call of a process, which starts the worker."""
    return await score(solution_str, extra_info, parse_options(kwargs))


def compute_score(data_source, solution_str: str, ground_truth=None, extra_info=None, **kwargs) -> dict:
    """:func:`compute_score_async` as a blocking call (``name=compute_score``), run on an event loop of its own;
    thread-safe. Called where an event loop runs, it runs in a thread of its own (and blocks that loop until it is
    done, as any blocking reward does)."""
    scoring = score(solution_str, extra_info, parse_options(kwargs))
    if _running_loop() is not None:
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            return thread.submit(_run_privately, scoring).result()
    return _run_privately(scoring)


def reference_spec(reference: str) -> dict:
    """The ``react_spec`` of a reference solution: :func:`spec_from_reference` of its outline (TypeScript's parse);
    ``ValueError`` if it does not compile."""
    answer = shared_checker().check([reference], "syntax", False, 20, 60.0, outline=True)[0]
    if not answer["ok"] or answer.get("outline") is None:
        raise ValueError(f"the reference solution does not compile: {reference[:120]!r}")
    return spec_from_reference(answer["outline"])


def _run_privately(scoring: typing.Coroutine):
    """Run the coroutine ``scoring`` to its end on an event loop of its own, made and closed here (~50 us a call:
    a loop kept per thread would outlive its thread unclosed, or be shared with a forked child)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(scoring)
    finally:
        loop.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
