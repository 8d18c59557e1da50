"""PURE: min-form (or sum-form) credit assignment on token rewards, with a leave-one-out baseline.

Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process Reward Model Needs for
Reasoning" (arXiv:2504.15275). verl has no PURE; the plugin registers it as ``pure`` so that it runs
on the same token rewards as ``bot_grpo`` (``+preset=pure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from bot_grpo_verl.groups import (
    Groups,
    accumulation_dtype,
    check_batch,
    check_values,
    reward_bound,
    suffix_sum,
)
from bot_grpo_verl.options import check_option_values, options_from_config

CREDITS = ("min", "sum")


@dataclass(frozen=True)
class PUREConfig:
    """Options of the ``pure`` estimator, read from ``algorithm.pure`` of verl's config.

    Parameters:
        temperature (`float`, *optional*, defaults to `0.1`):
            Temperature ``T`` of the softmin weights ``softmax(-r / T)`` over a response's tokens (``"min"``
            credit). The weighted sum ``sum_t softmax(-r/T)_t r_t`` tends to ``min_t r_t`` as ``T -> 0``
            (PURE's min-form value) and to the mean reward as ``T -> inf``. PURE uses 0.1. Rewards must
            stay within ``T * max / 2`` of the accumulation dtype (``max`` about 3.4e38 in float32), so
            that ``-r / T`` is finite.
        credit (`str`, *optional*, defaults to `"min"`):
            How a token's return is formed from the rewards of itself and the later tokens.
            - `"min"`: softmin-weighted sum, ``G[t] = sum_{s>=t} softmax(-r/T)_s r_s``: a response is
              valued by its worst steps (PURE's min-form credit assignment).
            - `"sum"`: plain sum, ``G[t] = sum_{s>=t} r_s``: the usual return-to-go (the sum-form credit
              PURE compares against; it lets a PRM's rewards be gamed by many small positive steps).
    """

    temperature: float = 0.1
    credit: str = "min"

    def __post_init__(self):
        check_option_values(
            self,
            "algorithm.pure",
            choices={"credit": CREDITS},
            ranges={"temperature": self.temperature > 0},
            requirement="must be a positive number",
        )

    @classmethod
    def from_algorithm_config(cls, config: Mapping | None) -> PUREConfig:
        """Read the options from verl's ``algorithm`` config (``DictConfig``, ``AlgoConfig``, dict or None)."""
        return options_from_config(cls, config, "pure", "algorithm.pure")

    def reward_bound(self, dtype: torch.dtype, batch_size: int, response_length: int) -> float:
        """The largest ``|r|`` these options can take in ``dtype``: the sums' bound, and for ``"min"`` credit
        the one that keeps every softmin logit ``-r / T`` and their differences finite."""
        bound = reward_bound(dtype, batch_size, response_length)
        if self.credit == "min":
            bound = min(bound, self.temperature * torch.finfo(dtype).max / 2)
        return bound


def compute_pure_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    config: Mapping | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    Compute PURE advantages: min-form (softmin-weighted) or sum-form return-to-go minus a leave-one-out
    baseline.

    For row i with valid tokens m[i, t] (L_i of them):

        \omega[i,t] = softmax over the valid t of (-r[i,t] / T)     (``"min"`` credit; 1 for ``"sum"``)
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
    Inputs are checked as for ``bot_grpo``, in one device-to-host sync.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length); finite, within :meth:`PUREConfig.reward_bound`
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length); bool or 0/1
        index: `(np.ndarray)`
            shape is (bs,); group labels, grouped by Python equality (as for ``bot_grpo``)
        config: `(Optional[AlgoConfig])`
            verl's ``algorithm`` config; reads ``pure.*``

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        returns: `(torch.Tensor)`
            shape is (bs, response_length); the returns G

    Raises:
        ValueError: for bad options, shapes, masks, indices or rewards, naming the problem.
    """
    options = PUREConfig.from_algorithm_config(config)
    groups = check_batch(token_level_rewards, response_mask, index)
    with torch.no_grad():
        rewards = token_level_rewards.to(accumulation_dtype(token_level_rewards.dtype))
        if not rewards.numel():
            return rewards.new_zeros(rewards.shape), rewards.new_zeros(rewards.shape)
        check_values(rewards, response_mask, options.reward_bound(rewards.dtype, *rewards.shape))
        mask = response_mask.to(rewards.dtype)
        weighted = credited_rewards(rewards, mask, options)
        returns = suffix_sum(weighted) * mask
        remaining = suffix_sum(mask)
        baseline = others_per_token(weighted.sum(dim=-1), mask.sum(dim=-1), groups)
        advantages = (returns - baseline.unsqueeze(1) * remaining) * mask
    return advantages, returns


def credited_rewards(rewards: torch.Tensor, mask: torch.Tensor, options: PUREConfig) -> torch.Tensor:
    """(B, T): each valid token's reward as it enters the returns, ``m w r``: weighted by the softmin
    ``w = softmax(-r / T)`` over its row's valid tokens for ``"min"`` credit, as it is for ``"sum"``."""
    if options.credit == "sum":
        return rewards * mask
    logits = (-rewards / options.temperature).masked_fill(mask == 0, -torch.inf)
    softmin = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # an empty row's softmax is NaN
    return softmin * rewards * mask


def others_per_token(totals: torch.Tensor, lengths: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Per row (B,), the summed ``totals`` (B,) of the other rows of its group per valid token of theirs
    (``lengths`` (B,)): the leave-one-out baseline; 0 for a row whose group has no other non-empty row."""
    others_length = groups.others_sum(lengths)
    return torch.where(others_length > 0, groups.others_sum(totals) / others_length.clamp(min=1), 0.0)
