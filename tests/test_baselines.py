"""The same-information baselines against loop references written from their papers' definitions, and
through verl's own advantage dispatch."""

import math
from collections import defaultdict

import numpy as np
import pytest
import torch
from conftest import verl_config
from estimator_batches import random_batch
from reference import reference_bot_grpo
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

from bot_grpo_verl.estimators.baselines import (
    ESTIMATORS,
    compute_bot_grpo_shuffled_advantage,
    compute_grpo_token_mean_advantage,
    compute_grpo_token_min_advantage,
    compute_ps_grpo_advantage,
    shuffle_within_rows,
)


def valid_positions(mask_row):
    return [t for t, m in enumerate(mask_row) if m]


def reference_grpo_on_scores(scores, mask, index, norm_by_std=True, eps=1e-6):
    """GRPO (DeepSeekMath eq. for outcome supervision) on one score per row, one row at a time."""
    members = defaultdict(list)
    for i, uid in enumerate(index):
        members[uid].append(i)
    advantages = torch.zeros(mask.shape, dtype=torch.float64)
    for rows in members.values():
        values = [scores[i] for i in rows]
        mean = sum(values) / len(values) if len(values) > 1 else 0.0
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 1.0
        for i in rows:
            advantages[i] = ((scores[i] - mean) / (std + eps) if norm_by_std else scores[i] - mean) * mask[i].double()
    return advantages


def reference_ps_grpo(rewards, mask, index, norm_by_std=True, eps=1e-6):
    """DeepSeekMath's process supervision on the step_end layout: a step ends at every valid token that does
    not hold negative zero."""
    steps = {}
    for i in range(len(index)):
        values = [(t, float(rewards[i, t])) for t in valid_positions(mask[i].tolist())]
        steps[i] = [(t, value) for t, value in values if value != 0 or math.copysign(1.0, value) > 0]
    members = defaultdict(list)
    for i, uid in enumerate(index):
        members[uid].append(i)
    advantages = torch.zeros(mask.shape, dtype=torch.float64)
    for rows in members.values():
        bag = [value for i in rows for _, value in steps[i]]
        non_empty = sum(1 for i in rows if steps[i])
        mean = sum(bag) / len(bag) if non_empty > 1 else 0.0
        std = math.sqrt(sum((v - mean) ** 2 for v in bag) / (len(bag) - 1)) if non_empty > 1 else 1.0
        for i in rows:
            normalised = [(t, (v - mean) / (std + eps) if norm_by_std else v - mean) for t, v in steps[i]]
            for t in valid_positions(mask[i].tolist()):
                advantages[i, t] = sum(value for end, value in normalised if end >= t)
    return advantages


def step_batch(generator, num_groups=5, group_size=4, length=20):
    """The step_end layout of responses with 0-3 steps valued +-1 and a 0/1 answer step at the end: each step's
    value on its last token (a 0 stored as +0.0), -0.0 on every other token."""
    batch = num_groups * group_size
    index = np.array([f"uid-{g}" for g in range(num_groups) for _ in range(group_size)], dtype=object)
    lengths = torch.randint(4, length + 1, (batch,), generator=generator)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    rewards = torch.full((batch, length), -0.0)
    for i, size in enumerate(lengths.tolist()):
        ends = sorted(torch.randperm(size - 1, generator=generator)[: torch.randint(0, 4, (1,)).item()].tolist())
        rewards[i, ends] = torch.randint(0, 2, (len(ends),), generator=generator).float() * 2 - 1
        rewards[i, size - 1] = torch.randint(0, 2, (1,), generator=generator).float() + 0.0
    return rewards, mask, index


def one_step_layout(rewards, mask):
    """``random_batch(dense=False)`` (an outcome on each last valid token) in the step_end layout."""
    last = (mask * torch.arange(mask.shape[-1])).argmax(-1, keepdim=True)
    is_last = torch.zeros_like(mask, dtype=torch.bool).scatter_(-1, last, True) & mask.bool()
    return torch.where(is_last, rewards + 0.0, -0.0)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_token_mean_is_grpo_on_each_responses_mean_token_reward(seed, norm_by_std):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed))
    scores = [
        sum(float(rewards[i, t]) for t in valid_positions(mask[i])) / max(1, len(valid_positions(mask[i])))
        for i in range(len(index))
    ]
    advantages, returns = compute_grpo_token_mean_advantage(
        rewards, mask, index, {"norm_adv_by_std_in_grpo": norm_by_std}
    )
    expected = reference_grpo_on_scores(scores, mask, index, norm_by_std)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
    assert returns is advantages or torch.equal(returns, advantages)


@pytest.mark.parametrize("seed", range(4))
def test_grpo_token_min_is_grpo_on_min_plus_last_token_reward(seed):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed))
    scores = []
    for i in range(len(index)):
        valid = valid_positions(mask[i])
        scores.append(min(float(rewards[i, t]) for t in valid) + float(rewards[i, valid[-1]]) if valid else 0.0)
    advantages, _ = compute_grpo_token_min_advantage(rewards, mask, index)
    torch.testing.assert_close(advantages.double(), reference_grpo_on_scores(scores, mask, index), atol=1e-5, rtol=1e-5)


