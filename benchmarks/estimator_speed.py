"""Speed of the bot_grpo estimator against verl's grpo and grpo_vectorized, measured side by side.

All candidates run in one process on the same batch, in alternating order, and the medians are
compared (dense rewards against verl's grpo on the same dense batch); a plain clone of the (B, T)
reward tensor is timed in the same rounds so that our cost can be read in memory passes. Writes the
figures (JSON) and a plot (PNG) of the ratios.

    python benchmarks/estimator_speed.py --out benchmarks/results/estimator_speed.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_grpo_vectorized_outcome_advantage

from bot_grpo_verl.estimator import compute_bot_grpo_advantage

SIZES = [(1024, 4096), (256, 1024), (1024, 1024), (4096, 1024), (512, 8192)]


def make_batch(batch: int, length: int, group_size: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 8, length + 1, (batch,), generator=generator)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()  # int64, as verl's agent loop builds it
    outcome = torch.zeros(batch, length)
    outcome[torch.arange(batch), lengths - 1] = torch.randint(0, 2, (batch,), generator=generator).float()
    dense = torch.randn(batch, length, generator=generator) * mask
    index = np.array([f"uid-{i // group_size}" for i in range(batch)], dtype=object)
    return outcome, dense, mask, index


def candidates(outcome, dense, mask, index):
    return {
        "bot_grpo (outcome rewards)": lambda: compute_bot_grpo_advantage(outcome, mask, index),
        "bot_grpo (dense rewards)": lambda: compute_bot_grpo_advantage(dense, mask, index),
        "verl grpo": lambda: compute_grpo_outcome_advantage(outcome, mask, index),
        "verl grpo (dense rewards)": lambda: compute_grpo_outcome_advantage(dense, mask, index),
        "verl grpo_vectorized": lambda: compute_grpo_vectorized_outcome_advantage(outcome, mask, index),
        "copy of B x T": lambda: dense.clone(),
    }


def measure(functions: dict, rounds: int) -> dict[str, float]:
    for function in functions.values():  # warm-up
        function()
    times = {name: [] for name in functions}
    names = list(functions)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            start = time.perf_counter()
            functions[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/estimator_speed.json"))
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args()

    results = []
    for number, (batch, length) in enumerate(SIZES, 1):
        print(f"[{number}/{len(SIZES)}] B={batch} T={length} ...", end=" ", flush=True)
        medians = measure(candidates(*make_batch(batch, length, args.group_size)), args.rounds)
        grpo, ours = medians["verl grpo"], medians["bot_grpo (outcome rewards)"]
        row = {
            "batch": batch,
            "response_length": length,
            "group_size": args.group_size,
            "median_seconds": medians,
            "ratio_ours_outcome_to_grpo": ours / grpo,
            "ratio_ours_dense_to_grpo": medians["bot_grpo (dense rewards)"] / medians["verl grpo (dense rewards)"],
            "ratio_ours_outcome_to_grpo_vectorized": ours / medians["verl grpo_vectorized"],
            "ours_dense_in_copies": medians["bot_grpo (dense rewards)"] / medians["copy of B x T"],
        }
        results.append(row)
        print(
            f"ours/grpo {row['ratio_ours_outcome_to_grpo']:.2f} (dense {row['ratio_ours_dense_to_grpo']:.2f}), "
            f"ours/grpo_vectorized {row['ratio_ours_outcome_to_grpo_vectorized']:.2f}, "
            f"dense = {row['ours_dense_in_copies']:.1f} copies"
        )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": {
            "cpu_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "rounds": args.rounds,
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2))
    plot(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['batch']}x{r['response_length']}" for r in results]
    series = {
        "bot_grpo outcome / verl grpo": [r["ratio_ours_outcome_to_grpo"] for r in results],
        "bot_grpo dense / verl grpo": [r["ratio_ours_dense_to_grpo"] for r in results],
        "bot_grpo outcome / grpo_vectorized": [r["ratio_ours_outcome_to_grpo_vectorized"] for r in results],
    }
    figure, axis = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(series)
    for offset, (name, values) in enumerate(series.items()):
        axis.bar(np.arange(len(labels)) + offset * width, values, width, label=name)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(np.arange(len(labels)) + width, labels)
    axis.set_xlabel("batch x response length")
    axis.set_ylabel("time ratio (lower is faster)")
    axis.set_title("bot_grpo estimator time relative to verl's estimators (medians, same run)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
