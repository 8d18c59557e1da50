"""The token-credit study (issue 43, benchmarks/PROTOCOL.md): its warm-start check and its one-seed comparison.

``warm-start`` builds (or reuses) the task's assets, checks that the warm start's exact rate on validation samples
lies in the registered range (a modest start: RL has something to learn and an outcome to learn from), and copies
the build's small files into ``<results>/warm-starts/<key>/`` (committed with ``--commit``), so the runs can resume
from the same weights on another machine. It exits 1, naming the figure, when the start is outside the range: the
sweep must not start from it.

``compare`` reproduces one seed of GRPO, BoT-GRPO and the shuffled control through verl's real trainer, then
writes the protocol report of those three runs (its ``curves.png``: held-out exact rate per step with 95% bands over
problems)::

    python -m benchmarks.token_credit compare --steps 24 --out runs/token-credit-compare

``edge-rates`` names the rates the registered edge rule runs next (the queue's ``edge`` stage); ``threshold``
computes the registered threshold T and the final matrix's steps (the plateau rule) from the committed sweep
(validation split only) and writes ``threshold.json`` beside it, before any test run; ``hypotheses`` decides each
registered hypothesis on the final matrix's test split at that T (:mod:`benchmarks.reporting.hypotheses`):
``hypotheses.md``, ``hypotheses.json`` and ``steps_to_threshold.png``::

    python -m benchmarks.token_credit threshold
    python -m benchmarks.token_credit hypotheses

``--task token_credit_prefix`` (before the command) does the same for the free-length family, H4's task (its
results beside the main task's, under ``token_credit_prefix/``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from benchmarks import matrix, protocol_report
from benchmarks.reporting.hypotheses import final_steps, threshold_from_sweep
from benchmarks.reporting.outputs import write_hypotheses, write_json
from benchmarks.reporting.runs import lr_name, read_runs
from benchmarks.reporting.sweep import beyond_edges
from demo.assets import build_assets
from demo.token_credit import TOKEN_CREDIT_PREFIX

TASK = "token_credit"
TASKS = (TASK, TOKEN_CREDIT_PREFIX.name)  # the main task; the free-length family (H4's)
START_RANGE = (0.10, 0.30)  # the registered warm start's exact rate on validation samples
COMPARED = ("grpo", "bot_grpo", "bot_grpo_shuffled")
WARM_START_FILES = ("manifest.json", "model", "train.parquet", "val.parquet", "test.parquet")
STUDY_RESULTS = Path(__file__).parent / "results" / "token-credit"
SWEEP, THRESHOLD = "sweep.json", "threshold.json"  # the registered sweep's choice; T, chosen on validation
STUDY_SWEEP = STUDY_RESULTS / TASK / SWEEP
KEPT_WARM_START = STUDY_RESULTS / "warm-starts" / "c2dea09be119fd63"
# The edge rule's bound (PROTOCOL.md): at most two rates below the registered grid's smallest, one above its largest.
EDGE_BOUNDS = (3e-5 / 9, 1e-3 * 3)
UNTUNED_LR = 3e-5  # compare's rate until the sweep is committed: the sweep's smallest (3e-4 collapses GRPO in 3 steps)


def start_problem(metrics: dict, allowed: tuple[float, float] = START_RANGE) -> str | None:
    """Why the build's warm start may not start the study (its ``accuracy`` outside ``allowed``), or None."""
    accuracy = metrics["accuracy"]
    if allowed[0] <= accuracy <= allowed[1]:
        return None
    return (
        f"the warm start solves {accuracy:.3f} of {metrics['eval_samples']} validation samples, outside the "
        f"registered [{allowed[0]}, {allowed[1]}]: change the task's sft_steps (demo/token_credit.py), record it in "
        "benchmarks/PROTOCOL.md, and build again before any RL run"
    )


