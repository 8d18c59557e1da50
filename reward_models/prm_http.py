"""The HTTP transport of served PRMs: one JSON POST with a deadline per attempt and bounded retries.

:func:`post_json` is what :class:`bot_grpo_verl.rewards.prm_endpoint.EndpointPRM` sends its requests through;
every failure, of the connection or of the answer, becomes a :class:`PRMEndpointError` naming the URL.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from urllib.parse import urlsplit

# An endpoint's answer larger than this is refused (an endless body must not exhaust memory).
MAX_ANSWER_BYTES = 256 * 2**20
# HTTP statuses retried besides 5xx: Request Timeout, Too Many Requests.
RETRIED_STATUSES = (408, 429)


class PRMEndpointError(RuntimeError):
    """A served PRM did not answer usably; the message names the endpoint."""


class PRMRequestRejected(PRMEndpointError):
    """The server refused the request (an HTTP 4xx that is not retried); ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class _RetryableFailure(Exception):
    """One failed HTTP attempt worth retrying; the message says what failed."""


def get_json(url: str, timeout_s: float, retries: int, backoff_s: float):
    """GET ``url`` and return the decoded JSON answer; attempts, retries and errors as :func:`post_json`."""
    return _with_retries(url, None, timeout_s, retries, backoff_s)


def post_json(url: str, body: dict, timeout_s: float, retries: int, backoff_s: float):
    """POST ``body`` as JSON to ``url`` and return the decoded JSON answer.

    Each attempt has one deadline of ``timeout_s`` for all of it (connect, send, status line, headers,
    body): a watchdog shuts the socket down when it passes, so a server that trickles bytes cannot hold
    the request (name resolution excepted). ``retries`` more attempts follow a retryable failure, waiting
    ``backoff_s * 2**k`` before retry ``k + 1``.

    Retryable: connection errors and timeouts, a dropped or cut answer (``IncompleteRead``), a non-HTTP
    answer (``BadStatusLine``) and other protocol errors, a body that is not JSON, HTTP 5xx, 408 and 429.
    Not retried: other 4xx, redirects, and an answer over :data:`MAX_ANSWER_BYTES`.

    Raises:
        PRMEndpointError: for every failure, naming ``url``, the attempts and the last failure
            (:class:`PRMRequestRejected` for a refused request).
    """
    return _with_retries(url, json.dumps(body).encode(), timeout_s, retries, backoff_s)


def _with_retries(url: str, payload: bytes | None, timeout_s: float, retries: int, backoff_s: float):
    failure = "no attempt"
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            return _attempt(url, payload, timeout_s)
        except _RetryableFailure as error:
            failure = str(error)
    raise PRMEndpointError(f"PRM endpoint {url} failed {retries + 1} times (deadline {timeout_s} s each): {failure}")


def _attempt(url: str, payload: bytes | None, timeout_s: float):
    """One attempt: a POST of ``payload`` (a GET when it is None)."""
    parts = urlsplit(url)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname, parts.port, timeout=timeout_s)
    expired = threading.Event()
    watchdog = threading.Timer(timeout_s, _cut, (connection, expired))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.connect()
        if not expired.is_set():
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            if payload is None:
                connection.request("GET", target)
            else:
                connection.request("POST", target, body=payload, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read(MAX_ANSWER_BYTES + 1)
    except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out, dropped, not HTTP
        if not expired.is_set():
            raise _RetryableFailure(f"{type(error).__name__}: {error}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if expired.is_set():
        raise _RetryableFailure(f"no complete answer within the deadline of {timeout_s} s")
    return _decode(url, response, data)


def _cut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The watchdog: mark the attempt expired and wake whatever waits on its socket."""
    expired.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS


def _decode(url: str, response: http.client.HTTPResponse, data: bytes):
    if len(data) > MAX_ANSWER_BYTES:
        raise PRMEndpointError(f"PRM endpoint {url} answered more than {MAX_ANSWER_BYTES} bytes")
    if response.length:  # what the server announced in Content-Length and did not send
        raise _RetryableFailure(f"IncompleteRead: the answer ended {response.length} bytes short")
    detail = f"HTTP {response.status} {data[:300].decode(errors='replace')}"
    if response.status >= 500 or response.status in RETRIED_STATUSES:
        raise _RetryableFailure(detail)
    if not 200 <= response.status < 300:
        location = response.getheader("Location")
        redirect = f" (redirects to {location}: set prm_endpoint to the final URL)" if location else ""
        raise PRMRequestRejected(f"PRM endpoint {url} rejected the request: {detail}{redirect}", response.status)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:  # not JSON, or nested past the parser's recursion limit
        raise _RetryableFailure(f"the answer is not JSON ({type(error).__name__}): {data[:100]!r}") from None
