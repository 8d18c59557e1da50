"""The reports' files: reading, statistics, tables and plots put together, and written to a folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.reporting.comparison import final_report
from benchmarks.reporting.hypotheses import hypotheses_report
from benchmarks.reporting.matrix_summary import summarize, summarize_pass_at_k
from benchmarks.reporting.plots import (
    plot_forest,
    plot_pass_at_k,
    plot_steps_to_threshold,
    plot_test_curves,
    plot_training_curves,
)
from benchmarks.reporting.runs import VAL, Runs, lr_name, read_matrix, read_pass_at_k
from benchmarks.reporting.sweep import at_grid_edge, choose_lrs, sweep_table
from benchmarks.reporting.tables import (
    hypotheses_markdown,
    matrix_table,
    pass_at_k_table,
    report_markdown,
    sweep_markdown,
)

NOT_REACHED = "not reached"


def to_json(value):
    """numpy values as plain JSON: inf as ``"not reached"``, nan (undefined) as null."""
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else NOT_REACHED if np.isinf(value) else float(value)
    return value.item() if isinstance(value, np.generic) else value


def write_json(path: Path, value) -> None:
    """``value`` as indented JSON (:func:`to_json`: numpy values, inf and nan made plain)."""
    path.write_text(json.dumps(to_json(value), indent=1, allow_nan=False) + "\n")


def write_sweep(
    task: str, runs: Runs, borrowed: dict[str, str], criterion: str, success: str, out: Path
) -> dict[str, dict]:
    """sweep.json and sweep.md of the sweep's runs; returns each cell's chosen learning rate."""
    rows = sweep_table(runs, success)
    chosen = choose_lrs(rows, borrowed, criterion)
    edges = at_grid_edge(rows, chosen)
    sweep = {"task": task, "split": VAL, "success": success, "criterion": criterion, "rows": rows}
    sweep |= {"chosen": chosen, "at_edge": edges}
    write_json(out / "sweep.json", sweep)
    (out / "sweep.md").write_text(sweep_markdown(task, rows, chosen, criterion, success))
    for cell, edge in sorted(edges.items()):
        print(f"warning: {cell}'s chosen lr {lr_name(chosen[cell]['lr'])} is the {edge} it ran: extend its grid")
    return chosen


def write_final(task: str, runs: Runs, chosen: dict[str, dict], out: Path, **settings) -> None:
    """summary.json, summary.md, curves.png and forest.png of the final matrix's runs; ``settings`` are
    :func:`~benchmarks.reporting.comparison.final_report`'s keyword arguments (baseline, threshold, ...)."""
    report = to_json({"task": task, **final_report(runs, chosen, **settings)})
    write_json(out / "summary.json", report)
    (out / "summary.md").write_text(report_markdown(report))
    plot_test_curves(report, out / "curves.png")
    plot_forest(report, out / "forest.png")


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
    markdown = matrix_table(report["algorithms"], metric, threshold, baseline)
    passes = read_pass_at_k(runs, pass_at_k) if pass_at_k else {}
    out.mkdir(parents=True, exist_ok=True)
    if passes:
        report["pass_at_k"] = summarize_pass_at_k(passes, baseline)
        markdown += "\n" + pass_at_k_table(report["pass_at_k"], baseline)
        plot_pass_at_k(report["pass_at_k"], out / "pass_at_k.png")
    (out / "summary.json").write_text(json.dumps(report, indent=2))
    (out / "summary.md").write_text(markdown)
    plot_training_curves(matrix, metric, threshold, out / "curves.png")
    return report


def write_hypotheses(
    task: str, runs: Runs, chosen: dict[str, dict], threshold: float | None, out: Path, **draws
) -> dict:
    """hypotheses.json, hypotheses.md and (with a threshold) steps_to_threshold.png of the token-credit study's
    final runs; ``draws`` are the bootstrap's ``boot`` and ``seed``. Returns the JSON's content."""
    report = to_json({"task": task, **hypotheses_report(runs, chosen, threshold, **draws)})
    write_json(out / "hypotheses.json", report)
    (out / "hypotheses.md").write_text(hypotheses_markdown(report))
    if threshold is not None:
        plot_steps_to_threshold(report, out / "steps_to_threshold.png")
    return report