def warm_start(cache_dir: Path, results: Path, commit: bool, task: str = TASK) -> int:
    """``warm-start``: build, check the range, keep the build's files beside the results; 0 when the start is fine."""
    assets = build_assets(cache_dir, task=matrix.TASKS[task].assets)
    problem = start_problem(assets.metrics)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    kept = results / "warm-starts" / assets.root.name
    if not kept.exists():
        kept.mkdir(parents=True)
        for name in WARM_START_FILES:
            source = assets.root / name
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, kept / name)
        if commit:
            matrix.commit(kept, f"benchmark warm start: {task} {assets.root.name}")
    print(f"warm start {assets.root.name}: exact rate {assets.metrics['accuracy']:.3f}, kept in {kept}")
    return 0


def compare_arguments(
    steps: int,
    lr: float | None,
    seed: int,
    every: int,
    samples: int,
    out: Path,
    kept: Path = KEPT_WARM_START,
    sweep: Path = STUDY_SWEEP,
) -> tuple[list, list]:
    """The matrix's and the report's arguments of ``compare``: :data:`COMPARED` at one seed, from the study's kept
    warm start ``kept`` (no build), validated on the validation split (nothing of the study's test split is used).
    Each cell runs at ``lr``, or (None) at the rate the study's committed ``sweep`` chose for it, or at
    :data:`UNTUNED_LR` while there is none."""
    if lr is None and sweep.exists():
        rates, report_rates = ["--chosen-lrs", str(sweep)], ["--lrs-from-sweep", str(sweep)]
    else:
        rates, report_rates = ["--lrs", f"{lr or UNTUNED_LR:g}"], []
    runs = [
        "--task", TASK, "--warm-start", str(kept),
        "--algorithms", ",".join(COMPARED), *rates, "--seeds", str(seed),
        "--steps", str(steps), "--validate", "val", "--test-freq", str(every), "--val-n", str(samples),
        "--runs", str(out / "runs"), "--results", str(out / "results"), "--no-report",
    ]  # fmt: skip
    report = [
        "--results", str(out / "results"), "--sweep-dir", str(out / "no-sweep"), "--task", TASK,
        "--ks", f"1,{samples}", "--same-information", "bot_grpo_shuffled", "--split", "val",
        "--out", str(out / "report"), *report_rates,
    ]  # fmt: skip
    return runs, report


def threshold(sweep: Path, out: Path) -> int:
    """``threshold``: T from the committed sweep (:func:`~benchmarks.reporting.hypotheses.threshold_from_sweep`),
    written to ``out``."""
    swept = json.loads(sweep.read_text())
    chosen = threshold_from_sweep(swept) | final_steps(swept)
    write_json(out, chosen)
    print(
        f"grpo's last two validations rose {chosen['rise']:+.3f}: the final matrix runs {chosen['final_steps']} steps"
    )
    if chosen["threshold"] is None:
        print(f"no threshold: no tuned arm rose on validation from {chosen['start']:.3f}; wrote {out}")
    else:
        print(
            f"T = {chosen['threshold']}: halfway from the sweep's step-0 mean {chosen['start']:.3f} to "
            f"{chosen['reference']}'s last validation {chosen['reference_level']:.3f}; wrote {out}"
        )
    return 0


def edge_rates(sweep: Path, cells: str) -> int:
    """``edge-rates``: one line ``CELL RATE`` per cell of ``cells`` (comma-separated; empty: all) whose chosen
    rate is its grid's edge, RATE the one the registered edge rule runs next (for the queue's ``edge`` stage); a
    cell whose next rate lies outside :data:`EDGE_BOUNDS` is named on stderr instead, "at the edge: not tuned"."""
    swept = json.loads(sweep.read_text())
    wanted = set(filter(None, cells.split(",")))
    low, high = EDGE_BOUNDS
    for cell, lr in beyond_edges(swept["chosen"], swept["at_edge"]).items():
        if wanted and cell not in wanted:
            continue
        if low * (1 - 1e-3) <= lr <= high * (1 + 1e-3):
            print(cell, lr_name(lr))
        else:
            print(f"{cell}: at the edge, not tuned (the bound stops the rule before {lr_name(lr)})", file=sys.stderr)
    return 0


