"""The reports' figures (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from demo.training import Curve


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display); imported on first use, as it is slow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(figure, path: Path) -> None:
    """Write ``figure`` to ``path`` (tight layout, 120 dpi) and free it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_test_curves(report: dict, path: Path) -> None:
    """curves.png: each cell's seed-mean held-out Pass@1 over steps with its 95% band, the level and threshold."""
    figure, axes = pyplot().subplots(figsize=(8, 5))
    for name, cell in report["cells"].items():
        curve = cell["curves"]["pass@1"]
        (line,) = axes.plot(cell["steps"], curve["estimate"], marker="o", markersize=3, label=name)
        axes.fill_between(cell["steps"], curve["low"], curve["high"], color=line.get_color(), alpha=0.15)
    axes.axhline(report["level"]["estimate"], color="grey", linestyle="--", label=f"{report['baseline']} final")
    if report["threshold"] is not None:
        axes.axhline(report["threshold"], color="grey", linestyle=":", label="threshold")
    split = report["split"]
    title = f"{report['task']}: held-out {split} Pass@1, 95% CI"
    axes.set(xlabel="training step", ylabel=f"{split} Pass@1", title=title)
    axes.legend(fontsize="small")
    save(figure, path)


def plot_forest(report: dict, path: Path) -> None:
    """forest.png: Pass@1 differences (95% CI) against the baseline and the best same-information baseline."""
    roles = list(dict.fromkeys(entry["role"] for entry in report["comparisons"]))
    if not roles:  # the baseline alone has run so far
        path.unlink(missing_ok=True)
        return
    size = (6 * len(roles), 1 + 0.4 * len(report["cells"]))
    figure, panels = pyplot().subplots(1, len(roles), figsize=size, squeeze=False)
    for axes, role in zip(panels[0], roles, strict=True):
        entries = [entry for entry in report["comparisons"] if entry["role"] == role]
        low, estimates, high = (
            np.array([entry["pass@1"][key] for entry in entries]) for key in ("low", "estimate", "high")
        )
        rows = np.arange(len(entries))
        axes.errorbar(estimates, rows, xerr=[estimates - low, high - estimates], fmt="o", capsize=3)
        axes.axvline(0, color="grey", linestyle="--")
        axes.set_yticks(rows, [entry["cell"] for entry in entries])
        axes.invert_yaxis()
        axes.set(xlabel=f"{report['split']} Pass@1 difference (95% CI)", title=f"vs {entries[0]['versus']} ({role})")
    save(figure, path)


def plot_training_curves(matrix: dict[str, dict[int, Curve]], metric: str, threshold: float, path: Path) -> None:
    """Mean curve of each algorithm over seeds, with a min-max band."""
    figure, axis = pyplot().subplots(figsize=(8, 4.5))
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
    save(figure, path)


def plot_pass_at_k(summary: dict, path: Path) -> None:
    """Pass@k against k after training, one line per algorithm with its seeds' min-max as error bars."""
    figure, axis = pyplot().subplots(figsize=(8, 4.5))
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
    save(figure, path)


def plot_steps_to_threshold(report: dict, path: Path) -> None:
    """steps_to_threshold.png: each cell's steps to T with its 95% interval; a cell that does not reach T (at the
    point estimate) is drawn at its last step as a hollow marker, its interval's unreached side open."""
    names = list(report["cells"])
    figure, axes = pyplot().subplots(figsize=(7, 1 + 0.4 * len(names)))
    for row, name in enumerate(names):
        cell = report["cells"][name]
        steps, last = cell["steps_to_threshold"], cell["last_step"]
        low, estimate, high = (
            steps[key] if isinstance(steps[key], float) else last for key in ("low", "estimate", "high")
        )
        reached = isinstance(steps["estimate"], float)
        axes.plot([low, high], [row, row], color="C0")
        axes.plot(estimate, row, "o", color="C0", fillstyle="full" if reached else "none")
        axes.annotate(f"{steps['reached']:.0%} reach", (high, row), xytext=(4, 0), textcoords="offset points",
                      va="center", fontsize="x-small")  # fmt: skip
    axes.set_yticks(range(len(names)), names)
    axes.invert_yaxis()
    axes.set(xlabel=f"training steps to test exact rate {report['threshold']} (95% CI)", title=report["task"])
    save(figure, path)
