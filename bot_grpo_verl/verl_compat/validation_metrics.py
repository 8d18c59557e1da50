"""verl's validation metrics in the CPU mode: best@N / worst@N at numpy speed, the same floats as verl's.

verl 0.9.1's ``process_validation_metrics`` (verl.trainer.ppo.metric_utils) bootstraps best@N and worst@N
of every reward key of every prompt through ``bootstrap_metric``, which reduces its 1000 resamples one at a
time in Python: ~45% of a CPU-mode validation. :func:`vectorised_bootstrap_metric` draws the same resamples
from the same random stream and reduces them in one numpy call per reduction; whatever it cannot prove to
give verl's floats bit for bit (another reduction, such as maj@N's vote; values that are not real numbers;
NaN or -0.0) goes through verl's own function. :func:`vectorise_validation_bootstrap` installs it; the CPU
mode (:mod:`.cpu_patches`) applies it, other runs keep verl's function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once

VECTORISED_REDUCTIONS = (np.max, np.min)
"""The reductions verl passes for best@N / worst@N, applied along the resample axis."""

REAL_NUMBERS = (int, float, np.integer, np.floating, np.bool_)

VERL_PARAMETERS = ["data", "subset_size", "reduce_fns", "n_bootstrap", "seed"]
VERL_RANDOM_STREAM = (
    "np.random.seed(seed)",
    "np.random.choice(n_data, size=(n_bootstrap, subset_size), replace=True)",
)


def real_values(data: Sequence[Any]) -> np.ndarray | None:
    """``data`` (n,) as float64 (n,) when it holds real numbers only, none NaN or -0.0; else None.

    A max/min over float64 then equals verl's max/min over the objects turned to float64 (rounding keeps
    order); verl's object comparisons order NaN and the two zeros by position, so those are left to verl.
    """
    if not all(isinstance(value, REAL_NUMBERS) for value in data):
        return None
    values = np.asarray(data, dtype=np.float64)
    if np.isnan(values).any() or np.signbit(values[values == 0]).any():
        return None
    return values


def vectorised_bootstrap_metric(verl_bootstrap_metric: Callable) -> Callable:
    """verl's ``bootstrap_metric`` (the argument) with its max/min reductions of real numbers vectorised."""

    def bootstrap_metric(
        data: list[Any],
        subset_size: int,
        reduce_fns: list[Callable[[np.ndarray], float]],
        n_bootstrap: int = 1000,
        seed: int = 42,
    ) -> list[tuple[float, float]]:
        """[(mean, std) over ``n_bootstrap`` resamples of ``subset_size`` values of ``data`` (n,), per
        reduction], from verl's seeded global random stream."""
        values = real_values(data)  # (n,)
        if values is None or not all(reduce_fn in VECTORISED_REDUCTIONS for reduce_fn in reduce_fns):
            return verl_bootstrap_metric(data, subset_size, reduce_fns, n_bootstrap, seed)
        np.random.seed(seed)
        indices = np.random.choice(len(values), size=(n_bootstrap, subset_size), replace=True)
        resamples = values[indices]  # (n_bootstrap, subset_size)
        reduced = [reduce_fn(resamples, axis=1) for reduce_fn in reduce_fns]  # each (n_bootstrap,)
        return [(float(np.mean(metric)), float(np.std(metric))) for metric in reduced]

    return bootstrap_metric


def vectorise_validation_bootstrap() -> None:
    """Replace verl.trainer.ppo.metric_utils.bootstrap_metric by :func:`vectorised_bootstrap_metric` (idempotent).

    Checks first that verl's function takes the expected arguments and seeds and draws the global random
    stream as it did, and that ``process_validation_metrics`` looks it up by its module-level name.
    """
    from verl.trainer.ppo import metric_utils

    name = "verl.trainer.ppo.metric_utils.bootstrap_metric"
    require(inspect.isfunction(getattr(metric_utils, "bootstrap_metric", None)), name, "it is a function")
    verl_function = inspect.unwrap(metric_utils.bootstrap_metric)
    require(list(inspect.signature(verl_function).parameters) == VERL_PARAMETERS, name, f"it takes {VERL_PARAMETERS}")
    require(
        all(line in source_of(verl_function) for line in VERL_RANDOM_STREAM),
        name,
        f"it draws its resamples by {' then '.join(VERL_RANDOM_STREAM)}",
    )
    caller = getattr(metric_utils, "process_validation_metrics", None)
    require(
        inspect.isfunction(caller)
        and "bootstrap_metric" in caller.__code__.co_names
        and caller.__globals__ is vars(metric_utils),
        "verl.trainer.ppo.metric_utils.process_validation_metrics",
        "it calls bootstrap_metric by its name in verl.trainer.ppo.metric_utils",
    )
    wrap_once(metric_utils, "bootstrap_metric", vectorised_bootstrap_metric)
