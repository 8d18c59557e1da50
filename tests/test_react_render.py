# ruff: noqa: E501  (the components under test are data, one line each)
"""The render check (``render=True`` of bot_grpo_verl/rewards/react_tsx.py, ``tsx/render.mjs``) in a real headless Chromium:
what a component shows, and that model code stays inside its page.

These tests need Chromium (``make setup`` installs Debian's ``chromium``); they fail, never skip, without it.
"""

import contextlib
import http.server
import os
import shutil
import threading
from pathlib import Path

import psutil
import pytest

from bot_grpo_verl.rewards import react_render
from bot_grpo_verl.rewards import react_tsx as rt
from bot_grpo_verl.rewards.node_worker import CheckerError

CHROMIUM = os.environ.get("BOT_GRPO_CHROMIUM", "/usr/bin/chromium")
TIMEOUT = 8.0
OK = "export default function App() { return <ul><li>one</li><li>two</li></ul>; }"


@pytest.fixture(scope="module", autouse=True)
def chromium():
    if shutil.which("node") is None or not Path(CHROMIUM).exists():
        pytest.fail(f"the render check needs node and Chromium at {CHROMIUM}: run `make setup` (Debian's chromium)")


def render(code: str, **kwargs) -> dict:
    return react_render.shared_renderer().render([code], TIMEOUT, **kwargs)[0]


def fenced(code: str) -> str:
    return f"Here is the component:\n```tsx\n{code}\n```\nDone."


def score(code: str) -> dict:
    return rt.compute_score("react", fenced(code), None, render=True, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (OK, "renders"),
        ("export default function App() { return null; }", "blank"),
        ("export default function App() { return <></>; }", "blank"),
        ("export default function App() { return <div><span /></div>; }", "blank"),  # elements that show nothing
        ("export const Card = () => <p>named</p>;", "renders"),
        (
            "import { Star } from 'lucide-react';\nimport Box from './Box';\nexport default () => <Box><Star />hi</Box>;",
            "renders",
        ),
        ("export default function App() { throw new Error('boom'); }", "runtime_error"),
        (
            "export default function App() { const f = (n: number): number => f(n + 1); return <p>{f(0)}</p>; }",
            "runtime_error",
        ),
        ("export default function App() { Promise.reject(new Error('later')); return <p>x</p>; }", "runtime_error"),
        ("export const answer = 42;", "runtime_error"),  # no component
        ("export default function App() { window.location.hash = 'tab-2'; return <p>tabs</p>; }", "renders"),
        (
            "export default function App() { history.pushState({}, '', '/elsewhere'); return <p>x</p>; }",
            "runtime_error",
        ),
    ],
    ids=[
        "list",
        "null",
        "empty fragment",
        "elements only",
        "named export",
        "imports stubbed",
        "throws",
        "stack overflow",
        "unhandled rejection",
        "no component",
        "fragment change",
        "history push",
    ],
)
def test_each_component_gets_its_status(code, status):
    assert render(code)["status"] == status


@pytest.mark.parametrize(
    ("code", "status", "text"),
    [
        (
            "import { useState, useEffect } from 'react';\nexport default function App() { const [s, set] = useState('loading'); useEffect(() => set('loaded'), []); return <p>{s}</p>; }",
            "renders",
            "loaded",
        ),
        (
            "import { useState, useEffect } from 'react';\nexport default function App() { const [a, setA] = useState(0); const [b, setB] = useState(0); useEffect(() => setA(1), []); useEffect(() => { if (a) setB(2); }, [a]); return <p>{a}{b}</p>; }",
            "renders",
            "12",
        ),
        (
            "import { useState, useEffect } from 'react';\nexport default function App() { const [s, set] = useState('soon'); useEffect(() => { setTimeout(() => set('now'), 0); }, []); return <p>{s}</p>; }",
            "renders",
            "now",
        ),
        (
            "import { useState, useEffect } from 'react';\nexport default function App() { const [s, set] = useState(''); useEffect(() => { localStorage.setItem('k', 'kept'); set(localStorage.getItem('k') ?? 'lost'); }, []); return <p>{s}</p>; }",
            "renders",
            "kept",
        ),
        (
            "import { useState, useEffect } from 'react';\nexport default function App() { const [n, set] = useState(0); useEffect(() => { if (n === 1) throw new Error('late'); set(1); }, [n]); return <p>{n}</p>; }",
            "runtime_error",
            "",
        ),
    ],
    ids=[
        "state set by an effect",
        "effects in a chain",
        "a zero timeout in an effect",
        "storage in an effect",
        "a throw after an update",
    ],
)
def test_the_page_is_read_after_its_effects_settle(code, status, text):
    answer = render(code)
    assert (answer["status"], answer["text"] if status == "renders" else "") == (status, text)


