"""The protocol's report: the learning-rate sweep on the validation split, the final comparison on the test split.

Reads the run summaries benchmarks/matrix.py commits, one per finished run,
``<results>/<task>/runs/<cell>__lr<lr>__seed<seed>.json`` (settings, training curves, and per validation step
and held-out split the ``[n, c]`` samples and correct ones of every problem).

Sweep (validation split only; the test split is never read): per cell and learning rate, the seed-mean
validation Pass@1 at the last validation and averaged over the last two; each cell runs at the learning rate
that maximises the chosen criterion (ties: the smaller), or at the one chosen for another cell
(``--lr-from CELL=SOURCE``, the family's best). Writes ``sweep.json`` and ``sweep.md``.

Final report (test split only; ``--split val`` for a demonstration that must leave a study's test split unread),
each cell at its chosen learning rate: held-out Pass@k curves (``--ks``,
default Pass@1 and Pass@8), final Pass@k, each cell's change from its first validation (did it learn at all),
differences against the baseline and against the best same-information baseline,
the probability of improvement (rliable, arXiv:2108.13264), steps to the baseline's final Pass@1 and to a
fixed threshold, and their ratios. Every interval is a 95% percentile bootstrap that resamples seeds (each
cell's own) and problems (the same draws for every cell: differences are paired over problems). Writes
``summary.json``, ``summary.md``, ``curves.png`` and ``forest.png``.

    python -m benchmarks.protocol_report --results benchmarks/results/protocol --task arith \\
        --sweep-dir benchmarks/results/protocol/sweep --lr-from grpo_token_min=grpo_token_mean,pure_sum=pure \\
        --threshold 0.6 --boot 2000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.reporting.comparison import KS, SAME_INFORMATION
from benchmarks.reporting.outputs import write_final, write_sweep
from benchmarks.reporting.runs import SOLVED, SUCCESSES, TEST, VAL, read_runs
from benchmarks.reporting.sweep import CRITERIA, single_lrs


def parse_borrowed(text: str) -> dict[str, str]:
    """``--lr-from``: ``CELL=SOURCE`` pairs joined by commas -> ``{cell: source}``."""
    pairs = [item.split("=") for item in text.split(",") if item]
    malformed = ["=".join(pair) for pair in pairs if len(pair) != 2 or not all(pair)]
    if malformed:
        raise ValueError(f"--lr-from takes CELL=SOURCE pairs joined by commas, got {malformed}")
    return dict(pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("benchmarks/results/protocol"),
        help="final matrix: RESULTS/<task>/runs/*.json",
    )
    parser.add_argument("--task", default="arith")
    parser.add_argument("--sweep-dir", type=Path, help="sweep: SWEEP_DIR/<task>/runs/*.json (default RESULTS/sweep)")
    parser.add_argument("--lr-from", default="", help="CELL=SOURCE,...: CELL runs at the lr the sweep chose for SOURCE")
    parser.add_argument(
        "--choose-by",
        choices=CRITERIA,
        default="last_two",
        help="sweep criterion: mean val Pass@1 over the last two validations, or the last one",
    )
    parser.add_argument(
        "--success",
        choices=list(SUCCESSES),
        default=SOLVED,
        help="what a held-out sample must do to count: the reward's acc, or also the task's as-asked check",
    )
    parser.add_argument(
        "--lrs-from-sweep",
        type=Path,
        action="append",
        help="take each cell's learning rate from this sweep.json (e.g. the same sweep chosen by another "
        "--success) instead of choosing it here; writes no sweep. Repeated: a later sweep's choices replace an "
        "earlier one's for the cells it chose (e.g. a re-tuning sweep of some cells over the first sweep)",
    )
    parser.add_argument("--baseline", default="grpo")
    parser.add_argument(
        "--same-information",
        default=",".join(SAME_INFORMATION),
        help="cells fed BoT-GRPO's token rewards; the best is the second reference",
    )
    parser.add_argument("--threshold", type=float, help="also count steps to this test Pass@1")
    parser.add_argument(
        "--ks",
        type=lambda text: tuple(int(k) for k in text.split(",")),
        default=KS,
        help="the k of Pass@k, each at most the samples per test problem (default 1,8)",
    )
    parser.add_argument(
        "--split",
        choices=(TEST, VAL),
        default=TEST,
        help="the held-out split the final comparison reads: test for a result; val only for a demonstration "
        "that must leave a study's test split unread",
    )
    parser.add_argument("--out", type=Path, help="output folder (default RESULTS/<task>)")
    parser.add_argument("--boot", type=int, default=2000, help="bootstrap draws")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap random seed")
    args = parser.parse_args(argv)
    sweep_dir, out = args.sweep_dir or args.results / "sweep", args.out or args.results / args.task
    try:
        borrowed = parse_borrowed(args.lr_from)
        sweep_runs = read_runs(sweep_dir).get(args.task, {})
        final_runs = read_runs(args.results).get(args.task, {})
        if not sweep_runs and not final_runs:
            raise ValueError(
                f"no run summaries of task {args.task!r} under {args.results / args.task / 'runs'} (final matrix) "
                f"or {sweep_dir / args.task / 'runs'} (sweep): run `python -m benchmarks.matrix` with --results first"
            )
        if borrowed and not sweep_runs:
            raise ValueError(f"--lr-from needs the sweep's runs, none under {sweep_dir / args.task / 'runs'}")
        out.mkdir(parents=True, exist_ok=True)
        if args.lrs_from_sweep:
            chosen = {}
            for sweep in args.lrs_from_sweep:
                chosen |= json.loads(sweep.read_text())["chosen"]
        elif sweep_runs:
            chosen = write_sweep(args.task, sweep_runs, borrowed, args.choose_by, args.success, out)
            print((out / "sweep.md").read_text())
        else:
            chosen = None
        if final_runs:
            settings = {
                "baseline": args.baseline,
                "same_information": tuple(args.same_information.split(",")),
                "threshold": args.threshold,
                "boot": args.boot,
                "seed": args.seed,
                "ks": args.ks,
                "success": args.success,
                "split": args.split,
            }
            write_final(args.task, final_runs, chosen or single_lrs(final_runs), out, **settings)
            print((out / "summary.md").read_text())
        else:
            print(f"no final runs yet under {args.results / args.task / 'runs'}: wrote the sweep only")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
