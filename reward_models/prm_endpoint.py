"""A PRM served by vLLM: P(correct) at each step's readout position, over its ``/pooling`` or ``/classify`` API.

This process encodes the steps (:func:`reward_models.prm_formats.encode_steps`) and sends the token ids;
requests go through :func:`reward_models.prm_http.post_json`.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot_grpo_verl.rewards.prm_formats import PRMFormat
from bot_grpo_verl.rewards.prm_http import PRMEndpointError, post_json

ENDPOINT_APIS = ("pooling", "classify")


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
        read = self._pooled_rows if self.api == "pooling" else self._classified_rows
        return [[self._positive(row) for row in item_rows] for item_rows in read(batch_ids, batch_positions)]

    def _pooled_rows(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """The served rows at the readout positions, from one ``/pooling`` request for the whole batch."""
        data = self._post("pooling", {"input": [list(ids) for ids in batch_ids], "task": "token_classify"})
        rows = [item.get("data") for item in data]
        if len(rows) != len(batch_ids):
            raise PRMEndpointError(
                f"PRM endpoint {self.url}/pooling returned {len(rows)} results for {len(batch_ids)} inputs"
            )
        return [
            self._rows_at(item_rows, len(ids), positions)
            for item_rows, ids, positions in zip(rows, batch_ids, batch_positions, strict=True)
        ]

    def _classified_rows(self, batch_ids: Sequence[Sequence[int]], batch_positions: Sequence[Sequence[int]]):
        """The served rows of every step prefix, from one ``/classify`` request, grouped per response."""
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
        return chosen

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
