"""Held-out validation of a CPU run: verl's validation settings, its dumps read per problem, and intervals.

verl validates before training (``trainer.val_before_train``) and every ``trainer.test_freq`` steps on
``data.val_files``, sampling ``rollout.val_kwargs.n`` responses per prompt, and dumps every sample to
``trainer.validation_data_dir/<step>.jsonl`` (``input``: the prompt as the policy saw it, ``acc``: the
reward's verdict). Reading those dumps per problem gives each validation's success rate with an interval
over problems, and changes between validations (or between runs on the same problems) paired by problem.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

SPLITS = ("val", "test")
Z_95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


@dataclass(frozen=True)
class Validation:
    """Held-out validation of a run.

    Attributes:
        splits: which held-out splits to sample (``"val"``, ``"test"``), in one verl validation.
        every: validate every this many steps (and after the last one).
        samples: temperature-1 samples per problem (the n of Pass@k).
        before: also validate before training (step 0).
    """

    splits: tuple[str, ...] = ("val", "test")
    every: int = 4
    samples: int = 8
    before: bool = True

    def __post_init__(self):
        if not set(self.splits) <= set(SPLITS) or self.every < 1 or self.samples < 1:
            raise ValueError(f"splits must be among {SPLITS}, every and samples >= 1: {self}")


def validation_overrides(assets, validation: Validation | None, out: Path) -> list[str]:
    """Validate (before training, if asked, and) every ``validation.every`` steps on the chosen held-out splits, at
    temperature 1 (put these after settings that turn validation off, so they win)."""
    if validation is None:
        return []
    files = ",".join(str(getattr(assets, f"{split}_parquet")) for split in validation.splits)
    return [
        f"data.val_files=[{files}]",
        f"trainer.val_before_train={str(validation.before).lower()}",
        f"trainer.test_freq={validation.every}",
        f"trainer.validation_data_dir={out / 'validation'}",
        f"actor_rollout_ref.rollout.val_kwargs.n={validation.samples}",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
    ]


def problem_index(assets, splits: tuple[str, ...]) -> dict[str, tuple[str, int]]:
    """``{prompt text: (split, row)}`` of the held-out parquet files."""
    index = {}
    for split in splits:
        frame = pd.read_parquet(getattr(assets, f"{split}_parquet"))
        for row, prompt in enumerate(frame.prompt):
            index[prompt[0]["content"]] = (split, row)
    return index


def solved(sample: dict) -> bool:
    """A validation sample the reward counts as a success: ``acc > 0.5``, or ``score > 0.5`` for a reward
    without ``acc``."""
    return float(sample["acc"] if "acc" in sample else sample["score"]) > 0.5


def jsx_elements(code: str) -> frozenset[str]:
    """The intrinsic JSX elements ``code`` opens (``<ul>``, ``<li key={i}>``, ``<br/>``; not ``useState<number>``)."""
    return frozenset(re.findall(r"(?<![\w$.])<([a-z][a-z0-9]*)[\s>/]", code))


def compiles_as_asked(sample: dict) -> bool:
    """A React validation sample that compiles and opens the JSX elements of the reference solution: the
    requested kind of component, not a template that compiles whatever the prompt asked for."""
    return solved(sample) and jsx_elements(sample["output"]) == jsx_elements(sample["gts"])


def held_out_counts(
    dump: Path, problems: dict[str, tuple[str, int]], success: Callable[[dict], bool] = solved
) -> dict[str, list[list[int]]]:
    """Per split, ``[n, c]`` per problem row (samples, and successes by ``success`` of a dumped sample) of one
    validation dump.

    A dump's ``input`` is the prompt as the policy saw it (chat template included): a row belongs to the
    problem whose text it contains (the longest, should one text contain another).
    """
    by_length = sorted(problems, key=len, reverse=True)
    sizes = {split: 1 + max(row for s, row in problems.values() if s == split) for split, _ in problems.values()}
    counts = {split: [[0, 0] for _ in range(size)] for split, size in sizes.items()}
    owner: dict[str, tuple[str, int]] = {}
    for line in dump.read_text().splitlines():
        if not line.strip():
            continue
        sample = json.loads(line)
        text = sample["input"]
        if text not in owner:
            match = next((prompt for prompt in by_length if prompt in text), None)
            if match is None:
                raise ValueError(f"{dump}: a validation prompt matches no held-out problem: {text[:80]!r}")
            owner[text] = problems[match]
        split, row = owner[text]
        counts[split][row][0] += 1
        counts[split][row][1] += int(success(sample))
    return counts


@dataclass(frozen=True)
class HeldOutCurve:
    """One run's validations of one split.

    Attributes:
        steps: ``(V,)`` training steps of the validations (0: before training).
        rates: ``(V, P)`` success rate of each of the ``P`` problems at each validation.
        samples: samples per problem (the same at every validation).
    """

    steps: np.ndarray
    rates: np.ndarray
    samples: int

    @classmethod
    def read(
        cls, folder: Path, problems: dict[str, tuple[str, int]], split: str, success: Callable[[dict], bool] = solved
    ) -> HeldOutCurve:
        """The dumps ``folder/<step>.jsonl`` of one run, samples counted by ``success``; raises ``ValueError``
        when there are none or a problem was not sampled equally often at every validation."""
        dumps = sorted(folder.glob("*.jsonl"), key=lambda path: int(path.stem))
        if not dumps:
            raise ValueError(f"no validation dumps <step>.jsonl in {folder}")
        counts = np.array([held_out_counts(dump, problems, success)[split] for dump in dumps])  # (V, P, 2)
        samples = counts[..., 0]
        if samples.min() < 1 or samples.min() != samples.max():
            raise ValueError(f"{folder}: problems of {split} were sampled unequally ({samples.min()}-{samples.max()})")
        rates = counts[..., 1] / samples
        return cls(np.array([int(dump.stem) for dump in dumps]), rates, int(samples.max()))

    def change(self) -> tuple[float, float]:
        """``(mean, half-width)``: the rate's change from the first to the last validation, paired by prompt."""
        return mean_interval(self.rates[-1] - self.rates[0])


def mean_interval(values: np.ndarray, z: float = Z_95) -> tuple[float, float]:
    """``(mean, half-width)`` of the normal interval for the mean of ``values`` ``(P,)``, one per problem.

    Problems are the independent units: the interval covers both the sampling noise within a problem and
    the spread between problems. For a rate: the problems' rates; for a change between two validations, or
    between two runs on the same problems: the problems' differences (paired by problem).
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"need a 1-D array of at least 2 problems, got shape {values.shape}")
    return float(values.mean()), z * float(values.std(ddof=1)) / math.sqrt(len(values))
