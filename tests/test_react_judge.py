"""The judge client (reward_models/react_judge.py) against a local fake OpenAI-compatible chat server: answers,
strict parsing, both orders of a comparison, retries within a deadline, refusals, the cache and the limit on
requests in flight."""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bot_grpo_verl.rewards.react_judge import JudgeClient, JudgeConfig, JudgeError


class FakeChat(ThreadingHTTPServer):
    """``POST /v1/chat/completions``; ``script`` is a list of behaviours used in turn (the last one repeats):
    ``"ok"`` (answers ``reply(prompt)``), ``"slow"``, ``"drop"``, ``"garbled"``, ``"refuse"`` (400),
    ``"busy"`` (503), ``"trickle"`` (the answer one byte every 50 ms)."""

    daemon_threads = True

    def __init__(self, script, reply):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.reply = list(script), reply
        self.bodies, self.in_flight, self.most_in_flight = [], 0, 0
        self.lock = threading.Lock()

    def behaviour(self) -> str:
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.bodies.append(body)
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            self.respond(server, body)
        finally:
            with server.lock:
                server.in_flight -= 1

    def respond(self, server, body):
        behaviour = server.behaviour()
        if behaviour == "drop":
            self.connection.close()
            return
        if behaviour == "slow":
            time.sleep(4.0)  # past the tests' 2 s attempt timeout
        content = body["messages"][0]["content"]
        prompt = content if isinstance(content, str) else content[0]["text"]
        status, payload = 200, {"choices": [{"message": {"role": "assistant", "content": server.reply(prompt)}}]}
        if behaviour == "garbled":
            payload = {"oops": True}
        elif behaviour == "refuse":
            status, payload = 400, {"error": {"message": "bad model", "type": "BadRequestError", "code": 400}}
        elif behaviour == "busy":
            status, payload = 503, {"error": {"message": "busy"}}
        time.sleep(0.05)
        data = json.dumps(payload).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if behaviour == "trickle":  # every byte in time for a per-read timeout, the whole far too late
                for byte in data:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def judge(script=("ok",), reply=lambda prompt: "Looks right.\nSCORE: 7", **options):
    server = FakeChat(script, reply)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    config = JudgeConfig(**{"endpoint": f"http://127.0.0.1:{server.server_address[1]}/v1", "model": "judge", **options})
    client = JudgeClient(config)
    try:
        yield client, server
    finally:
        server.shutdown()
        server.server_close()


def test_a_score_is_parsed_strictly_and_cached():
    with judge() as (client, server):
        assert client.score("a list of items", "export const A = () => <ul />;") == 0.7
        assert client.score("a list of items", "export const A = () => <ul />;") == 0.7
        assert len(server.bodies) == 1  # the second answer came from the cache
        assert server.bodies[0]["model"] == "judge" and "a list of items" in server.bodies[0]["messages"][0]["content"]
        assert client.score("a list of items", "export const A = () => <ul />;", sample=1) == 0.7
        assert len(server.bodies) == 2  # another sample is another judgment
    for reply in ("SCORE: 7\nSCORE: 8", "SCORE: 11", "I like it", "SCORE: seven"):
        with (
            judge(reply=lambda prompt, reply=reply: reply, deadline_s=0.5) as (client, _),
            pytest.raises(JudgeError, match=r"without exactly one `SCORE: 0..10` line"),
        ):
            client.score("r", "c")


def test_a_screenshot_goes_as_an_image():
    with judge() as (client, server):
        client.score("r", "c", screenshot=b"\x89PNG fake")
        content = server.bodies[0]["messages"][0]["content"]
        assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_a_comparison_asks_both_orders_so_position_bias_cancels():
    def prefers_first(prompt):
        return "WINNER: A"

    with judge(reply=prefers_first) as (client, server):
        assert client.compare("r", b"png one", b"png two") == 0.5  # always "A": a tie, not a win
        assert len(server.bodies) == 2

    def prefers_lists(prompt):
        first = prompt.index("Component A")
        return "WINNER: A" if "<ul>" in prompt[first : prompt.index("Component B")] else "WINNER: B"

    with judge(reply=prefers_lists) as (client, _):
        assert client.compare("r", "<ul></ul>", "<div></div>") == 1.0
        assert client.compare("r", "<div></div>", "<ul></ul>") == 0.0


