"""Speed of the dense reward path, measured side by side with what plain GRPO pays.

1. Alignment: :func:`token_char_ranges` (one pass over the response's bytes, which also gives the
   decoded text) against one plain ``tokenizer.decode`` of the same ids, on responses of
   ``--align-tokens`` tokens, for Qwen3's tokenizer (byte-level BPE, 151k vocabulary, from npm) and a
   SentencePiece-style byte-fallback tokenizer trained here; on text and on a run of ids that never
   complete a character; incremental decoding (the reference definition) for comparison.
2. verl's real ``RewardLoopWorker`` through ``naive`` and through ``bot_token``, the same step-reward
   function (spans), identical batches of ``--batch`` responses of up to ``--tokens`` tokens: wall and
   CPU time per batch in alternating rounds and their ratio; then, sample by sample, where the time
   goes (decode or alignment, reward function, token values and logs, packing into ``rm_scores``).
3. A ``TokenRewardScore`` of 16k tokens (it crosses Ray): memory and pickled size.

Medians of alternating rounds. The machine is shared with other work, so CPU time (this process's,
all threads) is reported beside wall time, with the load average before and after.

    python -m benchmarks.reward_path_speed --out benchmarks/results/reward_path_speed.json
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import pickle
import statistics
import tempfile
import textwrap
import time
import tracemalloc
from pathlib import Path

import cloudpickle
import numpy as np
import torch
from hydra import compose, initialize_config_module
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from benchmarks.estimator_speed import load_average, machine
from benchmarks.local_tokenizers import byte_token_ids, qwen3, sentencepiece_style
from bot_grpo_verl.reward.alignment import incremental_char_ranges, token_char_ranges
from bot_grpo_verl.reward.manager import (
    BoTTokenRewardManager,
    TokenRewardConfig,
    TokenRewardScore,
    aligned_token_rewards,
)

ROOT = Path(__file__).resolve().parents[1]


REWARD_FUNCTION = textwrap.dedent(
    """
    from bot_grpo_verl.reward.token_rewards import split_steps

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        steps = split_steps(solution_str)
        spans = [(start, end, -1.0 if "raise" in solution_str[start:end] else 1.0) for start, end in steps]
        return {"score": float(ground_truth in solution_str), "spans": spans}
    """
)
UNICODE = "\n\nnaïve 漢字 数学 🧪 👩\u200d👩\u200d👧 e\u0301 שלום مرحبا ≠ ∑ 🚀\r\n"


def corpus() -> str:
    """The project's own sources and README, with multi-byte text every few hundred characters."""
    files = sorted(glob.glob(str(ROOT / "bot_grpo_verl" / "*.py"))) + sorted(
        glob.glob(str(ROOT / "bot_grpo_verl" / "rewards" / "*.py"))
    )
    text = "".join(Path(name).read_text() for name in [*files, str(ROOT / "README.md")])
    return UNICODE.join(text[start : start + 600] for start in range(0, len(text), 600))


