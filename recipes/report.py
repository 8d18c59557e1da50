"""The GPU recipes' runs as the CPU protocol's report: ``python -m recipes.report --task react --model qwen2.5-3b``.

Reads each run that :mod:`recipes.launch` kept under ``<runs-dir>/<task>/<model>/<algorithm>/seed<seed>/``
(verl's ``metrics.jsonl``, with the parts an earlier start of the run left as ``metrics.<n>.jsonl``, and the
validation samples ``validation/<step>.jsonl``), writes one run summary per run in the protocol's format
(:mod:`benchmarks.reporting.runs`: training curves, and per validation step the ``[n, c]`` samples and successes of
every test problem, a sample succeeding when its ``acc``, else its ``score``, is above 0.5) into
``<out>/<task>/runs/``, then the protocol's final report (:func:`benchmarks.reporting.outputs.write_final`):
held-out Pass@k curves, each algorithm's change since step 0, differences against the baseline and against the
best same-information baseline with 95% bootstrap intervals over seeds and problems, the probability of
improvement, steps to the baseline's level; ``summary.md``, ``summary.json``, ``curves.png``, ``forest.png``.

Only runs that reached ``--steps`` (default: the task's training steps) count, cut there; the others are named
and left out. Problems are the task's test parquet's rows (``--data-dir``), matched to samples by their prompt text.

    python -m recipes.report --task react --model qwen2.5-3b [--runs-dir runs/recipes] [--steps 200] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

from benchmarks.matrix import TRAIN_METRICS
from benchmarks.reporting.comparison import SAME_INFORMATION
from benchmarks.reporting.outputs import write_final
from benchmarks.reporting.runs import read_runs, run_file_name
from benchmarks.reporting.sweep import single_lrs
from demo.held_out import held_out_counts
from demo.training import read_metrics
from recipes.algorithms import METRICS_FILE, MODELS, REPO, RUNS, TASKS, VALIDATION_DIR

SPLIT = "test"  # the recipes validate on the task's test parquet
METRICS_PART = re.compile(r"metrics\.(\d+)\.jsonl")


def metric_rows(folder: Path) -> list[dict]:
    """One row per logged step, ``{"step", **metrics}``, steps ascending, from the run's metrics files in the order
    they were written (``metrics.1.jsonl``, ``metrics.2.jsonl``, ..., ``metrics.jsonl``); a step logged again (a
    resumed run repeats the steps after its last checkpoint) takes the later values."""
    parts = sorted(
        (int(match[1]), path) for path in folder.glob("metrics.*.jsonl") if (match := METRICS_PART.fullmatch(path.name))
    )
    by_step: dict[int, dict] = {}
    for path in [*(path for _, path in parts), folder / METRICS_FILE]:
        for row in read_metrics(path):
            by_step.setdefault(int(row["step"]), {}).update(row)
    return [by_step[step] for step in sorted(by_step)]


def test_problems(data_dir: Path) -> dict[str, tuple[str, int]]:
    """``{prompt text: (SPLIT, row)}`` of the test parquet: the text of each row's last chat message (the request;
    a system prompt before it is shared by every row)."""
    frame = pd.read_parquet(data_dir / "test.parquet")
    problems = {}
    for row, prompt in enumerate(frame.prompt):
        text = prompt[-1]["content"]
        if text in problems:
            raise ValueError(f"{data_dir / 'test.parquet'}: rows {problems[text][1]} and {row} ask the same prompt")
        problems[text] = (SPLIT, row)
    return problems


def run_summary(folder: Path, task: str, algorithm: str, seed: int, steps: int, problems) -> dict | None:
    """The protocol's run summary of the run in ``folder`` cut at ``steps`` (its settings, training curves and
    held-out counts), or None when the run has not reached ``steps``."""
    rows = [row for row in metric_rows(folder) if row["step"] <= steps]
    if not rows or rows[-1]["step"] < steps:
        return None
    dumps = sorted(
        (path for path in (folder / VALIDATION_DIR).glob("*.jsonl") if path.stem.isdigit() and int(path.stem) <= steps),
        key=lambda path: int(path.stem),
    )
    return {
        "task": task,
        "cell": algorithm,
        "lr": None,  # each recipe's own (recipes/algorithms.py), the same for every algorithm of a task
        "seed": seed,
        "steps": len(rows),
        "prompts_per_step": TASKS[task].train_batch_size,
        "wall_seconds": None,
        "train": {key: [row.get(key) for row in rows] for key in TRAIN_METRICS if any(key in row for row in rows)},
        "held_out": {dump.stem: held_out_counts(dump, problems) for dump in dumps},
    }


def write_summaries(runs_dir: Path, task: str, model: str, steps: int, problems, out: Path) -> list[str]:
    """Write the summary of every run of ``task`` and ``model`` that reached ``steps`` into ``out/<task>/runs/``
    (replacing earlier ones); returns the runs left out, as ``<algorithm> seed<k> (reached step s)``."""
    destination = out / task / "runs"
    destination.mkdir(parents=True, exist_ok=True)
    for stale in destination.glob("*.json"):
        stale.unlink()
    left_out = []
    for folder in sorted((runs_dir / task / model).glob("*/seed*")):
        seed = re.fullmatch(r"seed(\d+)", folder.name)
        if seed is None or not folder.is_dir():
            continue
        algorithm = folder.parent.name
        summary = run_summary(folder, task, algorithm, int(seed[1]), steps, problems)
        if summary is None:
            reached = max((row["step"] for row in metric_rows(folder)), default=None)
            left_out.append(f"{algorithm} seed{seed[1]} (reached step {reached})")
            continue
        (destination / run_file_name(algorithm, None, int(seed[1]))).write_text(json.dumps(summary) + "\n")
    return left_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recipes.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--runs-dir", type=Path, default=RUNS, help="the launcher's --runs-dir (default runs/recipes)")
    parser.add_argument("--data-dir", type=Path, help="folder of the runs' test.parquet (default: the task's)")
    parser.add_argument("--steps", type=int, help="compare at this training step (default: the task's last)")
    parser.add_argument("--out", type=Path, help="report folder (default <runs-dir>/reports/<model>)")
    parser.add_argument("--baseline", default="grpo")
    parser.add_argument(
        "--same-information", default=",".join(SAME_INFORMATION), help="cells fed BoT-GRPO's token rewards"
    )
    parser.add_argument("--threshold", type=float, help="also count steps to this test Pass@1")
    parser.add_argument(
        "--ks", type=lambda text: tuple(int(k) for k in text.split(",")), help="default 1 and the samples per problem"
    )
    parser.add_argument("--boot", type=int, default=2000, help="bootstrap draws")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap random seed")
    args = parser.parse_args(argv)
    task = TASKS[args.task]
    out = args.out or args.runs_dir / "reports" / args.model
    try:
        problems = test_problems(args.data_dir or REPO / task.data_dir)
        steps = args.steps or task.total_training_steps
        left_out = write_summaries(args.runs_dir, args.task, args.model, steps, problems, out)
        for run in left_out:
            print(f"left out, not at step {steps}: {run}")
        runs = read_runs(out).get(args.task)
        if not runs:
            raise ValueError(f"no run of {args.task} with {args.model} reached step {steps} under {args.runs_dir}")
        write_final(
            args.task,
            runs,
            single_lrs(runs),
            out / args.task,
            baseline=args.baseline,
            same_information=tuple(args.same_information.split(",")),
            threshold=args.threshold,
            boot=args.boot,
            seed=args.seed,
            ks=args.ks or (1, task.val_rollouts_per_prompt),
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"PROBLEM: {error}", file=sys.stderr)
        return 1
    print((out / args.task / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
