"""The quick summary of a matrix's run folders: per algorithm over its seeds (mean ± std), steps to a threshold on
the training curve, area under it, final success, each against a baseline, and held-out Pass@k before training
and after the last step."""

from __future__ import annotations

import numpy as np

from benchmarks.metrics import area_under_curve, steps_to_threshold
from benchmarks.reporting.statistics import spread
from demo.training import Curve, moving_average


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
                **spread([s for s in reached if s is not None]),
                "reached": sum(s is not None for s in reached),
            },
            "auc": spread([area_under_curve(*curve) for curve in seeds.values()]),
            "final": spread([float(np.mean(curve[1][-final_window:])) for curve in seeds.values()]),
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
        return {str(k): spread([measured[k] for measured in measurements]) for k in sorted(measurements[0])}

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
