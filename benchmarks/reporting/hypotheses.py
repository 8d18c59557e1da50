"""The token-credit study's threshold and hypotheses (benchmarks/PROTOCOL.md, issue 43), each decided by the
comparisons it registered.

The threshold T is chosen on the VALIDATION split, from the sweep alone, before any test run: halfway from the
warm start (the mean step-0 validation exact rate of the sweep's runs) to tuned GRPO's last validation, rounded
down to 0.01. Where tuned GRPO does not rise on validation by :data:`LEARNED`, halfway to the best tuned arm's
last validation instead; where no tuned arm rises, there is no threshold and every hypothesis is decided by the
final test exact rates alone.

A claim says that ``faster`` beats ``slower``: the ratio of their steps to T (``slower / faster``, each cell's
seed-mean TEST curve, linear between validations) lies above 1, and the difference of their final test exact
rates (``faster - slower``) above 0; or, ``expect="level"``, that neither does. A hypothesis is ``supported``
when every deciding measure of every claim is on the predicted side of its 95% interval, ``contradicted`` when
one is on the other side, and ``not supported`` otherwise (no difference at this scale). Intervals are the
protocol report's paired bootstrap over seeds and test problems (:mod:`benchmarks.reporting.comparison`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from benchmarks.reporting.comparison import Cell, load_cells
from benchmarks.reporting.runs import Runs, each_run
from benchmarks.reporting.statistics import estimate, spread, steps_estimate, steps_ratio, steps_to_level

LEARNED = 0.02  # a rise of the validation exact rate smaller than this is no learning (the plateau rule's margin)
TAIL_STEPS = 20  # the training steps at a run's end whose letter accuracy the report gives
STEPS, FINAL = "steps to T", "final exact rate"
APART, LEVEL, REVERSED, UNDEFINED = "apart", "level", "reversed", "undefined"


@dataclass(frozen=True)
class Claim:
    """``faster`` beats ``slower`` (``expect="apart"``) or matches it (``"level"``), by the measures in
    ``decides``; ``min_ratio``: the steps ratio's point estimate a supported claim needs besides its interval."""

    slower: str
    faster: str
    decides: tuple[str, ...] = (STEPS,)
    expect: str = APART
    min_ratio: float = 1.0


@dataclass(frozen=True)
class Hypothesis:
    """One of the registered hypotheses: its name, the issue's words and its claims."""

    name: str
    words: str
    claims: tuple[Claim, ...]


BOT = "bot_grpo"
HYPOTHESES = (
    Hypothesis(
        "H1",
        "BoT-GRPO reaches the threshold at least 1.5x faster than GRPO given the same information (the mean token "
        "reward) and than GRPO on the outcome",
        (Claim("grpo_token_mean", BOT, min_ratio=1.5), Claim("grpo", BOT, min_ratio=1.5)),
    ),
    Hypothesis(
        "H2",
        "shuffling token rewards within each response removes that gain",
        (Claim("bot_grpo_shuffled", BOT), Claim("bot_grpo_shuffled", "grpo_token_mean", expect=LEVEL)),
    ),
    Hypothesis(
        "H3",
        "label noise erodes it, in the order of the noise",
        (Claim("bot_grpo@flip10", BOT, (STEPS, FINAL)), Claim("bot_grpo@flip30", "bot_grpo@flip10", (STEPS, FINAL))),
    ),
    Hypothesis(
        "H4",
        "1/L weighting beats uniform weighting when lengths vary",
        (Claim("bot_grpo_uniform", BOT, (STEPS, FINAL)),),
    ),
    *(
        Hypothesis(f"H5 {rival}", f"BoT-GRPO converges faster than {name}", (Claim(rival, BOT),))
        for rival, name in (("dapo", "DAPO"), ("ps_grpo", "PS-GRPO"), ("pure", "PURE"))
    ),
)


def rounded_down(value: float) -> float:
    """``value`` rounded down to 0.01 (a float's error in the product is not a step down)."""
    return math.floor(value * 100 + 1e-9) / 100


