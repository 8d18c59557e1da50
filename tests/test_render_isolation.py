# ruff: noqa: E501  (the components under test are data, one line each)
"""The render worker (``tsx/render.mjs``: Node and its Chromium, where model code runs) reaches no network by any
channel: it runs in a network namespace of its own without interfaces (``render_isolation="namespace"``), and
where that cannot be made it refuses unless ``render_isolation="flags_only"`` accepts Chromium's own flags alone.

Listeners: TCP and UDP, on 127.0.0.1 and on 127.0.0.2 (another loopback address: nothing outside this machine
is ever targeted), one set per channel so that a hit names its channel. Components try every channel we know at
them; no connection and no datagram may arrive.

These tests need Chromium (``make setup`` installs Debian's ``chromium``); they fail, never skip, without it.
"""

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from bot_grpo_verl.rewards import node_worker, react_render
from bot_grpo_verl.rewards.node_worker import ISOLATIONS, CheckerSetupError

CHROMIUM = os.environ.get("BOT_GRPO_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")
TIMEOUT = 8.0
ADDRESSES = ("127.0.0.1", "127.0.0.2")
OK = "export default function App() { return <p>fine</p>; }"
# Keeps the page's main thread (and so the host's unmount) busy for a while after an asynchronous start, so that
# what the browser's network side was asked to send has time to go out before the frame is removed.
HOLD = "const hold = () => { const end = Date.now() + 1500; while (Date.now() < end) {} };"
PEER = "const peer = (servers: any[]) => { const pc = new RTCPeerConnection({ iceServers: servers }); pc.createDataChannel('d'); pc.createOffer().then((offer) => pc.setLocalDescription(offer)).then(hold).catch(() => {}); return pc; };"

# name: the component's code; {tcp:A} / {udp:A} is the TCP / UDP listener of this channel on the A-th address.
CHANNELS = {
    "webrtc stun": "for (const a of [{udp:0}, {udp:1}]) peer([{ urls: 'stun:' + a }]);",
    "webrtc turn udp": "for (const a of [{udp:0}, {udp:1}]) peer([{ urls: 'turn:' + a + '?transport=udp', username: 'exfil', credential: 'x' }]);",
    "webrtc turn tcp": "for (const a of [{tcp:0}, {tcp:1}]) peer([{ urls: 'turn:' + a + '?transport=tcp', username: 'exfil', credential: 'x' }]);",
    "location": "setTimeout(() => { window.location.href = 'http://' + {tcp:0} + '/nav'; }, 0); setTimeout(() => { window.location.href = 'http://' + {tcp:1} + '/nav'; }, 5);",
    "window.open": "for (const a of [{tcp:0}, {tcp:1}]) window.open('http://' + a + '/popup');",
    "top navigation": "try { window.top!.location.href = 'http://' + {tcp:0} + '/top'; } catch {} try { window.parent.location.href = 'http://' + {tcp:1} + '/top'; } catch {}",
    "form submit": "for (const a of [{tcp:0}, {tcp:1}]) { const f = document.createElement('form'); f.method = 'post'; f.action = 'http://' + a + '/form'; const i = document.createElement('input'); i.name = 'q'; i.value = 'exfil'; f.appendChild(i); document.body.appendChild(f); try { f.submit(); } catch {} }",
    "anchor click": "for (const a of [{tcp:0}, {tcp:1}]) { const l = document.createElement('a'); l.href = 'http://' + a + '/a'; document.body.appendChild(l); l.click(); }",
    "meta refresh": "for (const a of [{tcp:0}, {tcp:1}]) { const m = document.createElement('meta'); m.httpEquiv = 'refresh'; m.content = '0;url=http://' + a + '/refresh'; document.head.appendChild(m); }",
    "fetch": "for (const a of [{tcp:0}, {tcp:1}]) fetch('http://' + a + '/fetch', { method: 'POST', body: 'exfil', mode: 'no-cors' }).catch(() => {});",
    "XMLHttpRequest": "for (const a of [{tcp:0}, {tcp:1}]) { try { const r = new XMLHttpRequest(); r.open('GET', 'http://' + a + '/xhr'); r.send(); } catch {} }",
    "WebSocket": "for (const a of [{tcp:0}, {tcp:1}]) { try { new WebSocket('ws://' + a + '/ws'); } catch {} }",
    "EventSource": "for (const a of [{tcp:0}, {tcp:1}]) { try { new EventSource('http://' + a + '/events'); } catch {} }",
    "sendBeacon": "for (const a of [{tcp:0}, {tcp:1}]) { try { navigator.sendBeacon('http://' + a + '/beacon', 'exfil'); } catch {} }",
    "img": "for (const a of [{tcp:0}, {tcp:1}]) { const i = new Image(); i.src = 'http://' + a + '/img.png'; document.body.appendChild(i); }",
    "css url": "for (const a of [{tcp:0}, {tcp:1}]) { const d = document.createElement('div'); d.style.backgroundImage = 'url(http://' + a + '/bg.png)'; d.textContent = 'x'; document.body.appendChild(d); }",
    "link prefetch and preconnect": "for (const a of [{tcp:0}, {tcp:1}]) for (const rel of ['prefetch', 'preconnect', 'dns-prefetch', 'preload', 'stylesheet']) { const l = document.createElement('link'); l.rel = rel; l.as = 'image'; l.href = 'http://' + a + '/' + rel; document.head.appendChild(l); }",
    "iframe": "for (const a of [{tcp:0}, {tcp:1}]) { const f = document.createElement('iframe'); f.src = 'http://' + a + '/frame'; document.body.appendChild(f); }",
    "script src": "for (const a of [{tcp:0}, {tcp:1}]) { const s = document.createElement('script'); s.src = 'http://' + a + '/s.js'; document.body.appendChild(s); }",
    "media": "for (const a of [{tcp:0}, {tcp:1}]) { const v = document.createElement('video'); v.src = 'http://' + a + '/v.mp4'; v.preload = 'auto'; document.body.appendChild(v); new Audio('http://' + a + '/a.mp3').play().catch(() => {}); }",
    "web font": "for (const a of [{tcp:0}, {tcp:1}]) { try { const f = new FontFace('F' + a.length, 'url(http://' + a + '/f.woff)'); f.load().catch(() => {}); } catch {} }",
    "dynamic import": "for (const a of [{tcp:0}, {tcp:1}]) { const load = new Function('u', 'return import(u)'); try { load('http://' + a + '/m.js').catch(() => {}); } catch {} }",
    "worker": "for (const a of [{tcp:0}, {tcp:1}]) { try { new Worker('http://' + a + '/w.js'); } catch {} }",
    "WebTransport (QUIC)": "for (const a of [{udp:0}, {udp:1}]) { try { const W = (window as any).WebTransport; new W('https://' + a + '/wt').ready.catch(() => {}); } catch {} }",
}


