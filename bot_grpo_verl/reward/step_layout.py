"""The ``step_end`` layout: step rewards as process supervision reads them, in verl's one reward tensor.

verl hands an estimator one ``token_level_rewards`` tensor. With ``reward.bot_token.placement=step_end`` the
``bot_token`` manager writes each step's reward on the step's last token and marks every other token as no
step; ``ps_grpo`` and ``pure`` read the steps back with :func:`is_step_end`. The mark is IEEE negative zero,
so a step whose reward is exactly 0 (a wrong answer, a clean line of failed code) stays a step.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from bot_grpo_verl.reward.alignment import token_values_from_spans

NOT_A_STEP = -0.0
"""What the ``step_end`` layout holds on a token that ends no step: IEEE negative zero. Sums, means and verl's
logs read it as 0; :func:`is_step_end` tells it from a step whose value is 0, which is stored as +0.0."""


def is_step_end(rewards):
    """Where the ``step_end`` layout (NumPy array or tensor) has a step end: anything but -0.0."""
    signbit = torch.signbit if isinstance(rewards, torch.Tensor) else np.signbit
    return (rewards != 0) | ~signbit(rewards)


def step_end_rewards(
    ranges: np.ndarray, spans, score: float, text_length: int, uncovered: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``step_end`` layout: one entry per step, on the step's last token; :data:`NOT_A_STEP` elsewhere.

    The steps are what the reward function marks: each span that owns a token (tokens owned as by
    ``token_values_from_spans``) is a step ending at the last token it owns, whatever its value (0 included).
    A response with no such span (no spans, an empty list, spans too short to own a token) is one step:
    ``score`` on its last valid token. Tokens no span owns (prose around code, an EOS without characters)
    end no step, so the outcome is counted once: inside the spans when they carry it, else as the one step;
    unless the reward function valued them (``uncovered``, not None): then they are one more step, ending at
    the last of them.

    Returns:
        rewards: float64, shape (L,); covered: bool, shape (L,), the tokens assigned to a span.
    """
    ordinals = [(start, end, k) for k, (start, end, _) in enumerate(spans)]
    owner = token_values_from_spans(ranges, ordinals, -1, text_length).astype(np.int64)
    covered = owner >= 0
    rewards = np.full(len(owner), NOT_A_STEP)
    if not covered.any():
        if len(rewards):
            rewards[-1] = (score if uncovered is None else uncovered) + 0.0  # + 0.0 stores a zero as +0.0: a step
        return rewards, covered
    if uncovered is not None and not covered.all():
        rewards[np.flatnonzero(~covered)[-1]] = uncovered + 0.0
    last_token = np.full(len(spans), -1)
    np.maximum.at(last_token, owner[covered], np.flatnonzero(covered))
    has_token = last_token >= 0
    rewards[last_token[has_token]] = np.asarray([value for _, _, value in spans])[has_token] + 0.0
    return rewards, covered


def turn_end_rewards(turns: np.ndarray, values: np.ndarray, length: int) -> np.ndarray:
    """The ``step_end`` layout of one step per assistant turn: ``values[k]`` on the last token of turn k
    (``turns``: int64 (T, 2) token ranges, ``values``: (T,)); float64 (L,), :data:`NOT_A_STEP` elsewhere."""
    rewards = np.full(length, NOT_A_STEP)
    rewards[turns[:, 1] - 1] = np.asarray(values, dtype=np.float64) + 0.0  # + 0.0: a zero value is a step
    return rewards


def kl_in_reward_problem(config: Mapping | None, estimator: str) -> str | None:
    """Why ``estimator`` cannot run with verl's ``algorithm`` ``config``: the ``step_end`` layout's marks do not
    survive verl's in-reward KL penalty (it adds to every token); None when it can."""
    if config is not None and config.get("use_kl_in_reward", False):
        return (
            f"{estimator} reads step rewards from the step_end layout, which algorithm.use_kl_in_reward=true "
            "overwrites on every token; use the actor's KL loss (actor_rollout_ref.actor.use_kl_loss=true)"
        )
    return None


def check_no_kl_in_reward(config: Mapping | None, estimator: str) -> None:
    """Raise ``ValueError`` with :func:`kl_in_reward_problem`, if any."""
    problem = kl_in_reward_problem(config, estimator)
    if problem is not None:
        raise ValueError(problem)
