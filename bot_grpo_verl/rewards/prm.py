"""Process reward models (PRMs): the probability that each step of a response is correct.

:func:`get_scorer` gives the process-wide :class:`StepScorer` of a set of :class:`ScorerSettings`: a format
and a backend, built once (model loaded) and shared between threads. The parts, one module each:

- :mod:`bot_grpo_verl.rewards.prm_formats`: the input formats (Qwen2.5-Math-PRM, Math-Shepherd, PURE) and
  :func:`~bot_grpo_verl.rewards.prm_formats.encode_steps`, a question and its steps as token ids and readout
  positions.
- :mod:`bot_grpo_verl.rewards.prm_local`: :class:`~bot_grpo_verl.rewards.prm_local.LocalPRM`, a ``transformers``
  model in this process (batched, ``torch.no_grad``).
- :mod:`bot_grpo_verl.rewards.prm_endpoint`: :class:`~bot_grpo_verl.rewards.prm_endpoint.EndpointPRM`, a vLLM server's
  ``/pooling`` API, checked against its ``/v1/models`` on first use, over the transport of
  :mod:`bot_grpo_verl.rewards.prm_http` (one deadline per attempt, bounded retries, every failure a
  :class:`~bot_grpo_verl.rewards.prm_http.PRMEndpointError`).
- :mod:`bot_grpo_verl.rewards.micro_batcher`: concurrent calls gathered into batches for the backend.
- :mod:`bot_grpo_verl.rewards.prm_values`: the probabilities shaped into step values.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from bot_grpo_verl.rewards.micro_batcher import MicroBatcher
from bot_grpo_verl.rewards.prm_endpoint import EndpointPRM
from bot_grpo_verl.rewards.prm_formats import FORMATS, PRMFormat, encode_steps
from bot_grpo_verl.rewards.prm_local import LocalPRM

BACKENDS = ("local", "endpoint")


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
    """What identifies a PRM scorer: the ``prm_*`` options of :class:`bot_grpo_verl.rewards.math_prm.MathPRMConfig`
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
            fmt, settings.endpoint, settings.endpoint_model, settings.timeout_s, settings.retries, settings.backoff_s
        )
        prm.connect()
    caps = [cap for cap in (settings.max_tokens, prm.max_tokens) if cap is not None]
    return StepScorer(fmt, tokenizer, prm, min(caps, default=None), settings.batch_size)
