"""The BoT-GRPO (Bag-of-Tokens Group Relative Policy Optimization) advantage estimator.

Registered in verl's advantage-estimator registry as ``bot_grpo`` by :mod:`bot_grpo_verl.plugin`, so a
recipe selects it with ``algorithm.adv_estimator=bot_grpo``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from bot_grpo_verl.estimators.groups import (
    Groups,
    accumulation_dtype,
    bag_moments,
    check_batch,
    check_values,
    last_valid_positions,
    reward_bound,
    suffix_sum,
)
from bot_grpo_verl.options import check_option_values, option_from_config, options_from_config

WEIGHTINGS = ("inverse_length", "uniform")
OUTCOME_BROADCASTS = ("auto", "always", "never")
CREDITS = ("token", "return_to_go")


@dataclass(frozen=True)
class BoTGRPOConfig:
    r"""Options of the ``bot_grpo`` estimator, read from ``algorithm.bot_grpo`` of verl's config.

    verl's config is in struct mode, so set them with a leading ``+`` on the command line
    (``+algorithm.bot_grpo.weighting=uniform``) or through the shipped hydra preset
    (``+preset=bot_grpo``). ``algorithm.norm_adv_by_std_in_grpo`` (verl's own key, a bool) is honoured as
    well. Values are type-checked by :mod:`bot_grpo_verl.options`: a bool, a string or a non-finite number
    where a number belongs (or the reverse) raises ``ValueError`` naming the full key.

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
            (DeepSeekMath, https://arxiv.org/abs/2402.03300). A finite number > 0.
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
        check_option_values(
            self,
            "algorithm.bot_grpo",
            choices={"weighting": WEIGHTINGS, "outcome_broadcast": OUTCOME_BROADCASTS, "credit": CREDITS},
            ranges={"epsilon": self.epsilon > 0},
            requirement="must be a positive number",
        )

    @classmethod
    def from_algorithm_config(cls, config: Mapping | None) -> BoTGRPOConfig:
        """Read the options from verl's ``algorithm`` config (``DictConfig``, ``AlgoConfig``, dict or None)."""
        return options_from_config(cls, config, "bot_grpo", "algorithm.bot_grpo")


def compute_bot_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any,
    config: Mapping | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    Compute the BoT-GRPO advantage: group-relative normalisation over the bag of all token rewards.

    For the rows of one group g (rows sharing an ``index`` value), with ``L_i = sum_t m[i,t]``:

        w[i,t]  = m[i,t] / L_i   (``inverse_length``)  or  m[i,t]   (``uniform``)
        W_g     = sum_{i in g, t} w[i,t]      (= number of non-empty rows for ``inverse_length``)
        \mu_g   = sum w[i,t] r[i,t] / W_g
        \sigma_g^2 = sum w[i,t] (r[i,t] - \mu_g)^2 / (W_g - 1)
        A[i,t]  = m[i,t] (r[i,t] - \mu_g) / (\sigma_g + \epsilon)     (or without the division when
                  ``norm_adv_by_std_in_grpo`` is False, Dr.GRPO style)

    Empty rows (L_i = 0) get zero advantage and stay out of the statistics; a group with a single
    non-empty row uses \mu = 0, \sigma = 1 (verl's GRPO convention). With outcome rewards only, each row's
    reward sum is first broadcast to its valid tokens (see :class:`BoTGRPOConfig`), and the result equals
    verl's ``grpo``. Statistics are accumulated in float32 (float64 for float64 rewards) around a reward of
    each group's own (:func:`bot_grpo_verl.estimators.groups.bag_moments`), so a group whose tokens share one
    reward gets exactly zero advantage. One device-to-host sync per call checks the inputs
    (:func:`bot_grpo_verl.estimators.groups.check_values`) and reads whether the batch holds outcome rewards only.

    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length); one reward per response token, finite and within
            :func:`bot_grpo_verl.estimators.groups.reward_bound` (about 4e11 in float32 at 512 x 8192)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length); bool or 0/1: 1 for tokens that take part (generated tokens),
            0 for padding and, in multi-turn rollouts, tool output
        index: `(np.ndarray)`
            shape is (bs,); group labels (verl's ``uid`` strings), one group per prompt; labels are
            grouped by Python equality, as verl's ``grpo`` groups them (``1`` and ``"1"`` are two groups)
        config: `(Optional[AlgoConfig])`
            verl's ``algorithm`` config; reads ``norm_adv_by_std_in_grpo`` and ``bot_grpo.*``

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        returns: `(torch.Tensor)`
            shape is (bs, response_length); equal to the advantages, as for verl's GRPO

    Raises:
        ValueError: for bad options, shapes, masks, indices or rewards, naming the problem.
    """
    options = BoTGRPOConfig.from_algorithm_config(config)
    norm_by_std = option_from_config(config, "norm_adv_by_std_in_grpo", bool, True, "algorithm.norm_adv_by_std_in_grpo")
    groups = check_batch(token_level_rewards, response_mask, index)
    with torch.no_grad():
        rewards = token_level_rewards.to(accumulation_dtype(token_level_rewards.dtype))
        if not rewards.numel():
            empty = rewards.new_zeros(rewards.shape)
            return empty, empty
        mask = response_mask.to(rewards.dtype)
        bound = reward_bound(rewards.dtype, *rewards.shape)
        on_device = broadcast_decision(rewards, mask, options.outcome_broadcast)
        (broadcast,) = check_values(rewards, response_mask, bound, on_device)  # the one host sync
        advantages = bag_advantages(rewards, mask, groups, options, norm_by_std, broadcast)
        if options.credit == "return_to_go":
            advantages = suffix_sum(advantages) / suffix_sum(mask).clamp(min=1) * mask
    return advantages, advantages


def bag_advantages(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    groups: Groups,
    options: BoTGRPOConfig,
    norm_by_std: bool,
    broadcast: bool,
) -> torch.Tensor:
    """The formula of :func:`compute_bot_grpo_advantage`, term by term, on checked inputs.

    Args:
        rewards, mask: (B, T) in the accumulation dtype; the mask is 0/1.
        groups: the rows' groups.
        options, norm_by_std: the estimator's options.
        broadcast: every valid token of a row carries the row's reward sum instead of its own reward.

    Returns:
        (B, T) advantages.
    """
    lengths = mask.sum(dim=-1)  # L_i (B,)
    bag = rewards.sum(dim=-1, keepdim=True) if broadcast else rewards  # r[i,t]: (B, 1) the row's sum, or (B, T)
    weights = token_weights(lengths, options.weighting)  # w[i,t] = w_i on valid tokens (B,)
    deviations, variance = bag_moments(bag, mask, weights, groups)  # m[i,t] (r[i,t] - mu_g) (B, T), sigma_g^2 (G,)
    scale = variance.sqrt() + options.epsilon if norm_by_std else torch.ones_like(variance)  # Dr.GRPO: none
    return deviations / scale[groups.ids, None]  # A[i,t] (B, T)


def broadcast_decision(rewards: torch.Tensor, mask: torch.Tensor, outcome_broadcast: str) -> torch.Tensor:
    """0-d bool tensor: whether each row's reward sum replaces its token rewards (``outcome_broadcast``; for
    ``"auto"``, :func:`is_outcome_batch`), on the device."""
    if outcome_broadcast == "auto":
        return is_outcome_batch(rewards, last_valid_positions(mask))
    return torch.tensor(outcome_broadcast == "always", device=rewards.device)


def is_outcome_batch(rewards: torch.Tensor, last_valid: torch.Tensor) -> torch.Tensor:
    """0-d bool tensor: every row of ``rewards`` (B, T) has at most one nonzero reward, at or after its
    ``last_valid`` (B,) position: where verl's reward managers write a sequence's score."""
    positions = torch.arange(rewards.shape[-1], device=rewards.device, dtype=rewards.dtype)
    nonzero = torch.ne(rewards, 0, out=torch.empty_like(rewards))  # 0/1 in the rewards' dtype
    count = nonzero.sum(dim=-1)
    position = nonzero @ positions  # of the nonzero reward, in a row that has one
    return ((count == 0) | ((count == 1) & (position >= last_valid))).all()


def token_weights(lengths: torch.Tensor, weighting: str) -> torch.Tensor:
    """Per row (B,), the weight of each of its valid tokens in its group's bag, from its valid-token count
    ``lengths`` (B,): ``1 / L_i`` for ``inverse_length`` (every response weighs 1), 1 for ``uniform``; 0 for an
    empty row."""
    non_empty = (lengths > 0).to(lengths.dtype)
    return non_empty / lengths.clamp(min=1) if weighting == "inverse_length" else non_empty
