"""The BoT-GRPO (Bag-of-Tokens Group Relative Policy Optimization) advantage estimator.

Registered in verl's advantage-estimator registry as ``bot_grpo`` by :mod:`bot_grpo_verl.plugin`, so a
recipe selects it with ``algorithm.adv_estimator=bot_grpo``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bot_grpo_verl.options import options_from_config

WEIGHTINGS = ("inverse_length", "uniform")
OUTCOME_BROADCASTS = ("auto", "always", "never")
CREDITS = ("token", "return_to_go")


@dataclass(frozen=True)
class BoTGRPOConfig:
    r"""Options of the ``bot_grpo`` estimator, read from ``algorithm.bot_grpo`` of verl's config.

    verl's config is in struct mode, so set them with a leading ``+`` on the command line
    (``+algorithm.bot_grpo.weighting=uniform``) or through the shipped hydra preset
    (``+preset=bot_grpo``). ``algorithm.norm_adv_by_std_in_grpo`` (verl's own key) is honoured as well.

    Parameters:
        weighting (`str`, *optional*, defaults to `"inverse_length"`):
            How each valid token is weighted in its group's bag of rewards.
            - `"inverse_length"`: weight ``1 / L_i`` (``L_i`` = valid tokens of its sequence), so every
              non-empty sequence weighs exactly 1 whatever its length (the BoT-GRPO paper).
            - `"uniform"`: weight 1 for every valid token, so long sequences dominate the group
              statistics (an ablation that shows why the paper weights by ``1 / L_i``).
        outcome_broadcast (`str`, *optional*, defaults to `"auto"`):
            Whether a sequence's reward sum is first spread over all its valid tokens.
            - `"auto"`: broadcast when the batch carries outcome rewards only, i.e. no row has a
              nonzero reward before its last valid token and no row has more than one nonzero
              reward (verl's reward managers write the score on the last token). BoT-GRPO then
              equals verl's ``grpo`` exactly, which makes it a drop-in replacement.
            - `"always"`: always broadcast (turns any dense reward into its sum, i.e. GRPO).
            - `"never"`: never broadcast (a lone last-token reward stays a lone token reward).
        epsilon (`float`, *optional*, defaults to `1e-6`):
            Added to the group standard deviation before dividing, as in verl's GRPO
            (DeepSeekMath, https://arxiv.org/abs/2402.03300).
        credit (`str`, *optional*, defaults to `"token"`):
            How a token is credited once the bag is normalised.
            - `"token"`: each token keeps its own normalised reward (BoT-GRPO).
            - `"return_to_go"`: each token gets the mean normalised reward of itself and every later
              valid token of its response, ``A[i,t] = sum_{s>=t} m A~[i,s] / sum_{s>=t} m`` (an ablation
              in the spirit of DeepSeekMath's process-supervised GRPO, which credits a step with the sum
              of the normalised rewards of the steps that follow; the mean keeps a token advantage's
              scale and still equals GRPO for sequence-level rewards).
    """

    weighting: str = "inverse_length"
    outcome_broadcast: str = "auto"
    epsilon: float = 1e-6
    credit: str = "token"

    def __post_init__(self):
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"algorithm.bot_grpo.weighting={self.weighting!r} is not one of {list(WEIGHTINGS)}")
        if self.outcome_broadcast not in OUTCOME_BROADCASTS:
            raise ValueError(
                f"algorithm.bot_grpo.outcome_broadcast={self.outcome_broadcast!r} "
                f"is not one of {list(OUTCOME_BROADCASTS)}"
            )
        if self.credit not in CREDITS:
            raise ValueError(f"algorithm.bot_grpo.credit={self.credit!r} is not one of {list(CREDITS)}")
        if not (isinstance(self.epsilon, int | float) and self.epsilon > 0):
            raise ValueError(f"algorithm.bot_grpo.epsilon={self.epsilon!r} must be a positive number")

    @classmethod
    def from_algorithm_config(cls, config: Mapping | None) -> BoTGRPOConfig:
        """Read the options from verl's ``algorithm`` config (``DictConfig``, ``AlgoConfig``, dict or None)."""
        return options_from_config(cls, config, "bot_grpo", "algorithm.bot_grpo")


def group_ids(index: Any, device: torch.device) -> tuple[torch.Tensor, int]:
    """Map group labels (verl passes a numpy object array of uid strings) to ids ``0..G-1``.

    Returns the ids as a ``(B,)`` long tensor on ``device`` and ``G``, known on the host so that no
    device-to-host sync is needed to size the per-group buffers.
    """
    labels = np.asarray(index)
    if labels.dtype == object:
        labels = labels.astype(str)
    _, inverse = np.unique(labels.reshape(-1), return_inverse=True)
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long, device=device), int(inverse.max(initial=-1)) + 1


def validate_inputs(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any) -> None:
    if token_level_rewards.ndim != 2:
        raise ValueError(
            f"token_level_rewards must be (batch, response_length), got shape {tuple(token_level_rewards.shape)}"
        )
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(
            f"response_mask shape {tuple(response_mask.shape)} does not match "
            f"token_level_rewards shape {tuple(token_level_rewards.shape)}"
        )
    if not token_level_rewards.is_floating_point():
        raise ValueError(f"token_level_rewards must be a floating-point tensor, got {token_level_rewards.dtype}")
    if index is None or len(index) != token_level_rewards.shape[0]:
        got = None if index is None else len(index)
        raise ValueError(f"index (group ids) has length {got}, expected one per row: {token_level_rewards.shape[0]}")


def raise_non_finite(token_level_rewards: torch.Tensor, bound: float | None = None) -> None:
    """Raise the ``ValueError`` that explains why rewards failed a finiteness (or ``bound``) check."""
    rows = torch.nonzero(~torch.isfinite(token_level_rewards).all(dim=-1)).flatten().tolist()
    if rows:
        raise ValueError(f"token_level_rewards holds non-finite values (NaN or inf) in rows {rows[:20]}")
    largest = token_level_rewards.abs().max().item() if token_level_rewards.numel() else 0.0
    limit = f" (|r| up to {largest:.3g}, limit {bound:.3g} for this batch shape)" if bound is not None else ""
    raise ValueError(f"token_level_rewards overflow: their squared sums are not finite{limit}; rescale the rewards")


def group_max(values: torch.Tensor, valid: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Per group, the largest of ``values`` (B,) over its ``valid`` rows; 0 for a group without one."""
    anchor = values.masked_fill(~valid, -torch.inf)
    largest = torch.zeros(num_groups, dtype=values.dtype, device=values.device)
    largest = largest.scatter_reduce(0, group, anchor, reduce="amax", include_self=False)
    return largest.nan_to_num(neginf=0.0)


def compute_bot_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    config: Mapping | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    Compute the BoT-GRPO advantage: group-relative normalisation over the bag of all token rewards.

    For the rows of one group g (rows sharing an ``index`` value), with ``L_i = sum_t m[i,t]``:

        w[i,t]  = m[i,t] / L_i   (``inverse_length``)  or  m[i,t]   (``uniform``);  rows with L_i = 0
                  get weight 0 and zero advantage
        W_g     = sum_{i in g, t} w[i,t]      (= number of non-empty rows for ``inverse_length``)
        \mu_g   = sum w[i,t] r[i,t] / W_g
        \sigma_g^2 = sum w[i,t] (r[i,t] - \mu_g)^2 / (W_g - 1)
        A[i,t]  = m[i,t] (r[i,t] - \mu_g) / (\sigma_g + \epsilon)     (or without the division when
                  ``norm_adv_by_std_in_grpo`` is False, Dr.GRPO style)

    A group with a single non-empty row uses \mu = 0, \sigma = 1 (verl's GRPO convention). With outcome
    rewards only, each row's reward sum is first broadcast to its valid tokens (see
    :class:`BoTGRPOConfig`), and the result equals verl's ``grpo``. Statistics are accumulated in
    float32 (or float64 for float64 rewards) around a shift taken from each group's own rewards, so a
    group whose tokens share one reward gets exactly zero advantage. Rewards must be finite and, so that
    no sum of squares overflows, within ``|r| <= sqrt(max / (8 B T)) / T`` (``max`` of the accumulation
    dtype: about 4e11 in float32 at 512 x 8192); anything else raises ``ValueError``. The call costs one
    device-to-host sync, which also picks the cheaper outcome-only computation when the rewards are
    broadcast.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length); one reward per response token
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length); 1 for tokens that take part (generated tokens), 0 for
            padding and, in multi-turn rollouts, tool output
        index: `(np.ndarray)`
            shape is (bs,); group ids (verl's ``uid`` strings), one group per prompt
        config: `(Optional[AlgoConfig])`
            verl's ``algorithm`` config; reads ``norm_adv_by_std_in_grpo`` and ``bot_grpo.*``

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        returns: `(torch.Tensor)`
            shape is (bs, response_length); equal to the advantages, as for verl's GRPO
    """
    options = BoTGRPOConfig.from_algorithm_config(config)
    norm_adv_by_std = bool(config.get("norm_adv_by_std_in_grpo", True)) if config is not None else True
    validate_inputs(token_level_rewards, response_mask, index)

    with torch.no_grad():
        device = token_level_rewards.device
        dtype = torch.promote_types(token_level_rewards.dtype, torch.float32)
        rewards = token_level_rewards.to(dtype)
        if not rewards.numel():
            return rewards.new_zeros(rewards.shape), rewards.new_zeros(rewards.shape)
        group, num_groups = group_ids(index, device)
        batch_size, response_length = rewards.shape
        positions = torch.arange(response_length, device=device, dtype=dtype)
        # One (B, T) buffer holds the nonzero detection, then the mask in ``dtype``, then (outcome rewards)
        # the advantages: on CPU a fresh large allocation costs more than a pass over it.
        buffer = torch.empty_like(rewards)
        if options.outcome_broadcast != "always":
            # One pass: every nonzero reward adds T + 1 + its position, so a row's total is 0 without
            # nonzeros, lies in [T + 1, 2T + 1) with exactly one (at total - T - 1), and is larger with more.
            offset = response_length + 1
            total = torch.ne(rewards, 0, out=buffer) @ (positions + offset)
        mask = buffer.copy_(response_mask)

        def per_group(values: torch.Tensor) -> torch.Tensor:
            return torch.zeros(num_groups, dtype=dtype, device=device).index_add_(0, group, values)

        lengths = mask.sum(dim=-1)
        non_empty = lengths > 0
        if options.weighting == "inverse_length":
            row_weight, row_mass = non_empty.to(dtype) / lengths.clamp(min=1), non_empty.to(dtype)
        else:
            row_weight, row_mass = non_empty.to(dtype), lengths
        group_rows = per_group(non_empty.to(dtype))
        single = group_rows <= 1

        def group_statistics(row_deviation: torch.Tensor, row_m2: torch.Tensor, group_shift: torch.Tensor):
            """Per row, its group's mean and scale from the rows' mean deviations from ``group_shift`` and
            their sums of squared deviations from their own means (B,), pooled with Chan's formula."""
            group_mass = per_group(row_mass)
            group_offset = per_group(row_mass * row_deviation) / group_mass.clamp(min=1)
            between = row_deviation - group_offset[group]
            group_m2 = per_group(row_weight * row_m2 + row_mass * between * between)
            group_std = (group_m2 / (group_mass - 1).clamp(min=1)).sqrt()
            group_mean = torch.where(single, torch.zeros_like(group_shift), group_shift + group_offset)
            if norm_adv_by_std:
                group_scale = torch.where(single, torch.ones_like(group_std), group_std) + options.epsilon
            else:
                group_scale = torch.ones_like(group_std)
            return group_mean[group], group_scale[group]

        def row_statistics(row_mean: torch.Tensor, row_m2: torch.Tensor):
            """:func:`group_statistics` of rows given by their means, shifted by their group's largest."""
            group_shift = group_max(row_mean, non_empty, group, num_groups)
            return group_statistics(row_mean - group_shift[group], row_m2, group_shift)

        def outcome_advantage(scores: torch.Tensor) -> torch.Tensor:
            """Per row (B,), the GRPO advantage of its score."""
            row_mean, row_scale = row_statistics(scores, torch.zeros_like(scores))
            return (scores - row_mean) / row_scale

        anchored = mask[:, 0] > 0  # rows whose first token is valid: its reward anchors the dense statistics
        checks = []
        if options.outcome_broadcast != "always":
            checks.append((total < 2 * offset).all())
            checks.append(((group_rows > 0) & (per_group(anchored.to(dtype)) == 0)).any())
        # The one host sync: bad rewards (NaN fails the comparison), and which computation below the batch
        # needs. The bound keeps every sum of squares below finite in ``dtype``.
        low, high = torch.aminmax(rewards)
        bound = math.sqrt(torch.finfo(dtype).max / (8 * batch_size * response_length)) / response_length
        bounded, *found = torch.stack([(low >= -bound) & (high <= bound), *checks]).tolist()
        if not bounded:
            raise_non_finite(token_level_rewards, bound)
        at_most_one_nonzero, unanchored_groups = found or (True, False)

        def last_valid_positions() -> torch.Tensor:
            # In the mask's own buffer: m (t + 1) / (t + 1) gives a 0/1 mask back exactly.
            ranks = positions + 1
            last = mask.mul_(ranks).amax(dim=-1) - 1
            mask.div_(ranks)
            return last.clamp(min=0)

        # Outcome rewards overwrite the mask with the advantages, unless ``return_to_go`` still needs it.
        output = mask if options.credit == "token" else None
        if options.outcome_broadcast == "always":
            advantages = torch.mul(mask, outcome_advantage(rewards.sum(dim=-1)).unsqueeze(1), out=output)
        elif at_most_one_nonzero:
            # Every row is one reward v at one position p (or none): the broadcast result and the token bag
            # both follow from (v, m[p], L), and one write of a per-row value plus the tokens at p.
            position = (total - offset).clamp(min=0).long().unsqueeze(1)
            value = rewards.gather(1, position).squeeze(1)
            value_mask = mask.gather(1, position).squeeze(1)
            if options.outcome_broadcast == "auto":
                broadcast = ((total == 0) | (total - offset >= last_valid_positions())).all()
            else:
                broadcast = torch.zeros((), dtype=torch.bool, device=device)
            token_sum = value * value_mask
            token_mean = token_sum / lengths.clamp(min=1)
            bag_mean, bag_scale = row_statistics(token_mean, (value * token_sum - token_sum * token_mean).clamp(min=0))
            row_advantage = torch.where(broadcast, outcome_advantage(value), -bag_mean / bag_scale)
            at_position = value_mask * torch.where(broadcast, row_advantage, (value - bag_mean) / bag_scale)
            advantages = torch.mul(mask, row_advantage.unsqueeze(1), out=output)
            flat = torch.arange(batch_size, device=device) * response_length + position.squeeze(1)
            advantages.view(-1).index_copy_(0, flat, at_position)
        else:
            # Statistics are taken around a shift read from each group's own rewards (a valid token's), so
            # that they stay well conditioned and a group of equal rewards gives exactly zero deviations.
            anchor = rewards[:, 0]
            if unanchored_groups:
                last_reward = rewards.gather(1, last_valid_positions().long().unsqueeze(1)).squeeze(1)
                anchor, anchored = torch.where(anchored, anchor, last_reward), non_empty
            group_shift = group_max(anchor, anchored, group, num_groups)
            row_shift = group_shift[group]
            centered = torch.sub(rewards, row_shift.unsqueeze(1)).mul_(mask)
            dense_sum = centered.sum(dim=-1)
            row_deviation = dense_sum / lengths.clamp(min=1)
            row_m2 = (torch.linalg.vector_norm(centered, dim=-1).square() - dense_sum * row_deviation).clamp(min=0)
            row_mean, row_scale = group_statistics(row_deviation, row_m2, group_shift)
            # A = m (r - mu) / s = centered / s + m (shift - mu) / s: two in-place passes.
            row_bias = (row_shift - row_mean) / row_scale
            advantages = centered.div_(row_scale.unsqueeze(1)).addcmul_(mask, row_bias.unsqueeze(1))
        if options.credit == "return_to_go":
            advantages = suffix_sum(advantages) / suffix_sum(mask).clamp(min=1) * mask
    return advantages, advantages


def suffix_sum(values: torch.Tensor) -> torch.Tensor:
    """``out[i, t] = sum_{s >= t} values[i, s]`` for a (B, T) tensor."""
    return values.flip(-1).cumsum(-1).flip(-1)
