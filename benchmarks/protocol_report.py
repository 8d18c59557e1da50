"""The protocol's report: the learning-rate sweep on the validation split, the final comparison on the test split.

Reads the run summaries benchmarks/matrix.py commits, one per finished run,
``<results>/<task>/runs/<cell>__lr<lr>__seed<seed>.json`` (settings, training curves, and per validation step
and held-out split the ``[n, c]`` samples and correct ones of every problem).

Sweep (validation split only; the test split is never read): per cell and learning rate, the seed-mean
validation Pass@1 at the last validation and averaged over the last two; each cell runs at the learning rate
that maximises the chosen criterion (ties: the smaller), or at the one chosen for another cell
(``--lr-from CELL=SOURCE``, the family's best). Writes ``sweep.json`` and ``sweep.md``.

Final report (test split only), each cell at its chosen learning rate: held-out Pass@k curves (``--ks``,
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
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.metrics import AS_ASKED, generated_per_trained, pass_at_k

VAL, TEST = "val", "test"
SOLVED = "solved"
SUCCESSES = {  # what a held-out sample must do to count
    SOLVED: "the reward's verdict (acc)",
    AS_ASKED: "the reward's verdict and the task's as-asked check (e.g. React: the requested component's JSX elements)",
}
KS = (1, 8)
SAME_INFORMATION = ("grpo_token_mean", "grpo_token_min", "ps_grpo", "pure", "pure_sum")
CRITERIA = ("last_two", "final")
TIE = 1e-12  # sweep scores closer than this are a tie
NOT_REACHED = "not reached"
RUN_FILE = re.compile(r"(?P<cell>.+)__lr(?P<lr>.+)__seed(?P<seed>\d+)\.json")

Runs = dict[str, dict[float | None, dict[int, dict]]]  # cell -> learning rate -> seed -> run summary


def lr_name(lr: float | None) -> str:
    """A learning rate as run files name it (``base``: the base settings' own)."""
    return "base" if lr is None else f"{lr:g}"


def run_file_name(cell: str, lr: float | None, seed: int) -> str:
    """A run summary's file name, ``<cell>__lr<lr>__seed<seed>.json`` (:data:`RUN_FILE` reads it)."""
    return f"{cell}__lr{lr_name(lr)}__seed{seed}.json"


def lr_order(lr: float | None) -> tuple[bool, float]:
    """Sort key of learning rates: ascending, ``base`` first."""
    return lr is not None, lr or 0.0


def each_run(runs: Runs) -> Iterator[tuple[str, float | None, int, dict]]:
    """``(cell, lr, seed, summary)`` of every run."""
    for cell, by_lr in runs.items():
        for lr, by_seed in by_lr.items():
            for seed, summary in by_seed.items():
                yield cell, lr, seed, summary


def read_runs(results: Path) -> dict[str, Runs]:
    """``{task: {cell: {lr: {seed: summary}}}}`` of every run summary under ``<results>/<task>/runs/``.

    A file whose name disagrees with its content, or a task whose runs were made with different settings
    (:func:`check_settings`), is refused.
    """
    tasks: dict[str, Runs] = {}
    for path in sorted(results.glob("*/runs/*.json")):
        name = RUN_FILE.fullmatch(path.name)
        if name is None:
            raise ValueError(f"{path}: not a run summary name (<cell>__lr<lr>__seed<seed>.json)")
        summary = json.loads(path.read_text())
        named = (path.parent.parent.name, name["cell"], name["lr"], int(name["seed"]))
        recorded = (summary["task"], summary["cell"], lr_name(summary["lr"]), summary["seed"])
        if named != recorded:
            raise ValueError(f"{path}: its name says (task, cell, lr, seed) = {named}, its content {recorded}")
        by_seed = tasks.setdefault(summary["task"], {}).setdefault(summary["cell"], {}).setdefault(summary["lr"], {})
        by_seed[summary["seed"]] = summary
    for task, runs in tasks.items():
        check_settings(runs, results / task / "runs")
    return tasks


def settings(summary: dict) -> tuple:
    """What runs compared with each other must share: the warm start (its weights' SHA-256, None in summaries
    older than that record), training steps, validation steps, and per held-out split the number of problems
    and the samples per problem."""
    held_out = summary["held_out"]
    shapes = {(split, len(rows), n) for counts in held_out.values() for split, rows in counts.items() for n, _ in rows}
    return summary.get("warm_start_sha256"), summary["steps"], tuple(sorted(held_out, key=int)), tuple(sorted(shapes))


def check_settings(runs: Runs, where: Path) -> None:
    """Refuse runs made with different settings (:func:`settings`): their scores are not comparable."""
    groups: dict[tuple, list[str]] = {}
    for cell, lr, seed, summary in each_run(runs):
        groups.setdefault(settings(summary), []).append(f"{cell} lr {lr_name(lr)} seed {seed}")
    if len(groups) > 1:
        described = "\n".join(
            f"  {names[0]} and {len(names) - 1} more: warm start {(warm_start or 'not recorded')[:16]}, {steps} "
            f"steps, validations at steps {list(validations)}, (split, problems, samples) {list(shapes)}"
            for (warm_start, steps, validations, shapes), names in groups.items()
        )
        raise ValueError(f"{where}: runs with mixed settings cannot be compared; rerun them alike:\n{described}")


def split_key(split: str, success: str) -> str:
    """The run summaries' held-out key of ``split`` counted by ``success`` (one of :data:`SUCCESSES`)."""
    return split if success == SOLVED else f"{split}:{success}"


def held_out_counts(by_seed: dict[int, dict], split: str) -> tuple[np.ndarray, np.ndarray]:
    """Validation steps (V,) and ``[n, c]`` per seed, validation and problem (S, V, P, 2), seeds ascending."""
    first = next(iter(by_seed.values()))
    steps = sorted(first["held_out"], key=int)
    lacking = sorted(
        seed for seed, summary in by_seed.items() if any(split not in summary["held_out"][step] for step in steps)
    )
    if lacking or not steps:
        raise ValueError(
            f"{first['cell']} lr {lr_name(first['lr'])} seed(s) {lacking or sorted(by_seed)} have no {split!r} "
            f"validation at some step: run them with --validate {split}"
        )
    counts = [[by_seed[seed]["held_out"][step][split] for step in steps] for seed in sorted(by_seed)]
    return np.array(steps, dtype=float), np.array(counts, dtype=float)


def pass_at_k_scores(counts: np.ndarray, k: int) -> np.ndarray:
    """Unbiased Pass@k of every problem: ``[n, c]`` counts (..., 2) -> (...)."""
    pairs, where = np.unique(counts.reshape(-1, 2), axis=0, return_inverse=True)
    values = np.array([pass_at_k(int(n), int(c), k) for n, c in pairs])
    return values[where.reshape(counts.shape[:-1])]


def sweep_table(runs: Runs, success: str = SOLVED) -> list[dict]:
    """One row per cell and learning rate (cells sorted, learning rates ascending), from the VALIDATION split
    only, samples counted by ``success``: seeds, validation steps, the seed-mean Pass@1 curve, its last value
    (``final``) and the mean of its last two values (``last_two``)."""
    rows = []
    for cell in sorted(runs):
        for lr in sorted(runs[cell], key=lr_order):
            steps, counts = held_out_counts(runs[cell][lr], split_key(VAL, success))
            curve = pass_at_k_scores(counts, 1).mean(axis=(0, 2))
            rows.append(
                {
                    "cell": cell,
                    "lr": lr,
                    "seeds": sorted(runs[cell][lr]),
                    "steps": steps.tolist(),
                    "curve": curve.tolist(),
                    "final": float(curve[-1]),
                    "last_two": float(curve[-2:].mean()),
                }
            )
    return rows


def choose_lrs(rows: list[dict], borrowed: dict[str, str], criterion: str = "last_two") -> dict[str, dict]:
    """``{cell: {"lr": lr, "chosen_by": cell whose sweep chose it}}``.

    Args:
        rows: :func:`sweep_table`'s rows (learning rates ascending within a cell).
        borrowed: ``{cell: source cell}``: the cell runs at the learning rate chosen for the source (a family's
            best reused); it overrides the cell's own sweep.
        criterion: the row score maximised, ``"last_two"`` or ``"final"``; ties (within ``TIE``) go to the
            smaller learning rate.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    best: dict[str, dict] = {}
    for row in rows:
        if row["cell"] not in best or row[criterion] > best[row["cell"]][criterion] + TIE:
            best[row["cell"]] = row
    unswept = sorted(source for source in borrowed.values() if source not in best)
    if unswept:
        raise ValueError(f"--lr-from names cell(s) {unswept} that the sweep did not run; swept: {sorted(best)}")
    chosen = {cell: {"lr": row["lr"], "chosen_by": cell} for cell, row in best.items()}
    chosen.update({cell: {"lr": best[source]["lr"], "chosen_by": source} for cell, source in borrowed.items()})
    return chosen


def at_grid_edge(rows: list[dict], chosen: dict[str, dict]) -> dict[str, str]:
    """``{cell: "smallest" | "largest"}`` for every cell whose own sweep chose the smallest or the largest of
    its (at least two) learning rates: not yet a tuned choice; PROTOCOL.md extends such a cell's grid."""
    swept: dict[str, list[float]] = {}
    for row in rows:
        swept.setdefault(row["cell"], []).append(row["lr"])
    edges = {}
    for cell, lrs in swept.items():
        lr = chosen[cell]["lr"]
        if len(lrs) > 1 and chosen[cell]["chosen_by"] == cell and lr in (min(lrs), max(lrs)):
            edges[cell] = "smallest" if lr == min(lrs) else "largest"
    return edges


def single_lrs(runs: Runs) -> dict[str, dict]:
    """Without a sweep, each cell's only learning rate (``chosen_by`` None); several are refused."""
    several = sorted(cell for cell, by_lr in runs.items() if len(by_lr) > 1)
    if several:
        raise ValueError(f"cell(s) {several} ran at several learning rates: give the sweep (--sweep-dir)")
    return {cell: {"lr": next(iter(by_lr)), "chosen_by": None} for cell, by_lr in runs.items()}


def sweep_markdown(task: str, rows: list[dict], chosen: dict[str, dict], criterion: str, success: str) -> str:
    """The sweep's table (validation Pass@1, mean over seeds) and the learning rate each cell runs at."""
    lines = [
        f"# Learning-rate sweep: {task} (validation split, Pass@1, mean over seeds)",
        "",
        f"A sample counts as a success by {SUCCESSES[success]}.",
        f"Chosen: the largest `{criterion}` per cell (ties: the smaller learning rate).",
        "",
        "| cell | lr | seeds | last validation | mean of last two | chosen |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        mark = "yes" if chosen.get(row["cell"], {}).get("lr") == row["lr"] else ""
        lines.append(
            f"| {row['cell']} | {lr_name(row['lr'])} | {len(row['seeds'])} | {row['final']:.3f} | "
            f"{row['last_two']:.3f} | {mark} |"
        )
    lines += ["", "| cell | runs at lr | chosen by |", "| --- | --- | --- |"]
    lines += [f"| {cell} | {lr_name(info['lr'])} | {info['chosen_by']} |" for cell, info in sorted(chosen.items())]
    edges = at_grid_edge(rows, chosen)
    if edges:
        named = ", ".join(f"{cell} ({lr_name(chosen[cell]['lr'])}, its {edge})" for cell, edge in sorted(edges.items()))
        lines += ["", f"**At the edge of the grid, so not yet tuned** (PROTOCOL.md extends these grids): {named}."]
    return "\n".join(lines) + "\n"


def resample_weights(rng: np.random.Generator, count: int, boot: int) -> np.ndarray:
    """(1 + boot, count): row 0 every item once, row b how often a draw with replacement takes each item;
    divided by count (a row sums to 1)."""
    draws = rng.multinomial(count, np.full(count, 1 / count), size=boot)
    return np.vstack([np.ones(count), draws]) / count


def per_seed_curves(scores: np.ndarray, problem_weights: np.ndarray) -> np.ndarray:
    """Problem-weighted mean of per-problem scores (S, V, P) under problem weights (N, P) -> (N, S, V)."""
    return np.tensordot(problem_weights, scores, axes=([1], [2]))


def seed_mean(per_seed: np.ndarray, seed_weights: np.ndarray) -> np.ndarray:
    """Seed-weighted mean of per-seed curves (N, S, V) under seed weights (N, S) -> (N, V)."""
    return np.einsum("ns,nsv->nv", seed_weights, per_seed)


def steps_to_level(steps: np.ndarray, curves: np.ndarray, level: np.ndarray) -> np.ndarray:
    """First step at which each curve reaches its level, linearly interpolated between validations; inf if
    never. steps (V,) ascending, curves (N, V), level (N,) -> (N,)."""
    reached = curves >= level[:, None]
    first = reached.argmax(axis=1)
    before = np.maximum(first - 1, 0)
    rows = np.arange(len(curves))
    rise = np.where(first > 0, curves[rows, first] - curves[rows, before], 1.0)
    fraction = np.where(first > 0, (level - curves[rows, before]) / rise, 0.0)
    crossing = steps[before] + fraction * (steps[first] - steps[before])
    return np.where(reached.any(axis=1), crossing, np.inf)


def steps_ratio(steps_x: np.ndarray, steps_y: np.ndarray) -> np.ndarray:
    """``steps_x / steps_y`` (N,); inf where x never reaches the level, nan (undefined) where y never does or
    reaches it at step 0."""
    defined = np.isfinite(steps_y) & (steps_y > 0)
    return np.where(defined, steps_x / np.where(defined, steps_y, 1.0), np.nan)


def probability_of_improvement(
    runs_x: np.ndarray, runs_y: np.ndarray, seed_weights_x: np.ndarray, seed_weights_y: np.ndarray
) -> np.ndarray:
    """P(a run of X beats a run of Y) over all pairs of runs, each seed weighted by how often it is drawn;
    ties count 1/2. runs_x (N, Sx) and runs_y (N, Sy) are per-run scores, weights alike -> (N,)."""
    wins = (runs_x[:, :, None] > runs_y[:, None, :]) + 0.5 * (runs_x[:, :, None] == runs_y[:, None, :])
    return np.einsum("ns,nt,nst->n", seed_weights_x, seed_weights_y, wins)


def estimate(values: np.ndarray) -> dict:
    """Point estimate (row 0) and 95% percentile interval of the bootstrap draws (rows 1..; nan draws, which
    are undefined, left out). values (1 + B, ...) -> entries of shape (...)."""
    draws = values[1:]
    if np.isnan(draws).all():
        low = high = np.full(values.shape[1:], np.nan)
    else:
        low, high = np.nanquantile(draws, [0.025, 0.975], axis=0, method="inverted_cdf")
    return {"estimate": values[0], "low": low, "high": high}


def steps_estimate(values: np.ndarray) -> dict:
    """:func:`estimate` of steps or step ratios (1 + B,), with the share of draws that reach the level."""
    return {**estimate(values), "reached": float(np.isfinite(values[1:]).mean())}


def verdict(difference: dict) -> str:
    """``better`` / ``worse`` when the difference's interval excludes 0, else no difference at this scale."""
    if difference["low"] > 0:
        return "better"
    if difference["high"] < 0:
        return "worse"
    return "no difference at this scale"


def with_verdict(difference: dict) -> dict:
    """An :func:`estimate` of a difference with its :func:`verdict`."""
    return {**difference, "verdict": verdict(difference)}


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


def stream(seed: int, name: str) -> np.random.Generator:
    """A random stream of its own per name: a cell's draws do not change when other cells are added."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def load_cells(
    runs: Runs, chosen: dict[str, dict], ks: tuple[int, ...], boot: int, seed: int, success: str = SOLVED
) -> dict[str, Cell]:
    """Every chosen cell that has runs at its learning rate, scored on the TEST split by ``success``, with the same
    problem draws for all (paired) and its own seed draws."""
    counts = {
        cell: held_out_counts(runs[cell][info["lr"]], split_key(TEST, success))
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
) -> dict:
    """The final comparison on the TEST split (the validation split is never read).

    Args:
        runs: the final matrix's runs (:func:`read_runs` of one task).
        chosen: ``{cell: {"lr", "chosen_by"}}`` (:func:`choose_lrs` or :func:`single_lrs`); a chosen cell
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
    """
    unchosen = sorted(set(runs) - set(chosen))
    if unchosen:
        raise ValueError(f"cell(s) {unchosen} ran but have no chosen learning rate: sweep them or use --lr-from")
    cells = load_cells(runs, chosen, ks, boot, seed, success)
    if baseline not in cells:
        raise ValueError(f"baseline {baseline!r} has no test runs at its chosen learning rate; cells: {sorted(cells)}")
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
        "split": TEST,
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


def number_text(value, digits: int = 3) -> str:
    """A JSON-ready number as text (``n/a``: undefined; ``not reached`` as is)."""
    return f"{value:.{digits}f}" if isinstance(value, float) else value or "n/a"


def interval_text(entry: dict, digits: int = 3) -> str:
    """``estimate [low, high]`` of a JSON-ready :func:`estimate`."""
    low, high = (number_text(entry[bound], digits) for bound in ("low", "high"))
    return f"{number_text(entry['estimate'], digits)} [{low}, {high}]"


def report_markdown(report: dict) -> str:
    """summary.md: the cells' test Pass@k and steps, and every comparison with its verdict (JSON-ready report)."""
    ks, baseline, threshold = report["ks"], report["baseline"], report["threshold"]
    best = report["best_same_information"]
    lines = [
        f"# Protocol report: {report['task']} (test split)",
        "",
        f"A sample counts as a success by {SUCCESSES[report['success']]}.",
        f"{report['boot']} bootstrap draws (seed {report['seed']}), 95% percentile intervals resampling seeds "
        "(each cell's own) and problems (the same for every cell, so differences are paired).",
        f"Level: {baseline}'s final test Pass@1, {interval_text(report['level'])}. Best same-information "
        f"baseline (best final test Pass@1 of {', '.join(report['same_information']) or 'none run'}): {best}.",
        "",
        "## Cells at their learning rates (last validation)",
        "",
        "| cell | lr (chosen by) | seeds | "
        + " | ".join(f"Pass@{k}" for k in ks)
        + " | Pass@1 change from the first validation"
        + f" | steps to {baseline}'s level"
        + (f" | steps to Pass@1 {threshold}" if threshold is not None else "")
        + " | rollouts generated per trained |",
        "| --- " * (6 + len(ks) + (threshold is not None)) + "|",
    ]
    for name, cell in report["cells"].items():
        columns = [name, f"{lr_name(cell['lr'])} ({cell['chosen_by'] or 'only lr'})", str(len(cell["seeds"]))]
        columns += [interval_text(cell["final"][f"pass@{k}"]) for k in ks]
        columns += [f"{interval_text(cell['change']['pass@1'])} ({cell['change']['pass@1']['verdict']})"]
        columns += [interval_text(cell["steps_to_level"], 1)]
        columns += [interval_text(cell["steps_to_threshold"], 1)] if threshold is not None else []
        columns += [number_text(cell["rollouts_generated_per_trained"], 2)]
        lines.append("| " + " | ".join(columns) + " |")
    extra = {
        name: cell["rollouts_generated_per_trained"]
        for name, cell in report["cells"].items()
        if (cell["rollouts_generated_per_trained"] or 1) > 1
    }
    if extra:
        lines += [
            "",
            "**Not the same sampling budget per step**: "
            + ", ".join(f"{name} generated {ratio:.2f}x" for name, ratio in extra.items())
            + " the rollouts it trained on (dynamic sampling regenerates groups whose rollouts all scored alike); "
            "the others train on all they generate. Counted in rollouts rather than steps, these cells took that "
            "many times more.",
        ]
    if report["cells"][baseline]["change"]["pass@1"]["verdict"] != "better":
        lines += [
            "",
            f"**{baseline} did not rise measurably** (its change from the first validation has an interval that "
            "reaches 0): its final level is within noise of where it started, so steps to that level count noise, "
            "not learning.",
        ]
    lines += [
        "",
        "## Comparisons (X - Y at the last validation; steps ratio: X's steps over Y's)",
        "",
        "P(X > Y): the probability that a run of X beats a run of Y on final test Pass@1 (ties 1/2). A steps ratio "
        "is n/a where Y never reaches the level (or starts at it), `not reached` where X never does.",
        "",
        "| X | Y | "
        + " | ".join(f"Pass@{k} difference | verdict" for k in ks)
        + " | P(X > Y) | steps ratio to level"
        + (" | steps ratio to threshold" if threshold is not None else "")
        + " |",
        "| --- " * (4 + 2 * len(ks) + (threshold is not None)) + "|",
    ]
    for entry in report["comparisons"]:
        columns = [entry["cell"], entry["versus"]]
        columns += [text for k in ks for text in (interval_text(entry[f"pass@{k}"]), entry[f"pass@{k}"]["verdict"])]
        columns += [interval_text(entry[key], 2) for key in ("probability_of_improvement", "steps_ratio_to_level")]
        columns += [interval_text(entry["steps_ratio_to_threshold"], 2)] if threshold is not None else []
        lines.append("| " + " | ".join(columns) + " |")
    if report["not_run"]:
        lines += ["", f"Not run yet at their chosen learning rate: {', '.join(report['not_run'])}."]
    return "\n".join(lines) + "\n"


def plot_curves(report: dict, path: Path) -> None:
    """curves.png: each cell's seed-mean test Pass@1 over steps with its 95% band, the level and threshold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for name, cell in report["cells"].items():
        curve = cell["curves"]["pass@1"]
        (line,) = axes.plot(cell["steps"], curve["estimate"], marker="o", markersize=3, label=name)
        axes.fill_between(cell["steps"], curve["low"], curve["high"], color=line.get_color(), alpha=0.15)
    axes.axhline(report["level"]["estimate"], color="grey", linestyle="--", label=f"{report['baseline']} final")
    if report["threshold"] is not None:
        axes.axhline(report["threshold"], color="grey", linestyle=":", label="threshold")
    axes.set(xlabel="training step", ylabel="test Pass@1", title=f"{report['task']}: held-out test Pass@1, 95% CI")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_forest(report: dict, path: Path) -> None:
    """forest.png: Pass@1 differences (95% CI) against the baseline and the best same-information baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    roles = list(dict.fromkeys(entry["role"] for entry in report["comparisons"]))
    if not roles:  # the baseline alone has run so far
        path.unlink(missing_ok=True)
        return
    size = (6 * len(roles), 1 + 0.4 * len(report["cells"]))
    figure, panels = plt.subplots(1, len(roles), figsize=size, squeeze=False)
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
        axes.set(xlabel="test Pass@1 difference (95% CI)", title=f"vs {entries[0]['versus']} ({role})")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def parse_borrowed(text: str) -> dict[str, str]:
    """``--lr-from``: ``CELL=SOURCE`` pairs joined by commas -> ``{cell: source}``."""
    pairs = [item.split("=") for item in text.split(",") if item]
    malformed = ["=".join(pair) for pair in pairs if len(pair) != 2 or not all(pair)]
    if malformed:
        raise ValueError(f"--lr-from takes CELL=SOURCE pairs joined by commas, got {malformed}")
    return dict(pairs)


def write_json(path: Path, value) -> None:
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


def write_final(task: str, runs: Runs, chosen: dict[str, dict], args: argparse.Namespace, out: Path) -> None:
    """summary.json, summary.md, curves.png and forest.png of the final matrix's runs."""
    same_information = tuple(args.same_information.split(","))
    report = final_report(
        runs, chosen, args.baseline, same_information, args.threshold, args.boot, args.seed, args.ks, args.success
    )
    report = to_json({"task": task, **report})
    write_json(out / "summary.json", report)
    (out / "summary.md").write_text(report_markdown(report))
    plot_curves(report, out / "curves.png")
    plot_forest(report, out / "forest.png")


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
        help="take each cell's learning rate from this sweep.json (e.g. the same sweep chosen by another "
        "--success) instead of choosing it here; writes no sweep",
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
            chosen = json.loads(args.lrs_from_sweep.read_text())["chosen"]
        elif sweep_runs:
            chosen = write_sweep(args.task, sweep_runs, borrowed, args.choose_by, args.success, out)
            print((out / "sweep.md").read_text())
        else:
            chosen = None
        if final_runs:
            write_final(args.task, final_runs, chosen or single_lrs(final_runs), args, out)
            print((out / "summary.md").read_text())
        else:
            print(f"no final runs yet under {args.results / args.task / 'runs'}: wrote the sweep only")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