def component(script: str, ports: dict) -> str:
    for (kind, index), port in ports.items():
        script = script.replace(f"{{{kind}:{index}}}", repr(f"{ADDRESSES[index]}:{port}"))
    return f"{HOLD}\n{PEER}\n{script}\nexport default function App() {{ return <p>x</p>; }}"


class Listeners:
    """A TCP and a UDP listener on each of :data:`ADDRESSES` for each channel; records what arrives."""

    def __init__(self, channels):
        self.arrived: list[tuple[str, str]] = []  # (channel, what)
        self.sockets = []
        self.ports = {}
        for channel in channels:
            for index, address in enumerate(ADDRESSES):
                for kind in ("tcp", "udp"):
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
                    sock.bind((address, 0))
                    if kind == "tcp":
                        sock.listen(16)
                    sock.settimeout(0.2)
                    self.sockets.append(sock)
                    self.ports[channel, kind, index] = sock.getsockname()[1]
                    threading.Thread(target=self._listen, args=(sock, channel, kind), daemon=True).start()

    def _listen(self, sock, channel, kind):
        while sock.fileno() >= 0:
            try:
                if kind == "tcp":
                    connection, peer = sock.accept()
                    connection.close()
                    self.arrived.append((channel, f"a TCP connection to {sock.getsockname()} from {peer}"))
                else:
                    data, peer = sock.recvfrom(65536)
                    self.arrived.append((channel, f"a UDP datagram to {sock.getsockname()} from {peer}: {data[:40]!r}"))
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self):
        for sock in self.sockets:
            sock.close()

    def of(self, channel) -> dict:
        return {(kind, index): port for (name, kind, index), port in self.ports.items() if name == channel}


@pytest.fixture(scope="module", autouse=True)
def chromium():
    if shutil.which("node") is None or not Path(CHROMIUM).exists():
        pytest.fail(f"the render check needs node and Chromium at {CHROMIUM}: run `make setup` (Debian's chromium)")


def test_the_listeners_see_what_this_machine_sends_them():
    """The probe itself works: a socket of this process reaches every listener."""
    listeners = Listeners(["probe"])
    try:
        for (kind, index), port in listeners.of("probe").items():
            if kind == "tcp":
                socket.create_connection((ADDRESSES[index], port), timeout=2).close()
            else:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                    sock.sendto(b"probe", (ADDRESSES[index], port))
        deadline = time.monotonic() + 5
        while len(listeners.arrived) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        listeners.close()
    assert len(listeners.arrived) == 4


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_no_channel_sends_a_packet_out_of_the_render_worker(isolation):
    """The namespace is the guarantee; Chromium's flags (``flags_only``) are its second layer, tested alone too."""
    renderer = react_render.shared_renderer(isolation)
    listeners = Listeners(CHANNELS)
    try:
        codes = [component(CHANNELS[channel], listeners.of(channel)) for channel in CHANNELS]
        answers = renderer.render(codes, TIMEOUT * 4)
        time.sleep(3)  # retransmissions, late ICE checks
    finally:
        listeners.close()
    assert all(answer["status"] in react_render.RENDER_STATUSES for answer in answers)
    leaked = sorted({channel for channel, _ in listeners.arrived})
    assert leaked == [], f"packets left the render worker by {leaked}: {listeners.arrived[:10]}"
    assert renderer.render([OK], TIMEOUT)[0]["status"] == "renders"


