"""PURE: min-form credit assignment on token rewards, with a leave-one-out baseline.

Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process Reward Model Needs for
Reasoning" (arXiv:2504.15275). verl has no PURE; the plugin registers it as ``pure`` so that it runs
on the same token rewards as ``bot_grpo`` (``+preset=pure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from bot_grpo_verl.estimator import group_ids, raise_non_finite, suffix_sum, validate_inputs
from bot_grpo_verl.options import options_from_config


@dataclass(frozen=True)
class PUREConfig:
    """Options of the ``pure`` estimator, read from ``algorithm.pure`` of verl's config.

    Parameters:
        temperature (`float`, *optional*, defaults to `0.1`):
            Temperature ``T`` of the softmin weights ``softmax(-r / T)`` over a response's tokens. The
            weighted sum ``sum_t softmax(-r/T)_t r_t`` tends to ``min_t r_t`` as ``T -> 0`` (PURE's
            min-form value) and to the mean reward as ``T -> inf``. PURE uses 0.1.
    """

    temperature: float = 0.1

    def __post_init__(self):
        if not (isinstance(self.temperature, int | float) and self.temperature > 0):
            raise ValueError(f"algorithm.pure.temperature={self.temperature!r} must be a positive number")


def compute_pure_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    config: Mapping | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    Compute PURE advantages: min-form (softmin-weighted) return-to-go minus a leave-one-out baseline.

    For row i with valid tokens m[i, t] (L_i of them):

        \omega[i,t] = softmax over the valid t of (-r[i,t] / T)
        G[i,t]      = sum_{s >= t} m[i,s] \omega[i,s] r[i,s]       (G[i,0] ~ min_t r[i,t] as T -> 0)
        N[i,t]      = sum_{s >= t} m[i,s]                          (valid tokens still to come)
        b_i         = sum_j G[j,0] / sum_j L_j over the other non-empty rows j of i's group: their
                      weighted reward per token (RLOO; 0 when alone)
        A[i,t]      = m[i,t] (G[i,t] - b_i N[i,t])

    The baseline is PURE's per-token one (``--reward_baseline token`` in the authors' scripts): each
    token's reward is compared with the others' average reward per token before the return is summed,
    so a token's baseline covers only what is left of its response.

    Verifiable outcomes enter through the token rewards (the ``bot_token`` manager gives the answer's
    tokens, or every uncovered token, the outcome score). Empty rows get zero and are not in baselines.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length)
        index: `(np.ndarray)`
            shape is (bs,); group ids
        config: `(Optional[AlgoConfig])`
            verl's ``algorithm`` config; reads ``pure.*``

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        returns: `(torch.Tensor)`
            shape is (bs, response_length); the min-form returns G
    """
    options = options_from_config(PUREConfig, config, "pure", "algorithm.pure")
    validate_inputs(token_level_rewards, response_mask, index)
    with torch.no_grad():
        dtype = torch.promote_types(token_level_rewards.dtype, torch.float32)
        rewards = token_level_rewards.to(dtype)
        valid = response_mask.bool()
        group, num_groups = group_ids(index, rewards.device)
        if not bool(torch.isfinite(rewards).all()):
            raise_non_finite(token_level_rewards)

        weights = torch.softmax((-rewards / options.temperature).masked_fill(~valid, -torch.inf), dim=-1)
        weights = weights.nan_to_num(0.0)  # rows without valid tokens
        weighted = weights * rewards * valid
        returns = suffix_sum(weighted) * valid
        remaining = suffix_sum(valid.to(dtype))
        total = weighted.sum(dim=-1)
        lengths = remaining[:, 0] if remaining.shape[1] else total

        def per_group(values: torch.Tensor) -> torch.Tensor:
            return torch.zeros(num_groups, dtype=dtype, device=rewards.device).index_add_(0, group, values)

        others_length = per_group(lengths)[group] - lengths
        baseline = torch.where(others_length > 0, (per_group(total)[group] - total) / others_length.clamp(min=1), 0.0)
        advantages = (returns - baseline.unsqueeze(1) * remaining) * valid
    return advantages, returns