def hypotheses(results: Path, sweep: Path, threshold_file: Path, boot: int, seed: int, task: str = TASK) -> int:
    """``hypotheses``: every registered hypothesis decided on ``task``'s final matrix's test split, written beside
    the sweep; 1 (with the reason) when the final runs, the sweep or T is missing."""
    missing = [path for path in (sweep, threshold_file) if not path.exists()]
    runs = read_runs(results).get(task, {})
    if missing or not runs:
        named = ", ".join(map(str, missing)) or f"final runs under {results / task / 'runs'}"
        print(f"error: {named} missing: run the sweep, `threshold`, then the final matrix", file=sys.stderr)
        return 1
    chosen = json.loads(sweep.read_text())["chosen"]
    level = json.loads(threshold_file.read_text())["threshold"]
    report = write_hypotheses(task, runs, chosen, level, sweep.parent, boot=boot, seed=seed)
    for entry in report["hypotheses"]:
        print(f"{entry['name']}: {entry['verdict']}")
    print(f"wrote {sweep.parent / 'hypotheses.md'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=TASKS, default=TASK, help="the main task or the free-length family")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("warm-start", help="build and check the warm start, keep its files")
    start.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"))
    start.add_argument("--results", type=Path, default=Path("benchmarks/results/token-credit"))
    start.add_argument("--commit", action="store_true", help="commit the kept warm start")
    compare = commands.add_parser("compare", help="one seed of GRPO, BoT-GRPO and the shuffled control, plotted")
    compare.add_argument("--steps", type=int, default=24)
    compare.add_argument(
        "--lr", type=float, help=f"every cell's rate (default: the study's sweep's choice, {UNTUNED_LR:g} until then)"
    )
    compare.add_argument("--seed", type=int, default=0)
    compare.add_argument("--test-freq", type=int, default=8, help="validate every this many steps")
    compare.add_argument("--val-n", type=int, default=2, help="samples per validation problem")
    compare.add_argument("--out", type=Path, default=Path("runs/token-credit-compare"))
    level = commands.add_parser("threshold", help="the registered threshold T from the sweep (validation only)")
    level.add_argument("--sweep", type=Path, help=f"default: the task's {STUDY_RESULTS}/TASK/{SWEEP}")
    level.add_argument("--out", type=Path, help=f"default: {THRESHOLD} beside the sweep")
    edge = commands.add_parser("edge-rates", help="the rates the registered edge rule runs next, per edge cell")
    edge.add_argument("--sweep", type=Path, help=f"default: the task's {STUDY_RESULTS}/TASK/{SWEEP}")
    edge.add_argument("--cells", default="", help="only these cells (comma-separated; default all)")
    decide = commands.add_parser("hypotheses", help="each registered hypothesis decided on the final test runs")
    decide.add_argument("--results", type=Path, default=STUDY_RESULTS, help="final runs: RESULTS/TASK/runs")
    decide.add_argument("--sweep", type=Path, help=f"default: the task's {STUDY_RESULTS}/TASK/{SWEEP}")
    decide.add_argument("--threshold-file", type=Path, help=f"default: {THRESHOLD} beside the sweep")
    decide.add_argument("--boot", type=int, default=2000, help="bootstrap draws")
    decide.add_argument("--seed", type=int, default=0, help="bootstrap random seed")
    args = parser.parse_args(argv)
    sweep = getattr(args, "sweep", None) or STUDY_RESULTS / args.task / SWEEP
    if args.command == "warm-start":
        return warm_start(args.cache_dir, args.results, args.commit, args.task)
    if args.command == "threshold":
        return threshold(sweep, args.out or sweep.parent / THRESHOLD)
    if args.command == "edge-rates":
        return edge_rates(sweep, args.cells)
    if args.command == "hypotheses":
        threshold_file = args.threshold_file or sweep.parent / THRESHOLD
        return hypotheses(args.results, sweep, threshold_file, args.boot, args.seed, args.task)
    runs, report = compare_arguments(args.steps, args.lr, args.seed, args.test_freq, args.val_n, args.out)
    matrix.main(runs)
    status = protocol_report.main(report)
    print(f"plot: {args.out / 'report' / 'curves.png'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
