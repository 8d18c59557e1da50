"""Render check of React components in a real browser: does the component that compiles show anything?

A compiled component can still answer nothing: return ``null``, crash on its first render, or never finish
rendering. :class:`RenderChecker` sends the component to ``tsx/render.mjs``, a long-lived Node worker that
bundles it with esbuild (real ``react`` and ``react-dom`` from npm) and renders it in headless Chromium, in a
sandboxed frame of an opaque origin of its own inside a warm host page, with no network, no file access, no navigation
and a time limit per page (see that file's header and docs/bad-input.md). The model's code runs only in that
frame. The worker (Node and its Chromium) runs in a network namespace of its own without interfaces
(``isolation="namespace"``, :func:`node_worker.network_namespace`); where that cannot be made it refuses to start
unless ``isolation="flags_only"`` accepts Chromium's own flags alone (a warning in the log).

Each sample keeps its own result: its page's time limit counts from when a page starts it (the worker says so),
not from when it was queued; the worker is taken for hung, and killed, only when a started request outlives
``timeout`` or when, with requests waiting, it starts and answers nothing for ``timeout``. A failure of this
machinery (the worker or the browser died, an error answer) raises ``CheckerError``, never a sample's status.

Each answer: ``status`` (one of :data:`RENDER_STATUSES`), ``elements``, ``visible`` and ``text_chars`` (what the
page shows), ``tags`` and ``tag_counts`` (the elements in its DOM), ``shown_tags`` (those with a box that can show),
``export_kind`` and ``default_kind`` (what the rendered and the default export are: ``"function"``, ``"class"``,
``"memo"``, ``"forward_ref"``, ``"lazy"``, or ``"number"``, ``"string"``, ...), ``text`` (the text a person can
see, first 2,000 characters), ``exception`` with
``offset_utf16`` in the component's code when a runtime error's position maps back through the source map,
and ``screenshot`` (base64 PNG) on request. :func:`render_outcome` turns it into the reward's terms.
"""

import base64
import functools
import logging
import time

from bot_grpo_verl.rewards.node_worker import (
    ISOLATIONS,
    CheckerSetupError,
    WorkerClient,
    WorkerProcess,
    network_namespace,
    shared,
)

logger = logging.getLogger(__name__)

RENDER_STATUSES = ("renders", "blank", "runtime_error", "timeout", "bundle_error")
# The share of a request's timeout one page may take in the browser, from its start on the page (the rest is the
# worker's margin before it is taken for hung: see RenderChecker.deadline).
PAGE_TIMEOUT_SHARE = 0.5


class RenderChecker(WorkerClient):
    """Client of ``tsx/render.mjs`` (see :class:`WorkerClient` for the lifecycle), isolated as ``isolation`` says
    (one of :data:`node_worker.ISOLATIONS`)."""

    name = "render worker"
    script_name = "render.mjs"

    def __init__(self, script=None, node=None, isolation: str = "namespace"):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation={isolation!r} is not allowed; choose one of {ISOLATIONS}")
        super().__init__(script, node)
        self.isolation = isolation

    def launcher(self) -> tuple[str, ...]:
        if self.isolation == "flags_only":
            logger.warning(
                "the render worker runs with network (render_isolation='flags_only'): only Chromium's flags and the "
                "page's request rules keep model code from sending packets"
            )
            return ()
        return network_namespace()

    def check_ready(self, ready: dict) -> None:
        """With ``isolation="namespace"``, the worker must see no network interface with an address."""
        if self.isolation == "namespace" and ready.get("network") != []:
            raise CheckerSetupError(
                f"the render worker was started in a network namespace but sees network interfaces "
                f"{ready.get('network')!r}; refusing to render model code with network"
            )

    def deadline(self, worker: WorkerProcess, request_id: int, timeout: float) -> float:
        """``timeout`` after a page started the request; before that, ``timeout`` after the worker last started or
        answered anything (a queue that moves is not a hang)."""
        started = worker.started_at.get(request_id)
        if started is not None:
            return started + timeout
        return max(worker.sent_at.get(request_id, time.monotonic()), worker.progress_at) + timeout

    @staticmethod
    def requests(codes: list[str], timeout: float, screenshot: bool, export: str | None) -> list[dict]:
        page_ms = max(1, int(timeout * PAGE_TIMEOUT_SHARE * 1000))
        return [
            {"code": code, "timeout_ms": page_ms, "screenshot": screenshot, "export": export or ""} for code in codes
        ]

    def render(self, codes: list[str], timeout: float, screenshot: bool = False, export: str | None = None):
        """The worker's answers for ``codes``, in order; raises ``CheckerError``."""
        return self.request(self.requests(codes, timeout, screenshot, export), timeout)

    async def render_async(self, codes: list[str], timeout: float, screenshot: bool = False, export: str | None = None):
        """:meth:`render` for an event loop."""
        return await self.request_async(self.requests(codes, timeout, screenshot, export), timeout)


_shared_renderers = {
    isolation: shared(functools.partial(RenderChecker, isolation=isolation)) for isolation in ISOLATIONS
}


def shared_renderer(isolation: str = "namespace") -> RenderChecker:
    """The process's shared :class:`RenderChecker` of ``isolation`` (a forked child gets its own)."""
    return _shared_renderers[isolation]()


def screenshot_png(answer: dict) -> bytes | None:
    """The PNG bytes of an answer's screenshot (None when none was asked for or taken)."""
    return base64.b64decode(answer["screenshot"]) if answer.get("screenshot") else None


def render_flags(answer: dict | None) -> dict:
    """The render keys every result of a ``render=True`` reward carries (0 when ``answer`` is None: not
    rendered because the response did not compile)."""
    status = answer["status"] if answer else None
    return {
        "rendered": int(status == "renders"),
        "render_blank": int(status == "blank"),
        "render_error": int(status in ("runtime_error", "bundle_error")),
        "render_timeout": int(status == "timeout"),
        "render_elements": int(answer["elements"]) if answer else 0,
    }
