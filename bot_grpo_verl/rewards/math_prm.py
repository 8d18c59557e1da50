"""Math reward for verl: process reward model (PRM) steps plus a math-verify outcome, as token-level spans.

Use from any verl recipe::

    reward.custom_reward_function.path=bot_grpo_verl/rewards/math_prm.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.prm_model=/models/Qwen2.5-Math-PRM-7B
    +reward.custom_reward_function.reward_kwargs.prm_trust_remote_code=true

:func:`compute_score` splits the response into steps (``step_separator``, default a blank line), scores
each step with a PRM (:mod:`bot_grpo_verl.rewards.prm`), checks the final answer against ``ground_truth`` with
math-verify, and returns ``{"score": outcome, "spans": [...], ...}``: each step's characters carry the
step's value, the final answer's characters the outcome value (see :class:`MathPRMConfig` for the exact
scheme). It is synchronous and thread safe; verl calls it concurrently from its executor threads.
"""

# No ``from __future__ import annotations``: verl's loader does not register this module in sys.modules,
# and dataclasses look string annotations up there (AttributeError at load time).
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from urllib.parse import urlsplit

from bot_grpo_verl.options import check_option_values, check_options, options_from_kwargs
from bot_grpo_verl.reward.token_rewards import Span, split_steps
from bot_grpo_verl.rewards.answer_check import MAX_TIMEOUT_S, TIMEOUT_S, Verdict, check_answer, ground_truth_text
from bot_grpo_verl.rewards.prm import BACKENDS, ScorerSettings, get_scorer
from bot_grpo_verl.rewards.prm_endpoint import ENDPOINT_APIS, endpoint_problem
from bot_grpo_verl.rewards.prm_formats import FORMAT_NAMES
from bot_grpo_verl.rewards.prm_values import AGGREGATIONS, aggregate, clip_value, mix_outcome, to_values

MISSING_GROUND_TRUTH = ("error", "process_only")
# Upper bounds of the endpoint options: each wait must fit the OS's timers, and a run must not stall for days.
MAX_PRM_TIMEOUT_S = 3600.0
MAX_PRM_RETRIES = 10
MAX_PRM_BACKOFF_S = 60.0

BRACES = re.compile(r"\\boxed\{|[{}]")
NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


