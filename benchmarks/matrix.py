"""Run a matrix of algorithms x seeds of a CPU task through verl's real trainer, then report on it.

Every run is ``python -m verl.trainer.main_ppo`` with the same base settings (the CPU demo's model, data,
batch, rollouts per prompt, lr and steps: :func:`bot_grpo_verl.demo.run.base_overrides`) and the
algorithm's own keys from the recipes' one table (:data:`recipes.algorithms.ALGORITHMS`). A finished run
leaves ``DONE`` in its folder and is skipped next time, so an interrupted matrix resumes where it
stopped. The report (``bot_grpo_verl.benchmark.report``) then writes JSON, a markdown table and curves.

    python benchmarks/matrix.py --task react --seeds 0,1,2 --steps 20 \\
        --algorithms grpo,dr_grpo,dapo,gspo,pure,bot_grpo --runs runs/matrix --out benchmarks/results
    python benchmarks/matrix.py --task arith --algorithms grpo,bot_grpo,bot_grpo@noisy,bot_grpo@unbounded
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the recipes' table

from bot_grpo_verl.benchmark.report import write_report  # noqa: E402
from bot_grpo_verl.demo.assets import ARITHMETIC, ARITHMETIC_STEPS, REACT, REACT_TSX, Task, build_assets  # noqa: E402
from bot_grpo_verl.demo.run import MAX_RESPONSE_LENGTH, base_overrides, run_verl  # noqa: E402
from recipes.algorithms import ALGORITHMS, algorithm_keys, reward_function_overrides  # noqa: E402


@dataclass(frozen=True)
class CpuTask:
    """A benchmark task on CPU: its assets, reward function and success metric.

    Attributes:
        assets: the demo assets' task (``bot_grpo_verl.demo.assets``).
        reward: the token-level reward function file.
        metric: the success curve's key in verl's metrics.
        threshold: the success level whose first step is compared across algorithms.
        variants: named ``reward_kwargs`` sets; a cell ``ALGORITHM@VARIANT`` runs the algorithm on that
            variant of the reward (``""``: the clean default), for the stability study.
        pass_at_k: the budgets k of the unbiased Pass@k on the held-out val prompts, measured before
            training and after the last step from ``max(pass_at_k)`` temperature-1 samples per prompt
            (verl's validation, dumped to ``<run>/validation/<step>.jsonl``); empty: no validation.
    """

    assets: Task
    reward: Path
    metric: str
    threshold: float
    variants: dict[str, tuple[tuple[str, str], ...]]
    pass_at_k: tuple[int, ...] = ()


TASKS = {
    "react": CpuTask(REACT, REACT_TSX, "reward_extra/compiled/mean", 0.8, {"": ()}),
    # The stability study: the exact step verifier's clean, bounded rewards against the same rewards
    # with Gaussian noise (std 1, the size of a step value) or scaled by 10 without bounds.
    "arith": CpuTask(
        ARITHMETIC,
        ARITHMETIC_STEPS,
        "reward_extra/acc/mean",
        0.6,
        {"": (), "noisy": (("noise", "1.0"),), "unbounded": (("scale", "10.0"),)},
        pass_at_k=(1, 2, 4, 8),
    ),
}


def merge_presets(overrides: list[str]) -> list[str]:
    """Hydra takes one ``+preset=``: gather every ``+preset=NAME`` into ``+preset=[NAME,...]``."""
    presets = [override.split("=", 1)[1] for override in overrides if override.startswith("+preset=")]
    names = [name for preset in presets for name in preset.strip("[]").split(",") if name]
    rest = [override for override in overrides if not override.startswith("+preset=")]
    return [f"+preset=[{','.join(dict.fromkeys(names))}]", *rest]


def validation_overrides(task: CpuTask, steps: int, out: Path) -> list[str]:
    """Validate before training and after the last step with enough samples per prompt for Pass@k
    (these come after the base settings, which turn validation off, and so win)."""
    if not task.pass_at_k:
        return []
    return [
        "trainer.val_before_train=true",
        f"trainer.test_freq={steps}",
        f"trainer.validation_data_dir={out / 'validation'}",
        f"actor_rollout_ref.rollout.val_kwargs.n={max(task.pass_at_k)}",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
    ]


def run_overrides(task: CpuTask, assets, cell: str, seed: int, steps: int, out: Path) -> list[str]:
    """Everything one run sets: CPU preset and base settings, validation, the reward (variant) as the
    algorithm consumes it, the algorithm's keys, and the run's name. ``cell`` is ``ALGORITHM`` or
    ``ALGORITHM@VARIANT``."""
    algorithm, _, variant = cell.partition("@")
    return merge_presets(
        [
            "+preset=cpu",
            *base_overrides(assets, steps, out, seed),
            *validation_overrides(task, steps, out),
            *reward_function_overrides(task.reward, task.variants[variant], ALGORITHMS[algorithm].reward),
            *algorithm_keys(algorithm, MAX_RESPONSE_LENGTH),
            f"trainer.experiment_name={cell}-seed{seed}",
        ]
    )


def run_matrix(task_name: str, algorithms: list[str], seeds: list[int], steps: int, runs: Path, cache: Path) -> None:
    task = TASKS[task_name]
    unknown = sorted(cell for cell in algorithms if cell.partition("@")[0] not in ALGORITHMS)
    unknown += sorted(cell for cell in algorithms if cell.partition("@")[2] not in task.variants)
    if unknown:
        raise ValueError(
            f"unknown algorithm(s) or variant(s) {unknown}; algorithms: {sorted(ALGORITHMS)}, "
            f"variants of {task_name}: {sorted(task.variants)}"
        )
    assets = build_assets(cache, task=task.assets)
    cells = [(algorithm, seed) for seed in seeds for algorithm in algorithms]
    for number, (algorithm, seed) in enumerate(cells, 1):
        out = runs / task_name / algorithm / f"seed{seed}"
        if (out / "DONE").exists():
            print(f"[{number}/{len(cells)}] {algorithm} seed {seed}: done before, skipped", flush=True)
            continue
        print(f"[{number}/{len(cells)}] {algorithm} seed {seed}: {steps} steps -> {out}", flush=True)
        started = time.monotonic()
        try:
            run_verl(run_overrides(task, assets, algorithm, seed, steps, out), out, steps)
        except RuntimeError as error:
            print(f"[{number}/{len(cells)}] {algorithm} seed {seed}: FAILED\n{error}", flush=True)
            continue
        (out / "DONE").write_text(f"{time.monotonic() - started:.0f} s\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="react")
    parser.add_argument("--algorithms", default="grpo,dr_grpo,dapo,gspo,pure,bot_grpo")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--runs", type=Path, default=Path("runs/matrix"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--baseline", default="grpo", help="the cell the report compares every other one with")
    parser.add_argument("--report-only", action="store_true", help="only write the report of finished runs")
    args = parser.parse_args(argv)

    task = TASKS[args.task]
    if not args.report_only:
        seeds = [int(seed) for seed in args.seeds.split(",")]
        run_matrix(args.task, args.algorithms.split(","), seeds, args.steps, args.runs.resolve(), args.cache_dir)
    write_report(
        args.runs / args.task, task.metric, task.threshold, args.baseline, args.out / args.task, task.pass_at_k
    )
    print((args.out / args.task / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
