"""Cost of the bot_grpo estimator beside verl's grpo and grpo_vectorized, measured side by side.

All candidates run in one process on the same batch, in alternating order, and the medians are
compared (dense rewards against verl's grpo on the same dense batch); a plain clone of the (B, T)
reward tensor is timed in the same rounds so that our cost can be read in memory passes. The whole
measurement is repeated in ``--processes`` fresh processes, because a process's allocator state
(whether large tensors are served from warm memory or page-faulted in afresh) changes every
candidate's time; the report gives each ratio's median and range over the processes, and the machine
it ran on (CPU model, cores, torch threads, load average before and after): CPU timings of
memory-bound code are properties of the machine and its load as much as of the code. Writes the figures
(JSON) and a plot (PNG) of the ratios.

    python benchmarks/estimator_speed.py --processes 5 --out benchmarks/results/estimator_speed.json
    python benchmarks/estimator_speed.py --threads 1 --out benchmarks/results/estimator_speed.threads1.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_grpo_vectorized_outcome_advantage

from bot_grpo_verl.estimators.bot_grpo import compute_bot_grpo_advantage

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


RATIOS = {
    "ratio_ours_outcome_to_grpo": "bot_grpo / verl grpo, outcome rewards",
    "ratio_ours_dense_to_grpo": "bot_grpo / verl grpo, dense rewards",
    "ratio_ours_outcome_to_grpo_vectorized": "bot_grpo / grpo_vectorized, outcome rewards",
    "ours_dense_in_copies": "bot_grpo dense, in B x T copies",
}


def measure_sizes(sizes: list[tuple[int, int]], rounds: int, group_size: int, label: str) -> list[dict]:
    """One process's measurement of every (batch, response length) of ``sizes``."""
    results = []
    for number, (batch, length) in enumerate(sizes, 1):
        print(f"{label}[{number}/{len(sizes)}] B={batch} T={length} ...", end=" ", flush=True)
        medians = measure(candidates(*make_batch(batch, length, group_size)), rounds)
        ours = medians["bot_grpo (outcome rewards)"]
        row = {
            "batch": batch,
            "response_length": length,
            "median_seconds": medians,
            "ratio_ours_outcome_to_grpo": ours / medians["verl grpo"],
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
    return results


def in_fresh_processes(
    sizes: list[tuple[int, int]], processes: int, rounds: int, group_size: int, threads: int | None
) -> list[list[dict]]:
    """``measure_sizes`` run once in each of ``processes`` new interpreters, one after the other."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(1, processes + 1):
            out = Path(folder) / f"run{number}.json"
            command = [sys.executable, __file__, "--processes", "1", "--rounds", str(rounds)]
            command += ["--sizes", *[f"{batch}x{length}" for batch, length in sizes]]
            command += [] if threads is None else ["--threads", str(threads)]
            command += ["--group-size", str(group_size), "--out", str(out), "--label", f"process {number}/{processes} "]
            subprocess.run(command, check=True)
            runs.append(json.loads(out.read_text())["processes"][0])
    return runs


def summarize(runs: list[list[dict]]) -> list[dict]:
    """Per size, each ratio's median, minimum and maximum over the processes, and each candidate's median
    time in milliseconds (median over the processes of the per-process medians)."""
    summary = []
    for rows in zip(*runs, strict=True):
        entry = {"batch": rows[0]["batch"], "response_length": rows[0]["response_length"]}
        for key in RATIOS:
            values = [row[key] for row in rows]
            entry[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        entry["median_ms"] = {
            name: 1000 * statistics.median(row["median_seconds"][name] for row in rows)
            for name in rows[0]["median_seconds"]
        }
        summary.append(entry)
    return summary


def machine() -> dict:
    """What the figures depend on besides the code: CPU model, cores, torch threads, versions."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu_model": model,
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (other processes competing for the cores), if known."""
    return [round(value, 2) for value in os.getloadavg()] if hasattr(os, "getloadavg") else None


def size(text: str) -> tuple[int, int]:
    batch, length = text.lower().split("x")
    return int(batch), int(length)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/estimator_speed.json"))
    parser.add_argument("--processes", type=int, default=5, help="fresh processes that each measure every size")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument(
        "--sizes", type=size, nargs="+", default=SIZES, help="batch x response length, e.g. 1024x4096 (default: all)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    load_before = load_average()
    if args.processes == 1:
        runs = [measure_sizes(args.sizes, args.rounds, args.group_size, args.label)]
    else:
        runs = in_fresh_processes(args.sizes, args.processes, args.rounds, args.group_size, args.threads)
    summary = summarize(runs)
    report = {
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "rounds": args.rounds,
        "group_size": args.group_size,
        "summary": summary,
        "processes": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    if not args.label:
        print(f"machine: {report['machine']}; load average before {load_before}, after {report['load_average_after']}")
        print("median (min-max) over processes:")
        for entry in summary:
            cells = "; ".join(
                f"{RATIOS[key]} {entry[key]['median']:.2f} ({entry[key]['min']:.2f}-{entry[key]['max']:.2f})"
                for key in RATIOS
            )
            times = ", ".join(f"{name} {ms:.1f}" for name, ms in entry["median_ms"].items())
            print(f"  B={entry['batch']} T={entry['response_length']}: {cells}\n    ms: {times}")
        plot(summary, report["machine"], args.out.with_suffix(".png"))
        print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


def plot(summary: list[dict], machine: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{entry['batch']}x{entry['response_length']}" for entry in summary]
    shown = [key for key in RATIOS if key != "ours_dense_in_copies"]
    figure, axis = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(shown)
    for offset, key in enumerate(shown):
        medians = np.array([entry[key]["median"] for entry in summary])
        spread = np.array([[m - e[key]["min"], e[key]["max"] - m] for m, e in zip(medians, summary, strict=True)]).T
        axis.bar(np.arange(len(labels)) + offset * width, medians, width, yerr=spread, capsize=3, label=RATIOS[key])
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(np.arange(len(labels)) + width, labels)
    axis.set_xlabel("batch x response length")
    axis.set_ylabel("time ratio (lower is faster)")
    axis.set_title(
        "bot_grpo estimator time relative to verl's (median and range over processes)\n"
        f"{machine['cpu_model']}, {machine['cpu_cores']} cores, {machine['torch_threads']} torch threads",
        fontsize="medium",
    )
    axis.set_ylim(0, 1.5 * max(entry[key]["max"] for entry in summary for key in shown))
    axis.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
