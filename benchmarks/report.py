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
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.metrics import area_under_curve, mean_pass_at_k, steps_to_threshold
from demo.run import Curve, moving_average


def read_curve(path: Path, metric: str) -> Curve:
    """Steps and values of ``metric`` from one verl metrics JSONL (lines without it are skipped)."""
    steps, values = [], []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        value = record.get("data", {}).get(metric)
        if value is not None:
            steps.append(float(record["step"]))
            values.append(float(value))
    return steps, values


def finished_runs(runs: Path) -> list[tuple[str, int, Path]]:
    """``(algorithm, seed, folder)`` of every run under ``<runs>/<algorithm>/seed<k>/`` that left its ``DONE``
    marker (an interrupted run's partial results would skew the comparison)."""
    found = []
    for done in sorted(runs.glob("*/seed*/DONE")):
        seed = re.fullmatch(r"seed(\d+)", done.parent.name)
        if seed:
            found.append((done.parent.parent.name, int(seed.group(1)), done.parent))
    return found


def read_matrix(runs: Path, metric: str) -> dict[str, dict[int, Curve]]:
    """``{algorithm: {seed: curve}}`` of ``metric`` in every finished run's ``metrics.jsonl``."""
    matrix: dict[str, dict[int, Curve]] = defaultdict(dict)
    for algorithm, seed, folder in finished_runs(runs):
        curve = read_curve(folder / "metrics.jsonl", metric) if (folder / "metrics.jsonl").exists() else ([], [])
        if curve[0]:
            matrix[algorithm][seed] = curve
    if not matrix:
        raise ValueError(f"no {metric!r} values under {runs}/<algorithm>/seed<k>/metrics.jsonl")
    return dict(matrix)


def read_pass_at_k(runs: Path, ks: Sequence[int]) -> dict[str, dict[int, dict[str, dict[int, float]]]]:
    """``{algorithm: {seed: {"before": {k: Pass@k}, "after": {k: Pass@k}}}}`` from the first and last
    validation dumps (``validation/<step>.jsonl``) of every finished run."""
    results: dict[str, dict[int, dict[str, dict[int, float]]]] = defaultdict(dict)
    for algorithm, seed, folder in finished_runs(runs):
        dumps = {int(path.stem): path for path in (folder / "validation").glob("*.jsonl") if path.stem.isdigit()}
        chosen = {"before": dumps.get(0), "after": dumps[max(dumps)] if max(dumps, default=0) > 0 else None}
        entry = {when: {k: pass_at_k_of_dump(dump, k) for k in ks} for when, dump in chosen.items() if dump}
        if entry:
            results[algorithm][seed] = entry
    return dict(results)


def pass_at_k_of_dump(path: Path, k: int, correct_key: str = "acc") -> float:
    """Mean Pass@k over the problems of one verl generation dump (JSONL with ``input`` and ``correct_key``).

    Samples of one problem share ``input``; a sample is correct when ``correct_key`` is > 0.5.
    """
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            counts[row["input"]][0] += 1
            counts[row["input"]][1] += int(float(row[correct_key]) > 0.5)
    return mean_pass_at_k([tuple(count) for count in counts.values()], k)


def _stats(values: list[float]) -> dict:
    array = np.asarray(values, dtype=float)
    return {
        "mean": float(array.mean()) if len(array) else None,
        "std": float(array.std(ddof=1)) if len(array) > 1 else 0.0 if len(array) else None,
        "values": [float(v) for v in array],
    }


def summarize(
    matrix: dict[str, dict[int, Curve]], threshold: float, baseline: str, final_window: int = 3, smooth: int = 3
) -> dict:
    """Per algorithm over its seeds: steps to ``threshold`` (on the ``smooth``-point moving average, so one
    lucky batch does not count as reaching it), area under the curve, final success (mean of the last
    ``final_window`` points), and each against ``baseline`` (speed-up = baseline steps / steps)."""
    summary = {}
    for algorithm, seeds in matrix.items():
        reached = [steps_to_threshold(*moving_average(curve, smooth), threshold) for curve in seeds.values()]
        summary[algorithm] = {
            "seeds": sorted(seeds),
            "steps_to_threshold": {
                **_stats([s for s in reached if s is not None]),
                "reached": sum(s is not None for s in reached),
            },
            "auc": _stats([area_under_curve(*curve) for curve in seeds.values()]),
            "final": _stats([float(np.mean(curve[1][-final_window:])) for curve in seeds.values()]),
        }
    if baseline in summary:
        base = summary[baseline]
        for entry in summary.values():
            steps, base_steps = entry["steps_to_threshold"]["mean"], base["steps_to_threshold"]["mean"]
            entry["vs_baseline"] = {
                "speedup_to_threshold": base_steps / steps if steps and base_steps else None,
                "auc_ratio": entry["auc"]["mean"] / base["auc"]["mean"] if base["auc"]["mean"] else None,
                "final_difference": entry["final"]["mean"] - base["final"]["mean"],
            }
    return summary


def summarize_pass_at_k(results: dict[str, dict[int, dict[str, dict[int, float]]]], baseline: str) -> dict:
    """Per algorithm and k over seeds: Pass@k before training and after the last step, and the
    difference after - baseline after; ``"before training"`` pools every run's pre-training measurement
    (one model, so its spread is the measurement's own noise)."""

    def per_k(measurements: list[dict[int, float]]) -> dict[str, dict]:
        return {str(k): _stats([measured[k] for measured in measurements]) for k in sorted(measurements[0])}

    summary: dict = {}
    for algorithm, seeds in results.items():
        summary[algorithm] = {
            when: per_k(measured)
            for when in ("before", "after")
            if (measured := [entry[when] for entry in seeds.values() if when in entry])
        }
    pooled = [entry["before"] for seeds in results.values() for entry in seeds.values() if "before" in entry]
    if pooled:
        summary["before training"] = {"after": per_k(pooled)}
    base = summary.get(baseline, {}).get("after", {})
    for entry in summary.values():
        entry["after_minus_baseline"] = {
            k: stats["mean"] - base[k]["mean"]
            for k, stats in entry.get("after", {}).items()
            if k in base and stats["mean"] is not None and base[k]["mean"] is not None
        }
    return summary


