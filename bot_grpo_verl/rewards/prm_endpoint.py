"""A PRM served by vLLM: P(correct) at each step's readout position, over its ``/pooling`` API.

This process encodes the steps (:func:`bot_grpo_verl.rewards.prm_formats.encode_steps`) and sends the token ids;
requests go through :mod:`bot_grpo_verl.rewards.prm_http`. What a vLLM server (0.18 to 0.33, read from its source:
``entrypoints/pooling/``, ``model_executor/models/qwen2_rm.py``, ``model_executor/models/config.py``,
``renderers/params.py``) does with them:

- ``POST /pooling`` with ``{"model", "input": [[ids...], ...], "task": "token_classify"}`` answers ``{"data":
  [{"index": i, "data": rows}, ...]}``: one row ``[p(-), p(+)]`` per input token (``ALL`` pooling: token
  classifiers such as PURE's PRM) or per occurrence of the step tag (``STEP`` pooling, Qwen2.5-Math-PRM's
  default: one row per ``<extra_0>`` token, literal ones in the text included).
- An input longer than the server's ``max_model_len`` fails the whole request (HTTP 400, "This model's maximum
  context length is ..."); :meth:`EndpointPRM.connect` reads ``max_model_len`` from ``GET /v1/models`` first,
  so inputs are cut to it as the local backend cuts them, and a refused batch is retried one input at a time.
- ``/classify`` exists only for sequence classifiers: none of the supported formats (:data:`SERVED_ROUTES`).
  A ``model`` other than the served name is a 404, an unsupported ``task`` a 400.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot_grpo_verl.rewards.prm_formats import PRMFormat
from bot_grpo_verl.rewards.prm_http import PRMEndpointError, PRMRequestRejected, get_json, post_json

ENDPOINT_APIS = ("pooling", "classify")
SERVED_ROUTES = {"qwen": ("pooling",), "pure": ("pooling",), "math_shepherd": ()}
"""The vLLM routes that give each format's rows. Math-Shepherd is a causal LM: ``--runner pooling`` turns it
into an embedding model, whose ``/pooling`` refuses ``token_classify`` and whose STEP pooling reads hidden
states, not the ``+``/``-`` logits; score it with ``prm_backend=local``."""


def endpoint_problem(format_name: str, api: str) -> str | None:
    """Why format ``format_name`` cannot be read over ``api`` from vLLM (None when it can)."""
    if api in SERVED_ROUTES[format_name]:
        return None
    if not SERVED_ROUTES[format_name]:
        return (
            f"vLLM cannot serve the {format_name!r} PRM format's +/- logits (a causal LM becomes an embedding "
            "model under --runner pooling, which refuses token_classify): use prm_backend=local"
        )
    return (
        f"vLLM serves the {format_name!r} PRM format for token classification on /pooling only; /{api} exists "
        "only for sequence classifiers (a 404 here): use prm_endpoint_api=pooling"
    )


class EndpointPRM:
    """A PRM served by vLLM, read over HTTP with the token ids this process encoded.

    Each row must be a probability distribution (the server applies the head's softmax, vLLM's default);
    P(correct) is column ``fmt.served_positive_column``. Requests go through :func:`post_json` (a deadline of
    ``timeout_s`` per attempt, ``retries`` retries with backoff); every failure, of the transport or of the
    answer's shape, raises :class:`PRMEndpointError` naming the URL.

    Attributes:
        max_tokens: the server's ``max_model_len`` once :meth:`connect` has read it (None before, or when the
            server does not say).
    """

    def __init__(self, fmt: PRMFormat, url: str, model: str | None, timeout_s: float, retries: int, backoff_s: float):
        self.fmt = fmt
        self.url = url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_tokens = None

    def connect(self) -> None:
        """The start-up check: the server serves ``model`` (or, without one, exactly one model, whose name is
        then used); learn its ``max_model_len``. Raises :class:`PRMEndpointError` naming the URL and the
        served names."""
        url = f"{self.url}/v1/models"
        answer = get_json(url, self.timeout_s, self.retries, self.backoff_s)
        cards = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(cards, list) or not all(isinstance(card, dict) and "id" in card for card in cards):
            raise PRMEndpointError(f"PRM endpoint {url} answered without a list of models: {str(answer)[:300]}")
        served = {card["id"]: card.get("max_model_len") for card in cards}
        if self.model is None and len(served) != 1:
            raise PRMEndpointError(f"PRM endpoint {self.url} serves {sorted(served)}: set prm_endpoint_model to one")
        if self.model is not None and self.model not in served:
            raise PRMEndpointError(
                f"PRM endpoint {self.url} serves {sorted(served)}, not {self.model!r}: set prm_endpoint_model to "
                "the served name (vLLM's --served-model-name, default the model path)"
            )
        self.model = self.model if self.model is not None else next(iter(served))
        self.max_tokens = served[self.model]

    def probabilities(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """P(correct) at each readout position: ``list[list[float]]`` shaped like ``batch_positions``."""
        rows = self._pooled_rows(batch_ids, batch_positions)
        return [[self._positive(row) for row in item_rows] for item_rows in rows]

    def _pooled_rows(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """The served rows at the readout positions, from one ``/pooling`` request for the whole batch; a
        refused batch is sent again one input at a time, so one bad input fails only itself."""
        try:
            data = self._post("pooling", {"input": [list(ids) for ids in batch_ids], "task": "token_classify"})
        except PRMRequestRejected:
            if len(batch_ids) == 1:
                raise
            return [
                rows
                for ids, positions in zip(batch_ids, batch_positions, strict=True)
                for rows in self._pooled_rows([ids], [positions])
            ]
        rows = [item.get("data") for item in data]
        if len(rows) != len(batch_ids):
            raise PRMEndpointError(
                f"PRM endpoint {self.url}/pooling returned {len(rows)} results for {len(batch_ids)} inputs"
            )
        return [
            self._rows_at(item_rows, ids, positions)
            for item_rows, ids, positions in zip(rows, batch_ids, batch_positions, strict=True)
        ]

    def _rows_at(self, rows, ids: Sequence[int], positions: Sequence[int]):
        """The rows of the readout positions: one row per token (ALL pooling), or one per occurrence of the step
        tag's token in ``ids`` (STEP pooling: a tag written in the text adds a row, which is skipped)."""
        if not isinstance(rows, list):
            raise PRMEndpointError(f"PRM endpoint {self.url}/pooling returned {type(rows).__name__} instead of rows")
        if len(rows) == len(ids):
            return [rows[position] for position in positions]
        tag = ids[positions[0]] if positions else None
        occurrences = [index for index, token in enumerate(ids) if token == tag]
        if len(rows) == len(occurrences) and set(positions) <= set(occurrences):
            row_of = {position: number for number, position in enumerate(occurrences)}
            return [rows[row_of[position]] for position in positions]
        raise PRMEndpointError(
            f"PRM endpoint {self.url}/pooling returned {len(rows)} rows for an input of {len(ids)} tokens and "
            f"{len(positions)} steps: serve it with ALL pooling (one row per token) or STEP pooling on the step "
            "tag's token (one row per tag)"
        )

    def _positive(self, row) -> float:
        column = self.fmt.served_positive_column
        valid = isinstance(row, list) and len(row) > column
        valid = valid and all(isinstance(v, int | float) and not isinstance(v, bool) for v in row)
        if not valid or not all(0.0 <= v <= 1.0 for v in row) or abs(sum(row) - 1.0) > 1e-3:
            raise PRMEndpointError(
                f"PRM endpoint {self.url}/pooling returned {row!r}, not a probability distribution with column "
                f"{column}: serve the PRM with its softmax activation (vLLM's default)"
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
