"""Statistics of the reports: per-problem Pass@k, bootstrap draws over seeds and problems, their intervals and
verdicts, steps to a level, the probability of improvement, and the plain spread over seeds.

Bootstrap arrays carry the point estimate in row 0 (every seed and problem once) and one draw per further row.
"""

from __future__ import annotations

import zlib

import numpy as np

from benchmarks.metrics import pass_at_k


def pass_at_k_scores(counts: np.ndarray, k: int) -> np.ndarray:
    """Unbiased Pass@k of every problem: ``[n, c]`` counts (..., 2) -> (...)."""
    pairs, where = np.unique(counts.reshape(-1, 2), axis=0, return_inverse=True)
    values = np.array([pass_at_k(int(n), int(c), k) for n, c in pairs])
    return values[where.reshape(counts.shape[:-1])]


def resample_weights(rng: np.random.Generator, count: int, boot: int) -> np.ndarray:
    """(1 + boot, count): row 0 every item once, row b how often a draw with replacement takes each item;
    divided by count (a row sums to 1)."""
    draws = rng.multinomial(count, np.full(count, 1 / count), size=boot)
    return np.vstack([np.ones(count), draws]) / count


def stream(seed: int, name: str) -> np.random.Generator:
    """A random stream of its own per name: a cell's draws do not change when other cells are added."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


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


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation and the values themselves (None where too few to say)."""
    array = np.asarray(values, dtype=float)
    return {
        "mean": float(array.mean()) if len(array) else None,
        "std": float(array.std(ddof=1)) if len(array) > 1 else 0.0 if len(array) else None,
        "values": [float(v) for v in array],
    }
