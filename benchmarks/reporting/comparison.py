"""The protocol's final comparison on the TEST split, each cell at its chosen learning rate.

Held-out Pass@k curves and finals, each cell's change from its first validation (did it learn at all),
differences against the baseline and the best same-information baseline, the probability of improvement
(rliable, arXiv:2108.13264), and steps to the baseline's final Pass@1 and to a fixed threshold with their
ratios. Every interval is a 95% percentile bootstrap that resamples seeds (each cell's own) and problems (the
same draws for every cell: differences are paired over problems).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.metrics import generated_per_trained
from benchmarks.reporting.runs import SOLVED, TEST, Runs, held_out_counts, split_key
from benchmarks.reporting.statistics import (
    estimate,
    pass_at_k_scores,
    per_seed_curves,
    probability_of_improvement,
    resample_weights,
    seed_mean,
    steps_estimate,
    steps_ratio,
    steps_to_level,
    stream,
    with_verdict,
)

KS = (1, 8)
SAME_INFORMATION = ("grpo_token_mean", "grpo_token_min", "ps_grpo", "pure", "pure_sum")


@dataclass(frozen=True)
class Cell:
    """One cell's test-split Pass@k at its chosen learning rate; row 0 of every array is the point estimate
    (every seed and problem once), rows 1..B the bootstrap draws.

    Attributes:
        name: the cell (``ALGORITHM`` or ``ALGORITHM@VARIANT``).
        lr: its learning rate; chosen_by: the cell whose sweep chose it (None: no sweep).
        seeds: its seeds, ascending (S of them).
        steps: (V,) validation steps.
        per_seed: ``{k: (1 + B, S, V)}`` Pass@k per seed and validation, mean over the (drawn) problems.
        seed_weights: (1 + B, S) how often each seed is drawn, over S.
        wall_seconds: mean wall time of its runs (None if not recorded).
        generated_per_trained: mean over its runs of the rollouts generated per rollout trained on (above 1
            with DAPO's dynamic sampling; None if a run's summary predates its record).
    """

    name: str
    lr: float | None
    chosen_by: str | None
    seeds: tuple[int, ...]
    steps: np.ndarray
    per_seed: dict[int, np.ndarray]
    seed_weights: np.ndarray
    wall_seconds: float | None
    generated_per_trained: float | None

    def curve(self, k: int) -> np.ndarray:
        """(1 + B, V): seed-mean Pass@k curve."""
        return seed_mean(self.per_seed[k], self.seed_weights)

    def final(self, k: int) -> np.ndarray:
        """(1 + B,): Pass@k at the last validation."""
        return self.curve(k)[:, -1]

    def change(self, k: int) -> np.ndarray:
        """(1 + B,): Pass@k at the last validation minus at the first (paired: the same seeds and problems)."""
        return self.final(k) - self.curve(k)[:, 0]


def load_cells(
    runs: Runs,
    chosen: dict[str, dict],
    ks: tuple[int, ...],
    boot: int,
    seed: int,
    success: str = SOLVED,
    split: str = TEST,
) -> dict[str, Cell]:
    """Every chosen cell that has runs at its learning rate, scored on ``split`` by ``success``, with the same
    problem draws for all (paired) and its own seed draws."""
    counts = {
        cell: held_out_counts(runs[cell][info["lr"]], split_key(split, success))
        for cell, info in chosen.items()
        if info["lr"] in runs.get(cell, {})
    }
    if not counts:
        return {}
    problems = next(iter(counts.values()))[1].shape[2]
    problem_weights = resample_weights(stream(seed, "problems"), problems, boot)
    cells = {}
    for name, (steps, cell_counts) in sorted(counts.items()):
        by_seed = runs[name][chosen[name]["lr"]]
        walls = [summary["wall_seconds"] for summary in by_seed.values() if summary.get("wall_seconds") is not None]
        generated = (
            [generated_per_trained(run["train"], run["prompts_per_step"]) for run in by_seed.values()]
            if all("prompts_per_step" in run for run in by_seed.values())
            else []
        )
        cells[name] = Cell(
            name,
            chosen[name]["lr"],
            chosen[name]["chosen_by"],
            tuple(sorted(by_seed)),
            steps,
            {k: per_seed_curves(pass_at_k_scores(cell_counts, k), problem_weights) for k in ks},
            resample_weights(stream(seed, name), len(by_seed), boot),
            float(np.mean(walls)) if walls else None,
            float(np.mean(generated)) if generated else None,
        )
    return cells


def comparison(x: Cell, y: Cell, role: str, ks: tuple[int, ...], to_level: dict, to_threshold: dict) -> dict:
    """X against Y: Pass@k differences at the last validation (paired over problems) with verdicts, the
    probability of improvement on Pass@1, and the ratios of steps to the baseline's level and to the threshold."""
    entry = {"cell": x.name, "versus": y.name, "role": role}
    for k in ks:
        entry[f"pass@{k}"] = with_verdict(estimate(x.final(k) - y.final(k)))
    entry["probability_of_improvement"] = estimate(
        probability_of_improvement(x.per_seed[1][:, :, -1], y.per_seed[1][:, :, -1], x.seed_weights, y.seed_weights)
    )
    entry["steps_ratio_to_level"] = steps_estimate(steps_ratio(to_level[x.name], to_level[y.name]))
    if to_threshold:
        entry["steps_ratio_to_threshold"] = steps_estimate(steps_ratio(to_threshold[x.name], to_threshold[y.name]))
    return entry