def pass_at_k_table(summary: dict, baseline: str) -> str:
    ks = sorted({int(k) for entry in summary.values() for k in entry.get("after", {})})
    lines = [
        f"Unbiased Pass@k on the held-out prompts after the last step (mean ± std over seeds); the last "
        f"column against `{baseline}`; `before training` pools every run's measurement of the starting model.",
        "",
        "| algorithm | " + " | ".join(f"Pass@{k}" for k in ks) + f" | Pass@{ks[-1]} - baseline |",
        "| --- |" + " --- |" * (len(ks) + 1),
    ]
    for algorithm, entry in summary.items():
        after = entry.get("after", {})
        difference = entry["after_minus_baseline"].get(str(ks[-1]))
        cells = [_cell(after[str(k)], 3) if str(k) in after else "n/a" for k in ks]
        lines.append(
            f"| {algorithm} | " + " | ".join(cells) + f" | {'n/a' if difference is None else f'{difference:+.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def plot_pass_at_k(summary: dict, path: Path) -> None:
    """Pass@k against k after training, one line per algorithm with its seeds' min-max as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for algorithm, entry in sorted(summary.items()):
        after = entry.get("after", {})
        ks = sorted(after, key=int)
        mean = np.array([after[k]["mean"] for k in ks])
        low = mean - np.array([min(after[k]["values"]) for k in ks])
        high = np.array([max(after[k]["values"]) for k in ks]) - mean
        style = {"color": "black", "linestyle": "--"} if algorithm == "before training" else {}
        axis.errorbar([int(k) for k in ks], mean, yerr=[low, high], capsize=3, marker="o", label=algorithm, **style)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("k (samples per problem)")
    axis.set_ylabel("Pass@k (held-out prompts)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _cell(stats: dict, digits: int = 2) -> str:
    if stats["mean"] is None:
        return "n/a"
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def markdown_table(summary: dict, metric: str, threshold: float, baseline: str) -> str:
    lines = [
        f"Success metric `{metric}`, threshold {threshold} (reached when its 3-step moving average is); "
        f"mean ± std over seeds; ratios against `{baseline}`.",
        "",
        "| algorithm | seeds | steps to threshold (reached) | speed-up vs baseline | AUC | AUC ratio | final "
        "| final - baseline |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for algorithm, entry in summary.items():
        versus = entry.get("vs_baseline", {})
        reach = entry["steps_to_threshold"]
        speedup, auc_ratio = versus.get("speedup_to_threshold"), versus.get("auc_ratio")
        final_difference = versus.get("final_difference")
        lines.append(
            f"| {algorithm} | {len(entry['seeds'])} | {_cell(reach, 1)} ({reach['reached']}/{len(entry['seeds'])}) "
            f"| {'n/a' if speedup is None else f'{speedup:.2f}x'} | {_cell(entry['auc'])} "
            f"| {'n/a' if auc_ratio is None else f'{auc_ratio:.2f}'} | {_cell(entry['final'])} "
            f"| {'n/a' if final_difference is None else f'{final_difference:+.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def plot_curves(matrix: dict[str, dict[int, Curve]], metric: str, threshold: float, path: Path) -> None:
    """Mean curve of each algorithm over seeds, with a min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for algorithm, seeds in sorted(matrix.items()):
        steps = sorted({step for curve in seeds.values() for step in curve[0]})
        grid = np.array([np.interp(steps, *curve, right=math.nan) for curve in seeds.values()])
        mean = np.nanmean(grid, axis=0)
        (line,) = axis.plot(steps, mean, label=f"{algorithm} ({len(seeds)} seeds)")
        axis.fill_between(steps, np.nanmin(grid, axis=0), np.nanmax(grid, axis=0), color=line.get_color(), alpha=0.2)
    axis.axhline(threshold, color="black", linestyle="--", linewidth=0.8, label=f"threshold {threshold}")
    axis.set_xlabel("training step")
    axis.set_ylabel(metric)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_report(
    runs: Path, metric: str, threshold: float, baseline: str, out: Path, pass_at_k: Sequence[int] = ()
) -> dict:
    """Write ``summary.json``, ``summary.md`` and ``curves.png`` (and ``pass_at_k.png`` when ``pass_at_k``
    names budgets and the runs dumped validations) to ``out``; returns the JSON's content."""
    matrix = read_matrix(runs, metric)
    report = {
        "metric": metric,
        "threshold": threshold,
        "baseline": baseline,
        "algorithms": summarize(matrix, threshold, baseline),
    }
    markdown = markdown_table(report["algorithms"], metric, threshold, baseline)
    passes = read_pass_at_k(runs, pass_at_k) if pass_at_k else {}
    out.mkdir(parents=True, exist_ok=True)
    if passes:
        report["pass_at_k"] = summarize_pass_at_k(passes, baseline)
        markdown += "\n" + pass_at_k_table(report["pass_at_k"], baseline)
        plot_pass_at_k(report["pass_at_k"], out / "pass_at_k.png")
    (out / "summary.json").write_text(json.dumps(report, indent=2))
    (out / "summary.md").write_text(markdown)
    plot_curves(matrix, metric, threshold, out / "curves.png")
    return report


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
