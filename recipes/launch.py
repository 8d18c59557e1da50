"""Print or run the verl command of one recipe: ``python -m recipes.launch --task T --model M --algorithm A``.

Examples (from the repository root)::

    python -m recipes.launch --task react --model qwen2.5-3b --algorithm bot_grpo --seed 0 --dry-run
    python -m recipes.launch --task aime --model smollm3-3b --algorithm dapo trainer.n_gpus_per_node=4

Without ``--seed`` it runs every seed of the task, one after the other; ``--algorithm all`` runs every row of
the table in its order, and stops at the first failure. Trailing ``key=value`` arguments
are appended to the command as extra hydra overrides (cluster size, logger, paths); they apply to every
algorithm alike when given to ``recipes/<task>/run.sh``.
"""

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from recipes.algorithms import ALGORITHMS, MODELS, TASKS, overrides


def command(task: str, model: str, algorithm: str, seed: int, data_dir: Path, extra: list[str]) -> list[str]:
    """The argv of one run: this interpreter, ``-m verl.trainer.main_ppo``, the recipe's overrides, ``extra``."""
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(task, model, algorithm, seed, data_dir), *extra]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m recipes.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--algorithm", required=True, choices=[*ALGORITHMS, "all"], help="a table row, or all of them")
    parser.add_argument("--seed", type=int, default=None, help="one seed (default: every seed of the task)")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="folder of train.parquet and test.parquet (default: the task's)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("extra", nargs="*", help="extra hydra overrides, appended last")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    task = TASKS[args.task]
    seeds = task.seeds if args.seed is None else (args.seed,)
    data_dir = args.data_dir or Path(task.data_dir)
    algorithms = list(ALGORITHMS) if args.algorithm == "all" else [args.algorithm]
    for algorithm in algorithms:
        for seed in seeds:
            argv_run = command(args.task, args.model, algorithm, seed, data_dir, args.extra)
            print(shlex.join(argv_run), flush=True)
            if args.dry_run:
                continue
            returncode = subprocess.run(argv_run, check=False).returncode
            if returncode:
                return returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
