"""The batch a group-relative estimator receives, and the group-wise statistics both estimators share.

A batch is B responses (rows) of T tokens; the rows that share an ``index`` label are one prompt's
rollouts, a group, numbered ``0..G-1``. Every function is pure (it writes only tensors it allocates) and
vectorised over rows and groups (``index_add_``, ``scatter_reduce``), with no Python loop over rows or
tokens. :func:`check_values` is the estimators' one device-to-host sync.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch


@dataclass(frozen=True)
class Groups:
    """Rows grouped by prompt.

    Attributes:
        ids: (B,) long tensor, each row's group number in ``0..count-1``.
        count: G, the number of groups, known on the host (sizing per-group tensors needs no sync).
    """

    ids: torch.Tensor
    count: int

    @classmethod
    def from_index(cls, index: Any, batch_size: int, device: torch.device) -> Groups:
        """Number the group labels ``index`` (verl passes a numpy object array of uid strings), one per row.

        Labels are grouped by Python equality, as verl's ``grpo`` groups them (a dict keyed by label): ``1``
        and ``"1"`` are two groups; ``1``, ``1.0`` and ``np.int64(1)`` one.

        Raises:
            ValueError: for a ``str``, anything that is not one label per row (0-d, 2-D, wrong length), or
                unhashable labels.
        """
        if isinstance(index, str | bytes):
            raise ValueError(f"index must hold one group label per row, got a {type(index).__name__}: {index!r:.40}")
        labels = np.asarray(index) if isinstance(index, np.ndarray | torch.Tensor) else np.asarray(index, dtype=object)
        if labels.ndim != 1 or len(labels) != batch_size:
            raise ValueError(
                f"index must hold one group label per row: shape ({batch_size},), got {type(index).__name__} "
                f"of shape {labels.shape}"
            )
        try:
            ids, uniques = pd.factorize(labels, use_na_sentinel=False)
        except TypeError as error:
            raise ValueError(f"index labels must be hashable (strings or numbers): {error}") from None
        return cls(torch.as_tensor(ids, dtype=torch.long, device=device), len(uniques))

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Per group (G,), the sum of ``values`` (B,) over its rows."""
        return values.new_zeros(self.count).index_add_(0, self.ids, values)

    def max(self, values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """Per group (G,), the largest of ``values`` (B,) over its rows where ``where`` (B,) holds; 0 if none."""
        candidates = values.masked_fill(~where, -torch.inf)
        largest = values.new_zeros(self.count).scatter_reduce(0, self.ids, candidates, "amax", include_self=False)
        return largest.nan_to_num(neginf=0.0)

    def others_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Per row (B,), the sum of ``values`` (B,) over the other rows of its group (leave-one-out)."""
        return self.sum(values)[self.ids] - values


def check_batch(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any) -> Groups:
    """Check what can be checked without reading the tensors, and number the groups.

    Args:
        token_level_rewards: (B, T) floating-point tensor.
        response_mask: (B, T) tensor on the same device (its values are checked by :func:`check_values`).
        index: B group labels (see :meth:`Groups.from_index`).

    Raises:
        ValueError: naming the problem: shapes, dtype, device or index.
    """
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
    if response_mask.device != token_level_rewards.device:
        raise ValueError(
            f"response_mask is on {response_mask.device}, token_level_rewards on {token_level_rewards.device}"
        )
    return Groups.from_index(index, token_level_rewards.shape[0], token_level_rewards.device)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype statistics are taken in: float32, or float64 for float64 rewards."""
    return torch.promote_types(dtype, torch.float32)


def reward_bound(dtype: torch.dtype, batch_size: int, response_length: int) -> float:
    """The largest ``|r|`` for which every sum of (shifted, squared) rewards over a (B, T) batch stays finite
    in ``dtype``: ``sqrt(max / (8 B T)) / T``, about 4e11 in float32 at 512 x 8192."""
    return math.sqrt(torch.finfo(dtype).max / (8 * batch_size * response_length)) / response_length


def is_binary(mask: torch.Tensor) -> torch.Tensor:
    """0-d bool tensor: ``mask`` (B, T) holds only 0 and 1, i.e. its values lie in [0, 1] and have no
    fractional part (a bool mask always does; NaN does not)."""
    if mask.dtype == torch.bool:
        return torch.ones((), dtype=torch.bool, device=mask.device)
    low, high = torch.aminmax(mask)
    fraction = mask.frac().amax() if mask.is_floating_point() else 0
    return (low >= 0) & (high <= 1) & (fraction == 0)


def check_values(rewards: torch.Tensor, response_mask: torch.Tensor, bound: float, *reads: torch.Tensor) -> list[bool]:
    """The estimators' one device-to-host sync: it checks the mask and the rewards, and brings back ``reads`` (0-d
    bool tensors the caller needs on the host) in the same transfer.

    Args:
        rewards: (B, T) rewards in the accumulation dtype; every one must be finite and within ``bound``.
        response_mask: (B, T) mask as given; it must be bool or hold only 0 and 1 (it is not a weight).
        bound: the largest ``|r|`` allowed (:func:`reward_bound`, or less).
        reads: 0-d bool tensors.

    Returns:
        ``reads`` as Python bools.

    Raises:
        ValueError: for a mask value other than 0/1, or a NaN, infinite or too large reward.
    """
    low, high = torch.aminmax(rewards)
    checks = [is_binary(response_mask), (low >= -bound) & (high <= bound), *reads]
    mask_is_binary, rewards_are_bounded, *values = torch.stack(checks).tolist()
    if not mask_is_binary:
        raise_bad_mask(response_mask)
    if not rewards_are_bounded:
        raise_bad_rewards(rewards, bound)
    return values


def raise_bad_mask(response_mask: torch.Tensor) -> None:
    """Raise the ``ValueError`` that shows the mask values other than 0/1 and their rows."""
    bad = (response_mask != 0) & (response_mask != 1)
    rows = torch.nonzero(bad.any(dim=-1)).flatten().tolist()
    values = response_mask[bad].unique()[:5].tolist()
    raise ValueError(
        f"response_mask must be bool or hold only 0 and 1 (it selects tokens, it is not a weight); "
        f"found {values} in rows {rows[:20]}"
    )


def raise_bad_rewards(rewards: torch.Tensor, bound: float) -> None:
    """Raise the ``ValueError`` that explains why ``rewards`` (B, T) failed the finite and ``bound`` check."""
    rows = torch.nonzero(~torch.isfinite(rewards).all(dim=-1)).flatten().tolist()
    if rows:
        raise ValueError(f"token_level_rewards holds non-finite values (NaN or inf) in rows {rows[:20]}")
    largest = rewards.abs().max().item()
    raise ValueError(
        f"token_level_rewards overflow: |r| up to {largest:.3g}, limit {bound:.3g} for this batch shape "
        f"(and options) in {rewards.dtype}; rescale the rewards"
    )


def last_valid_positions(mask: torch.Tensor) -> torch.Tensor:
    """(B,) long: the column of each row's last valid token in ``mask`` (B, T) (bool or 0/1), -1 for an empty row."""
    columns = torch.arange(1, mask.shape[-1] + 1, device=mask.device)
    return (mask * columns).amax(dim=-1).long() - 1


def bag_moments(
    values: torch.Tensor, mask: torch.Tensor, token_weight: torch.Tensor, groups: Groups
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each group's bag of weighted values: every valid value ``v[i,t]`` of its rows weighs ``w_i``, and

        mu_g       = sum w v / W_g                     with W_g = sum w  (sums over the group's valid tokens)
        sigma_g^2  = sum w (v - mu_g)^2 / (W_g - 1)    (Bessel-corrected, as verl's ``grpo``)

    A group with one non-empty row has no spread to measure: ``mu_g = 0``, ``sigma_g^2 = 1`` (verl's convention).

    The estimators' numerical safety lives here. The values are first centred on a valid value of each
    group's own (the largest of its rows' last valid values), so that a group whose values are all equal gets
    exactly zero deviations and variance, and a group's sums stay well conditioned whatever its offset; the
    group's moments are pooled from each row's (Chan, Golub and LeVeque).

    Args:
        values: (B, T) the values (those on masked tokens are ignored), or (B, 1): one value on every token of
            its row.
        mask: (B, T) 0/1 in the values' dtype.
        token_weight: (B,) the weight ``w_i`` of each valid token of row i (0 keeps the row out of the bag).
        groups: the rows' groups.

    Returns:
        deviations: (B, T) ``m[i,t] (v[i,t] - mu_g)``: 0 on masked tokens.
        variance: (G,) ``sigma_g^2``.
    """
    lengths = mask.sum(dim=-1)
    non_empty = lengths > 0
    single = groups.sum(non_empty.to(values.dtype)) <= 1  # (G,)
    per_row = values.shape[-1] == 1  # one value on every token of its row
    if per_row:
        own_values = values.squeeze(1)  # (B,)
    else:
        own_values = values.gather(1, last_valid_positions(mask).clamp(min=0).unsqueeze(1)).squeeze(1)
    shift = groups.max(own_values, non_empty).masked_fill(single, 0.0)  # (G,)
    centred = values - shift[groups.ids, None]  # shaped as values, a fresh tensor
    if per_row:  # a row's mean is its value, its spread 0
        row_mean, row_m2 = centred.squeeze(1), torch.zeros_like(lengths)
        centred = centred * mask  # (B, T)
    else:
        centred = centred.mul_(mask)  # in place
        row_mean, row_m2 = row_moments(centred, lengths)
    mean, variance = pooled_moments(row_mean, row_m2, token_weight, token_weight * lengths, groups)
    mean, variance = mean.masked_fill(single, 0.0), variance.masked_fill(single, 1.0)
    return centred.addcmul_(mask, mean[groups.ids, None], value=-1), variance  # in place; masked tokens stay 0


def row_moments(values: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the mean of its valid values and the sum of their squared deviations from that mean.

    Args:
        values: (B, T), zero on masked tokens.
        lengths: (B,) valid tokens per row.

    Returns:
        mean: (B,), 0 for an empty row.
        m2: (B,), ``sum_t m (v - mean)^2`` (as ``sum v^2 - sum v * mean``, so centre ``values`` first).
    """
    total = values.sum(dim=-1)
    mean = total / lengths.clamp(min=1)
    m2 = torch.linalg.vector_norm(values, dim=-1).square() - total * mean
    return mean, m2.clamp(min=0)


def pooled_moments(
    row_mean: torch.Tensor, row_m2: torch.Tensor, row_weight: torch.Tensor, row_mass: torch.Tensor, groups: Groups
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per group, the weighted mean and Bessel-corrected variance of the bag of all its rows' valid values,
    combined from per-row moments (Chan, Golub and LeVeque's pairwise update).

    Args:
        row_mean, row_m2: (B,) each row's mean and sum of squared deviations (:func:`row_moments`).
        row_weight: (B,) the weight of each of the row's values.
        row_mass: (B,) the row's total weight, ``row_weight * length``.
        groups: the rows' groups.

    Returns:
        mean: (G,) ``sum w v / W_g`` with ``W_g = sum row_mass``.
        variance: (G,) ``sum w (v - mean)^2 / (W_g - 1)``.
    """
    mass = groups.sum(row_mass)
    mean = groups.sum(row_mass * row_mean) / mass.clamp(min=1)
    between = row_mean - mean[groups.ids]
    m2 = groups.sum(row_weight * row_m2 + row_mass * between.square())
    return mean, m2 / (mass - 1).clamp(min=1)


def suffix_sum(values: torch.Tensor) -> torch.Tensor:
    """``out[i, t] = sum_{s >= t} values[i, s]`` for a (B, T) tensor."""
    return values.flip(-1).cumsum(-1).flip(-1)
