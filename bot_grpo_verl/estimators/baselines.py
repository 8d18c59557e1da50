"""Same-information baselines: other ways of using the token rewards that BoT-GRPO consumes.

"I have a token-level reward model; is BoT-GRPO better than the obvious ways of using it with GRPO?"
Each estimator here reads the same ``token_level_rewards`` as ``bot_grpo`` (the ``bot_token`` reward
manager's output) and is registered with verl by :mod:`bot_grpo_verl.plugin`:

- ``grpo_token_mean``: verl's ``grpo`` on one scalar per response, the mean of its token rewards (a PRM
  scalarised by its mean, as in the "Blend-PRM" GRPO baselines).
- ``grpo_token_min``: verl's ``grpo`` on ``min_t r[i,t] + r[i,last]``: the smallest token (hence step)
  reward, PRM-min scalarisation (PURE's min-form at the sequence level), plus the reward of the response's
  last valid token, which carries the outcome when the task's reward gives the final (answer) step the
  outcome, as ``bot_grpo_verl/rewards/arithmetic_steps.py`` does.
- ``ps_grpo``: DeepSeekMath's process-supervised GRPO (arXiv:2402.03300, section 4.1.3): every step reward
  of the group is normalised by the mean and std over all steps of the group, and a token's advantage is
  the sum of the normalised rewards of the steps ending at or after it. It reads the step layout
  ``reward.bot_token.placement=step_end`` (:mod:`bot_grpo_verl.reward.step_layout`): the reward function's spans
  are the steps, and a response without spans is one step valued at its outcome.
- ``bot_grpo_shuffled``: a localisation control, BoT-GRPO on each response's token rewards permuted within
  the response (same values, same bag, no credit localisation).

PURE's sum-form credit, the fifth baseline, is ``algorithm.pure.credit=sum`` of :mod:`bot_grpo_verl.estimators.pure`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from bot_grpo_verl.estimators.bot_grpo import compute_bot_grpo_advantage
from bot_grpo_verl.estimators.groups import last_valid_positions, suffix_sum
from bot_grpo_verl.options import option_from_config
from bot_grpo_verl.reward.step_layout import check_no_kl_in_reward, is_step_end


def row_token_mean(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Mean reward of each row's valid tokens (0 for a row without one); shape (bs,)."""
    mask = response_mask.to(token_level_rewards.dtype)
    return (token_level_rewards * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)