@dataclass(frozen=True)
class MathPRMConfig:
    r"""Options of :func:`compute_score`, passed as verl's
    ``+reward.custom_reward_function.reward_kwargs.<name>=<value>``.

    Token values (``g`` = the probability map, ``o`` = the outcome value, ``lambda`` = ``outcome_weight``):
    step k's P(correct) ``p_k`` becomes ``v_k = g(p_k)``, then :func:`bot_grpo_verl.rewards.prm_values.aggregate`
    (``aggregation``) turns ``v`` into ``a``; step k's characters carry ``(1 - lambda) a_k + lambda o``, the
    final answer's characters carry ``o = g(1)`` if math-verify accepts it and ``g(0)`` otherwise, and
    ``score = o``. Every value is then clipped to ``[-clip, clip]`` when ``clip`` is set.

    Parameters:
        prm_format (`str`, *optional*, defaults to `"qwen"`):
            The PRM's input format and head: `"qwen"` (Qwen2.5-Math-PRM, arXiv:2501.07301: `<extra_0>`
            after each step, 2-label head), `"math_shepherd"` (Math-Shepherd, arXiv:2312.08935: ` ки` after
            each step, causal LM logits over `+`/`-`), `"pure"` (PURE, arXiv:2504.15275: `\n` after each
            step, 2-label token classification). See :mod:`bot_grpo_verl.rewards.prm_formats`.
        prm_backend (`str`, *optional*, defaults to `"local"`):
            `"local"`: a `transformers` model in each reward worker process; `"endpoint"`: a vLLM server.
        prm_model (`str`, *optional*):
            Checkpoint directory (or hub name already in the local cache) of the local PRM.
        prm_tokenizer (`str`, *optional*, defaults to `prm_model`):
            The PRM's tokenizer; required with `prm_backend="endpoint"` (token ids are sent to the server).
        prm_trust_remote_code (`bool`, *optional*, defaults to `False`):
            Load remote code; Qwen2.5-Math-PRM needs `true` (its head ships as code).
        prm_device (`str`, *optional*, defaults to `"auto"`): torch device of the local PRM; `"auto"`: CUDA if
            available, else CPU.
        prm_dtype (`str`, *optional*, defaults to `"auto"`): `"auto"` (bfloat16 on CUDA, float32 on CPU) or a
            torch dtype name.
        prm_batch_size (`int`, *optional*, defaults to `16`):
            Most responses per PRM call; concurrent verl calls are gathered into batches up to this size.
        prm_max_tokens (`int`, *optional*, defaults to the model's context):
            PRM input length cap; steps past it are not scored (their characters get `score`) and
            `truncated` is 1. Default: the local model's `max_position_embeddings`, or the served model's
            `max_model_len` (read from the server's `/v1/models` on first use); a value above that is lowered to it.
        prm_step_tag (`str`, *optional*, defaults to the format's tag): text whose tokens follow each step.
        prm_endpoint (`str`, *optional*): base URL of the vLLM server, `http://` or `https://` and a host,
            e.g. `http://prm-host:8000`.
        prm_endpoint_api (`str`, *optional*, defaults to `"pooling"`):
            `"pooling"`: vLLM's `/pooling` (`task: token_classify`; one row per token, or per step tag under
            STEP pooling). `"classify"` is refused at configuration time: vLLM mounts `/classify` only for
            sequence classifiers, none of the formats (`bot_grpo_verl.rewards.prm_endpoint.SERVED_ROUTES`); the
            `"math_shepherd"` format cannot be served at all (use `prm_backend="local"`).
        prm_endpoint_model (`str`, *optional*): the served model name (vLLM's `--served-model-name`); checked
            against the server's `/v1/models` on first use. Default: the server's one model.
        prm_timeout_s (`float`, *optional*, defaults to `30.0`): deadline of each HTTP attempt as a whole
            (connect, send, status line, headers, body), in (0, 3600]; a server that trickles bytes is cut
            off at it. A request takes at most `(prm_retries + 1) * prm_timeout_s` plus the backoff waits.
        prm_retries (`int`, *optional*, defaults to `2`): retries after a failed attempt, in [0, 10]. Retried:
            connection errors, timeouts, dropped or garbled answers, HTTP 5xx, 408 and 429; not retried:
            other 4xx and redirects. Every failure raises `bot_grpo_verl.rewards.prm_http.PRMEndpointError`
            naming the URL.
        prm_backoff_s (`float`, *optional*, defaults to `0.5`): wait before retry k is `prm_backoff_s * 2**k`;
            in [0, 60].
        step_separator (`str`, *optional*, defaults to `"\n\n"`):
            Steps are the text between runs of this separator (`bot_grpo_verl.reward.token_rewards.split_steps`).
        question_key (`str`, *optional*, defaults to `"question"`):
            Key of `extra_info` holding the problem text shown to the PRM (verl does not pass the prompt to
            reward functions); missing: the PRM sees the steps without a question.
        symmetric (`bool`, *optional*, defaults to `True`):
            `g(p) = 2p - 1` in [-1, 1] (PURE's p(+) - p(-)), so a doubtful step (p = 0.5) is worth 0 and
            wrong steps are penalised; `False`: `g(p) = p` in [0, 1].
        aggregation (`str`, *optional*, defaults to `"step"`):
            `"step"`: each step its own value; `"min"`: step k gets the min over steps k.. (PURE's min-form
            credit assignment); `"softmin"`: PURE's softmin-weighted form of it (see `softmin_temperature`).
        softmin_temperature (`float`, *optional*, defaults to `0.1`):
            Temperature of `"softmin"` (PURE's default 0.1); smaller is closer to the min.
        outcome_weight (`float`, *optional*, defaults to `0.5`):
            `lambda` in [0, 1], the outcome's share in each step's value: 0 gives pure PRM steps (the
            answer tokens still carry the outcome), 1 gives every token the outcome (GRPO's signal). Mixing
            anchors the PRM, which PURE shows can be reward-hacked on its own.
        clip (`float`, *optional*, defaults to `None`):
            Bound every value to [-clip, clip] (the values already lie in [-1, 1], or [0, 1] with
            `symmetric=False`; a smaller bound trades resolution for stability).
        max_response_chars (`int`, *optional*, defaults to `65536`):
            Only the first characters of a longer response are split, scored and searched for the final
            answer (every scan is linear in them); the rest is covered by no span (its tokens get
            `score`) and `truncated` is 1.
        missing_ground_truth (`str`, *optional*, defaults to `"error"`):
            A ground truth that is None or blank: `"error"` raises `ValueError`; `"process_only"` scores
            the steps only (`outcome_weight` treated as 0, no answer span) and sets
            `score = min(step values)` (PURE's min-form return; `g(0)` when no step is scored). Missing
            also covers NaN (pandas' missing value) and the strings a missing value becomes through
            `astype(str)` (`"nan"`, `"None"`, `"<NA>"`, `"null"`); see
            `bot_grpo_verl.rewards.answer_check.ground_truth_text`.
        answer_timeout_s (`float`, *optional*, defaults to `5.0`):
            Wall-clock bound of one answer check, in (0, 600]. Checks run in worker processes within the
            limits of `bot_grpo_verl.rewards.answer_check` (answers over 1000 characters, brackets nested over 8
            deep, numbers of over ~1000 digits such as `9^{9^{9}}` are refused at once); an answer refused
            or still running at this bound scores as wrong (`g(0)`), with `answer_refused` = 1.

    Every option is type-checked when the config is built (`bot_grpo_verl.options.check_options`:
    numbers finite and not bool, bools true/false, strings strings), then range-checked; a bad value
    raises `ValueError` naming it.
    """

    prm_format: str = "qwen"
    prm_backend: str = "local"
    prm_model: str | None = None
    prm_tokenizer: str | None = None
    prm_trust_remote_code: bool = False
    prm_device: str = "auto"
    prm_dtype: str = "auto"
    prm_batch_size: int = 16
    prm_max_tokens: int | None = None
    prm_step_tag: str | None = None
    prm_endpoint: str | None = None
    prm_endpoint_api: str = "pooling"
    prm_endpoint_model: str | None = None
    prm_timeout_s: float = 30.0
    prm_retries: int = 2
    prm_backoff_s: float = 0.5
    step_separator: str = "\n\n"
    question_key: str = "question"
    symmetric: bool = True
    aggregation: str = "step"
    softmin_temperature: float = 0.1
    outcome_weight: float = 0.5
    clip: float | None = None
    max_response_chars: int = 65536
    missing_ground_truth: str = "error"
    answer_timeout_s: float = TIMEOUT_S

    def __post_init__(self):
        check_options(type(self), {field.name: getattr(self, field.name) for field in fields(self)}, "math_prm")
        choices = {
            "prm_format": FORMAT_NAMES,
            "prm_backend": BACKENDS,
            "prm_endpoint_api": ENDPOINT_APIS,
            "aggregation": AGGREGATIONS,
            "missing_ground_truth": MISSING_GROUND_TRUTH,
        }
        ranges = {
            "prm_batch_size": self.prm_batch_size >= 1,
            "prm_max_tokens": self.prm_max_tokens is None or self.prm_max_tokens >= 1,
            "prm_step_tag": self.prm_step_tag is None or bool(self.prm_step_tag),
            "prm_endpoint": self.prm_endpoint is None or _is_http_url(self.prm_endpoint),
            "prm_timeout_s": 0 < self.prm_timeout_s <= MAX_PRM_TIMEOUT_S,
            "prm_retries": 0 <= self.prm_retries <= MAX_PRM_RETRIES,
            "prm_backoff_s": 0 <= self.prm_backoff_s <= MAX_PRM_BACKOFF_S,
            "step_separator": bool(self.step_separator),
            "softmin_temperature": self.softmin_temperature > 0,
            "outcome_weight": 0.0 <= self.outcome_weight <= 1.0,
            "clip": self.clip is None or self.clip > 0,
            "max_response_chars": self.max_response_chars >= 1,
            "answer_timeout_s": 0 < self.answer_timeout_s <= MAX_TIMEOUT_S,
        }
        check_option_values(self, "", choices=choices, ranges=ranges)
        problem = endpoint_problem(self.prm_format, self.prm_endpoint_api) if self.prm_backend == "endpoint" else None
        if problem is not None:
            raise ValueError(
                f"math_prm: prm_format={self.prm_format!r}, prm_endpoint_api={self.prm_endpoint_api!r}: {problem}"
            )

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> "MathPRMConfig":
        """The config from ``compute_score``'s keyword arguments; an unknown name raises ``ValueError``."""
        return options_from_kwargs(cls, kwargs, "math_prm")

    def scorer(self):
        """The process-wide :class:`bot_grpo_verl.rewards.prm.StepScorer` of these options."""
        return get_scorer(
            ScorerSettings(**{field.name: getattr(self, f"prm_{field.name}") for field in fields(ScorerSettings)})
        )


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def find_boxed(text: str) -> tuple[int, int] | None:
    r"""Character range ``[start, end)`` of the content of the last ``\boxed{...}`` whose braces balance.

    One pass over the braces with a stack of the open ones (linear in ``text``, whatever its nesting): a
    ``}`` closes the innermost open brace; of the closed ``\boxed{`` the one that starts last wins. None
    when no ``\boxed{`` closes.
    """
    open_braces: list[int | None] = []  # content start of each open \boxed{, None for a plain {
    last = None
    for match in BRACES.finditer(text):
        if match.group() != "}":
            open_braces.append(match.end() if len(match.group()) > 1 else None)
        elif open_braces:
            start = open_braces.pop()
            if start is not None and (last is None or start > last[0]):
                last = (start, match.start())
    return last