def network_namespace_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_the_render_worker_and_its_browser_run_in_a_network_namespace_without_interfaces():
    renderer = react_render.shared_renderer()
    assert renderer.render([OK], TIMEOUT)[0]["status"] == "renders"
    worker = psutil.Process(renderer.worker.process.pid)
    processes = [worker, *worker.children(recursive=True)]
    assert any("chrom" in process.name() for process in processes)
    assert {network_namespace_of(process.pid) for process in processes} == {network_namespace_of(worker.pid)}
    assert network_namespace_of(worker.pid) != network_namespace_of(os.getpid())
    links = subprocess.run(["nsenter", "-t", str(worker.pid), "-n", "ip", "-o", "link"], capture_output=True, text=True)
    assert links.returncode == 0 and [line.split(":")[1].strip() for line in links.stdout.splitlines()] == ["lo"]
    assert "state DOWN" in links.stdout


@pytest.mark.parametrize("command", node_worker.NAMESPACE_COMMANDS, ids=" ".join)
def test_each_way_of_making_the_namespace_renders_without_network(command, monkeypatch):
    """``unshare --net`` (root) and ``unshare --user --map-root-user --net`` (anyone, where user namespaces are
    allowed) both give a worker that renders and sees no interface."""
    if command[1] == "--net" and os.geteuid() != 0:
        pytest.skip("unshare --net alone needs root")
    monkeypatch.setattr(node_worker, "NAMESPACE_COMMANDS", (command,))
    node_worker.network_namespace.cache_clear()
    renderer = react_render.RenderChecker()
    try:
        assert renderer.render([OK], TIMEOUT)[0]["status"] == "renders"
        assert renderer.worker.ready.result()["network"] == []
        assert network_namespace_of(renderer.worker.process.pid) != network_namespace_of(os.getpid())
    finally:
        renderer.close()
        node_worker.network_namespace.cache_clear()


FAKE_UNSHARE = {
    "missing": None,
    "refused": "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1",
    # Runs the program as asked, but in this process's namespace: the worker must notice it has network.
    "a no-op": 'while [ "$1" != "--" ]; do shift; done; shift; PATH=/usr/bin:/bin exec "$@"',
}


@pytest.fixture
def unshare_as(tmp_path, monkeypatch):
    """PATH with ``unshare`` replaced by one of :data:`FAKE_UNSHARE` (the namespace probe forgotten around it)."""

    def replace(kind: str) -> None:
        if FAKE_UNSHARE[kind] is not None:
            fake = tmp_path / "unshare"
            fake.write_text(f"#!/bin/sh\n{FAKE_UNSHARE[kind]}\n")
            fake.chmod(0o755)
        monkeypatch.setenv("PATH", str(tmp_path))
        node_worker.network_namespace.cache_clear()

    yield replace
    node_worker.network_namespace.cache_clear()


@pytest.mark.parametrize("kind", ["missing", "refused"])
def test_without_a_namespace_the_worker_refuses_in_one_line_naming_what_it_needs(kind, unshare_as):
    unshare_as(kind)
    renderer = react_render.RenderChecker(node=NODE)
    with pytest.raises(CheckerSetupError) as refused:
        renderer.render([OK], TIMEOUT)
    message = str(refused.value)
    assert "\n" not in message and "network namespace" in message and "render_isolation='flags_only'" in message
    assert renderer.worker is None


def test_a_launcher_that_leaves_the_network_is_refused(unshare_as):
    unshare_as("a no-op")
    with pytest.raises(CheckerSetupError, match="sees network interfaces"):
        react_render.RenderChecker(node=NODE).render([OK], TIMEOUT)


def test_flags_only_renders_without_a_namespace_and_warns(unshare_as, caplog):
    unshare_as("missing")
    renderer = react_render.RenderChecker(node=NODE, isolation="flags_only")
    try:
        with caplog.at_level(logging.WARNING):
            assert renderer.render([OK], TIMEOUT)[0]["status"] == "renders"
        assert "render_isolation='flags_only'" in caplog.text
        assert network_namespace_of(renderer.worker.process.pid) == network_namespace_of(os.getpid())
    finally:
        renderer.close()