def test_a_null_component_or_a_crash_cannot_score_what_a_working_component_scores():
    working = score(OK)
    assert working["score"] == 1.0 and working["rendered"] == 1 and working["render_elements"] == 3
    for code, flag in [
        ("export default function App() { return null; }", "render_blank"),
        ("export default function App() { throw new Error('boom'); }", "render_error"),
        ("export default function App() { while (true) {} }", "render_timeout"),
    ]:
        result = score(code)
        assert result["score"] == 0.0 and result["compiled"] == 1 and result[flag] == 1, (code, result)


FORGERIES = {  # name: (code, the status it must get)
    "a report posted to the host": (
        "window.parent.postMessage({ nonce: 'guess', result: { elements: 9, text: 'fake', tags: ['div'], errors: [] } }, '*');\nexport default function App() { return null; }",
        "blank",
    ),
    "the DOM's built-ins replaced": (
        "Element.prototype.querySelectorAll = (() => [1, 2, 3]) as any;\nObject.defineProperty(HTMLElement.prototype, 'innerText', { get: () => 'fake' });\nexport default function App() { return null; }",
        "blank",
    ),
    "an error swallowed by Array.prototype": (
        "Object.defineProperty(Array.prototype, 0, { set() {}, configurable: true });\nexport default function App() { throw new Error('boom'); }",
        "runtime_error",
    ),
    "the error reporter replaced": (
        "try { (window as any).__report = () => {}; } catch {}\nexport default function App() { throw new Error('boom'); }",
        "runtime_error",
    ),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_component_cannot_forge_its_render_result(name):
    code, status = FORGERIES[name]
    answer = render(code)
    assert (answer["status"], answer["elements"], answer["text"]) == (status, 0, "")


def test_a_runtime_errors_line_becomes_an_error_span():
    code = "export default function App() {\n  const x: any = undefined;\n  return <div>{x.y}</div>;\n}"
    text = fenced(code)
    result = rt.compute_score("react", text, None, render=True, timeout=TIMEOUT)
    errors = [(start, end) for start, end, value in result["spans"] if value < 0]
    assert [text[start:end] for start, end in errors] == ["  return <div>{x.y}</div>;\n"]


@contextlib.contextmanager
def local_server():
    """An HTTP server on loopback that records every request it gets."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"secret")

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


ESCAPES = {
    "fetch": "export default function App() { fetch('{url}/fetch').catch(() => {}); return <p>x</p>; }",
    "XMLHttpRequest": "export default function App() { try { const r = new XMLHttpRequest(); r.open('GET', '{url}/xhr', false); r.send(); } catch {} return <p>x</p>; }",
    "img": "export default function App() { return <img src='{url}/img.png' />; }",
    "css url": "export default function App() { return <div style={{ backgroundImage: 'url({url}/bg.png)' }}>x</div>; }",
    "navigation": "export default function App() { window.location.href = '{url}/nav'; return <p>x</p>; }",
    "popup": "export default function App() { window.open('{url}/popup'); return <p>x</p>; }",
    "iframe": "export default function App() { return <iframe src='{url}/frame' />; }",
    "script tag": "export default function App() { const s = document.createElement('script'); s.src = '{url}/s.js'; document.body.appendChild(s); return <p>x</p>; }",
    "websocket": "export default function App() { try { new WebSocket('ws://127.0.0.1:1/'); } catch {} return <p>x</p>; }",
    "file url": "export default function App() { fetch('file:///etc/hostname').catch(() => {}); return <img src='file:///etc/hostname' />; }",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_no_request_leaves_the_page_and_the_next_page_is_unaffected(name):
    with local_server() as (url, hits):
        answer = render(ESCAPES[name].replace("{url}", url))
        assert answer["status"] in react_render.RENDER_STATUSES
        assert render(OK)["status"] == "renders"
    assert hits == [], f"{name} reached the network: {hits}"


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("endless loop", "export default function App() { while (true) {} }", "timeout"),
        (
            "render storm",
            "import { useState, useEffect } from 'react';\nexport default function App() { const [n, set] = useState(0); useEffect(() => set(n + 1)); return <p>{n}</p>; }",
            None,
        ),
        ("alert", "export default function App() { alert('hi'); confirm('sure?'); return <p>x</p>; }", "renders"),
        (
            "100k elements",
            "export default function App() { return <div>{Array.from({ length: 100000 }, (_, i) => <i key={i} />)}</div>; }",
            None,
        ),
        ("document.write", "export default function App() { document.write('<p>gone</p>'); return <p>x</p>; }", None),
        (
            "require fs",
            "export default function App() { (globalThis as any).require('fs').writeFileSync('/tmp/bot-grpo-render-probe', 'x'); return <p>x</p>; }",
            "runtime_error",
        ),
    ],
)
def test_hostile_pages_get_a_defined_result_within_the_limit(name, code, status):
    answer = render(code)
    assert answer["status"] in react_render.RENDER_STATUSES
    if status is not None:
        assert answer["status"] == status
    assert render(OK)["status"] == "renders"
    assert not Path("/tmp/bot-grpo-render-probe").exists()


def test_an_endless_loop_does_not_hold_the_pages_rendered_beside_it():
    renderer = react_render.shared_renderer()
    codes = ["export default function App() { while (true) {} }"] + [OK] * 4
    answers = renderer.render(codes, TIMEOUT)
    assert [answer["status"] for answer in answers] == ["timeout"] + ["renders"] * 4


def test_a_dead_browser_is_started_again():
    assert render(OK)["status"] == "renders"
    worker = react_render.shared_renderer().worker.process
    browsers = [child for child in psutil.Process(worker.pid).children(recursive=True) if "chrom" in child.name()]
    assert browsers
    for process in browsers:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(browsers, timeout=10)
    # the first may meet the dying browser (the machinery's failure, CheckerError, which the reward retries);
    # restarting Chromium on a loaded 2-core machine can take over 8 s
    with contextlib.suppress(CheckerError):
        react_render.shared_renderer().render([OK], 30.0)
    assert react_render.shared_renderer().render([OK], 30.0)[0]["status"] == "renders"
    assert react_render.shared_renderer().worker.process is worker  # the worker lived on


def test_the_browser_keeps_playwrights_disabled_features_and_adds_its_own():
    assert render(OK)["status"] == "renders"
    worker = react_render.shared_renderer().worker.process
    [browser] = [
        child
        for child in psutil.Process(worker.pid).children(recursive=True)
        if "chrom" in child.name() and not any(part.startswith("--type=") for part in child.cmdline())
    ]
    [features] = [part for part in browser.cmdline() if part.startswith("--disable-features=")]
    disabled = features.removeprefix("--disable-features=").split(",")
    assert "IsolateSandboxedIframes" in disabled  # the components' frames share their host's renderer
    assert "HttpsUpgrades" in disabled  # one of Playwright's own, which its request routing needs


def test_a_screenshot_is_a_png_on_request():
    answer = render(OK, screenshot=True)
    png = react_render.screenshot_png(answer)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and react_render.screenshot_png(render(OK)) is None


def test_the_render_keys_are_on_every_result_of_a_render_run():
    keys = set(react_render.render_flags(None))
    for text in ["no code at all", fenced("export const = ;"), fenced(OK)]:
        assert keys <= set(rt.compute_score("react", text, None, render=True, timeout=TIMEOUT))
    assert not keys & set(rt.compute_score("react", fenced(OK), None))
    with pytest.raises(ValueError, match="render='yes' must be a bool"):
        rt.compute_score("react", fenced(OK), None, render="yes")


def test_nothing_a_component_stores_reaches_the_next_component():
    writer = "export default function App() { localStorage.setItem('k', 'leak'); sessionStorage.setItem('k', 'leak'); document.cookie = 'k=leak'; (window as any).shared = 'leak'; return <p>w</p>; }"
    reader = "export default function App() { return <p>{String(localStorage.getItem('k'))} {String(sessionStorage.getItem('k'))} {document.cookie || 'none'} {String((window as any).shared)}</p>; }"
    renderer = react_render.shared_renderer()
    for _ in range(3):  # every page of the pool, whichever the reader gets
        renderer.render([writer] * 4, TIMEOUT)
        answers = renderer.render([reader] * 4, TIMEOUT)
        assert {answer["text"] for answer in answers} == {"null null none undefined"}
