"""A stand-in for an OpenAI-compatible chat server (vLLM's ``/v1`` API, as the React judge uses it), on 127.0.0.1.

Routes, answered as vLLM 0.33 answers them (``entrypoints/openai/``): ``GET /v1/models`` (a list of model cards)
and ``POST /v1/chat/completions`` (``{"choices": [{"message": {"role", "content"}}]}``); a ``model`` other than the
served name is ``404 NotFoundError``, every other route FastAPI's ``404 {"detail": "Not Found"}``. What a server
may do besides, each a constructor argument:

- ``api_key``: every route wants ``Authorization: Bearer <api_key>``, else ``401 {"error": "Unauthorized"}`` (vLLM's
  ``--api-key``);
- ``refuse_images``: a message with an ``image_url`` part is ``400 BadRequestError`` (a text-only model);
- ``delay_s``: every chat answer waits this long;
- ``script``: the chat answers' behaviours, used in turn (the last one repeats): ``"ok"`` (the content is
  ``reply(prompt)``), ``"list"`` (the same as a list of text parts, one per line, after a reasoning part),
  ``"null"`` (content ``null``), ``"no_choices"``, ``"not_json"``, ``"busy"`` (503), ``"drop"`` (the connection
  closed unanswered), ``"refuse"`` (400).

A request sent through it as a proxy (an absolute URL in the request line) is answered the same way; ``requests``
records ``(method, path as sent, headers (lower-case names), body)``.
"""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply=lambda prompt: "Looks right.\nSCORE: 7", served="judge", **options):
        super().__init__(("127.0.0.1", 0), Handler)
        self.reply, self.served = reply, served
        self.api_key = options.get("api_key")
        self.refuse_images = options.get("refuse_images", False)
        self.delay_s = options.get("delay_s", 0.0)
        self.script = list(options.get("script", ("ok",)))
        self.requests, self.in_flight, self.most_in_flight = [], 0, 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def chats(self) -> list[dict]:
        """The bodies of the chat requests, in order."""
        return [body for method, path, _, body in self.requests if urlsplit(path).path == "/v1/chat/completions"]

    def behaviour(self) -> str:
        with self.lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def answer(self, method: str, path: str, headers, body) -> tuple[int, object] | None:
        """The status and JSON body (or raw bytes) of an answer; None drops the connection."""
        if self.api_key is not None and headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": "Unauthorized"}
        route = (method, urlsplit(path).path)
        if route == ("GET", "/v1/models"):
            card = {"id": self.served, "object": "model", "owned_by": "vllm", "max_model_len": 8192}
            return 200, {"object": "list", "data": [card]}
        if route != ("POST", "/v1/chat/completions"):
            return 404, {"detail": "Not Found"}
        if body.get("model") != self.served:
            return 404, error(f"The model `{body.get('model')}` does not exist.", "NotFoundError", 404)
        content = body["messages"][0]["content"]
        parts = [content] if isinstance(content, str) else content
        if self.refuse_images and any(isinstance(part, dict) and part.get("type") == "image_url" for part in parts):
            return 400, error(f"{self.served} is not a multimodal model", "BadRequestError", 400)
        time.sleep(self.delay_s)
        prompt = content if isinstance(content, str) else content[0]["text"]
        return self.chat_answer(self.behaviour(), prompt)

    def chat_answer(self, behaviour: str, prompt: str):
        if behaviour == "drop":
            return None
        if behaviour == "busy":
            return 503, error("busy", "ServiceUnavailableError", 503)
        if behaviour == "refuse":
            return 400, error("This model's maximum context length is 8192 tokens.", "BadRequestError", 400)
        if behaviour == "not_json":
            return 200, b"<html>gateway says hello</html>"
        if behaviour == "no_choices":
            return 200, {"id": "chatcmpl-1", "object": "chat.completion", "choices": []}
        text = self.reply(prompt)
        content = {
            "ok": text,
            "null": None,
            "list": [{"type": "reasoning", "reasoning": "SCORE: 10"}]
            + [{"type": "text", "text": line} for line in text.split("\n")],
        }[behaviour]
        message = {"role": "assistant", "content": content}
        return 200, {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": self.served,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }


def error(message: str, kind: str, code: int) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802
        self.handle_request("GET")

    def do_POST(self):  # noqa: N802
        self.handle_request("POST")

    def handle_request(self, method: str):
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with server.lock:
            server.requests.append(
                (method, self.path, {key.lower(): value for key, value in self.headers.items()}, body)
            )
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            answer = server.answer(method, self.path, self.headers, body)
        finally:
            with server.lock:
                server.in_flight -= 1
        if answer is None:
            self.close_connection = True
            self.connection.close()
            return
        status, payload = answer
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if isinstance(payload, bytes) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(**options):
    """A :class:`FakeOpenAI` serving in a thread until the block ends."""
    server = FakeOpenAI(**options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
