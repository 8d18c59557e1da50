"""PURE: min-form (or sum-form) credit assignment over process-reward steps, with PURE's token baseline.

Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process Reward Model Needs for
Reasoning" (arXiv:2504.15275), as the authors' code computes it (CJReinforce/PURE,
``openrlhf/trainer/ppo_utils/experience_maker.py``, ``openrlhf/utils/utils.py`` and the batch whitening of
``openrlhf/trainer/ppo_utils/replay_buffer.py``; ``--reward_baseline token``, ``--reward_mode PRM``). verl has
no PURE; the plugin registers it as ``pure`` (``+preset=pure``), reading the step rewards that the ``bot_token``
manager writes with ``placement=step_end``. What differs from the authors' trainer: docs/algorithm.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from bot_grpo_verl.estimators.groups import (
    Groups,
    accumulation_dtype,
    check_batch,
    check_values,
    reward_bound,
    suffix_sum,
)
from bot_grpo_verl.options import check_option_values, options_from_config
from bot_grpo_verl.reward.step_layout import check_no_kl_in_reward, is_step_end

CREDITS = ("min", "sum")


@dataclass(frozen=True)
class PUREConfig:
    """Options of the ``pure`` estimator, read from ``algorithm.pure`` of verl's config.

    Parameters:
        temperature (`float`, *optional*, defaults to `0.1`):
            Temperature ``T`` of the softmin weights ``softmax(-r / T)`` over a response's steps (``"min"``
            credit). The weighted sum ``sum_j softmax(-r/T)_j r_j`` tends to ``min_j r_j`` as ``T -> 0``
            (PURE's min-form value) and to the mean step reward as ``T -> inf``. PURE uses 0.1. Rewards must
            stay within ``T * max / 2`` of the accumulation dtype (``max`` about 3.4e38 in float32), so
            that ``-r / T`` is finite.
        credit (`str`, *optional*, defaults to `"min"`):
            How a token's return is formed from the rewards of the steps ending at or after it.
            - `"min"`: softmin-weighted sum, ``G[t] = sum_{j: e_j >= t} softmax(-r/T)_j r_j``: a response is
              valued by its worst steps (PURE's min-form credit assignment).
            - `"sum"`: plain sum, ``G[t] = sum_{j: e_j >= t} r_j``: the usual return-to-go (the sum-form
              credit PURE compares against; it lets a PRM's rewards be gamed by many small positive steps).
        batch_whitening (`bool`, *optional*, defaults to `True`):
            Whiten the advantages over the whole batch before the update, as the authors' trainer does
            (``NaiveReplayBuffer.normalize("advantages")``, on unless ``--disable_advantage_normalization``; their
            released scripts leave it on): mean and variance over the valid tokens whose advantage is not exactly 0
            (the step-end separators, and tokens whose return is 0), ``A <- (A - mean) / sqrt(max(var, 1e-8))``,
            and those zero tokens stay 0 (their default ``mask_separator_adv``). `False` gives the raw returns.
    """

    temperature: float = 0.1
    credit: str = "min"
    batch_whitening: bool = True

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
    Compute PURE advantages: min-form (softmin-weighted) or sum-form step rewards, minus PURE's per-token
    leave-one-out baseline, summed to go.

    Reads the ``step_end`` layout (:mod:`bot_grpo_verl.reward.step_layout`): step j of row i has reward ``r[i,j]``
    on its last token ``e[i,j]``. With ``L_i`` valid tokens in row i:

        \omega[i,j] = softmax over the steps j of row i of (-r[i,j] / T)   (``"min"`` credit; 1 for ``"sum"``)
        v_i         = sum_j \omega[i,j] r[i,j]                              (-> min_j r[i,j] as T -> 0)
        b_i         = sum_{k != i} v_k / sum_{k != i} L_k                    (others' reward per token; 0 alone)
        n[i,j]      = valid tokens after e[i,j-1] and before e[i,j]          (step j's tokens before its end)
        q[i,e[i,j]] = \omega[i,j] r[i,j] - b_i n[i,j]                        (0 on every other token)
        G[i,t]      = sum_{s >= t} q[i,s]
        A[i,t]      = m[i,t] G[i,t], and 0 on the step-end tokens             (the authors' separator mask)
        A           = whiten(A) over the batch's tokens with A != 0            (``batch_whitening``, default on)

    This is the authors' ``--reward_mode PRM``: the outcome enters as a step (arithmetic's answer step, or
    the one step of a response without spans). Their ``PRMVR`` also adds the verifier's outcome at EOS
    with a leave-one-out baseline of its own; verl hands an estimator one reward tensor, which cannot hold
    the outcome beside the steps. Empty rows get zero and are not in baselines. Inputs are checked as for
    ``bot_grpo``, in one device-to-host sync.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length); the ``step_end`` layout, finite, within
            :meth:`PUREConfig.reward_bound`
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
        ValueError: for bad options, shapes, masks, indices or rewards, or an in-reward KL penalty.
    """
    options = PUREConfig.from_algorithm_config(config)
    check_no_kl_in_reward(config, "pure")
    groups = check_batch(token_level_rewards, response_mask, index)
    with torch.no_grad():
        rewards = token_level_rewards.to(accumulation_dtype(token_level_rewards.dtype))
        if not rewards.numel():
            return rewards.new_zeros(rewards.shape), rewards.new_zeros(rewards.shape)
        check_values(rewards, response_mask, options.reward_bound(rewards.dtype, *rewards.shape))
        mask = response_mask.to(rewards.dtype)
        ends = is_step_end(rewards) & response_mask.bool()
        credited = credited_step_rewards(rewards, ends, options)
        baseline = others_per_token(credited.sum(dim=-1), mask.sum(dim=-1), groups)
        step_rewards = credited - baseline.unsqueeze(1) * tokens_before_step_end(ends, mask)
        returns = suffix_sum(step_rewards) * mask
        advantages = returns.masked_fill(ends, 0.0)
        if options.batch_whitening:
            advantages = whiten_over_batch(advantages, mask)
    return advantages, returns


def whiten_over_batch(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T): ``advantages`` ((B, T), 0 off ``mask``, (B, T) 0/1) whitened over the batch as the PURE authors'
    ``NaiveReplayBuffer.normalize`` does it: the mean over the valid tokens with a non-zero advantage, the
    variance's squares summed over every valid token but divided by that same count, the variance clamped at
    1e-8, and every token with a zero advantage (or off the mask) left at 0."""
    counted = mask.bool() & (advantages != 0)
    count = counted.sum()
    mean = advantages.sum() / count
    variance = ((advantages - mean).square() * mask).sum() / count
    return ((advantages - mean) * variance.clamp(min=1e-8).rsqrt()).where(counted, 0.0)


def credited_step_rewards(rewards: torch.Tensor, ends: torch.Tensor, options: PUREConfig) -> torch.Tensor:
    """(B, T): each step's reward as it enters the returns, on its end token (``ends``, (B, T) bool), 0
    elsewhere: weighted by the softmin ``softmax(-r / T)`` over its row's steps for ``"min"`` credit
    (the authors' ``turn_process_reward_logits_to_reward``), as it is for ``"sum"``."""
    step_rewards = rewards.where(ends, 0.0)
    if options.credit == "sum":
        return step_rewards
    logits = (-rewards / options.temperature).masked_fill(~ends, -torch.inf)
    softmin = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # a row without steps has a NaN softmax
    return softmin * step_rewards


def tokens_before_step_end(ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T): on each step-end token of ``ends`` ((B, T) bool), the valid tokens (``mask``, (B, T) 0/1) of its
    step before it, those after the previous step's end; 0 elsewhere."""
    valid_so_far = mask.cumsum(dim=-1)
    valid_at_ends = valid_so_far.where(ends, 0).cummax(dim=-1).values
    valid_at_previous_end = torch.nn.functional.pad(valid_at_ends[:, :-1], (1, 0))
    return (valid_so_far - valid_at_previous_end - 1).where(ends, 0)


def others_per_token(totals: torch.Tensor, lengths: torch.Tensor, groups: Groups) -> torch.Tensor:
    """Per row (B,), the summed ``totals`` (B,) of the other rows of its group per valid token of theirs
    (``lengths`` (B,)): the leave-one-out baseline; 0 for a row whose group has no other non-empty row."""
    others_length = groups.others_sum(lengths)
    return torch.where(others_length > 0, groups.others_sum(totals) / others_length.clamp(min=1), 0.0)
