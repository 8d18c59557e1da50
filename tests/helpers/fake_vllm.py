"""A stand-in for a vLLM server of a PRM, answering as vLLM 0.33 does (0.18 differs only where noted), with a local
tiny model computing the rows. Read from vLLM's source (the published 0.18.0 and 0.33.0 sdists):

- routes: ``GET /v1/models`` (``entrypoints/openai/models/serving.py``: cards with ``max_model_len``) and
  ``POST /pooling`` (``entrypoints/pooling/``); ``/classify`` is mounted only for models with a classify task,
  which no PRM has, so it and every other route answer FastAPI's ``404 {"detail": "Not Found"}``;
- ``/pooling`` request checks (``pooling/base/serving.py``, ``pooling/pooling/serving.py``): a ``model`` other
  than the served name is ``404 NotFoundError``; a ``task`` other than ``token_classify`` a ``400
  BadRequestError`` with ``param: "task"``; any input longer than ``max_model_len`` fails the whole request with
  ``400`` (``renderers/params.py``: "This model's maximum context length is ..."), ``param: "input_tokens"``;
- error bodies ``{"error": {"message", "type", "param", "code"}}`` (``serve/engine/protocol.py``);
- rows: the head's softmax per token (``ALL`` pooling: token classifiers) or per occurrence of ``step_tag_id``
  (``STEP`` pooling: ``Qwen2ForProcessRewardModel``'s default, ``model_executor/models/qwen2_rm.py``), items in
  input order, ``{"id": "pooling-...", "object": "list", "model", "data": [{"index", "object": "pooling",
  "data"}], "usage"}``.

``behaviour`` adds the transport faults the client must survive: ``"fail_once"`` (a 503, then normal),
``"bad_rows"`` (rows that are not distributions); ``delay_s`` delays every answer.
"""

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

SUPPORTED_TASKS = ("token_classify",)


def error(status: int, message: str, kind: str, param: str | None = None) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": kind, "param": param, "code": status}}


class FakeVLLM(ThreadingHTTPServer):
    """The server; ``requests`` records ``(method, path, body)``."""

    daemon_threads = True

    def __init__(self, model, tokenizer, pooling, step_tag, served_name="tiny", max_model_len=512, **kwargs):
        super().__init__(("127.0.0.1", 0), Handler)
        self.model, self.pooling, self.served_name, self.max_model_len = model, pooling, served_name, max_model_len
        self.step_tag_id = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(step_tag)[-1]) if step_tag else None
        self.behaviour, self.delay_s = kwargs.get("behaviour", "ok"), kwargs.get("delay_s", 0.0)
        self.requests = []

    def models(self) -> tuple[int, dict]:
        card = {
            "id": self.served_name,
            "object": "model",
            "created": 0,
            "owned_by": "vllm",
            "root": "/models/tiny",
            "parent": None,
            "max_model_len": self.max_model_len,
            "permission": [],
        }
        return 200, {"object": "list", "data": [card]}

    def pooling_answer(self, body) -> tuple[int, dict]:
        model = body.get("model")
        if model not in (None, "", self.served_name):
            return error(404, f"The model `{model}` does not exist.", "NotFoundError")
        task = body.get("task") or "token_classify"
        if task not in SUPPORTED_TASKS:
            message = f"Unsupported task: {task!r} Supported tasks: {SUPPORTED_TASKS} (parameter=task)"
            return error(400, message, "BadRequestError", "task")
        inputs = body["input"] if body["input"] and isinstance(body["input"][0], list) else [body["input"]]
        for ids in inputs:
            if len(ids) > self.max_model_len:
                message = (
                    f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt "
                    f"contains {len(ids)} input tokens, which exceeds this limit even without any output tokens. "
                    f"Please reduce the length of the input prompt. (parameter=input_tokens, value={len(ids)})"
                )
                return error(400, message, "BadRequestError", "input_tokens")
        items = []
        for index, ids in enumerate(inputs):
            with torch.no_grad():
                rows = self.model(torch.tensor([ids])).logits[0].softmax(-1)
            if self.pooling == "STEP":
                rows = rows[[position for position, token in enumerate(ids) if token == self.step_tag_id]]
            rows = rows.tolist()
            if self.behaviour == "bad_rows":
                rows = [[5.0, -3.0] for _ in rows]
            items.append({"index": index, "object": "pooling", "data": rows})
        tokens = sum(map(len, inputs))
        usage = {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}
        answer = {"id": "pooling-0", "object": "list", "created": 0, "model": self.served_name, "data": items}
        return 200, {**answer, "usage": usage}


class Handler(BaseHTTPRequestHandler):
    def answer(self, method: str):
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        server.requests.append((method, self.path, body))
        time.sleep(server.delay_s)
        if server.behaviour == "fail_once" and len(server.requests) == 2:  # the first request after /v1/models
            status, payload = error(503, "overloaded", "ServiceUnavailableError")
        elif method == "GET" and self.path == "/v1/models":
            status, payload = server.models()
        elif method == "POST" and self.path == "/pooling":
            status, payload = server.pooling_answer(body)
        else:
            status, payload = 404, {"detail": "Not Found"}
        data = json.dumps(payload).encode()
        with contextlib.suppress(OSError):  # the client may have timed out and gone
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.answer("GET")

    def do_POST(self):  # noqa: N802
        self.answer("POST")

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def running(server: FakeVLLM):
    """``(server, url)`` while ``server`` runs in a thread."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
