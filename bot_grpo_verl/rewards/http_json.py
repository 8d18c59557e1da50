"""JSON over HTTP for the served PRM endpoint, on ``httpx``: a deadline for each whole attempt,
retries, a limit on requests in flight.

One attempt is one request on a fresh connection (no keep-alive) whose whole exchange (connect, send, status
line, headers, body) must end within ``timeout_s``: ``httpx``'s timeouts bound each network operation, so a
watchdog shuts the attempt's socket down when the deadline passes, and a server that trickles bytes cannot hold
the request (name resolution excepted). Direct connections only: proxy variables of the environment are ignored.

Retried (:class:`Retries` says how often): connection errors and timeouts, a dropped, cut or non-HTTP answer, a
body that is not JSON (or that ``read`` refuses), HTTP 5xx, 408 and 429. Not retried: other 4xx and redirects
(the endpoint's ``rejected`` error, with the status) and an answer over ``max_answer_bytes``. Every failure
raises the endpoint's ``error`` class (a subclass of :class:`EndpointError`), its message naming the URL.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

# HTTP statuses retried besides 5xx: Request Timeout, Too Many Requests.
RETRIED_STATUSES = (408, 429)


class EndpointError(RuntimeError):
    """An endpoint did not answer usably; the message names it."""


class RequestRejected(EndpointError):
    """The server refused the request (an HTTP 4xx that is not retried, or a redirect); ``status`` is the HTTP
    status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Retryable(Exception):
    """One failed attempt worth retrying; the message says what failed."""


@dataclass(frozen=True)
class Retries:
    """When to try again: at most ``attempts`` attempts (None: no limit), no retry started ``deadline_s``
    seconds after the first attempt (None: no limit), waiting ``backoff_s * 2**k`` (at most ``max_backoff_s``)
    before retry ``k + 1``."""

    attempts: int | None
    deadline_s: float | None = None
    backoff_s: float = 0.1
    max_backoff_s: float = math.inf

    def allow(self, made: int, started: float) -> bool:
        """Whether another attempt may start after ``made`` attempts, the first at ``started``."""
        if made == 0:
            return True
        within_count = self.attempts is None or made < self.attempts
        return within_count and (self.deadline_s is None or time.monotonic() - started < self.deadline_s)

    def wait_before(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        return min(self.backoff_s * 2 ** (retry - 1), self.max_backoff_s)

    def describe(self, timeout_s: float) -> str:
        """How the attempts were bounded, for the final error."""
        return f"within {self.deadline_s} s" if self.deadline_s is not None else f"(deadline {timeout_s} s each)"


@dataclass(frozen=True)
class JsonEndpoint:
    """How to ask one kind of endpoint: ``label`` starts its error messages (e.g. ``"PRM endpoint"``), each
    attempt gets ``timeout_s``, :class:`Retries` bound the attempts, ``slots`` (a semaphore, optional) the
    requests in flight, ``max_answer_bytes`` the answer; failures raise ``error`` and ``rejected``."""

    label: str
    timeout_s: float
    retries: Retries
    max_answer_bytes: int = 256 * 2**20
    slots: threading.Semaphore | None = None
    error: type[EndpointError] = EndpointError
    rejected: type[RequestRejected] = RequestRejected

    def get(self, url: str, read: Callable = lambda value: value):
        """GET ``url``: ``read`` of the decoded JSON answer (``read`` may raise :class:`Retryable`)."""
        return self._with_retries(url, None, read)

    def post(self, url: str, body: dict, read: Callable = lambda value: value):
        """POST ``body`` as JSON to ``url``: ``read`` of the decoded JSON answer (``read`` may raise
        :class:`Retryable`)."""
        return self._with_retries(url, json.dumps(body).encode(), read)

    def _with_retries(self, url: str, payload: bytes | None, read: Callable):
        started, made, failure = time.monotonic(), 0, "no attempt"
        while self.retries.allow(made, started):
            if made:
                time.sleep(self.retries.wait_before(made))
            made += 1
            try:
                with self.slots or contextlib.nullcontext():
                    status, location, data = attempt(url, payload, self.timeout_s, self.max_answer_bytes)
                return read(self._decode(url, status, location, data))
            except Retryable as error:
                failure = str(error)
        raise self.error(f"{self.label} {url} failed {made} times {self.retries.describe(self.timeout_s)}: {failure}")

    def _decode(self, url: str, status: int, location: str | None, data: bytes):
        if len(data) > self.max_answer_bytes:
            raise self.error(f"{self.label} {url} answered more than {self.max_answer_bytes} bytes")
        detail = f"HTTP {status} {data[:300].decode(errors='replace')}"
        if status >= 500 or status in RETRIED_STATUSES:
            raise Retryable(detail)
        if not 200 <= status < 300:
            redirect = f" (redirects to {location}: set the endpoint to the final URL)" if location else ""
            raise self.rejected(f"{self.label} {url} rejected the request: {detail}{redirect}", status)
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as error:  # not JSON, or nested past the parser's recursion limit
            raise Retryable(f"the answer is not JSON ({type(error).__name__}): {data[:100]!r}") from None


_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child makes its own client (the parent's lock may have been held by another thread)."""
    global _client, _client_lock
    _client, _client_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def _http() -> httpx.Client:
    """The process's ``httpx`` client: no keep-alive (each attempt's socket is its own, for the watchdog), no
    redirects followed, no proxies from the environment."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), trust_env=False)
        return _client


class _Watchdog:
    """Shuts an attempt's socket down when its deadline passes (``expired`` then tells why it failed)."""

    def __init__(self, timeout_s: float):
        self.expired = threading.Event()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.timer = threading.Timer(timeout_s, self.cut)
        self.timer.daemon = True

    def trace(self, event: str, info: dict) -> None:
        """``httpx``'s trace hook: keep the socket of each connection the attempt opens."""
        if event == "connection.connect_tcp.complete":
            with self.lock:
                self.sockets.append(info["return_value"].get_extra_info("socket"))
            if self.expired.is_set():
                self.cut()

    def cut(self) -> None:
        self.expired.set()
        with self.lock:
            sockets = list(self.sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS


def attempt(url: str, payload: bytes | None, timeout_s: float, max_bytes: int) -> tuple[int, str | None, bytes]:
    """One attempt, a POST of ``payload`` (a GET when it is None): the status, the ``Location`` header and the
    body (cut after ``max_bytes + 1`` bytes); raises :class:`Retryable`."""
    client = _http()  # made before the deadline runs: the first call loads the TLS certificates
    method, headers = ("GET", {}) if payload is None else ("POST", {"Content-Type": "application/json"})
    watchdog = _Watchdog(timeout_s)
    watchdog.timer.start()
    try:
        with client.stream(
            method, url, content=payload, headers=headers, timeout=timeout_s, extensions={"trace": watchdog.trace}
        ) as response:
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > max_bytes:
                    break
    except httpx.HTTPError as error:  # refused, reset, timed out, dropped, not HTTP
        if not watchdog.expired.is_set():
            raise Retryable(f"{type(error).__name__}: {error}") from None
    finally:
        watchdog.timer.cancel()
    if watchdog.expired.is_set():
        raise Retryable(f"no complete answer within the deadline of {timeout_s} s")
    return response.status_code, response.headers.get("Location"), bytes(data)
