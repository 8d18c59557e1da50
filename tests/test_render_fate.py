"""Each sample keeps its own render result (``render=True`` of bot_grpo_verl/rewards/react_tsx.py): a page's time limit
counts from when a page starts it, a hung renderer fails only its own request, and a failure of the render
machinery (the worker or the browser killed) is the response's ``checker_error`` (after one retry), never its render
status. The reward is called as verl's reward loop calls it: ``compute_score`` from threads, or
``compute_score_async`` on one event loop.

These tests need Chromium (``make setup`` installs Debian's ``chromium``); they fail, never skip, without it.
"""

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from bot_grpo_verl.rewards import react_render
from bot_grpo_verl.rewards import react_tsx as rt
from bot_grpo_verl.rewards.node_worker import CheckerError

CHROMIUM = os.environ.get("BOT_GRPO_CHROMIUM", "/usr/bin/chromium")
TIMEOUT = 8.0
# The mixed batch's timeout: each loop holds a page for half of it; a loaded machine (2 cores, others' work)
# still renders a correct component in a fraction of it.
MIXED_TIMEOUT = 12.0
LOOP = "export default function App() { while (true) {} return <p>never</p>; }"
CORRECT = "export default function App() { return <ul><li>one</li><li>two</li></ul>; }"
# Correct, and slow enough (2 s of its page's main thread) to be killed in flight.
SLOW = (
    "export default function App() { const end = Date.now() + 2000; while (Date.now() < end) {} return <p>slow</p>; }"
)


@pytest.fixture(scope="module", autouse=True)
def chromium():
    if shutil.which("node") is None or not Path(CHROMIUM).exists():
        pytest.fail(f"the render check needs node and Chromium at {CHROMIUM}: run `make setup` (Debian's chromium)")


def fenced(code: str) -> str:
    return f"```tsx\n{code}\n```"


def score(code: str, timeout: float = TIMEOUT) -> dict:
    return rt.compute_score("react", fenced(code), None, render=True, timeout=timeout)


async def score_async(code: str, timeout: float = TIMEOUT) -> dict:
    return await rt.compute_score_async("react", fenced(code), None, render=True, timeout=timeout)


def flags(results: list[dict], *keys: str) -> list[tuple]:
    return [tuple(result[key] for key in keys) for result in results]


def warm() -> None:
    """Both workers started, so that the batch below queues in the render worker, not in their startup."""
    assert score(CORRECT)["score"] == 1.0


def mixed_batch_threads() -> tuple[list[dict], list[dict]]:
    """8 endless loops, then (once they hold every page and fill the queue) 4 correct components, each response
    scored by its own thread."""
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        loops = [pool.submit(score, LOOP, MIXED_TIMEOUT) for _ in range(8)]
        time.sleep(1.0)
        correct = [pool.submit(score, CORRECT, MIXED_TIMEOUT) for _ in range(4)]
        return [future.result() for future in loops], [future.result() for future in correct]


async def mixed_batch_async() -> tuple[list[dict], list[dict]]:
    loops = [asyncio.ensure_future(score_async(LOOP, MIXED_TIMEOUT)) for _ in range(8)]
    await asyncio.sleep(1.0)
    correct = [asyncio.ensure_future(score_async(CORRECT, MIXED_TIMEOUT)) for _ in range(4)]
    return await asyncio.gather(*loops), await asyncio.gather(*correct)


@pytest.mark.slow
@pytest.mark.parametrize("caller", ["threads", "async"])
def test_endless_loops_queued_first_do_not_take_the_correct_samples_score(caller):
    warm()
    loops, correct = mixed_batch_threads() if caller == "threads" else asyncio.run(mixed_batch_async())
    assert flags(correct, "score", *RENDER_KEYS) == [(1.0, 1, 0, 0, 0, 0)] * 4
    assert flags(loops, "score", *RENDER_KEYS) == [(0.0, 0, 0, 0, 1, 0)] * 8


RENDER_KEYS = ("rendered", "render_blank", "render_error", "render_timeout", "checker_error")