def cell_entry(cell: Cell, ks: tuple[int, ...], to_level: np.ndarray, to_threshold: np.ndarray | None) -> dict:
    """One cell's settings, Pass@k curves and finals with intervals, and steps to the level and threshold."""
    entry = {
        "lr": cell.lr,
        "chosen_by": cell.chosen_by,
        "seeds": list(cell.seeds),
        "wall_seconds": cell.wall_seconds,
        "rollouts_generated_per_trained": cell.generated_per_trained,
        "steps": cell.steps,
        "curves": {f"pass@{k}": estimate(cell.curve(k)) for k in ks},
        "final": {f"pass@{k}": estimate(cell.final(k)) for k in ks},
        "change": {f"pass@{k}": with_verdict(estimate(cell.change(k))) for k in ks},
        "steps_to_level": steps_estimate(to_level),
    }
    if to_threshold is not None:
        entry["steps_to_threshold"] = steps_estimate(to_threshold)
    return entry


def final_report(
    runs: Runs,
    chosen: dict[str, dict],
    baseline: str = "grpo",
    same_information: tuple[str, ...] = SAME_INFORMATION,
    threshold: float | None = None,
    boot: int = 2000,
    seed: int = 0,
    ks: tuple[int, ...] = KS,
    success: str = SOLVED,
    split: str = TEST,
) -> dict:
    """The final comparison on the TEST split (the validation split is never read), or on ``split``.

    Args:
        runs: the final matrix's runs (:func:`~benchmarks.reporting.runs.read_runs` of one task).
        chosen: ``{cell: {"lr", "chosen_by"}}`` (:mod:`~benchmarks.reporting.sweep`); a chosen cell
            without runs at its learning rate is listed under ``not_run``.
        baseline: the cell every other one is compared with; its seed-mean final test Pass@1 is the level
            whose steps are counted.
        same_information: cells fed the same token rewards as BoT-GRPO; the one with the best final test
            Pass@1 is the second reference.
        threshold: a fixed Pass@1 level whose steps are counted too (None: not counted).
        boot: bootstrap draws; seed: their random seed.
        ks: the k of Pass@k (at most the samples per problem).
        success: what a sample must do to count (:data:`SUCCESSES`): the reward's ``acc``, or the task's
            stricter as-asked check where its reward can be satisfied without doing the task.
        split: the held-out split read: TEST for a result; VAL only where the test split must stay unread (a
            one-seed demonstration beside a registered study whose test runs are still to come).
    """
    unchosen = sorted(set(runs) - set(chosen))
    if unchosen:
        raise ValueError(f"cell(s) {unchosen} ran but have no chosen learning rate: sweep them or use --lr-from")
    cells = load_cells(runs, chosen, ks, boot, seed, success, split)
    if baseline not in cells:
        raise ValueError(
            f"baseline {baseline!r} has no {split} runs at its chosen learning rate; cells: {sorted(cells)}"
        )
    level = cells[baseline].final(1)
    to_level = {name: steps_to_level(cell.steps, cell.curve(1), level) for name, cell in cells.items()}
    to_threshold = {
        name: steps_to_level(cell.steps, cell.curve(1), np.full_like(level, threshold))
        for name, cell in cells.items()
        if threshold is not None
    }
    present = [name for name in same_information if name in cells]
    best = max(present, key=lambda name: cells[name].final(1)[0], default=None)
    references = [(baseline, "baseline"), *([(best, "best same-information baseline")] if best else [])]
    return {
        "split": split,
        "success": success,
        "ks": list(ks),
        "boot": boot,
        "seed": seed,
        "baseline": baseline,
        "same_information": present,
        "best_same_information": best,
        "level": estimate(level),
        "threshold": threshold,
        "not_run": sorted(set(chosen) - set(cells)),
        "cells": {name: cell_entry(cell, ks, to_level[name], to_threshold.get(name)) for name, cell in cells.items()},
        "comparisons": [
            comparison(cells[name], cells[reference], role, ks, to_level, to_threshold)
            for reference, role in references
            for name in cells
            if name != reference
        ],
    }
