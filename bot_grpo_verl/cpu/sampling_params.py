"""The sampling parameters of one ``hf_cpu`` request, resolved from the dict verl's agent loop sends.

verl's agent loop calls a rollout server with ``generate(prompt_ids, sampling_params, request_id)`` where
``sampling_params`` is a plain dict (verl.experimental.agent_loop); :func:`parse_sampling_params` turns it
into :class:`SamplingParams` and refuses what the CPU rollout does not implement, and
:func:`resolve_max_tokens` applies the max-token rules of verl's vLLM server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUPPORTED_SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "top_k", "repetition_penalty", "logprobs", "max_tokens", "max_new_tokens"}
    | {"ignore_eos", "stop_token_ids"}
)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling of one request, resolved from the dict verl's agent loop sends.

    Parameters:
        max_tokens (`int`): tokens to generate at most (>= 1), see :func:`resolve_max_tokens`.
        temperature (`float`, defaults to `1.0`): logits are divided by it; ``0`` means greedy.
        top_p (`float`, defaults to `1.0`): nucleus sampling mass in (0, 1]; ``1`` disables it.
        top_k (`int`, defaults to `-1`): sample among the k most likely tokens; ``-1`` or ``0`` disables it.
        logprobs (`bool`, defaults to `False`): return the log-prob of every generated token.
        ignore_eos (`bool`, defaults to `False`): do not stop at the EOS tokens (verl's ``rollout.ignore_eos``).
        stop_token_ids (`tuple[int, ...]`, defaults to `()`): extra token ids that end the generation.
    """

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    logprobs: bool = False
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def resolve_max_tokens(
    prompt_len: int, sampling_params: dict[str, Any], *, max_model_len: int, prompt_length: int, response_length: int
) -> int:
    """The number of tokens a request may generate, by the rules of verl's ``vLLMHttpServer.generate``.

    ``max_tokens`` (or SGLang-style ``max_new_tokens``) from the request, else
    ``min(response_length, prompt_length + response_length - prompt_len)``; then clamped to
    ``[1, max_model_len - prompt_len]``. A prompt that leaves no room in ``max_model_len`` is an error.
    """
    room = max_model_len - prompt_len
    if room < 1:
        raise ValueError(
            f"Prompt length ({prompt_len}) leaves no room to generate within the model's maximum context "
            f"length ({max_model_len}); need at least 1 token of headroom."
        )
    if "max_tokens" in sampling_params:
        wanted = sampling_params["max_tokens"]
    elif "max_new_tokens" in sampling_params:
        wanted = sampling_params["max_new_tokens"]
    else:
        wanted = min(response_length, prompt_length + response_length - prompt_len)
    return max(1, min(int(wanted), room))


def parse_sampling_params(sampling_params: dict[str, Any], max_tokens: int, *, ignore_eos: bool) -> SamplingParams:
    """Turn the agent loop's sampling dict into :class:`SamplingParams`; unknown or unsupported keys are errors."""
    unknown = set(sampling_params) - SUPPORTED_SAMPLING_KEYS
    if unknown:
        raise ValueError(f"hf_cpu rollout: unsupported sampling params {sorted(unknown)}")
    if float(sampling_params.get("repetition_penalty", 1.0)) != 1.0:
        raise ValueError("hf_cpu rollout: repetition_penalty other than 1.0 is not supported")
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=float(sampling_params.get("temperature", 1.0)),
        top_p=float(sampling_params.get("top_p", 1.0)),
        top_k=int(sampling_params.get("top_k", -1)),
        logprobs=bool(sampling_params.get("logprobs", False)),
        ignore_eos=bool(sampling_params.get("ignore_eos", ignore_eos)),
        stop_token_ids=tuple(int(t) for t in sampling_params.get("stop_token_ids") or ()),
    )
