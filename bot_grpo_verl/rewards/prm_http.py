"""The HTTP transport of served PRMs: one JSON request with a deadline per attempt and bounded retries.

:func:`post_json` is what :class:`bot_grpo_verl.rewards.prm_endpoint.EndpointPRM` sends its requests through, over
:mod:`bot_grpo_verl.rewards.http_json` (``httpx``); every failure, of the connection or of the answer, becomes a
:class:`PRMEndpointError` naming the URL.
"""

from __future__ import annotations

from bot_grpo_verl.rewards.http_json import EndpointError, JsonEndpoint, RequestRejected, Retries

# An endpoint's answer larger than this is refused (an endless body must not exhaust memory).
MAX_ANSWER_BYTES = 256 * 2**20


class PRMEndpointError(EndpointError):
    """A served PRM did not answer usably; the message names the endpoint."""


class PRMRequestRejected(PRMEndpointError, RequestRejected):
    """The server refused the request (an HTTP 4xx that is not retried); ``status`` is the HTTP status."""


def _endpoint(timeout_s: float, retries: int, backoff_s: float) -> JsonEndpoint:
    return JsonEndpoint(
        "PRM endpoint",
        timeout_s,
        Retries(attempts=retries + 1, backoff_s=backoff_s),
        max_answer_bytes=MAX_ANSWER_BYTES,
        error=PRMEndpointError,
        rejected=PRMRequestRejected,
    )


def get_json(url: str, timeout_s: float, retries: int, backoff_s: float):
    """GET ``url`` and return the decoded JSON answer; attempts, retries and errors as :func:`post_json`."""
    return _endpoint(timeout_s, retries, backoff_s).get(url)


def post_json(url: str, body: dict, timeout_s: float, retries: int, backoff_s: float):
    """POST ``body`` as JSON to ``url`` and return the decoded JSON answer.

    Each attempt has one deadline of ``timeout_s`` for all of it (connect, send, status line, headers,
    body; see :mod:`bot_grpo_verl.rewards.http_json`). ``retries`` more attempts follow a retryable failure,
    waiting ``backoff_s * 2**k`` before retry ``k + 1``.

    Retryable: connection errors and timeouts, a dropped or cut answer, a non-HTTP answer and other protocol
    errors (``httpx.RemoteProtocolError``), a body that is not JSON, HTTP 5xx, 408 and 429. Not retried: other
    4xx, redirects, and an answer over :data:`MAX_ANSWER_BYTES`.

    Raises:
        PRMEndpointError: for every failure, naming ``url``, the attempts and the last failure
            (:class:`PRMRequestRejected` for a refused request).
    """
    return _endpoint(timeout_s, retries, backoff_s).post(url, body)
