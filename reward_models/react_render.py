"""Render check of React components in a real browser: does the component that compiles show anything?

A compiled component can still answer nothing: return ``null``, crash on its first render, or never finish
rendering. :class:`RenderChecker` sends the component to ``tsx/render.mjs``, a long-lived Node worker that
bundles it with esbuild (real ``react`` and ``react-dom`` from npm) and renders it in headless Chromium, in a
sandboxed frame of an opaque origin of its own inside a warm host page, with no network, no file access, no navigation
and a time limit per page (see that file's header and docs/bad-input.md). The model's code runs only in that
frame.

Each answer: ``status`` (one of :data:`RENDER_STATUSES`), ``elements``, ``visible`` and ``text_chars`` (what the
page shows), ``tags`` and ``tag_counts`` (the elements in its DOM), ``shown_tags`` (those with a box that can show),
``export_kind`` and ``default_kind`` (what the rendered and the default export are: ``"function"``, ``"class"``,
``"memo"``, ``"forward_ref"``, ``"lazy"``, or ``"number"``, ``"string"``, ...), ``text`` (the text a person can
see, first 2,000 characters), ``exception`` with
``offset_utf16`` in the component's code when a runtime error's position maps back through the source map,
and ``screenshot`` (base64 PNG) on request. :func:`render_outcome` turns it into the reward's terms.
"""

import base64

from bot_grpo_verl.rewards.node_worker import WorkerClient, shared

RENDER_STATUSES = ("renders", "blank", "runtime_error", "timeout", "bundle_error")
# The share of a request's timeout one page may take in the browser (the rest covers queueing and startup).
PAGE_TIMEOUT_SHARE = 0.5


class RenderChecker(WorkerClient):
    """Client of ``tsx/render.mjs`` (see :class:`WorkerClient` for the lifecycle)."""

    name = "render worker"
    script_name = "render.mjs"

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


shared_renderer = shared(RenderChecker)
"""The process's shared :class:`RenderChecker` (a forked child gets its own)."""


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