def find_final_answer(text: str) -> tuple[int, int] | None:
    r"""Character range ``[start, end)`` of the final answer in ``text``, or None.

    The content of the last ``\boxed{...}`` whose braces balance (:func:`find_boxed`); without one, the
    last number (``-12``, ``1,000``, ``3.5``; a fraction or expression must be boxed). Linear in ``text``.
    """
    boxed = find_boxed(text)
    if boxed is not None:
        return boxed
    last = None
    for last in NUMBER.finditer(text):  # noqa: B007 - the loop keeps the last match
        pass
    return last.span() if last else None


def step_texts(text: str, ranges: list[tuple[int, int]], separator: str) -> list[str]:
    """The text the PRM sees for each step range: without its trailing separator run and outer whitespace.

    The trailing run is matched as a leading run of the reversed separator in the reversed step (one
    regex pass, linear however long the run).
    """
    trailing = re.compile(f"(?:{re.escape(separator[::-1])})*")
    texts = []
    for start, end in ranges:
        step = text[start:end]
        texts.append(step[: len(step) - trailing.match(step[::-1]).end()].strip())
    return texts


def with_span(spans: list[Span], start: int, end: int, value: float) -> list[Span]:
    """``spans`` (disjoint) with ``[start, end)`` cut out of them and given ``value``; sorted by start."""
    result = [(start, end, value)]
    for span_start, span_end, span_value in spans:
        if span_end <= start or span_start >= end:
            result.append((span_start, span_end, span_value))
            continue
        if span_start < start:
            result.append((span_start, start, span_value))
        if span_end > end:
            result.append((end, span_end, span_value))
    return sorted(result)