@pytest.mark.parametrize("fault", ["slow", "drop", "busy", "garbled"])
def test_transient_faults_are_retried_within_the_deadline(fault):
    # 2 s per attempt: a loaded CI machine must still answer the "ok" attempt within it (0.5 s was flaky there)
    with judge(script=(fault, "ok"), timeout_s=2.0, deadline_s=20.0) as (client, server):
        assert client.score("r", "c") == 0.7
        assert len(server.bodies) == 2


def test_a_refusal_is_not_retried_and_a_dead_endpoint_is_named_after_the_deadline():
    with judge(script=("refuse",)) as (client, server):
        with pytest.raises(
            JudgeError, match=r"judge http://127.0.0.1:\d+/v1/chat/completions rejected the request: HTTP 400"
        ):
            client.score("r", "c")
        assert len(server.bodies) == 1
    started = time.monotonic()
    with (
        judge(script=("busy",), deadline_s=1.0) as (client, _),
        pytest.raises(JudgeError, match=r"failed \d+ times within 1.0 s: HTTP 503"),
    ):
        client.score("r", "c")
    assert time.monotonic() - started < 8


def test_an_answer_trickled_past_the_attempt_deadline_fails_the_attempt():
    started = time.monotonic()
    with (
        judge(script=("trickle",), timeout_s=0.5, deadline_s=1.0) as (client, server),
        pytest.raises(JudgeError, match=r"failed \d+ times within 1.0 s: no complete answer within the deadline"),
    ):
        client.score("r", "c")
    assert time.monotonic() - started < 5  # the answer alone would take ~4 s per attempt


def test_requests_in_flight_stay_within_the_concurrency_limit():
    with judge(concurrency=2) as (client, server):
        threads = [threading.Thread(target=client.score, args=("r", f"code {n}")) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(server.bodies) == 8 and server.most_in_flight == 2


def test_the_composed_reward_judges_only_responses_that_compile_render_and_meet_their_spec():
    import shutil

    if shutil.which("node") is None:
        pytest.fail("the composed reward needs node and Chromium (make setup)")
    from bot_grpo_verl.rewards import react_tsx as rt

    good = "Here:\n```tsx\nexport default function App() { return <ul><li>a</li></ul>; }\n```\n"
    blank = "Here:\n```tsx\nexport default function App() { return null; }\n```\n"
    replies = iter(["SCORE: 4", "SCORE: 8"] * 10)
    with judge(reply=lambda prompt: next(replies)) as (client, server):
        options = {
            "render": True,
            "timeout": 10.0,
            "judge_endpoint": client.config.endpoint,
            "judge_model": "judge",
            "judge_weight": 0.5,
            "judge_samples": 2,
        }
        info = {"instruction": "a list with one item"}
        result = rt.compute_score("react", good, None, info, **options)
        assert (result["judged"], result["judge_score"], result["judge_spread"]) == (
            1,
            pytest.approx(0.6),
            pytest.approx(0.4),
        )
        assert result["score"] == pytest.approx(0.8) and len(server.bodies) == 2
        assert "a list with one item" in server.bodies[0]["messages"][0]["content"][0]["text"]  # with its screenshot
        failing = rt.compute_score("react", blank, None, info, **options)
        assert (failing["score"], failing["judged"]) == (0.0, 0) and len(server.bodies) == 2  # never judged
        with pytest.raises(ValueError, match=r"the judge needs the request in extra_info\['instruction'\]"):
            rt.compute_score("react", good, None, {}, **options)
    with pytest.raises(ValueError, match="judge_endpoint needs render=True"):
        rt.compute_score("react", good, None, info, judge_endpoint="http://h/v1", judge_model="m")
