"""Process reward models (PRMs): the probability that each step of a response is correct.

A PRM reads the question and the steps of a response, with a tag after each step, and scores each step
at the tag's token. Three public formats (:data:`FORMATS`):

- ``"qwen"`` (Qwen2.5-Math-PRM, arXiv:2501.07301): the special token ``<extra_0>`` after each step; a
  2-label head gives P(correct) = softmax(logits)[1] at that token.
- ``"math_shepherd"`` (Math-Shepherd, arXiv:2312.08935): the tag `` ки`` after each step; a causal LM's
  next-token logits at the tag, restricted to the tokens ``+`` and ``-``, give P(correct) =
  softmax([logit(+), logit(-)])[0].
- ``"pure"`` (PURE, arXiv:2504.15275): a token-classification PRM scored at each step's last token, a
  ``\\n`` appended after the step; PURE's step reward is p(+) - p(-), which for its 2-label head is
  2 p(+) - 1, i.e. :func:`to_values` with ``symmetric=True`` of P(correct) = softmax(logits)[1].

Two backends score the encoded steps: :class:`LocalPRM` (a ``transformers`` model in this process, batched,
``torch.no_grad``) and :class:`EndpointPRM` (a vLLM server's ``/pooling`` or ``/classify`` HTTP API through
:func:`post_json`: one deadline per attempt, bounded retries, every failure a :class:`PRMEndpointError`).
:func:`get_scorer` builds a :class:`StepScorer` once per process and :class:`ScorerSettings`, and shares
it between threads; concurrent calls are gathered into batches by :class:`MicroBatcher`. :func:`to_values`
and :func:`aggregate` shape the probabilities into step rewards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

FORMAT_NAMES = ("qwen", "math_shepherd", "pure")
# An endpoint's answer larger than this is refused (an endless body must not exhaust memory).
MAX_ANSWER_BYTES = 256 * 2**20
# HTTP statuses retried besides 5xx: Request Timeout, Too Many Requests.
RETRIED_STATUSES = (408, 429)
BACKENDS = ("local", "endpoint")
ENDPOINT_APIS = ("pooling", "classify")
AGGREGATIONS = ("step", "min", "softmin")

QWEN_PROMPT = (
    "<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
    "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
)


@dataclass(frozen=True)
class PRMFormat:
    """How a PRM reads a response: the text around the steps and the head that scores them.

    Attributes:
        name: one of :data:`FORMAT_NAMES`.
        step_tag: text whose tokens follow each step; the step is scored at the tag's last token.
        joiner: text put before every step but the first.
        prompt_template: the text before the first step, ``{question}`` replaced by the question.
        head: ``"classifier"`` (2-label token classification, label 1 = correct) or ``"lm_pair"`` (a causal
            LM's next-token logits over the tokens ``plus`` and ``minus``).
        plus, minus: the two tokens of ``"lm_pair"``.
        served_positive_column: the column of P(correct) in a row a server returns: the classifier's
            labels in order, or the ``returned_token_ids`` of vLLM's STEP pooler in order ``[+, -]``.
    """

    name: str
    step_tag: str
    joiner: str
    prompt_template: str
    head: str
    plus: str = "+"
    minus: str = "-"
    served_positive_column: int = 1


FORMATS = {
    "qwen": PRMFormat("qwen", step_tag="<extra_0>", joiner="", prompt_template=QWEN_PROMPT, head="classifier"),
    "math_shepherd": PRMFormat(
        "math_shepherd",
        step_tag=" ки",
        joiner="\n",
        prompt_template="{question} ",
        head="lm_pair",
        served_positive_column=0,
    ),
    "pure": PRMFormat("pure", step_tag="\n", joiner="", prompt_template="{question}\n", head="classifier"),
}


class PRMEndpointError(RuntimeError):
    """A served PRM did not answer usably; the message names the endpoint."""


class _RetryableFailure(Exception):
    """One failed HTTP attempt worth retrying; the message says what failed."""


def post_json(url: str, body: dict, timeout_s: float, retries: int, backoff_s: float):
    """POST ``body`` as JSON to ``url`` and return the decoded JSON answer: the transport of :class:`EndpointPRM`.

    Each attempt has one deadline of ``timeout_s`` for all of it (connect, send, status line, headers,
    body): a watchdog shuts the socket down when it passes, so a server that trickles bytes cannot hold
    the request (name resolution excepted). ``retries`` more attempts follow a retryable failure, waiting
    ``backoff_s * 2**k`` before retry ``k + 1``.

    Retryable: connection errors and timeouts, a dropped or cut answer (``IncompleteRead``), a non-HTTP
    answer (``BadStatusLine``) and other protocol errors, a body that is not JSON, HTTP 5xx, 408 and 429.
    Not retried: other 4xx, redirects, and an answer over :data:`MAX_ANSWER_BYTES`.

    Raises:
        PRMEndpointError: for every failure, naming ``url``, the attempts and the last failure.
    """
    payload = json.dumps(body).encode()
    failure = "no attempt"
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            return _post_once(url, payload, timeout_s)
        except _RetryableFailure as error:
            failure = str(error)
    raise PRMEndpointError(f"PRM endpoint {url} failed {retries + 1} times (deadline {timeout_s} s each): {failure}")


def _post_once(url: str, payload: bytes, timeout_s: float):
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
        raise PRMEndpointError(f"PRM endpoint {url} rejected the request: {detail}{redirect}")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:  # not JSON, or nested past the parser's recursion limit
        raise _RetryableFailure(f"the answer is not JSON ({type(error).__name__}): {data[:100]!r}") from None


def encode_steps(
    tokenizer, fmt: PRMFormat, question: str, steps: Sequence[str], max_tokens: int | None = None
) -> tuple[list[int], list[int]]:
    """Token ids of the PRM input and the readout position of each step.

    The prompt is encoded with the tokenizer's special tokens (a BOS where the model has one); each step
    is encoded on its own (``joiner + step``) and followed by the ids of ``step_tag`` encoded on its own,
    as PURE concatenates token ids, so the readout position is exactly the tag's last token whatever the
    tokenizer would merge across steps. Steps that would make the input longer than ``max_tokens`` are
    dropped from the end: then ``len(positions) < len(steps)``.

    Returns:
        ``(ids, positions)``: ``ids`` a list of ints, ``positions`` one index into ``ids`` per kept step.
    """
    ids = tokenizer.encode(fmt.prompt_template.replace("{question}", question), add_special_tokens=True)
    tag_ids = tokenizer.encode(fmt.step_tag, add_special_tokens=False)
    positions: list[int] = []
    for number, step in enumerate(steps):
        segment = tokenizer.encode((fmt.joiner if number else "") + step, add_special_tokens=False) + tag_ids
        if max_tokens is not None and len(ids) + len(segment) > max_tokens:
            break
        ids.extend(segment)
        positions.append(len(ids) - 1)
    return ids, positions


def single_token_id(tokenizer, token: str) -> int:
    """The id of ``token``, which must encode to exactly one token (else ``ValueError``)."""
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the PRM tokenizer encodes {token!r} as {len(ids)} tokens {ids}, expected exactly one")
    return ids[0]


class LocalPRM:
    """A PRM run by ``transformers`` in this process.

    ``"classifier"`` formats load ``AutoModelForTokenClassification`` (2 labels), or ``AutoModel`` when
    ``trust_remote_code`` is set and the checkpoint maps its own class (Qwen2.5-Math-PRM ships its head as
    remote code; its output's first element is the ``[batch, tokens, 2]`` logits, as a token classifier's).
    ``"lm_pair"`` formats load ``AutoModelForCausalLM``.
    """

    def __init__(self, fmt: PRMFormat, model_path: str, tokenizer, device: str, dtype: str, trust_remote_code: bool):
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification

        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        if fmt.head == "lm_pair":
            model_class = AutoModelForCausalLM
        elif trust_remote_code and getattr(config, "auto_map", None):
            model_class = AutoModel
        else:
            model_class = AutoModelForTokenClassification
        self.device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, self.device)
        self.model = model_class.from_pretrained(model_path, dtype=torch_dtype, trust_remote_code=trust_remote_code)
        self.model.to(self.device).eval()
        self.fmt = fmt
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pair_ids = (
            [single_token_id(tokenizer, fmt.plus), single_token_id(tokenizer, fmt.minus)]
            if fmt.head == "lm_pair"
            else None
        )
        self.max_tokens = getattr(config, "max_position_embeddings", None)

    def probabilities(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """P(correct) at each readout position: ``list[list[float]]`` shaped like ``batch_positions``.

        One right-padded forward pass over the batch under ``torch.no_grad``.
        """
        import torch

        width = max(len(ids) for ids in batch_ids)
        input_ids = torch.full((len(batch_ids), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for row, ids in enumerate(batch_ids):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        with torch.no_grad():
            output = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device))
        # Element 0 is the logits for transformers' outputs (no labels given) and Qwen2.5-Math-PRM's.
        logits = output[0].float()
        if self.fmt.head == "classifier" and logits.shape[-1] != 2:
            raise ValueError(f"a {self.fmt.name!r} PRM needs a 2-label head, the model gives {logits.shape[-1]} labels")
        result = []
        for row, positions in enumerate(batch_positions):
            rows = logits[row, list(positions)]
            if self.fmt.head == "lm_pair":
                result.append(rows[:, self.pair_ids].softmax(dim=-1)[:, 0].tolist())
            else:
                result.append(rows.softmax(dim=-1)[:, 1].tolist())
        return result


class EndpointPRM:
    """A PRM served by vLLM, read over HTTP with the token ids this process encoded.

    - ``api="pooling"``: one ``POST {url}/pooling`` with ``{"input": [[ids...], ...], "task":
      "token_classify"}`` (plus ``"model"`` if given). vLLM answers ``{"data": [{"index": i, "data":
      rows}, ...]}`` with one row per input token (``ALL`` pooling; the rows at the readout positions are
      used) or one row per step tag (``STEP`` pooling with ``step_tag_id``; all rows are used).
    - ``api="classify"``: one ``POST {url}/classify`` with ``{"input": [prefixes]}``, a prefix per step
      ending at its readout position (quadratic in tokens, for servers that only classify sequences);
      vLLM answers ``{"data": [{"index": j, "probs": row, ...}, ...]}``.

    Each row must be a probability distribution (the server applies the head's softmax, vLLM's default);
    P(correct) is column ``fmt.served_positive_column``. Requests go through :func:`post_json` (a deadline
    of ``timeout_s`` per attempt, ``retries`` retries with backoff); every failure, of the transport or of
    the answer's shape, raises :class:`PRMEndpointError` naming the URL.
    """

    def __init__(
        self, fmt: PRMFormat, url: str, api: str, model: str | None, timeout_s: float, retries: int, backoff_s: float
    ):
        self.fmt = fmt
        self.url = url.rstrip("/")
        self.api = api
        self.model = model
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_tokens = None

    def probabilities(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """P(correct) at each readout position: ``list[list[float]]`` shaped like ``batch_positions``."""
        if self.api == "pooling":
            data = self._post("pooling", {"input": [list(ids) for ids in batch_ids], "task": "token_classify"})
            rows = [item.get("data") for item in data]
            if len(rows) != len(batch_ids):
                raise PRMEndpointError(
                    f"PRM endpoint {self.url}/pooling returned {len(rows)} results for {len(batch_ids)} inputs"
                )
            chosen = [
                self._rows_at(item_rows, len(ids), positions)
                for item_rows, ids, positions in zip(rows, batch_ids, batch_positions, strict=True)
            ]
        else:
            prefixes = [
                list(ids[: position + 1])
                for ids, positions in zip(batch_ids, batch_positions, strict=True)
                for position in positions
            ]
            flat = [item.get("probs") for item in self._post("classify", {"input": prefixes})]
            if len(flat) != len(prefixes):
                raise PRMEndpointError(
                    f"PRM endpoint {self.url}/classify returned {len(flat)} results for {len(prefixes)} inputs"
                )
            chosen, start = [], 0
            for positions in batch_positions:
                chosen.append(flat[start : start + len(positions)])
                start += len(positions)
        return [[self._positive(row) for row in item_rows] for item_rows in chosen]

    def _rows_at(self, rows, num_tokens: int, positions: Sequence[int]):
        if not isinstance(rows, list):
            raise PRMEndpointError(f"PRM endpoint {self.url}/pooling returned {type(rows).__name__} instead of rows")
        if len(rows) == num_tokens:
            return [rows[position] for position in positions]
        if len(rows) == len(positions):
            return rows
        raise PRMEndpointError(
            f"PRM endpoint {self.url}/pooling returned {len(rows)} rows for an input of {num_tokens} tokens and "
            f"{len(positions)} steps: serve it with ALL pooling (one row per token) or STEP pooling (one per step tag)"
        )

    def _positive(self, row) -> float:
        column = self.fmt.served_positive_column
        valid = isinstance(row, list) and len(row) > column
        valid = valid and all(isinstance(v, int | float) and not isinstance(v, bool) for v in row)
        if not valid or not all(0.0 <= v <= 1.0 for v in row) or abs(sum(row) - 1.0) > 1e-3:
            raise PRMEndpointError(
                f"PRM endpoint {self.url}/{self.api} returned {row!r}, not a probability distribution with column "
                f"{column}: serve the PRM with its softmax activation (for STEP pooling: returned_token_ids [+, -])"
            )
        return float(row[column])

    def _post(self, path: str, body: dict) -> list[dict]:
        """The items of the answer's ``data`` list, in the order of their ``index`` (their position if absent)."""
        url = f"{self.url}/{path}"
        if self.model is not None:
            body = {"model": self.model, **body}
        answer = post_json(url, body, self.timeout_s, self.retries, self.backoff_s)
        items = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise PRMEndpointError(f"PRM endpoint {url} answered without a 'data' list of objects: {str(answer)[:300]}")
        indices = [item.get("index", position) for position, item in enumerate(items)]
        if len(set(indices)) != len(items) or set(indices) != set(range(len(items))):
            raise PRMEndpointError(f"PRM endpoint {url} answered with indices {indices[:20]}, not 0..{len(items) - 1}")
        return [items[position] for position in sorted(range(len(items)), key=indices.__getitem__)]


class MicroBatcher:
    """Gathers concurrent single calls into batched calls of ``run_batch``.

    A caller whose item is not done and who finds no batch running runs the next batch: up to
    ``max_batch`` waiting items (oldest first). Callers arriving meanwhile wait and form the next batch,
    so under verl's concurrent reward calls the model sees batches, and a lone caller runs at once (no
    timer). An exception from ``run_batch`` is raised in every caller of that batch.
    """

    def __init__(self, run_batch: Callable[[list], list], max_batch: int):
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._condition = threading.Condition()
        self._waiting: list[_Slot] = []
        self._busy = False

    def __call__(self, item):
        slot = _Slot(item)
        with self._condition:
            self._waiting.append(slot)
            while not slot.done:
                if self._busy:
                    self._condition.wait()
                    continue
                self._busy = True
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                self._condition.release()
                try:
                    _fill(batch, self._run_batch)
                finally:
                    self._condition.acquire()
                    self._busy = False
                    self._condition.notify_all()
        if slot.error is not None:
            raise slot.error
        return slot.result


class _Slot:
    def __init__(self, item):
        self.item = item
        self.result = None
        self.error: BaseException | None = None
        self.done = False


def _fill(batch: list[_Slot], run_batch: Callable[[list], list]) -> None:
    try:
        results = run_batch([slot.item for slot in batch])
        if len(results) != len(batch):
            raise RuntimeError(f"a batch of {len(batch)} items gave {len(results)} results")
        for slot, result in zip(batch, results, strict=True):
            slot.result = result
    except BaseException as error:  # handed to every caller of the batch, who re-raises it
        for slot in batch:
            slot.error = error
    for slot in batch:
        slot.done = True


class StepScorer:
    """P(correct) of each step of a response from one PRM (a format and a backend); thread safe.

    Attributes:
        fmt: the :class:`PRMFormat`.
        backend: a :class:`LocalPRM` or :class:`EndpointPRM`.
        max_tokens: the PRM input length cap (None: none).
    """

    def __init__(self, fmt: PRMFormat, tokenizer, backend, max_tokens: int | None, batch_size: int):
        self.fmt = fmt
        self.tokenizer = tokenizer
        self.backend = backend
        self.max_tokens = max_tokens
        self._tokenizer_lock = threading.Lock()
        self._batcher = MicroBatcher(self._run_batch, batch_size)

    def probabilities(self, question: str, steps: Sequence[str]) -> list[float]:
        """P(correct) of the leading steps that fit in ``max_tokens`` (all steps when they fit)."""
        with self._tokenizer_lock:  # a fast tokenizer shared between threads may raise "Already borrowed"
            ids, positions = encode_steps(self.tokenizer, self.fmt, question, steps, self.max_tokens)
        if not positions:
            return []
        return self._batcher((ids, positions))

    def _run_batch(self, items: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        return self.backend.probabilities([ids for ids, _ in items], [positions for _, positions in items])


@dataclass(frozen=True)
class ScorerSettings:
    """What identifies a PRM scorer: the ``prm_*`` options of :class:`reward_models.math_prm.MathPRMConfig`
    without their prefix (``model`` = ``prm_model``, ``endpoint`` = ``prm_endpoint``, ...)."""

    format: str
    backend: str
    model: str | None
    tokenizer: str | None
    endpoint: str | None
    endpoint_api: str
    endpoint_model: str | None
    timeout_s: float
    retries: int
    backoff_s: float
    device: str
    dtype: str
    trust_remote_code: bool
    batch_size: int
    max_tokens: int | None
    step_tag: str | None


_SCORERS: dict[ScorerSettings, StepScorer] = {}
_SCORERS_LOCK = threading.Lock()


def get_scorer(settings: ScorerSettings) -> StepScorer:
    """The process-wide :class:`StepScorer` for ``settings``, built (model loaded) on first use.

    Building happens under a lock, so concurrent first calls load the model once.
    """
    with _SCORERS_LOCK:
        if settings not in _SCORERS:
            _SCORERS[settings] = _build_scorer(settings)
        return _SCORERS[settings]


def _build_scorer(settings: ScorerSettings) -> StepScorer:
    from transformers import AutoTokenizer

    fmt = FORMATS[settings.format]
    if settings.step_tag is not None:
        fmt = PRMFormat(**{**fmt.__dict__, "step_tag": settings.step_tag})
    if settings.backend == "local" and not settings.model:
        raise ValueError("prm_backend='local' needs prm_model (a local checkpoint directory or hub name)")
    if settings.backend == "endpoint" and not settings.endpoint:
        raise ValueError("prm_backend='endpoint' needs prm_endpoint (for example http://host:8000)")
    if not (settings.tokenizer or settings.model):
        raise ValueError("the PRM needs a tokenizer: set prm_tokenizer (or prm_model, whose tokenizer is used)")
    tokenizer = AutoTokenizer.from_pretrained(
        settings.tokenizer or settings.model, trust_remote_code=settings.trust_remote_code
    )
    if settings.backend == "local":
        prm = LocalPRM(fmt, settings.model, tokenizer, settings.device, settings.dtype, settings.trust_remote_code)
    else:
        prm = EndpointPRM(
            fmt,
            settings.endpoint,
            settings.endpoint_api,
            settings.endpoint_model,
            settings.timeout_s,
            settings.retries,
            settings.backoff_s,
        )
    max_tokens = settings.max_tokens if settings.max_tokens is not None else prm.max_tokens
    return StepScorer(fmt, tokenizer, prm, max_tokens, settings.batch_size)


def resolve_device(device: str) -> str:
    """``"auto"``: ``"cuda"`` when available, else ``"cpu"``; any other value is returned as is."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str):
    """The torch dtype named by ``dtype``; ``"auto"``: bfloat16 on CUDA, float32 elsewhere."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ValueError(f"prm_dtype={dtype!r} is not a torch dtype name (float32, bfloat16, float16) or 'auto'")
    return getattr(torch, dtype)


def to_values(probabilities: Sequence[float], symmetric: bool) -> list[float]:
    """Step rewards from P(correct): ``2p - 1`` in [-1, 1] when ``symmetric`` (PURE's p(+) - p(-)), else p."""
    return [2.0 * p - 1.0 if symmetric else float(p) for p in probabilities]


def aggregate(values: Sequence[float], aggregation: str, temperature: float) -> list[float]:
    """The value each step's tokens carry, from the step rewards ``values`` (list of floats, one per step).

    - ``"step"``: each step keeps its own reward.
    - ``"min"``: step k gets ``min(values[k:])``, PURE's min-form credit: a step is worth its worst
      successor, so a bad step cannot be paid for by good ones after it.
    - ``"softmin"``: PURE's implementation of it: weights ``w = softmax(-values / temperature)`` over the
      steps, step k gets ``sum(w[j] * values[j] for j >= k)``; step 0 tends to ``min(values)`` as
      ``temperature -> 0`` and to ``mean(values)`` as ``temperature -> inf``.
    """
    if not values:
        return []
    if aggregation == "step":
        return [float(v) for v in values]
    if aggregation == "min":
        result, running = [], math.inf
        for value in reversed(values):
            running = min(running, value)
            result.append(running)
        return result[::-1]
    lowest = min(values)
    exps = [math.exp(-(v - lowest) / temperature) for v in values]
    total = sum(exps)
    weighted = [e / total * v for e, v in zip(exps, values, strict=True)]
    result, running = [], 0.0
    for value in reversed(weighted):
        running += value
        result.append(running)
    return result[::-1]