def is_browser(process: psutil.Process) -> bool:
    """Chromium's main process: not a helper (``--type=``), and not a child that exited and awaits its reaping."""
    try:
        return "chrom" in process.name() and not any(part.startswith("--type=") for part in process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return False


def browser_of(worker) -> psutil.Process:
    [browser] = [child for child in psutil.Process(worker.process.pid).children(recursive=True) if is_browser(child)]
    return browser


def kill_worker(worker) -> None:
    os.kill(worker.process.pid, signal.SIGKILL)


def kill_browser(worker) -> None:
    browser_of(worker).kill()


KILLS = {"the worker": kill_worker, "the browser": kill_browser}


def when_started(renderer: react_render.RenderChecker, count: int, timeout: float = 30.0):
    """The renderer's worker once ``count`` of its requests are on pages."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker = renderer.worker
        if worker is not None and len(worker.started_at) >= count:
            return worker
        time.sleep(0.02)
    raise AssertionError(f"{count} requests never started")


@pytest.mark.parametrize("victim", sorted(KILLS))
def test_requests_in_flight_when_the_machinery_dies_get_a_checker_error(victim):
    """Killed with a request on a page: that request (every one sent, when the worker dies) raises CheckerError;
    none gets a status of its own (a request still queued when only the browser died may render on the next)."""
    renderer = react_render.RenderChecker()
    try:
        assert renderer.render([CORRECT], TIMEOUT)[0]["status"] == "renders"
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(renderer.render, [SLOW], 20.0) for _ in range(4)]
            KILLS[victim](when_started(renderer, 1))
            outcomes = [future.exception(timeout=60) or future.result()[0]["status"] for future in futures]
        failed = [outcome for outcome in outcomes if isinstance(outcome, CheckerError)]
        assert failed and set(outcomes) - set(failed) <= {"renders"}, outcomes
        if victim == "the worker":
            assert len(failed) == 4, outcomes
        assert renderer.render([CORRECT], 30.0)[0]["status"] == "renders"  # the machinery came back
    finally:
        renderer.close()


def test_a_crashed_renderer_fails_only_the_request_it_holds():
    """A renderer that dies under its component (only that component ran in it): that request's runtime_error."""
    renderer = react_render.RenderChecker()
    try:
        assert renderer.render([CORRECT], TIMEOUT)[0]["status"] == "renders"  # one host, reused below
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(renderer.render, [SLOW], 20.0)
            worker = when_started(renderer, 1)
            for process in browser_of(worker).children(recursive=True):
                if "--type=renderer" in process.cmdline():
                    process.kill()
            [answer] = future.result(timeout=60)
        assert (answer["status"], answer["exception"]["message"]) == ("runtime_error", "the page crashed")
        assert renderer.render([CORRECT], TIMEOUT)[0]["status"] == "renders"
        assert renderer.worker is worker  # the worker and its browser lived on
    finally:
        renderer.close()


@contextlib.contextmanager
def killing(victim: str, times: int | None):
    """A thread that kills ``victim`` of the shared render worker whenever that worker has a request on a page,
    ``times`` times (None: until the block ends)."""
    stop = threading.Event()
    kills = []

    def run():
        while not stop.is_set() and (times is None or len(kills) < times):
            worker = react_render.shared_renderer().worker
            if worker is not None and worker.started_at and (worker, victim) not in kills:
                with contextlib.suppress(psutil.NoSuchProcess, ValueError, ProcessLookupError):
                    KILLS[victim](worker)
                    kills.append((worker, victim))
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield kills
    finally:
        stop.set()
        thread.join()


def scored_in_threads(code: str, count: int, timeout: float) -> list[dict]:
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: score(code, timeout), range(count)))


@pytest.mark.parametrize("victim", sorted(KILLS))
def test_one_failure_of_the_machinery_is_retried(victim, caplog):
    warm()
    with caplog.at_level(logging.WARNING), killing(victim, times=1) as kills:
        results = scored_in_threads(SLOW, 4, 20.0)
    assert len(kills) == 1
    assert [(r["score"], r["rendered"], r["checker_error"]) for r in results] == [(1.0, 1, 0)] * 4, results
    assert "try 1 of 2, retrying" in caplog.text


def test_a_machinery_that_keeps_failing_is_a_checker_error_not_the_samples_render_error(caplog):
    warm()
    with caplog.at_level(logging.WARNING), killing("the worker", times=None):
        results = scored_in_threads(SLOW, 4, 20.0)
    flags = [(r["score"], r["compiled"], r["checker_error"], r["render_error"], r["rendered"]) for r in results]
    assert flags == [(0.0, 1, 1, 0, 0)] * 4, results
    assert "the response gets checker_error=1" in caplog.text
    assert score(CORRECT)["score"] == 1.0
