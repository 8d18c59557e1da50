"""Run a matrix of algorithms x learning rates x seeds of a CPU task through verl's real trainer.

Every run is ``python -m verl.trainer.main_ppo`` with the same base settings (the CPU demo's model, data,
batch, rollouts per prompt and steps: :func:`demo.training.base_overrides`), its own actor learning
rate, and the algorithm's own keys from the recipes' one table (:data:`recipes.algorithms.ALGORITHMS`).
On every task a run can validate on held-out problems before training and every ``--test-freq``
steps: the validation split (choosing settings) and/or the disjoint test split (reporting), ``--val-n``
temperature-1 samples per problem. A finished run leaves ``DONE`` in its folder and is skipped next time,
and its small summary (training curves, per-problem validation counts) is written to
``<results>/<task>/runs/`` at once (``--commit`` also commits it), so a matrix resumes after any
interruption. Each summary records the SHA-256 of the warm start's weights: the assets are rebuilt on each
machine, a rebuild on another CPU can train a different warm start, and runs are added to committed ones only
from the same weights (:func:`check_warm_start`); to resume on another machine, carry the build folder
``<cache-dir>/<key>/``. The protocol and its report: benchmarks/PROTOCOL.md.

    python -m benchmarks.matrix --task arith --algorithms grpo,bot_grpo --lrs 3e-5,1e-4 --seeds 0,1 \
        --steps 32 --validate val --results benchmarks/results/protocol/sweep --commit
    python -m benchmarks.matrix --task arith --algorithms grpo,bot_grpo --seeds 100,101,102 --steps 32 \
        --chosen-lrs benchmarks/results/protocol/arith/sweep.json --validate test --test-freq 8 --val-n 8 \
        --results benchmarks/results/protocol --commit --no-report
    python -m benchmarks.matrix --task react --seeds 0,1,2 --steps 20 --validate none \
        --algorithms grpo,dr_grpo,dapo,gspo,pure,bot_grpo --runs runs/matrix --out benchmarks/results
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.metrics import AS_ASKED, DYNAMIC_SAMPLING, groups_with_signal, prompt_groups, within_group_length_std
from benchmarks.reporting.outputs import write_report
from benchmarks.reporting.runs import lr_name, run_file_name
from bot_grpo_verl.verl_compat.token_dump import TOKEN_DUMP_SUFFIX
from demo.assets import build_assets, install_warm_start
from demo.held_out import (
    Validation,
    compiles_as_asked,
    held_out_counts,
    problem_index,
    validation_overrides,
)
from demo.tasks import (
    ARITHMETIC,
    ARITHMETIC_HARD,
    ARITHMETIC_STEPS,
    REACT,
    REACT_COMPILE_ONLY,
    REACT_TSX,
    TOOL_ARITHMETIC,
    TOOL_ARITHMETIC_TASK,
    Task,
)
from demo.token_credit import TOKEN_CREDIT, TOKEN_CREDIT_PREFIX, TOKEN_CREDIT_REWARD
from demo.training import (
    MAX_PROMPT_LENGTH,
    MAX_RESPONSE_LENGTH,
    PROMPTS_PER_STEP,
    base_overrides,
    merge_presets,
    read_metrics,
    run_verl,
)
from recipes.algorithms import ALGORITHMS, algorithm_keys, reward_function_overrides

# Training metrics kept in a run's summary (verl's names); the validation counts are kept per problem.
TRAIN_METRICS = (
    "reward_extra/acc/mean",
    "reward_extra/compiled/mean",
    "reward_extra/steps_correct/mean",
    "reward_extra/token_reward_mean/mean",
    "reward_extra/calls/mean",
    "reward_extra/calls_progressing/mean",
    "reward_extra/items_correct/mean",
    "reward_extra/length_error/mean",
    "reward_extra/flipped/mean",
    "critic/advantages/max",
    "critic/advantages/min",
    "actor/entropy",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "actor/grad_norm",
    "response_length/mean",
    "timing_s/step",
    *DYNAMIC_SAMPLING,
)
# The training curves a run's summary adds from its rollouts' token dumps (benchmarks.metrics), per step.
GROUP_CURVES = {
    "response_length/within_group_std": within_group_length_std,
    "training/groups_with_signal": groups_with_signal,
}


@dataclass(frozen=True)
class CpuTask:
    """A benchmark task on CPU: its assets, reward function and success metric.

    Attributes:
        assets: the demo assets' task (``demo.assets``).
        reward: the token-level reward function file.
        metric: the success curve's key in verl's metrics (training rollouts).
        threshold: the success level whose first step is compared across algorithms.
        variants: named ``reward_kwargs`` sets; a cell ``ALGORITHM@VARIANT`` runs the algorithm on that
            variant of the reward (``""``: the clean default), for the stability study.
        held_out: whether runs can validate on the held-out val and test problems (verl's validation,
            dumped to ``<run>/validation/<step>.jsonl``, scored by the reward's ``acc``).
        metric_name: what ``metric`` and the held-out ``acc`` measure, on the progress lines.
        as_asked: a stricter held-out success than the reward's ``acc``, for a reward a policy can satisfy
            without doing the task (None: ``acc`` is the task); recorded as the split ``<split>:as_asked``.
        max_prompt_length, max_response_length: verl's token budgets (``data.max_prompt_length``,
            ``data.max_response_length``; DAPO's overlong buffer is a fifth of the latter).
    """

    assets: Task
    reward: Path
    metric: str
    threshold: float
    variants: dict[str, tuple[tuple[str, str], ...]]
    held_out: bool = False
    metric_name: str = "compile rate"
    as_asked: Callable[[dict], bool] | None = None
    max_prompt_length: int = MAX_PROMPT_LENGTH
    max_response_length: int = MAX_RESPONSE_LENGTH


# The stability study's variants: the exact step verifier's clean, bounded rewards against the same rewards
# with Gaussian noise (std 1, the size of a step value) or scaled by 10 without bounds.
ARITHMETIC_VARIANTS = {"": (), "noisy": (("noise", "1.0"),), "unbounded": (("scale", "10.0"),)}
# React's rewards: compilation only (the rows' specs ignored); composed: compiled, rendered in a browser and
# meeting the row's spec (issue 26's question in PROTOCOL.md); composed_graded: the same, scored by the share of
# the spec's requirements that hold (its follow-up); composed_named: that share only when the requested
# component is there (the next follow-up).
REACT_VARIANTS = {
    "": REACT_COMPILE_ONLY,
    "composed": (("render", "true"),),
    "composed_graded": (("render", "true"), ("requirements_score", "fraction")),
    "composed_named": (("render", "true"), ("requirements_score", "fraction_named")),
}
# The agentic task's score for the outcome-level algorithms: the outcome, or the mean or smallest turn value
# (bot_grpo_verl/rewards/tool_arithmetic.py): GRPO given the per-turn information BoT-GRPO gets.
AGENT_VARIANTS = {"": (), "turn_mean": (("score", "turn_mean"),), "turn_min": (("score", "turn_min"),)}
# The token-credit study's labels (bot_grpo_verl/rewards/token_credit.py): exact, or each item's label flipped with
# probability 0.1 or 0.3 (the score stays exact).
TOKEN_CREDIT_VARIANTS = {"": (), "flip10": (("flip", "0.1"),), "flip30": (("flip", "0.3"),)}
TASKS = {
    "agent": CpuTask(
        TOOL_ARITHMETIC_TASK,
        TOOL_ARITHMETIC,
        "reward_extra/acc/mean",
        0.6,
        AGENT_VARIANTS,
        True,
        "solve rate",
    ),
    "react": CpuTask(
        REACT, REACT_TSX, "reward_extra/compiled/mean", 0.8, REACT_VARIANTS, True, as_asked=compiles_as_asked
    ),
    "arith": CpuTask(
        ARITHMETIC, ARITHMETIC_STEPS, "reward_extra/acc/mean", 0.6, ARITHMETIC_VARIANTS, True, "solve rate"
    ),
    "arith_hard": CpuTask(
        ARITHMETIC_HARD, ARITHMETIC_STEPS, "reward_extra/acc/mean", 0.3, ARITHMETIC_VARIANTS, True, "solve rate"
    ),
    # Prompts of up to 63 letters (81 tokens with the chat template), answers of up to 64 tokens with EOS; the
    # free-length family's the same (H4's task: any prefix of 7 letters or more is right).
    **{
        task.name: CpuTask(
            task,
            TOKEN_CREDIT_REWARD,
            "reward_extra/acc/mean",
            0.5,
            TOKEN_CREDIT_VARIANTS,
            True,
            "exact rate",
            max_prompt_length=96,
            max_response_length=72,
        )
        for task in (TOKEN_CREDIT, TOKEN_CREDIT_PREFIX)
    },
}


def run_overrides(
    task: CpuTask,
    assets,
    cell: str,
    seed: int,
    steps: int,
    out: Path,
    lr: float | None = None,
    validation: Validation | None = None,
) -> list[str]:
    """Everything one run sets: CPU preset and base settings, the learning rate, validation, the reward
    (variant) as the algorithm consumes it, the algorithm's keys, and the run's name. ``cell`` is
    ``ALGORITHM`` or ``ALGORITHM@VARIANT``; ``lr`` None keeps the base settings' learning rate."""
    algorithm, _, variant = cell.partition("@")
    return merge_presets(
        [
            "+preset=cpu",
            *base_overrides(assets, steps, out, seed, task.max_prompt_length, task.max_response_length),
            *task.assets.rollout,
            *([f"actor_rollout_ref.actor.optim.lr={lr}"] if lr is not None else []),
            *validation_overrides(assets, validation, out),
            *reward_function_overrides(task.reward, task.variants[variant], ALGORITHMS[algorithm].reward),
            *algorithm_keys(algorithm, task.max_response_length),
            f"trainer.experiment_name={cell}-seed{seed}" + (f"-lr{lr:g}" if lr is not None else ""),
        ]
    )


def held_out_record(dump: Path, problems, as_asked: Callable[[dict], bool] | None) -> dict[str, list[list[int]]]:
    """One validation's ``[n, c]`` per split and problem; with ``as_asked`` also per ``<split>:as_asked``."""
    record = held_out_counts(dump, problems)
    if as_asked is not None:
        record |= {f"{split}:{AS_ASKED}": counts for split, counts in held_out_counts(dump, problems, as_asked).items()}
    return record


def warm_start_sha256(assets) -> str:
    """SHA-256 of the warm-started policy's weights file (``model.safetensors`` in ``assets.model_dir``)."""
    return hashlib.sha256((Path(assets.model_dir) / "model.safetensors").read_bytes()).hexdigest()


def check_warm_start(summaries: Path, warm_start: str) -> None:
    """Refuse to add runs from the warm start ``warm_start`` (:func:`warm_start_sha256`) to the run summaries in
    ``summaries`` made from other weights, or from unrecorded ones (summaries older than the record): their
    scores would be pooled as if they came from one starting model.

    Raises:
        ValueError: naming each other warm start, how many runs it made, and what to do.
    """
    others: dict[str, list[str]] = {}
    for path in sorted(summaries.glob("*.json")):
        recorded = json.loads(path.read_text()).get("warm_start_sha256")
        if recorded != warm_start:
            others.setdefault(recorded or "not recorded", []).append(path.stem)
    if others:
        described = "; ".join(f"{sha[:16]}: {len(runs)} runs, e.g. {runs[0]}" for sha, runs in others.items())
        raise ValueError(
            f"{summaries}: committed runs come from another warm start ({described}) than this build's "
            f"{warm_start[:16]}; a rebuild on another CPU can train different weights. Copy the original build "
            "folder into --cache-dir (same key), or write these runs to a new --results directory."
        )


def run_summary(out: Path, task_name: str, cell: str, lr: float | None, seed: int, problems, warm_start: str) -> dict:
    """The small, committed record of one finished run: its settings, warm start (:func:`warm_start_sha256`),
    training curves (with :data:`GROUP_CURVES` per step where the run dumped its rollouts' tokens) and
    held-out counts."""
    rows = read_metrics(out / "metrics.jsonl")
    dumps = sorted((out / "validation").glob("*.jsonl"), key=lambda path: int(path.stem)) if problems else []
    train = {key: [row.get(key) for row in rows] for key in TRAIN_METRICS if any(key in row for row in rows)}
    groups = {
        int(dump.name.removesuffix(TOKEN_DUMP_SUFFIX)): prompt_groups(dump)
        for dump in (out / "rollouts").glob(f"*{TOKEN_DUMP_SUFFIX}")
    }
    for name, statistic in GROUP_CURVES.items() if groups else ():
        by_step = {step: statistic(step_groups) for step, step_groups in groups.items()}
        train[name] = [by_step.get(row["step"]) for row in rows]
    return {
        "task": task_name,
        "cell": cell,
        "lr": lr,
        "seed": seed,
        "warm_start_sha256": warm_start,
        "steps": len(rows),
        "prompts_per_step": PROMPTS_PER_STEP,
        "wall_seconds": float((out / "DONE").read_text().split()[0]) if (out / "DONE").exists() else None,
        "cpu_seconds": float((out / "cpu_seconds").read_text()) if (out / "cpu_seconds").exists() else None,
        "train": train,
        "held_out": {dump.stem: held_out_record(dump, problems, TASKS[task_name].as_asked) for dump in dumps},
    }


def commit(path: Path, message: str, attempts: int = 10) -> None:
    """Commit ``path`` alone, in the repository that holds it (other staged or changed files stay as they
    are); retries while git is busy."""
    git = ["git", "-C", str(path.parent)]
    for _ in range(attempts):
        added = subprocess.run([*git, "add", path.name], capture_output=True, text=True)
        done = (
            added.returncode == 0
            and subprocess.run(
                [*git, "commit", "-q", "-m", message, "--", path.name], capture_output=True, text=True
            ).returncode
            == 0
        )
        if done:
            return
        time.sleep(3)
    print(f"warning: could not commit {path}; commit it by hand", flush=True)


def run_folder(runs: Path, task_name: str, cell: str, lr: float | None, seed: int) -> Path:
    """``<runs>/<task>/<cell>[/lr<lr>]/seed<k>`` (no lr: the layout :mod:`benchmarks.report` reads)."""
    return runs / task_name / cell / (f"lr{lr:g}" if lr is not None else "") / f"seed{seed}"


def plan_runs(
    cells: list[str], lrs: list[float | None], seeds: list[int], chosen: dict[str, float] | None = None
) -> list[tuple[str, float | None, int]]:
    """The runs ``(cell, lr, seed)`` in order: seed by seed, every cell at every learning rate of ``lrs``, or at
    its own one from ``chosen`` (``{cell: lr}``, see :func:`chosen_lrs`), so an interrupted matrix has as many
    seeds of every cell as it can.

    Raises:
        ValueError: a cell without a chosen learning rate.
    """
    if chosen is None:
        return [(cell, lr, seed) for seed in seeds for lr in lrs for cell in cells]
    missing = sorted(set(cells) - set(chosen))
    if missing:
        raise ValueError(f"no chosen learning rate for {missing}; chosen: {chosen}")
    return [(cell, chosen[cell], seed) for seed in seeds for cell in cells]


def chosen_lrs(path: Path) -> dict[str, float]:
    """``{cell: lr}`` from the sweep's ``sweep.json`` (written by :mod:`benchmarks.protocol_report`)."""
    return {cell: float(info["lr"]) for cell, info in json.loads(path.read_text())["chosen"].items()}


def run_matrix(
    task_name: str,
    plan: list[tuple[str, float | None, int]],
    steps: int,
    runs: Path,
    cache: Path,
    validation: Validation | None,
    results: Path | None,
    commit_results: bool,
    kept_warm_start: Path | None = None,
) -> None:
    task = TASKS[task_name]
    cells = sorted({cell for cell, _, _ in plan})
    unknown = sorted(cell for cell in cells if cell.partition("@")[0] not in ALGORITHMS)
    unknown += sorted(cell for cell in cells if cell.partition("@")[2] not in task.variants)
    if unknown:
        raise ValueError(
            f"unknown algorithm(s) or variant(s) {unknown}; algorithms: {sorted(ALGORITHMS)}, "
            f"variants of {task_name}: {sorted(task.variants)}"
        )
    if validation is not None and not task.held_out:
        raise ValueError(f"task {task_name} has no held-out problems to validate on; use --validate none")
    if kept_warm_start:
        install_warm_start(cache, kept_warm_start, task=task.assets)
    assets = build_assets(cache, task=task.assets)
    warm_start = warm_start_sha256(assets)
    problems = problem_index(assets, validation.splits) if validation else {}
    summaries = results / task_name / "runs" if results else None
    if summaries and any(not (summaries / run_file_name(*run)).exists() for run in plan):
        check_warm_start(summaries, warm_start)
    for number, (cell, lr, seed) in enumerate(plan, 1):
        out = run_folder(runs, task_name, cell, lr, seed)
        name = f"[{number}/{len(plan)}] {cell} lr {lr_name(lr)} seed {seed}"
        summary_path = summaries / run_file_name(cell, lr, seed) if summaries else None
        if (out / "DONE").exists() or (summary_path and summary_path.exists()):
            print(f"{name}: done before, skipped", flush=True)
            continue
        print(f"{name}: {steps} steps -> {out}", flush=True)
        started = time.monotonic()
        try:
            overrides = run_overrides(task, assets, cell, seed, steps, out, lr, validation)
            run_verl(overrides, out, steps, success=(task.metric, task.metric_name))
        except RuntimeError as error:
            print(f"{name}: FAILED\n{error}", flush=True)
            continue
        (out / "DONE").write_text(f"{time.monotonic() - started:.0f} s\n")
        if summary_path:
            summary_path.parent.mkdir(parents=True, exist_ok=True)
            summary = run_summary(out, task_name, cell, lr, seed, problems, warm_start)
            summary_path.write_text(json.dumps(summary) + "\n")
            if commit_results:
                commit(summary_path, f"benchmark run: {task_name} {cell} lr {lr_name(lr)} seed {seed}")


def parse_validation(text: str, every: int, samples: int, before: bool) -> Validation | None:
    """``--validate``: ``none``, or held-out splits joined by ``+`` (``val``, ``test``, ``val+test``)."""
    return None if text == "none" else Validation(tuple(text.split("+")), every, samples, before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="react")
    parser.add_argument("--algorithms", default="grpo,dr_grpo,dapo,gspo,pure,bot_grpo")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--lrs", default="", help="actor learning rates, e.g. 1e-5,3e-5,1e-4 (default: the base 1e-4)")
    parser.add_argument(
        "--chosen-lrs", type=Path, help="each algorithm at its own learning rate from a sweep.json (protocol_report)"
    )
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--validate", default="none", help="none, val, test or val+test")
    parser.add_argument("--test-freq", type=int, default=4, help="validate every this many steps")
    parser.add_argument("--val-n", type=int, default=8, help="samples per held-out problem")
    parser.add_argument("--no-val-before", action="store_true", help="do not validate before training")
    parser.add_argument("--runs", type=Path, default=Path("runs/matrix"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"))
    parser.add_argument(
        "--warm-start",
        type=Path,
        help="start from this kept build (RESULTS/warm-starts/<key>/) instead of building the task's assets",
    )
    parser.add_argument("--results", type=Path, help="write each finished run's summary under RESULTS/<task>/runs/")
    parser.add_argument("--commit", action="store_true", help="commit each run summary as soon as it is written")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--baseline", default="grpo", help="the cell the report compares every other one with")
    parser.add_argument("--report-only", action="store_true", help="only write the report of finished runs")
    parser.add_argument("--no-report", action="store_true", help="run only; the protocol has its own report")
    args = parser.parse_args(argv)

    task = TASKS[args.task]
    if not args.report_only:
        if args.lrs and args.chosen_lrs:
            parser.error("--lrs and --chosen-lrs exclude each other")
        lrs = [float(lr) for lr in args.lrs.split(",")] if args.lrs else [None]
        seeds = [int(seed) for seed in args.seeds.split(",")]
        chosen = chosen_lrs(args.chosen_lrs) if args.chosen_lrs else None
        validation = parse_validation(args.validate, args.test_freq, args.val_n, not args.no_val_before)
        run_matrix(
            args.task,
            plan_runs(args.algorithms.split(","), lrs, seeds, chosen),
            args.steps,
            args.runs.resolve(),
            args.cache_dir,
            validation,
            args.results,
            args.commit,
            args.warm_start,
        )
    if args.no_report:
        return 0
    write_report(args.runs / args.task, task.metric, task.threshold, args.baseline, args.out / args.task)
    print((args.out / args.task / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
