"""The long-lived Node workers behind the React rewards (``tsx/worker.mjs``, ``tsx/render.mjs``): one process
per Python process, newline-delimited JSON both ways, many requests in flight, restarted when it dies or hangs.

A worker that runs model code (the render worker: Node and its Chromium) starts in a network namespace of its
own without interfaces (:func:`network_namespace`): no API of the browser, known or future, can send a packet.
"""

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bot_grpo_verl.rewards.tsx_setup import TsxNotInstalled, setup_command, worker_script

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 60.0


class CheckerError(RuntimeError):
    """The worker crashed, timed out or failed on a request (the sample scores 0, ``checker_error=1``)."""


class CheckerSetupError(RuntimeError):
    """The worker cannot start: ``node`` or the npm packages are missing, or the isolation it needs cannot be made
    (raised, training stops)."""


# How the render worker is isolated (the reward option ``render_isolation``): "namespace", a network namespace of
# its own without interfaces (refused where it cannot be made); "flags_only", Chromium's own flags alone (see
# ``tsx/render.mjs``), a weaker isolation accepted explicitly, with a warning in the log.
ISOLATIONS = ("namespace", "flags_only")
# The commands that run a program in a new network namespace (its only interface, loopback, down), tried in this
# order: as root, then as an unprivileged user mapped to root in a user namespace of its own.
NAMESPACE_COMMANDS = (("unshare", "--net", "--"), ("unshare", "--user", "--map-root-user", "--net", "--"))