def test_grpo_token_min_of_the_arithmetic_layout():
    # steps +1, +1, -1 then a right answer (1): min -1 plus outcome 1 = 0; all steps right, wrong answer: 0 + 0.
    rewards = torch.tensor([[1.0, 1, 1, -1, 1], [1.0, 1, 1, 1, 0]])
    mask = torch.ones_like(rewards)
    advantages, _ = compute_grpo_token_min_advantage(rewards, mask, np.array(["a", "a"], dtype=object))
    assert torch.equal(advantages, torch.zeros_like(advantages))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_ps_grpo_matches_deepseekmath_process_supervision(seed, norm_by_std):
    rewards, mask, index = step_batch(torch.Generator().manual_seed(seed))
    advantages, returns = compute_ps_grpo_advantage(rewards, mask, index, {"norm_adv_by_std_in_grpo": norm_by_std})
    expected = reference_ps_grpo(rewards, mask, index, norm_by_std)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(returns, advantages)


def test_ps_grpo_with_one_step_per_response_is_grpo_on_the_outcome():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(3), dense=False, gaps=False, empty_rows=False)
    advantages, _ = compute_ps_grpo_advantage(one_step_layout(rewards, mask), mask, index)
    torch.testing.assert_close(advantages.double(), reference_bot_grpo(rewards, mask, index), atol=1e-5, rtol=1e-5)


def test_ps_grpo_ignores_the_users_bot_grpo_weighting():
    rewards, mask, index = step_batch(torch.Generator().manual_seed(1))
    config = {"bot_grpo": {"weighting": "inverse_length", "outcome_broadcast": "always"}}
    torch.testing.assert_close(
        compute_ps_grpo_advantage(rewards, mask, index, config)[0], compute_ps_grpo_advantage(rewards, mask, index)[0]
    )


@pytest.mark.parametrize("seed", range(4))
def test_shuffling_keeps_each_rows_multiset_and_the_masked_tokens(seed):
    rewards, mask, _ = random_batch(torch.Generator().manual_seed(seed))
    shuffled = shuffle_within_rows(rewards, mask, torch.Generator().manual_seed(seed))
    valid = mask.bool()
    assert torch.equal(shuffled[~valid], rewards[~valid])
    for i in range(len(rewards)):
        assert torch.equal(shuffled[i][valid[i]].sort().values, rewards[i][valid[i]].sort().values)
    moved = (shuffled != rewards) & valid
    assert moved.any(), "a shuffle of random rewards moved nothing"


def test_shuffling_reaches_every_position():
    rewards = torch.arange(6.0).repeat(2000, 1)
    mask = torch.ones_like(rewards)
    shuffled = shuffle_within_rows(rewards, mask, torch.Generator().manual_seed(0))
    frequency = (shuffled == 0).double().mean(dim=0)
    torch.testing.assert_close(frequency, torch.full((6,), 1 / 6, dtype=torch.float64), atol=0.04, rtol=0)


def test_shuffled_control_equals_bot_grpo_on_sequence_level_rewards():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(5), dense=False)
    rewards = rewards.sum(-1, keepdim=True) * mask  # one value per response, on every valid token
    torch.manual_seed(0)
    advantages, _ = compute_bot_grpo_shuffled_advantage(rewards, mask, index)
    torch.testing.assert_close(advantages.double(), reference_bot_grpo(rewards, mask, index), atol=1e-5, rtol=1e-5)


def test_shuffled_control_is_bot_grpo_on_the_shuffled_rewards():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(6))
    torch.manual_seed(11)
    advantages, _ = compute_bot_grpo_shuffled_advantage(rewards, mask, index)
    torch.manual_seed(11)
    shuffled = shuffle_within_rows(rewards, mask)
    expected = reference_bot_grpo(shuffled, mask, index)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(advantages.double(), reference_bot_grpo(rewards, mask, index), atol=1e-3)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_verl_dispatches_each_baseline_by_name(name):
    assert get_adv_estimator_fn(name).__wrapped__ is ESTIMATORS[name]
    config = verl_config("+preset=bot_grpo", f"algorithm.adv_estimator={name}").algorithm
    rewards, mask, index = step_batch(torch.Generator().manual_seed(2))
    tensors = {"token_level_rewards": rewards, "response_mask": mask}
    data = DataProto.from_dict(tensors=tensors, non_tensors={"uid": index})
    torch.manual_seed(0)
    data = compute_advantage(data, adv_estimator=config.adv_estimator, config=config)
    torch.manual_seed(0)
    expected, _ = ESTIMATORS[name](rewards, mask, index, config)
    torch.testing.assert_close(data.batch["advantages"], expected)
    assert data.batch["advantages"].abs().sum() > 0


@pytest.mark.parametrize("name", ["grpo_token_mean", "grpo_token_min", "ps_grpo"])
def test_a_string_for_verls_norm_adv_by_std_key_is_refused(name):
    rewards, mask, index = step_batch(torch.Generator().manual_seed(4))
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo='false' must be a bool"):
        ESTIMATORS[name](rewards, mask, index, {"norm_adv_by_std_in_grpo": "false"})
