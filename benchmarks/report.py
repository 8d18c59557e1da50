"""Report on a benchmark matrix: per algorithm, steps to a threshold, area under the success curve and
final success over seeds, ratios against a baseline, curves with seed bands; with ``--pass-at-k``, the
unbiased Pass@k on held-out prompts before training and after the last step.

Reads ``<runs>/<algorithm>/seed<k>/metrics.jsonl`` in verl's file-logger format
(``{"step": s, "data": {metric: value}}`` per line) and, for Pass@k, verl's validation dumps
``<runs>/<algorithm>/seed<k>/validation/<step>.jsonl``; writes ``summary.json``, ``summary.md``,
``curves.png`` (and ``pass_at_k.png``) to ``--out``.

    python -m benchmarks.report runs/react --metric reward_extra/compiled/mean \\
        --threshold 0.8 --baseline grpo --out benchmarks/results/react
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.reporting.outputs import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="folder of <algorithm>/seed<k>/metrics.jsonl")
    parser.add_argument("--metric", required=True, help="the success metric's key in verl's logs")
    parser.add_argument("--threshold", type=float, required=True)
    parser.add_argument("--baseline", default="grpo")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pass-at-k", default="", help="comma-separated budgets k, e.g. 1,4,8 (from validation dumps)")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.pass_at_k.split(",") if k]
    write_report(args.runs, args.metric, args.threshold, args.baseline, args.out, ks)
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