def tuned_rows(sweep: dict, baseline: str) -> dict[str, dict]:
    """``{cell: its sweep row at its chosen rate}`` of the cells the sweep tuned themselves (not borrowed rates),
    from ``sweep.json``; ``ValueError`` when ``baseline`` is not among them."""
    rows = {(row["cell"], row["lr"]): row for row in sweep["rows"]}
    tuned = {cell: rows[cell, info["lr"]] for cell, info in sweep["chosen"].items() if info["chosen_by"] == cell}
    if baseline not in tuned:
        raise ValueError(f"the sweep chose no learning rate for {baseline!r}: its threshold is halfway to its level")
    return tuned


def threshold_from_sweep(sweep: dict, baseline: str = "grpo") -> dict:
    """T from the sweep's ``sweep.json`` (VALIDATION split; rows per cell and rate, and each cell's choice).

    Returns ``{"start", "reference", "reference_level", "threshold"}``: the mean step-0 validation exact rate of
    the sweep's runs; the tuned cell T is taken towards (``baseline``, or the best tuned cell where the baseline
    rises less than :data:`LEARNED`, or None where none does) and its last validation; T (None: no threshold).
    """
    start = float(np.mean([row["curve"][0] for row in sweep["rows"]]))
    last = {cell: row["curve"][-1] for cell, row in tuned_rows(sweep, baseline).items()}
    reference = baseline if last[baseline] >= start + LEARNED else max(last, key=last.get)
    if last[reference] < start + LEARNED:
        return {"start": start, "reference": None, "reference_level": None, "threshold": None}
    threshold = rounded_down(start + 0.5 * (last[reference] - start))
    return {"start": start, "reference": reference, "reference_level": last[reference], "threshold": threshold}


def final_steps(sweep: dict, baseline: str = "grpo") -> dict:
    """The registered plateau rule on the sweep's ``sweep.json``: ``baseline``'s tuned validation exact rate over
    its last two validations against the two before; a rise above :data:`LEARNED` means it has not plateaued and
    the final matrix runs twice the sweep's steps. Returns ``{"rise", "final_steps"}``."""
    row = tuned_rows(sweep, baseline)[baseline]
    curve = row["curve"]
    rise = float(np.mean(curve[-2:]) - np.mean(curve[-4:-2]))
    steps = int(row["steps"][-1])
    return {"rise": rise, "final_steps": 2 * steps if rise > LEARNED else steps}


def side(values: dict, null: float) -> str:
    """Where a measure's 95% interval lies against ``null``: above (:data:`APART`), below (:data:`REVERSED`),
    holding it (:data:`LEVEL`), or :data:`UNDEFINED` (no point estimate)."""
    if np.isnan(values["estimate"]):
        return UNDEFINED
    if values["low"] > null:
        return APART
    if values["high"] < null:
        return REVERSED
    return LEVEL


def claim_entry(claim: Claim, cells: dict[str, Cell], to_threshold: dict[str, np.ndarray] | None) -> dict:
    """Both measures of a claim with the side each lies on, and whether the claim holds (by its deciding
    measures; the steps ratio is left out where there is no threshold)."""
    slower, faster = cells[claim.slower], cells[claim.faster]
    measures, sides = {}, {}
    if to_threshold is not None:
        measures[STEPS] = steps_estimate(steps_ratio(to_threshold[claim.slower], to_threshold[claim.faster]))
        sides[STEPS] = side(measures[STEPS], 1.0)
    measures[FINAL] = estimate(faster.final(1) - slower.final(1))
    sides[FINAL] = side(measures[FINAL], 0.0)
    deciding = [measure for measure in claim.decides if measure in sides] or [FINAL]
    holds = all(sides[measure] == claim.expect for measure in deciding)
    if holds and STEPS in deciding and claim.expect == APART:
        holds = measures[STEPS]["estimate"] >= claim.min_ratio
    reversed_ = claim.expect == APART and any(sides[measure] == REVERSED for measure in deciding)
    return {**asdict(claim), "deciding": deciding, "measures": measures, "sides": sides, "holds": bool(holds),
            "reversed": reversed_}  # fmt: skip