def timed_rounds(functions: dict, rounds: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds of each function, the functions run in alternating order each round."""
    wall, cpu = {name: [] for name in functions}, {name: [] for name in functions}
    names = list(functions)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            started, started_cpu = time.perf_counter(), time.process_time()
            functions[name]()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - started_cpu)
    return {name: {"wall_s": statistics.median(wall[name]), "cpu_s": statistics.median(cpu[name])} for name in names}


# ------------------------------------------------------------------------------------------------ 1. alignment


def alignment_against_decode(tokenizers: dict, length: int, rounds: int) -> list[dict]:
    rows = []
    for family, tokenizer in tokenizers.items():
        text = tokenizer.encode(corpus(), add_special_tokens=False)[:length]
        never_complete = byte_token_ids(tokenizer, b"\x80" * length)  # lone continuation bytes
        token_char_ranges(tokenizer, text)  # the tokenizer's byte table, built once
        # Incremental decoding grows quadratically over ids that never complete a character (tens of
        # seconds at 8k): it is timed on a quarter of those.
        for kind, ids, reference_tokens in (
            ("text", text, length),
            ("lone continuation bytes", never_complete, length // 4),
        ):
            rows.append(alignment_row(tokenizer, ids, rounds, reference_tokens) | {"tokenizer": family, "input": kind})
            row = rows[-1]
            print(
                f"alignment {family:36s} {kind:24s} decode {row['decode_ms']:6.2f} ms, alignment "
                f"{row['alignment_ms']:6.2f} ms ({row['alignment_over_decode']:.2f}x wall, "
                f"{row['alignment_over_decode_cpu']:.2f}x cpu); "
                f"incremental decoding of {row['reference_tokens']} tokens {row['reference_over_decode']:.0f}x"
            )
    return rows


def alignment_row(tokenizer, ids: list[int], rounds: int, reference_tokens: int) -> dict:
    """One decode against the alignment (which gives the same text), alternating; the reference against one
    decode of the first ``reference_tokens`` ids, in three rounds."""
    times = timed_rounds(
        {
            "decode": lambda: tokenizer.decode(ids, skip_special_tokens=True),
            "alignment": lambda: token_char_ranges(tokenizer, ids),
        },
        rounds,
    )
    head = ids[:reference_tokens]
    reference = timed_rounds(
        {
            "decode": lambda: tokenizer.decode(head, skip_special_tokens=True),
            "reference": lambda: incremental_char_ranges(tokenizer, head),
        },
        3,
    )
    return {
        "tokens": len(ids),
        "decode_ms": 1e3 * times["decode"]["wall_s"],
        "alignment_ms": 1e3 * times["alignment"]["wall_s"],
        "alignment_over_decode": times["alignment"]["wall_s"] / times["decode"]["wall_s"],
        "alignment_over_decode_cpu": times["alignment"]["cpu_s"] / times["decode"]["cpu_s"],
        "reference_tokens": len(head),
        "reference_ms": 1e3 * reference["reference"]["wall_s"],
        "reference_over_decode": reference["reference"]["wall_s"] / reference["decode"]["wall_s"],
    }


# ------------------------------------------------------------------------------------------------ 2. verl's worker


def verl_config(folder: Path, manager: str):
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose(
            "ppo_trainer",
            overrides=[
                "+preset=bot_grpo",
                f"actor_rollout_ref.model.path={folder / 'tokenizer'}",
                f"reward.custom_reward_function.path={folder / 'reward.py'}",
                "reward.custom_reward_function.name=compute_score",
                f"reward.reward_manager.name={manager}",
            ],
        )


def batch_of_responses(tokenizer, batch: int, tokens: int, seed: int = 0) -> DataProto:
    """What verl's agent loop hands the reward workers: prompts, right-padded responses ending in EOS,
    their attention mask, and the non-tensor fields; response lengths uniform in [3/4, 1] x tokens."""
    stream = tokenizer.encode(corpus(), add_special_tokens=False)
    lengths = np.random.default_rng(seed).integers(3 * tokens // 4, tokens + 1, batch)
    responses = torch.full((batch, tokens), tokenizer.pad_token_id)
    for row, length in enumerate(lengths):
        start = (row * 977) % (len(stream) - tokens)
        responses[row, : length - 1] = torch.tensor(stream[start : start + length - 1])
        responses[row, length - 1] = tokenizer.eos_token_id
    prompts = torch.tensor(tokenizer.encode("Explain this code:", add_special_tokens=False)).repeat(batch, 1)
    response_mask = (torch.arange(tokens)[None] < torch.tensor(lengths)[:, None]).long()
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "attention_mask": torch.cat([torch.ones_like(prompts), response_mask], dim=1),
        "input_ids": torch.cat([prompts, responses], dim=1),
        "position_ids": torch.arange(prompts.shape[1] + tokens).repeat(batch, 1),
    }
    non_tensors = {
        "data_source": np.array(["code"] * batch, dtype=object),
        "reward_model": np.array([{"ground_truth": "def ", "style": "rule"}] * batch, dtype=object),
        "extra_info": np.array([{"index": row} for row in range(batch)], dtype=object),
        "uid": np.array([f"prompt-{row // 8}" for row in range(batch)], dtype=object),
        "__num_turns__": np.array([2] * batch),
        "tool_extra_fields": np.array([{} for _ in range(batch)], dtype=object),
    }
    return DataProto(batch=TensorDict(tensors, batch_size=batch), non_tensor_batch=non_tensors)


def worker_side_by_side(tokenizer, batch: int, tokens: int, rounds: int) -> dict:
    """Both managers in verl's RewardLoopWorker on one event loop, whole batches in alternating rounds."""
    data = batch_of_responses(tokenizer, batch, tokens)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        tokenizer.save_pretrained(folder / "tokenizer")
        (folder / "reward.py").write_text(REWARD_FUNCTION)

        async def run() -> dict:
            workers = {manager: RewardLoopWorker(verl_config(folder, manager)) for manager in ("naive", "bot_token")}
            outputs = {manager: await worker.compute_score_batch(data) for manager, worker in workers.items()}
            wall, cpu = {manager: [] for manager in workers}, {manager: [] for manager in workers}
            for round_ in range(rounds):
                for manager in list(workers)[:: 1 if round_ % 2 == 0 else -1]:
                    started, started_cpu = time.perf_counter(), time.process_time()
                    await workers[manager].compute_score_batch(data)
                    wall[manager].append(time.perf_counter() - started)
                    cpu[manager].append(time.process_time() - started_cpu)
            return {"outputs": outputs, "wall": wall, "cpu": cpu, "tokenizer": workers["bot_token"].input_tokenizer}

        measured = asyncio.run(run())
    wall = {manager: statistics.median(values) for manager, values in measured["wall"].items()}
    cpu = {manager: statistics.median(values) for manager, values in measured["cpu"].items()}
    packing = packing_times(data, measured["outputs"], rounds)
    result = {
        "batch": batch,
        "max_tokens": tokens,
        "mean_tokens": float(data.batch["attention_mask"][:, -tokens:].sum(dim=1).float().mean()),
        "rounds": rounds,
        "wall_s": wall,
        "cpu_s": cpu,
        "wall_rounds_s": measured["wall"],
        "ratio_wall": wall["bot_token"] / wall["naive"],
        "ratio_cpu": cpu["bot_token"] / cpu["naive"],
        "packing_cpu_s": packing,
        "ratio_cpu_with_colocated_packing": (cpu["bot_token"] + packing["bot_token"])
        / (cpu["naive"] + packing["naive"]),
        "where_time_goes_ms_per_sample": where_time_goes(measured["tokenizer"], data, rounds),
    }
    print(
        f"RewardLoopWorker, {batch} x up to {tokens} tokens: naive {wall['naive']:.3f} s (cpu {cpu['naive']:.3f}), "
        f"bot_token {wall['bot_token']:.3f} s (cpu {cpu['bot_token']:.3f}): bot_token / naive = "
        f"{result['ratio_wall']:.2f} wall, {result['ratio_cpu']:.2f} cpu "
        f"({result['ratio_cpu_with_colocated_packing']:.2f} with packing into rm_scores)"
    )
    return result


def packing_times(data: DataProto, outputs: dict, rounds: int) -> dict[str, float]:
    """Median seconds to write a batch's scores into rm_scores: verl's last-token write against the dense one
    (colocated path), and the streaming path's per-sample AgentLoopOutput.as_dict, which the plugin wraps."""
    scores = {manager: [output["reward_score"] for output in outputs[manager]] for manager in outputs}
    lengths = data.batch["attention_mask"][:, -data.batch["responses"].shape[1] :].sum(dim=1).tolist()
    samples = {
        manager: [
            AgentLoopOutput(
                prompt_ids=[1], response_ids=[0] * length, response_mask=[1] * length, metrics=AgentLoopMetrics()
            )
            for length in lengths
        ]
        for manager in outputs
    }
    for manager in outputs:
        for sample, score in zip(samples[manager], scores[manager], strict=True):
            sample.reward_score = score
    times = timed_rounds(
        {
            "naive": lambda: RewardManagerBase.assemble_rm_scores(data, scores["naive"]),
            "bot_token": lambda: BoTTokenRewardManager.assemble_rm_scores(data, scores["bot_token"]),
            "naive streaming": lambda: [sample.as_dict() for sample in samples["naive"]],
            "bot_token streaming": lambda: [sample.as_dict() for sample in samples["bot_token"]],
        },
        rounds,
    )
    return {name: value["cpu_s"] for name, value in times.items()}


def where_time_goes(tokenizer, data: DataProto, rounds: int) -> dict[str, dict[str, float]]:
    """CPU milliseconds per sample of each step, sample after sample (no threads), as each manager runs it."""
    namespace: dict = {}
    exec(REWARD_FUNCTION, namespace)
    reward = namespace["compute_score"]
    valid = data.batch["attention_mask"][:, -data.batch["responses"].shape[1] :].sum(dim=1).tolist()
    ids = [data.batch["responses"][row, :length] for row, length in enumerate(valid)]
    aligned = [token_char_ranges(tokenizer, sample) for sample in ids]
    results = [reward("code", text, "def ") for text, _ in aligned]
    options = TokenRewardConfig()
    dense = [
        aligned_token_rewards(result, *alignment, options) for result, alignment in zip(results, aligned, strict=True)
    ]
    steps = timed_rounds(
        {
            "decode": lambda: [tokenizer.decode(sample, skip_special_tokens=True) for sample in ids],
            "decoded text and alignment": lambda: [token_char_ranges(tokenizer, sample) for sample in ids],
            "reward function": lambda: [reward("code", text, "def ") for text, _ in aligned],
            "response ids as a list": lambda: [sample.tolist() for sample in ids],
            "token values and logs": lambda: [
                aligned_token_rewards(result, text, ranges, options)
                for result, (text, ranges) in zip(results, aligned, strict=True)
            ],
            "TokenRewardScore": lambda: [TokenRewardScore(info["score"], rewards) for rewards, info in dense],
        },
        rounds,
    )
    per_sample = {name: 1e3 * value["cpu_s"] / len(ids) for name, value in steps.items()}
    return {
        "naive": {name: per_sample[name] for name in ("decode", "reward function")},
        "bot_token": {
            **{name: per_sample[name] for name in ("decoded text and alignment", "reward function")},
            "response ids as a list": per_sample["response ids as a list"],
            "token values and logs": per_sample["token values and logs"] + per_sample["TokenRewardScore"],
        },
    }


# ------------------------------------------------------------------------------------------------ 3. sample size


def token_reward_score_size(tokens: int = 16384) -> dict:
    """Bytes of one TokenRewardScore of ``tokens`` rewards in memory (traced allocations) and pickled, with the
    tuple of Python floats it used to carry for comparison."""
    rewards = np.random.default_rng(0).normal(size=tokens)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    scores = [TokenRewardScore(1.0, rewards) for _ in range(20)]
    in_memory = (tracemalloc.get_traced_memory()[0] - before) / len(scores)
    as_tuple = [tuple(float(value) for value in rewards) for _ in range(5)]
    tuple_in_memory = (tracemalloc.get_traced_memory()[0] - before - in_memory * len(scores)) / len(as_tuple)
    tracemalloc.stop()
    return {
        "tokens": tokens,
        "memory_bytes": in_memory,
        "pickled_bytes": len(pickle.dumps(scores[0], protocol=pickle.HIGHEST_PROTOCOL)),
        "cloudpickled_bytes": len(cloudpickle.dumps(scores[0])),
        "as_tuple_of_floats_memory_bytes": tuple_in_memory,
        "as_tuple_of_floats_pickled_bytes": len(pickle.dumps((1.0, as_tuple[0]), protocol=pickle.HIGHEST_PROTOCOL)),
    }


# ------------------------------------------------------------------------------------------------ report


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    rows = report["alignment"]
    labels = [f"{row['tokenizer'].split(' (')[0]}\n{row['input']}" for row in rows]
    positions = np.arange(len(rows))
    left.bar(positions - 0.2, [row["alignment_over_decode"] for row in rows], width=0.4, label="wall time")
    left.bar(positions + 0.2, [row["alignment_over_decode_cpu"] for row in rows], width=0.4, label="CPU time")
    left.axhline(3, color="tab:red", linestyle="--", label="goal: 3 decodes")
    left.axhline(1, color="grey", linewidth=0.8)
    left.set_xticks(range(len(rows)), labels, fontsize=7)
    left.set_ylabel("alignment time / one decode")
    left.set_title(f"alignment of {rows[0]['tokens']}-token responses (it gives the decoded text too)")
    for number, row in enumerate(rows):
        left.text(
            number,
            row["alignment_over_decode"],
            f"incremental: {row['reference_over_decode']:.0f}x\n({row['reference_tokens']} tokens)",
            ha="center",
            va="bottom",
            fontsize=7,
        )
    left.legend(fontsize=8)

    steps = report["worker"]["where_time_goes_ms_per_sample"]
    colors = {step: f"C{number}" for number, step in enumerate(dict.fromkeys([*steps["naive"], *steps["bot_token"]]))}
    for position, manager in enumerate(("naive", "bot_token")):
        bottom = 0.0
        for step, value in steps[manager].items():  # in the order the manager runs them
            labelled = manager == "naive" or step not in steps["naive"]
            right.bar(position, value, bottom=bottom, color=colors[step], label=step if labelled else None)
            bottom += value
    right.set_xticks([0, 1], ["naive", "bot_token"])
    right.set_ylabel("CPU ms per sample")
    worker = report["worker"]
    right.set_title(
        f"verl RewardLoopWorker, {worker['batch']} responses x ~{worker['mean_tokens']:.0f} tokens\n"
        f"bot_token / naive = {worker['ratio_cpu']:.2f} (CPU), {worker['ratio_wall']:.2f} (wall)",
        fontsize=9,
    )
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/reward_path_speed.json"))
    parser.add_argument("--align-tokens", type=int, default=8192, help="response length of the alignment timing")
    parser.add_argument("--batch", type=int, default=256, help="responses per batch through the reward worker")
    parser.add_argument("--tokens", type=int, default=4096, help="longest response of the batch (the shortest: 3/4)")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds through the reward worker")
    parser.add_argument("--align-rounds", type=int, default=31, help="alternating rounds of decode and alignment")
    args = parser.parse_args()

    load_before = load_average()
    qwen = qwen3()
    tokenizers = {
        "Qwen3 (byte-level BPE)": qwen,
        "SentencePiece style (byte fallback)": sentencepiece_style(8000, tuple(corpus().split("\n\n"))),
    }
    report = {
        "machine": machine(),
        "load_average_before": load_before,
        "alignment": alignment_against_decode(tokenizers, args.align_tokens, args.align_rounds),
        "worker": worker_side_by_side(qwen, args.batch, args.tokens, args.rounds),
        "token_reward_score": token_reward_score_size(),
        "load_average_after": load_average(),
    }
    size = report["token_reward_score"]
    kib = {key: value / 1024 for key, value in size.items()}
    print(
        f"TokenRewardScore of {size['tokens']} tokens: {kib['memory_bytes']:.0f} KiB in memory, "
        f"{kib['pickled_bytes']:.0f} KiB pickled (a tuple of floats: {kib['as_tuple_of_floats_memory_bytes']:.0f} "
        f"KiB, {kib['as_tuple_of_floats_pickled_bytes']:.0f} KiB)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
