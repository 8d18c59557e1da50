"""Print or run the verl command of one recipe: ``python -m recipes.launch --task T --model M --algorithm A``.

Examples (from the repository root)::

    python -m recipes.launch --task react --model qwen2.5-3b --algorithm bot_grpo --seed 0
    python -m recipes.launch --task aime --model smollm3-3b --algorithm dapo --seed 1 trainer.n_gpus_per_node=4
    python -m recipes.launch --task react --model qwen2.5-3b --algorithm all --dry-run   # every command, one a line

Without ``--seed`` the plan holds every seed of the task, and ``--algorithm all`` every row of the table. A plan of
more than one run is refused unless ``--dry-run`` prints it (one command per scheduler job) or ``--sequential``
runs it, one run after the other, stopping at the first failure. Trailing ``key=value`` arguments are appended to
the command as extra hydra overrides (cluster size, logger, paths); they apply to every algorithm alike when given
to ``recipes/<task>/run.sh``.

Each run keeps its record in ``<runs-dir>/<task>/<model>/<algorithm>/seed<seed>/`` (verl's ``metrics.jsonl`` and
validation samples; ``python -m recipes.report`` compares them). verl's file logger starts its file afresh, so
before a run resumes there the earlier ``metrics.jsonl`` is kept as ``metrics.<n>.jsonl``.
"""

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from recipes.algorithms import ALGORITHMS, METRICS_FILE, MODELS, RUNS, TASKS, overrides, run_folder


def command(
    task: str, model: str, algorithm: str, seed: int, data_dir: Path, extra: list[str], runs_dir: Path = RUNS
) -> list[str]:
    """The argv of one run: this interpreter, ``-m verl.trainer.main_ppo``, the recipe's overrides, ``extra``."""
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        *overrides(task, model, algorithm, seed, data_dir, runs_dir),
        *extra,
    ]


def keep_earlier_metrics(folder: Path) -> Path | None:
    """Make ``folder`` and move an earlier, non-empty ``metrics.jsonl`` there to ``metrics.<n>.jsonl`` (the next
    free ``n`` from 1): verl's file logger truncates its file when a run resumes. Returns where it went, if moved."""
    folder.mkdir(parents=True, exist_ok=True)
    metrics = folder / METRICS_FILE
    if not metrics.exists() or metrics.stat().st_size == 0:
        return None
    number = 1
    while (kept := folder / f"{metrics.stem}.{number}.jsonl").exists():
        number += 1
    return metrics.rename(kept)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m recipes.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--algorithm", required=True, choices=[*ALGORITHMS, "all"], help="a table row, or all of them")
    parser.add_argument("--seed", type=int, default=None, help="one seed (default: every seed of the task)")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="folder of train.parquet and test.parquet (default: the task's)"
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=RUNS,
        help="where runs keep metrics and validation samples (default runs/recipes)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--sequential", action="store_true", help="run a plan of several runs, one after the other")
    parser.add_argument("extra", nargs="*", help="extra hydra overrides, appended last")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    task = TASKS[args.task]
    seeds = task.seeds if args.seed is None else (args.seed,)
    data_dir = args.data_dir or Path(task.data_dir)
    algorithms = list(ALGORITHMS) if args.algorithm == "all" else [args.algorithm]
    plan = [(algorithm, seed) for algorithm in algorithms for seed in seeds]
    if len(plan) > 1 and not (args.dry_run or args.sequential):
        print(
            f"PROBLEM: this would start {len(plan)} runs one after the other ({len(algorithms)} algorithm(s) x "
            f"{len(seeds)} seed(s)), each hours of a GPU node (recipes/README.md). Start one with an algorithm and a "
            "seed (run.sh: ALGORITHM=bot_grpo SEED=0; launch: --algorithm bot_grpo --seed 0), print every command "
            "for a scheduler with DRY_RUN=1 (--dry-run), or run them all in turn with SEQUENTIAL=1 (--sequential)",
            file=sys.stderr,
        )
        return 2
    for algorithm, seed in plan:
        argv_run = command(args.task, args.model, algorithm, seed, data_dir, args.extra, args.runs_dir)
        print(shlex.join(argv_run), flush=True)
        if args.dry_run:
            continue
        kept = keep_earlier_metrics(run_folder(args.runs_dir, args.task, args.model, algorithm, seed))
        if kept:
            print(f"kept the earlier metrics of this run as {kept}", flush=True)
        returncode = subprocess.run(argv_run, check=False).returncode
        if returncode:
            return returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
