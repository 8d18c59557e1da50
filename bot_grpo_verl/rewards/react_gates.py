"""The gates a compiled response passes after its compile check, each applied to the reward's result dict:

- :func:`with_render` (``render=True``): the last block renders something in headless Chromium
  (:mod:`bot_grpo_verl.rewards.react_render`); a blank page, a runtime error (its line marked when its position maps
  back) or a timeout scores 0. A failure of the render machinery is retried (:func:`render_tried_async`), never a
  render status.
- :func:`with_requirements` (a row with ``extra_info["react_spec"]``): the spec's requirements hold
  (:mod:`bot_grpo_verl.rewards.react_requirements`); a violation with a place is an error region.
- :func:`with_judge` (``judge_endpoint`` set): a response that passed everything is judged
  (:mod:`bot_grpo_verl.rewards.react_judge`) and its score mixed with the judgment.
"""

import asyncio
import functools
import logging
import threading

from bot_grpo_verl.rewards.node_worker import CheckerError
from bot_grpo_verl.rewards.react_judge import JudgeClient, JudgeConfig
from bot_grpo_verl.rewards.react_options import ReactTsxConfig
from bot_grpo_verl.rewards.react_render import render_flags, shared_renderer
from bot_grpo_verl.rewards.react_requirements import check_requirements
from bot_grpo_verl.rewards.tsx_source import CodeMap, line_region

logger = logging.getLogger(__name__)

# Tries of one render while the render machinery fails (its worker or browser died, an error answer, a hung worker):
# our failure, retried once, then the response's ``checker_error``, never its render status.
RENDER_TRIES = 2


def with_render(result: dict, answer: dict | None, positions: CodeMap, options: ReactTsxConfig) -> tuple[dict, list]:
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


def with_requirements(
    result: dict, spec, outline, page, positions: CodeMap, options: ReactTsxConfig
) -> tuple[dict, list]:
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


def unchecked(blocks, result: dict, spec, options: ReactTsxConfig) -> dict:
    """A result decided before any check (no code, oversized, checker error), with the keys of its run."""
    result, _ = with_render(result, None, None, options)
    if spec is None:
        return result
    return {**result, "requirements_met": 0, "requirements_unmet": 0, "requirements_share": 0.0}


def _render_try_failed(error: CheckerError, attempt: int) -> None:
    outcome = "retrying" if attempt < RENDER_TRIES else "the response gets checker_error=1"
    logger.warning(
        "react_tsx: the render machinery failed (try %d of %d, %s): %s", attempt, RENDER_TRIES, outcome, error
    )


async def render_tried_async(code: str, options: ReactTsxConfig, export: str | None) -> dict | None:
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


def judge_for(options: ReactTsxConfig) -> JudgeClient | None:
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


def wants_screenshot(options: ReactTsxConfig) -> bool:
    """Whether the render keeps a screenshot: for a judge in vision mode."""
    return bool(options.judge_endpoint) and options.judge_mode == "vision"


def with_judge(result: dict, extra_info, code: str | None, screenshot: bytes | None, options: ReactTsxConfig) -> dict:
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


async def with_judge_async(
    result: dict, extra_info, code: str | None, screenshot: bytes | None, options: ReactTsxConfig
) -> dict:
    """:func:`with_judge` for an event loop: the judge's blocking questions are asked from the loop's executor."""
    if not options.judge_endpoint:
        return with_judge(result, extra_info, code, screenshot, options)
    judged = functools.partial(with_judge, result, extra_info, code, screenshot, options)
    return await asyncio.get_running_loop().run_in_executor(None, judged)