def hypothesis_entry(hypothesis: Hypothesis, cells: dict[str, Cell], to_threshold: dict | None) -> dict:
    """A hypothesis's claims and verdict; ``not run`` where a cell it compares has no runs."""
    missing = sorted({name for claim in hypothesis.claims for name in (claim.slower, claim.faster)} - set(cells))
    if missing:
        return {"name": hypothesis.name, "words": hypothesis.words, "verdict": "not run", "missing": missing}
    claims = [claim_entry(claim, cells, to_threshold) for claim in hypothesis.claims]
    if any(claim["reversed"] for claim in claims):
        verdict = "contradicted"
    else:
        verdict = "supported" if all(claim["holds"] for claim in claims) else "not supported"
    return {"name": hypothesis.name, "words": hypothesis.words, "verdict": verdict, "claims": claims}


def cell_costs(runs: Runs, cells: dict[str, Cell]) -> dict[str, dict]:
    """Per cell at its rate: CPU and wall seconds per run, the letter accuracy of training rollouts over the
    last :data:`TAIL_STEPS` steps, the mean within-group spread of response lengths (H4's premise) and the mean
    share of prompt groups with a learning signal (advantages not all zero), each with its spread over seeds."""
    by_cell: dict[str, dict[str, list[float]]] = {name: {} for name in cells}
    for name, lr, _seed, summary in each_run(runs):
        if name not in cells or lr != cells[name].lr:
            continue
        train = summary["train"]
        values = {
            "cpu_seconds": summary.get("cpu_seconds"),
            "wall_seconds": summary.get("wall_seconds"),
            "items_correct_tail": tail_mean(train.get("reward_extra/items_correct/mean", [])),
            "within_group_length_std": tail_mean(train.get("response_length/within_group_std", []), None),
            "groups_with_signal": tail_mean(train.get("training/groups_with_signal", []), None),
        }
        for key, value in values.items():
            if value is not None:
                by_cell[name].setdefault(key, []).append(value)
    return {name: {key: spread(values) for key, values in found.items()} for name, found in by_cell.items()}


def tail_mean(values: list[float | None], steps: int | None = TAIL_STEPS) -> float | None:
    """Mean of a training curve's recorded values over its last ``steps`` (None: all); None when none is."""
    recorded = [value for value in values if value is not None]
    recorded = recorded[-steps:] if steps else recorded
    return float(np.mean(recorded)) if recorded else None


def hypotheses_report(runs: Runs, chosen: dict[str, dict], threshold: float | None, boot: int, seed: int) -> dict:
    """Every registered hypothesis decided on the final matrix's TEST split, with each cell's steps to T,
    final exact rate and costs.

    Args:
        runs: the final matrix's runs; chosen: each cell's learning rate (the sweep's choice).
        threshold: T (:func:`threshold_from_sweep`); None: decided by the final exact rates alone.
        boot, seed: the bootstrap's draws and random seed (the protocol report's, so the draws are the same).
    """
    cells = load_cells(runs, chosen, (1,), boot, seed)
    to_threshold = None
    if threshold is not None:
        level = np.full(boot + 1, threshold)
        to_threshold = {name: steps_to_level(cell.steps, cell.curve(1), level) for name, cell in cells.items()}
    costs = cell_costs(runs, cells)
    return {
        "threshold": threshold,
        "boot": boot,
        "seed": seed,
        "cells": {
            name: {
                "lr": cell.lr,
                "seeds": list(cell.seeds),
                "last_step": float(cell.steps[-1]),
                "final": estimate(cell.final(1)),
                **({"steps_to_threshold": steps_estimate(to_threshold[name])} if to_threshold else {}),
                **costs[name],
            }
            for name, cell in cells.items()
        },
        "hypotheses": [hypothesis_entry(hypothesis, cells, to_threshold) for hypothesis in HYPOTHESES],
    }
