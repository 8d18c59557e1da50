"""Reading runs: the protocol's run summaries, and the run folders of a matrix (verl's metrics and dumps).

Two layouts are read. The protocol's: one committed summary per finished run (:mod:`benchmarks.matrix`),
``<results>/<task>/runs/<cell>__lr<lr>__seed<seed>.json``, with its settings, training curves and per validation
step and held-out split the ``[n, c]`` samples and correct ones of every problem. A matrix's run folders:
``<runs>/<algorithm>/seed<k>/`` with verl's ``metrics.jsonl`` and validation dumps ``validation/<step>.jsonl``,
read once the run left its ``DONE`` marker.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from benchmarks.metrics import AS_ASKED, mean_pass_at_k
from demo.training import Curve, read_metrics

VAL, TEST = "val", "test"
SPLIT_NAMES = {VAL: "validation", TEST: "test"}
SOLVED = "solved"
SUCCESSES = {  # what a held-out sample must do to count
    SOLVED: "the reward's verdict (acc)",
    AS_ASKED: "the reward's verdict and the task's as-asked check (e.g. React: the requested component's JSX elements)",
}
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


def read_curve(path: Path, metric: str) -> Curve:
    """Steps and values of ``metric`` from one verl metrics JSONL (lines without it are skipped)."""
    rows = [row for row in read_metrics(path) if row.get(metric) is not None]
    return [float(row["step"]) for row in rows], [float(row[metric]) for row in rows]


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
        curve = read_curve(folder / "metrics.jsonl", metric)
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
