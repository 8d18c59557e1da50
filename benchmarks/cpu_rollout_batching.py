"""Throughput of the CPU rollout (``hf_cpu``) with concurrent requests batched vs one request at a time.

The same 64 requests (the demo's React prompts, through the demo's tokenizer and policy builder at its
default sizes, random weights; 64 new tokens each, EOS ignored so that every setting does the same work) go
through :class:`bot_grpo_verl.cpu.batching.RequestBatcher`, the batching queue behind the rollout server,
from 1, 4, 16 and 64 concurrent clients. One client is one request at a time; 64 clients is a whole GRPO
batch arriving together, as verl's agent loop sends it.

    python -m benchmarks.cpu_rollout_batching --out benchmarks/results/cpu_rollout_batching.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from pathlib import Path

import torch
from transformers import Qwen2ForCausalLM

from bot_grpo_verl.cpu.batching import RequestBatcher
from bot_grpo_verl.cpu.sampling_params import SamplingParams
from demo.settings import DemoSettings
from demo.tasks import REACT
from demo.tiny_model import build_model, prompt_ids, train_tokenizer

TARGET_SPEEDUP = 4.0


def demo_policy_and_prompts(count: int, seed: int) -> tuple[Qwen2ForCausalLM, list[list[int]]]:
    """The demo's React policy at its default sizes (random weights: throughput does not depend on them) and
    the token ids of ``count`` of its RL prompts, with the demo's tokenizer trainer run on the demo's corpus."""
    settings = DemoSettings()
    examples = REACT.generate(count + settings.sft_examples, seed)
    prompts, corpus = examples[:count], examples[count:]
    tokenizer = train_tokenizer([f"{e.prompt}\n{e.response}" for e in corpus], settings.vocab_size)
    model = build_model(tokenizer, seed, **settings.architecture).eval()
    return model, [prompt_ids(tokenizer, example.prompt) for example in prompts]


async def serve(batcher: RequestBatcher, prompts: list[list[int]], params: SamplingParams, clients: int) -> int:
    """Send every prompt from ``clients`` concurrent clients, each waiting for its answer before the next."""

    async def client(share: list[list[int]]) -> int:
        tokens = 0
        for prompt in share:
            tokens += len((await batcher.generate(prompt, params)).token_ids)
        return tokens

    return sum(await asyncio.gather(*(client(prompts[i::clients]) for i in range(clients))))


def measure(model, prompts, params, clients: int) -> dict:
    batcher = RequestBatcher(model, eos_token_ids=[0], pad_token_id=0, max_batch_size=256)
    started = time.perf_counter()
    tokens = asyncio.run(serve(batcher, prompts, params, clients))
    seconds = time.perf_counter() - started
    return {
        "concurrent_clients": clients,
        "seconds": round(seconds, 3),
        "generated_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1),
        "decode_steps": batcher.stats.steps,
        "mean_batch_size": round(batcher.stats.row_steps / batcher.stats.steps, 1),
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3.2))
    labels = [str(r["concurrent_clients"]) for r in results]
    axis.bar(labels, [r["tokens_per_s"] for r in results], color="#4c72b0")
    axis.set_xlabel("concurrent requests")
    axis.set_ylabel("generated tokens / s")
    axis.set_title("hf_cpu rollout: batching concurrent requests")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/cpu_rollout_batching.json"))
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model, prompts = demo_policy_and_prompts(args.requests, args.seed)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=1.0, ignore_eos=True)
    measure(model, prompts[:4], params, 4)  # warm-up
    results = [measure(model, prompts, params, clients) for clients in (1, 4, 16, args.requests)]
    speedup = results[-1]["tokens_per_s"] / results[0]["tokens_per_s"]
    report = {
        "benchmark": "cpu_rollout_batching",
        "model_parameters": sum(p.numel() for p in model.parameters()),
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "results": results,
        f"speedup_{args.requests}_vs_1": round(speedup, 2),
        "target_speedup": TARGET_SPEEDUP,
        "meets_target": speedup >= TARGET_SPEEDUP,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out.with_suffix(".png"))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