@functools.cache
def network_namespace() -> tuple[str, ...]:
    """The command prefix that runs a program without network (the first of :data:`NAMESPACE_COMMANDS` that works
    here, tried once per process); raises :class:`CheckerSetupError` in one line where none does."""
    unshare = shutil.which("unshare")
    reasons = []
    for command in NAMESPACE_COMMANDS:
        if command[1] == "--net" and os.geteuid() != 0:
            continue
        if unshare is None:
            reasons.append("`unshare` (util-linux) is not on PATH")
            break
        try:
            probe = subprocess.run([unshare, *command[1:], "true"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as error:
            reasons.append(f"{' '.join(command[:-1])}: {error}")
            continue
        if probe.returncode == 0:
            return (unshare, *command[1:])
        said = probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"]
        reasons.append(f"{' '.join(command[:-1])}: {said[-1]}")
    raise CheckerSetupError(
        "the render worker runs model code and needs a network namespace of its own, which cannot be made here "
        f"({'; '.join(reasons)}): run as root, or allow unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0), with util-linux's unshare on "
        "PATH; or accept Chromium's flags alone with render_isolation='flags_only'"
    )


def _settle(future: concurrent.futures.Future, result=None, error: BaseException | None = None) -> None:
    """Resolve ``future`` unless it is already resolved or was cancelled (an abandoned async wait)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class WorkerProcess:
    """One running ``node <script>`` (after ``launcher``, a command prefix such as :func:`network_namespace`'s) with
    its pending requests; a reader thread resolves them and records when each was sent and started (monotonic
    seconds) and when the worker last answered or started anything (``progress_at``)."""

    def __init__(self, node: str, script: Path, name: str, launcher: tuple[str, ...] = ()):
        self.name = name
        self.process = subprocess.Popen(
            [*launcher, node, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
            errors="surrogatepass",
            cwd=script.parent,
            # A process group of its own, so that kill() ends the worker's children too (the TypeScript 7 Go
            # process, Chromium), which could otherwise run on for minutes on a sample that hung the worker.
            start_new_session=hasattr(os, "killpg"),
        )
        self.pending: dict[int, concurrent.futures.Future] = {}
        self.sent_at: dict[int, float] = {}
        self.started_at: dict[int, float] = {}
        self.progress_at = time.monotonic()
        self.pending_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.ready: concurrent.futures.Future = concurrent.futures.Future()
        self.killed = False
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr_tail.append(line.rstrip())

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.stderr_tail.append(f"(stdout) {line[:200].rstrip()}")
                continue
            if message.get("ready"):
                _settle(self.ready, result=message)
                continue
            self.progress_at = time.monotonic()
            if message.get("started"):
                self.started_at[message.get("id")] = self.progress_at
                continue
            with self.pending_lock:
                future = self.pending.pop(message.get("id"), None)
                self.sent_at.pop(message.get("id"), None)
                self.started_at.pop(message.get("id"), None)
            if future is None:
                continue
            if "error" in message:
                logger.warning("the %s could not check a sample: %s", self.name, message["error"][:500])
                _settle(future, error=CheckerError(f"the {self.name} failed on a request: {message['error']}"))
            else:
                _settle(future, result=message)
        self.process.wait()
        error = CheckerError(f"the {self.name} exited (code {self.process.returncode}): {self.describe()}")
        if not self.killed:
            logger.warning("%s; the next check starts a new worker", error)
        _settle(self.ready, error=error)
        with self.pending_lock:
            failed, self.pending = list(self.pending.values()), {}
        for future in failed:
            _settle(future, error=error)

    def describe(self) -> str:
        return " | ".join(self.stderr_tail) or "no stderr output"

    def submit(self, request: dict) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self.pending_lock:
            self.pending[request["id"]] = future
            self.sent_at[request["id"]] = time.monotonic()
        # A separate write lock: the reader thread never waits for a writer stuck on a full pipe.
        with self.write_lock:
            try:
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
            except (OSError, ValueError) as error:
                with self.pending_lock:
                    self.pending.pop(request["id"], None)
                    self.sent_at.pop(request["id"], None)
                raise CheckerError(f"cannot write to the {self.name}: {error}; {self.describe()}") from error
        return future

    def kill(self) -> None:
        self.killed = True
        if self.process.poll() is None:
            if hasattr(os, "killpg"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.kill()
        self.process.wait()


class WorkerClient:
    """Thread-safe client of one long-lived Node worker (``script``, found in the installed checker folder when
    None): many requests in flight, lazy (re)start. A worker that does not answer a request by its
    :meth:`deadline` (here: its timeout after it was sent) is killed (its other pending requests fail with
    :class:`CheckerError` too); a dead worker is replaced on the next call. Both are logged."""

    name = "node worker"
    script_name = "worker.mjs"

    def __init__(self, script: Path | None = None, node: str | None = None):
        self.script = script
        self.node = node or shutil.which("node")
        self.worker: WorkerProcess | None = None
        self.lock = threading.Lock()
        self.ids = itertools.count()

    def _running(self) -> WorkerProcess:
        with self.lock:
            if self.worker is None or self.worker.process.poll() is not None:
                self.worker = self._start()
            return self.worker

    def launcher(self) -> tuple[str, ...]:
        """The command prefix the worker runs under (none: the TypeScript worker runs no model code)."""
        return ()

    def check_ready(self, ready: dict) -> None:
        """Raise :class:`CheckerSetupError` if the worker's ready line shows it is not what it must be."""

    def _start(self) -> WorkerProcess:
        if self.node is None:
            raise CheckerSetupError(
                f"node is not on PATH; the {self.name} needs Node.js >= 18, then `{setup_command()}`"
            )
        try:
            script = Path(self.script or worker_script().with_name(self.script_name))
        except TsxNotInstalled as error:
            raise CheckerSetupError(str(error)) from error
        hint = f"(reinstall its npm packages with `{setup_command()}`, or `make setup` in a clone)"
        launcher = self.launcher()
        try:
            worker = WorkerProcess(self.node, script, self.name, launcher)
        except OSError as error:
            raise CheckerSetupError(f"cannot run {' '.join(launcher)} {self.node} {script}: {error}") from error
        try:
            ready = worker.ready.result(timeout=STARTUP_TIMEOUT)
        except (CheckerError, concurrent.futures.TimeoutError) as error:
            worker.kill()
            raise CheckerSetupError(f"the {self.name} did not start {hint}: {error}") from error
        try:
            self.check_ready(ready)
        except CheckerSetupError:
            worker.kill()
            raise
        return worker

    def submit(self, requests: list[dict]) -> tuple[WorkerProcess, dict[int, concurrent.futures.Future]]:
        """Send ``requests`` (each gets an ``id``); returns the worker and each request's future by id, in order."""
        worker = self._running()
        sent = {}
        for request in requests:
            request_id = next(self.ids)
            sent[request_id] = worker.submit({"id": request_id, **request})
        return worker, sent

    def send(self, requests: list[dict]) -> tuple[WorkerProcess, list[concurrent.futures.Future]]:
        """Send ``requests`` (each gets an ``id``); returns ``(worker, futures)``."""
        worker, sent = self.submit(requests)
        return worker, list(sent.values())

    def kill(self, worker: WorkerProcess) -> None:
        """Kill ``worker``; the next call starts a fresh worker."""
        worker.kill()
        with self.lock:
            if self.worker is worker:
                self.worker = None

    def _hung(self, worker: WorkerProcess, timeout: float) -> CheckerError:
        """Kill ``worker``, which did not answer within ``timeout``; the error to raise."""
        self.kill(worker)
        error = CheckerError(f"the {self.name} did not answer within {timeout} s; it was killed ({worker.describe()})")
        logger.warning("%s; the next check starts a new worker", error)
        return error

    def deadline(self, worker: WorkerProcess, request_id: int, timeout: float) -> float:
        """When (``time.monotonic()``) the worker must have answered request ``request_id``, or be killed as
        hung: ``timeout`` after it was sent."""
        return worker.sent_at.get(request_id, time.monotonic()) + timeout

    def _overdue_in(self, worker: WorkerProcess, waiting: list[int], timeout: float) -> float:
        """Seconds until the first of the ``waiting`` requests' deadlines (<= 0: the worker hung)."""
        return min(self.deadline(worker, request_id, timeout) for request_id in waiting) - time.monotonic()

    def request(self, requests: list[dict], timeout: float) -> list[dict]:
        """The worker's answers to ``requests``, in order; raises :class:`CheckerError`."""
        worker, sent = self.submit(requests)
        while waiting := [request_id for request_id, future in sent.items() if not future.done()]:
            left = self._overdue_in(worker, waiting, timeout)
            if left <= 0:
                raise self._hung(worker, timeout)
            concurrent.futures.wait(sent.values(), timeout=left)
        return [future.result() for future in sent.values()]

    async def request_async(self, requests: list[dict], timeout: float) -> list[dict]:
        """:meth:`request` for an event loop: waits without blocking the loop."""
        worker, sent = self.submit(requests)
        awaited = [asyncio.wrap_future(future) for future in sent.values()]
        while waiting := [request_id for request_id, future in sent.items() if not future.done()]:
            left = self._overdue_in(worker, waiting, timeout)
            if left <= 0:
                raise self._hung(worker, timeout)
            await asyncio.wait(awaited, timeout=left)
        return [await future for future in awaited]

    def close(self) -> None:
        with self.lock:
            worker, self.worker = self.worker, None
        if worker is not None:
            worker.kill()


def shared(factory: Callable[[], WorkerClient]) -> Callable[[], WorkerClient]:
    """A function returning the process's one client made by ``factory``: made on first use, closed at exit,
    forgotten in a forked child (which makes its own)."""
    state = {"client": None, "lock": threading.Lock()}

    def get() -> WorkerClient:
        with state["lock"]:
            if state["client"] is None:
                state["client"] = factory()
            return state["client"]

    def forget_in_child() -> None:
        state["client"], state["lock"] = None, threading.Lock()

    def close() -> None:
        if state["client"] is not None:
            state["client"].close()

    os.register_at_fork(after_in_child=forget_in_child)
    atexit.register(close)
    return get
