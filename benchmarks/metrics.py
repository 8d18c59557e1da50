"""Curve and sampling metrics of a benchmark: Pass@k, steps to a threshold, area under the curve, rollouts per
trained rollout and the spread of response lengths within a prompt's group."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# The held-out success that a task's reward can be satisfied without (benchmarks/matrix.py CpuTask.as_asked):
# a run summary's ``<split>:as_asked`` counts, the report's ``--success as_asked``.
AS_ASKED = "as_asked"
# verl's counts of the prompt groups DAPO's dynamic sampling generated beyond a step's batch: dropped because all
# their rollouts scored alike, or surplus once the batch was full (groups, not samples, despite the names).
DYNAMIC_SAMPLING = ("training/filter_groups/evicted_samples", "training/filter_groups/discarded_surplus_samples")


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Unbiased Pass@k of one problem (Chen et al. 2021, arXiv:2107.03374): ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``, which never forms the huge binomials.

    Args:
        num_samples: n, samples drawn for the problem.
        num_correct: c, how many of them are correct.
        k: the budget, ``1 <= k <= n``.
    """
    if not 0 <= num_correct <= num_samples:
        raise ValueError(f"need 0 <= correct <= samples, got correct={num_correct}, samples={num_samples}")
    if not 1 <= k <= num_samples:
        raise ValueError(f"need 1 <= k <= samples ({num_samples}), got k={k}")
    if num_samples - num_correct < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(num_samples - num_correct + 1, num_samples + 1)))


def mean_pass_at_k(samples_and_correct: Sequence[tuple[int, int]], k: int) -> float:
    """Pass@k averaged over problems, each given as ``(n, c)``."""
    return float(np.mean([pass_at_k(n, c, k) for n, c in samples_and_correct]))


def steps_to_threshold(steps: Sequence[float], values: Sequence[float], threshold: float) -> float | None:
    """First step whose value reaches ``threshold``, or None if the curve never does."""
    for step, value in zip(steps, values, strict=True):
        if value >= threshold:
            return float(step)
    return None


def area_under_curve(steps: Sequence[float], values: Sequence[float]) -> float:
    """Mean height of the curve over its steps (trapezoids / step span): 1.0 means success from the start."""
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if len(steps) < 2:
        return float(values.mean()) if len(values) else float("nan")
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(steps)) / (steps[-1] - steps[0]))


def generated_per_trained(train: dict[str, list[float | None]], prompts_per_step: int) -> float:
    """Rollouts generated per rollout trained on over a run: 1 without dynamic sampling, more with it.

    Args:
        train: verl's training metrics per logged step (``{name: [value or None, ...]}``); a step is a row
            with ``timing_s/step``; a step without a :data:`DYNAMIC_SAMPLING` count generated nothing extra.
        prompts_per_step: the prompt groups each step trains on (``data.train_batch_size``).
    """
    steps = sum(value is not None for value in train.get("timing_s/step", []))
    if not steps:
        raise ValueError("no training step recorded (timing_s/step): cannot count rollouts per step")
    extra = sum(value or 0 for key in DYNAMIC_SAMPLING for value in train.get(key, []))
    return 1 + extra / (prompts_per_step * steps)


def within_group_length_std(tokens_dump: Path) -> float:
    """Mean over a step's prompt groups of the standard deviation (population) of their rollouts' response
    lengths in tokens: how far lengths vary where BoT-GRPO's 1/L weighting differs from uniform weighting.

    Args:
        tokens_dump: one step's ``<step>.tokens.jsonl`` (:mod:`bot_grpo_verl.verl_compat.token_dump`): per
            rollout its key ``{uid}_{session}_{index}`` (the uid names the prompt's group) and ``response_ids``.
    """
    groups: dict[str, list[int]] = {}
    for line in tokens_dump.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            groups.setdefault(row["key"].rsplit("_", 2)[0], []).append(len(row["response_ids"]))
    if not groups:
        raise ValueError(f"{tokens_dump} holds no rollout: cannot measure its groups' length spread")
    return float(np.mean([np.std(lengths) for lengths in groups.values()]))