@dataclass(frozen=True)
class ScoredSteps:
    """The steps of a response and what the PRM made of them.

    Attributes:
        ranges: the ``[start, end)`` character range of every step
            (:func:`bot_grpo_verl.reward.token_rewards.split_steps`).
        probabilities: ``p_k``, P(correct) of the leading steps that fit the PRM's input (``prm_max_tokens``).
        values: ``a_k``, their values after :func:`bot_grpo_verl.rewards.prm_values.aggregate`, one per probability.
    """

    ranges: list[tuple[int, int]]
    probabilities: list[float]
    values: list[float]


NO_STEPS = ScoredSteps([], [], [])


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl reward function: PRM step values and the math-verify outcome as token-level spans.

    Args:
        data_source: logged only (any value).
        solution_str: the decoded response (str).
        ground_truth: the reference answer (str or number, numpy scalars included); None, NaN or blank: see
            ``missing_ground_truth``; one math-verify cannot parse or that exceeds the answer-check
            limits raises ``ValueError`` whatever the response.
        extra_info: verl's per-sample dict; ``extra_info[question_key]`` is shown to the PRM.
        **kwargs: :class:`MathPRMConfig` options (verl's ``reward_kwargs``).

    Returns:
        ``{"score", "spans", ...}`` per :mod:`bot_grpo_verl.reward.token_rewards`, always with the same extra
        keys (verl gathers them per batch): ``acc`` (1 if the answer is correct), ``answer_found``,
        ``answer_parsed``, ``answer_refused`` (1 if the answer exceeded a limit or ``answer_timeout_s``:
        scored as wrong, see :mod:`bot_grpo_verl.rewards.answer_check`), ``steps``, ``steps_scored``,
        ``truncated`` (1 if characters or steps were left unscored), ``empty_response`` (1 for an empty
        or whitespace-only response: no PRM call, score ``g(0)``, one span of ``g(0)`` over the
        whitespace), ``prm_mean``/``prm_min`` (of P(correct); 0 when no step was scored).
    """
    config = MathPRMConfig.from_kwargs(kwargs)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    truth = reference_answer(ground_truth, data_source, config.missing_ground_truth)
    text = solution_str[: config.max_response_chars]
    answer = find_final_answer(text)
    verdict = answer_verdict(truth, text, answer, config.answer_timeout_s)
    if not solution_str.strip():
        return empty_response_result(solution_str, answer, verdict, config)
    steps = score_steps(text, question_text(extra_info, config.question_key), config)
    if verdict is None:
        rewards = process_only_rewards(steps, config)
    else:
        rewards = outcome_rewards(steps, answer, verdict.correct, config)
    truncated = len(text) < len(solution_str) or len(steps.values) < len(steps.ranges)
    return {**rewards, **metrics(answer, verdict, steps, truncated=truncated, empty=False)}


def reference_answer(ground_truth, data_source, missing_ground_truth: str) -> str | None:
    """The ground truth as text (:func:`bot_grpo_verl.rewards.answer_check.ground_truth_text`), None when it is missing.

    Raises:
        ValueError: it is missing and ``missing_ground_truth`` is ``"error"``.
    """
    truth = ground_truth_text(ground_truth)
    if truth is None and missing_ground_truth == "error":
        raise ValueError(
            f"ground_truth is missing ({ground_truth!r}, data_source {str(data_source)!r}); "
            "set reward_kwargs.missing_ground_truth=process_only to score such samples by the PRM alone"
        )
    return truth


def answer_verdict(truth: str | None, text: str, answer: tuple[int, int] | None, timeout_s: float) -> Verdict | None:
    """math-verify's verdict on ``text[answer[0]:answer[1]]`` (no answer when ``answer`` is None) against
    ``truth``; None without a ground truth. The ground truth is checked also without an answer, and before
    the PRM runs, so a bad one always raises."""
    if truth is None:
        return None
    return check_answer(truth, text[answer[0] : answer[1]] if answer else None, timeout_s)


def question_text(extra_info, question_key: str) -> str:
    """The problem text shown to the PRM: ``extra_info[question_key]`` when it is a string, else ``""``."""
    question = extra_info.get(question_key) if isinstance(extra_info, Mapping) else None
    return question if isinstance(question, str) else ""


def score_steps(text: str, question: str, config: MathPRMConfig) -> ScoredSteps:
    """The steps of ``text`` (split at ``step_separator``) scored by the PRM of ``config`` and aggregated."""
    ranges = split_steps(text, config.step_separator)
    probabilities = config.scorer().probabilities(question, step_texts(text, ranges, config.step_separator))
    values = aggregate(to_values(probabilities, config.symmetric), config.aggregation, config.softmin_temperature)
    return ScoredSteps(ranges, probabilities, values)


def outcome_value(correct: bool, symmetric: bool) -> float:
    """``o``: ``g(1)`` for a correct answer, ``g(0)`` otherwise."""
    return to_values([1.0 if correct else 0.0], symmetric)[0]


def outcome_rewards(steps: ScoredSteps, answer: tuple[int, int] | None, correct: bool, config: MathPRMConfig) -> dict:
    """``score`` and ``spans`` with a ground truth: step k's characters carry ``(1 - lambda) a_k + lambda o``,
    the final answer's characters ``o``, and ``score = o`` (clipped)."""
    outcome = outcome_value(correct, config.symmetric)
    spans = step_spans(steps.ranges, mix_outcome(steps.values, outcome, config.outcome_weight), config.clip)
    if answer and answer[1] > answer[0]:
        spans = with_span(spans, answer[0], answer[1], clip_value(outcome, config.clip))
    return {"score": clip_value(outcome, config.clip), "spans": spans}


def process_only_rewards(steps: ScoredSteps, config: MathPRMConfig) -> dict:
    """``score`` and ``spans`` without a ground truth: step k's characters carry ``a_k`` and ``score = min(a)``
    (PURE's min-form return; ``g(0)`` when no step is scored), clipped."""
    score = min(steps.values, default=outcome_value(False, config.symmetric))
    return {"score": clip_value(score, config.clip), "spans": step_spans(steps.ranges, steps.values, config.clip)}


def empty_response_result(
    response: str, answer: tuple[int, int] | None, verdict: Verdict | None, config: MathPRMConfig
) -> dict:
    """The result of an empty or whitespace-only response: no PRM call, ``score = g(0)`` and one span of
    ``g(0)`` over the whitespace."""
    low = clip_value(outcome_value(False, config.symmetric), config.clip)
    spans = [(0, len(response), low)] if response else []
    return {"score": low, "spans": spans, **metrics(answer, verdict, NO_STEPS, truncated=False, empty=True)}


def step_spans(ranges: list[tuple[int, int]], values: list[float], clip: float | None) -> list[Span]:
    """The leading ``len(values)`` steps' ranges, each with its value clipped to ``[-clip, clip]``."""
    return [
        (start, end, clip_value(value, clip)) for (start, end), value in zip(ranges[: len(values)], values, strict=True)
    ]


def metrics(
    answer: tuple[int, int] | None, verdict: Verdict | None, steps: ScoredSteps, truncated: bool, empty: bool
) -> dict[str, float]:
    """The extra keys of the result (see :func:`compute_score`), the same set for every response."""
    judged = (verdict.correct, verdict.parsed, verdict.refused) if verdict is not None else (False, False, False)
    correct, parsed, refused = judged
    probabilities = steps.probabilities
    return {
        "acc": float(correct),
        "answer_found": float(answer is not None),
        "answer_parsed": float(parsed),
        "answer_refused": float(refused),
        "steps": float(len(steps.ranges)),
        "steps_scored": float(len(steps.values)),
        "truncated": float(truncated),
        "empty_response": float(empty),
        "prm_mean": sum(probabilities) / len(probabilities) if probabilities else 0.0,
        "prm_min": min(probabilities, default=0.0),
    }