def row_min_plus_last(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``min_t r[i,t] + r[i, last valid t]`` over each row's valid tokens (0 for a row without one); shape (bs,)."""
    valid = response_mask.bool()
    smallest = torch.where(valid, token_level_rewards, torch.inf).amin(dim=-1)
    last = last_valid_positions(response_mask)
    final = token_level_rewards.gather(-1, last.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return torch.where(last >= 0, smallest + final, torch.zeros_like(final))


def grpo_on_row_scores(
    scores: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config: Mapping | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's ``grpo`` on one score per row (verl sums a row's token rewards: the score sits on column 0).

    Args:
        scores: shape (bs,).
        response_mask: shape (bs, response_length).
        index: shape (bs,), group ids.
        config: verl's ``algorithm`` config; reads ``norm_adv_by_std_in_grpo``.
    """
    layout = torch.zeros(response_mask.shape, dtype=scores.dtype, device=scores.device)
    layout[:, 0] = scores
    norm_by_std = option_from_config(config, "norm_adv_by_std_in_grpo", bool, True, "algorithm.norm_adv_by_std_in_grpo")
    return compute_grpo_outcome_advantage(layout, response_mask, index, norm_adv_by_std_in_grpo=norm_by_std)


def compute_grpo_token_mean_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config: Mapping | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``grpo_token_mean``: verl's ``grpo`` on each response's mean token reward.

    Args:
        token_level_rewards: shape (bs, response_length).
        response_mask: shape (bs, response_length).
        index: shape (bs,), group ids.
        config: verl's ``algorithm`` config.

    Returns:
        advantages, returns: shape (bs, response_length).
    """
    return grpo_on_row_scores(row_token_mean(token_level_rewards, response_mask), response_mask, index, config)


def compute_grpo_token_min_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config: Mapping | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``grpo_token_min``: verl's ``grpo`` on ``min_t r[i,t] + r[i, last valid t]`` per response.

    Args and returns as :func:`compute_grpo_token_mean_advantage`.
    """
    return grpo_on_row_scores(row_min_plus_last(token_level_rewards, response_mask), response_mask, index, config)


def compute_ps_grpo_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config: Mapping | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``ps_grpo``: process-supervised GRPO (DeepSeekMath, arXiv:2402.03300, section 4.1.3).

    Reads the ``step_end`` layout (``reward.bot_token.placement=step_end``,
    :mod:`bot_grpo_verl.reward.step_layout`): step rewards ``r_j`` on the steps' last tokens. Per group g:

        \tilde r_j = (r_j - mean_g(r)) / (std_g(r) + \epsilon)     over every step j of every response of g
        A[i,t]     = sum_{steps j of i ending at or after t} \tilde r_j

    The step statistics are BoT-GRPO's bag with every step weighing 1 (``weighting=uniform`` over the
    step-end tokens; ``std_g`` is Bessel-corrected as in verl's ``grpo``; ``norm_adv_by_std_in_grpo`` and
    ``algorithm.bot_grpo.epsilon`` apply).

    Args and returns as :func:`compute_grpo_token_mean_advantage`.
    """
    check_no_kl_in_reward(config, "ps_grpo")
    ends = is_step_end(token_level_rewards) & response_mask.bool()
    config = config if config is not None else {}
    bot_grpo = dict(config.get("bot_grpo") or {})
    step_config = {
        "norm_adv_by_std_in_grpo": config.get("norm_adv_by_std_in_grpo", True),
        "bot_grpo": {**bot_grpo, "weighting": "uniform", "outcome_broadcast": "never", "credit": "token"},
    }
    normalised, _ = compute_bot_grpo_advantage(token_level_rewards * ends, ends.long(), index, step_config)
    advantages = suffix_sum(normalised) * response_mask
    return advantages, advantages


def shuffle_within_rows(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Each row's valid-token rewards permuted at random among its valid positions; masked tokens kept.

    Args:
        token_level_rewards: shape (bs, response_length).
        response_mask: shape (bs, response_length), 0/1.
        generator: the random source (default: torch's global one, seeded by verl).

    Returns:
        shape (bs, response_length).
    """
    valid = response_mask.bool()
    keys = torch.rand(valid.shape, generator=generator, device=valid.device)
    valid_in_random_order = torch.where(valid, keys, 2.0).argsort(dim=-1)
    valid_in_order = (~valid).to(torch.uint8).argsort(dim=-1, stable=True)
    shuffled = token_level_rewards.scatter(-1, valid_in_order, token_level_rewards.gather(-1, valid_in_random_order))
    return torch.where(valid, shuffled, token_level_rewards)


def compute_bot_grpo_shuffled_advantage(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, config: Mapping | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``bot_grpo_shuffled``: ``bot_grpo`` (with ``algorithm.bot_grpo.*``) after :func:`shuffle_within_rows`.

    Args and returns as :func:`compute_grpo_token_mean_advantage`.
    """
    shuffled = shuffle_within_rows(token_level_rewards, response_mask)
    return compute_bot_grpo_advantage(shuffled, response_mask, index, config)


ESTIMATORS = {
    "grpo_token_mean": compute_grpo_token_mean_advantage,
    "grpo_token_min": compute_grpo_token_min_advantage,
    "ps_grpo": compute_ps_grpo_advantage,
    "bot_grpo_shuffled": compute_bot_grpo_shuffled_advantage,
}
