"""The bot_grpo estimator against an independent reference, verl's GRPO, and its defining properties."""

import numpy as np
import pytest
import torch
from estimator_batches import count_host_reads, random_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from reference import reference_bot_grpo, reference_suffix_mean
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig, compute_bot_grpo_advantage


def algorithm_config(norm_by_std=True, **options):
    return OmegaConf.create({"norm_adv_by_std_in_grpo": norm_by_std, "bot_grpo": options})


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("weighting", ["inverse_length", "uniform"])
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_matches_loop_reference_on_dense_rewards(seed, weighting, norm_by_std):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed))
    config = algorithm_config(norm_by_std, weighting=weighting)
    advantages, returns = compute_bot_grpo_advantage(rewards, mask, index, config)
    expected = reference_bot_grpo(rewards, mask, index, weighting=weighting, norm_by_std=norm_by_std)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
    assert returns is advantages
    assert advantages.shape == rewards.shape and advantages.dtype == torch.float32


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("broadcast", ["auto", "always", "never"])
def test_outcome_rewards_follow_the_broadcast_option(seed, broadcast):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed), dense=False)
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast=broadcast))
    expected = reference_bot_grpo(rewards, mask, index, outcome_broadcast=broadcast)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


def test_dense_rewards_are_not_broadcast_in_auto_mode():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(0))
    auto, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config())
    never, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast="never"))
    always, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast="always"))
    torch.testing.assert_close(auto, never)
    assert not torch.allclose(auto, always)


def one_reward_per_row_batch(seed):
    """At most one nonzero reward per row, at the last valid token, before it, or on a masked token (the
    batch-level outcome detection must then decide as the spec says); masked gaps and empty rows."""
    generator = torch.Generator().manual_seed(seed)
    _, mask, index = random_batch(generator, dense=False)
    rewards = torch.zeros_like(mask)
    rows = torch.arange(len(mask))
    positions = torch.randint(0, mask.shape[1], (len(mask),), generator=generator)
    rewards[rows, positions] = torch.randn(len(mask), generator=generator).round(decimals=1)
    rewards[torch.rand(len(mask), generator=generator) < 0.2] = 0.0
    return rewards, mask, index


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("broadcast", ["auto", "always", "never"])
@pytest.mark.parametrize("weighting", ["inverse_length", "uniform"])
def test_one_reward_per_row_anywhere_matches_the_reference(seed, broadcast, weighting):
    rewards, mask, index = one_reward_per_row_batch(seed)
    options = algorithm_config(outcome_broadcast=broadcast, weighting=weighting)
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, options)
    expected = reference_bot_grpo(rewards, mask, index, outcome_broadcast=broadcast, weighting=weighting)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dense", [True, False])
def test_rows_whose_first_token_is_masked_are_anchored_by_another_valid_token(dense):
    # Multi-turn style: every response of a group starts with masked tokens.
    rewards, mask, index = random_batch(torch.Generator().manual_seed(7), dense=dense, empty_rows=False)
    mask[:, :3] = 0.0
    rewards = rewards * mask
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast="never"))
    expected = reference_bot_grpo(rewards, mask, index, outcome_broadcast="never")
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
    equal = torch.where(mask > 0, torch.full_like(rewards, 0.3), 0.0)
    advantages, _ = compute_bot_grpo_advantage(equal, mask, index, algorithm_config(outcome_broadcast="never"))
    assert torch.count_nonzero(advantages) == 0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("broadcast", ["auto", "always"])
def test_equals_verl_grpo_on_outcome_rewards(seed, norm_by_std, broadcast):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed), dense=False, gaps=False, empty_rows=False)
    rewards = rewards * torch.rand(rewards.shape[0], 1, generator=torch.Generator().manual_seed(seed)) * 3
    ours, _ = compute_bot_grpo_advantage(
        rewards, mask, index, algorithm_config(norm_by_std, outcome_broadcast=broadcast)
    )
    theirs, _ = compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm_by_std)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)


def test_sequence_constant_dense_rewards_equal_verl_grpo():
    """A reward spread evenly over a sequence's tokens is GRPO whatever the lengths (the 1/L weighting)."""
    rewards, mask, index = random_batch(torch.Generator().manual_seed(3), gaps=False, empty_rows=False)
    scores = torch.randn(rewards.shape[0])
    ours, _ = compute_bot_grpo_advantage(scores[:, None] * mask, mask, index, algorithm_config())
    outcome = torch.zeros_like(rewards)
    outcome[:, 0] = scores
    theirs, _ = compute_grpo_outcome_advantage(outcome, mask, index)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_float64_rewards_stay_float64_and_bf16_accumulates_in_float32():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(1))
    expected = reference_bot_grpo(rewards.bfloat16().float(), mask, index)
    high, _ = compute_bot_grpo_advantage(rewards.double(), mask.long(), index)
    assert high.dtype == torch.float64
    low, _ = compute_bot_grpo_advantage(rewards.bfloat16(), mask.bool(), index)
    assert low.dtype == torch.float32
    torch.testing.assert_close(low.double(), expected, atol=1e-4, rtol=1e-4)


def test_masked_tokens_and_empty_rows_get_zero():
    rewards = torch.tensor([[1.0, 5.0, 2.0], [3.0, 3.0, 3.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 0, 1], [1, 1, 0], [0, 0, 0]])
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, np.array(["a", "a", "a"], dtype=object))
    assert advantages[0, 1] == 0 and advantages[1, 2] == 0 and torch.all(advantages[2] == 0)
    # bag: row 0 -> {1, 2} weight 1/2 each, row 1 -> {3, 3} weight 1/2 each; mean 2.25
    mean = (0.5 * 1 + 0.5 * 2 + 0.5 * 3 + 0.5 * 3) / 2
    std = ((0.5 * (1 - mean) ** 2 + 0.5 * (2 - mean) ** 2 + 1.0 * (3 - mean) ** 2) / 1) ** 0.5
    torch.testing.assert_close(advantages[0, 0], torch.tensor((1 - mean) / (std + 1e-6)))


def test_single_row_group_uses_mean_zero_std_one():
    rewards = torch.tensor([[0.5, -1.0], [2.0, 0.0], [7.0, 7.0]])
    mask = torch.tensor([[1, 1], [1, 1], [0, 0]])
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, np.array(["a", "b", "b"], dtype=object))
    torch.testing.assert_close(advantages[:2], rewards[:2] / (1 + 1e-6))


# ---------------------------------------------------------------- properties (hypothesis)


@st.composite
def groups(draw, max_rows=6, max_len=8, grid=False):
    """Rows of 1..max_len valid tokens in up to three groups; ``grid`` draws rewards from a coarse grid
    (multiples of 1/2), so that a group's std is either exactly 0 or far above epsilon."""
    rows = draw(st.integers(2, max_rows))
    lengths = draw(st.lists(st.integers(1, max_len), min_size=rows, max_size=rows))
    values = st.integers(-20, 20).map(lambda k: k / 2) if grid else st.floats(-10, 10, allow_nan=False, width=32)
    rewards = torch.zeros(rows, max_len)
    mask = torch.zeros(rows, max_len)
    for i, length in enumerate(lengths):
        rewards[i, :length] = torch.tensor(draw(st.lists(values, min_size=length, max_size=length)))
        mask[i, :length] = 1
    labels = draw(st.lists(st.sampled_from("abc"), min_size=rows, max_size=rows))
    return rewards, mask, np.array(labels, dtype=object)


def never_broadcast(weighting="inverse_length"):
    return algorithm_config(outcome_broadcast="never", weighting=weighting)


@settings(max_examples=60, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_permuting_rows_only_permutes_advantages(batch, rng):
    rewards, mask, index = batch
    order = list(range(len(index)))
    rng.shuffle(order)
    base, _ = compute_bot_grpo_advantage(rewards, mask, index, never_broadcast())
    permuted, _ = compute_bot_grpo_advantage(rewards[order], mask[order], index[order], never_broadcast())
    torch.testing.assert_close(permuted, base[order], atol=1e-4, rtol=1e-4)


@settings(max_examples=60, deadline=None)
@given(groups(), st.integers(2, 4), st.data())
def test_stretching_a_sequence_changes_no_token_advantage(batch, k, data):
    rewards, mask, index = batch
    row = data.draw(st.integers(0, len(index) - 1))
    base, _ = compute_bot_grpo_advantage(rewards, mask, index, never_broadcast())
    width = rewards.shape[1] * k
    wide_rewards = torch.zeros(len(index), width)
    wide_mask = torch.zeros(len(index), width)
    wide_rewards[:, : rewards.shape[1]] = rewards
    wide_mask[:, : rewards.shape[1]] = mask
    wide_rewards[row] = rewards[row].repeat_interleave(k)
    wide_mask[row] = mask[row].repeat_interleave(k)
    stretched, _ = compute_bot_grpo_advantage(wide_rewards, wide_mask, index, never_broadcast())
    torch.testing.assert_close(stretched[row], base[row].repeat_interleave(k), atol=1e-4, rtol=1e-4)
    others = [i for i in range(len(index)) if i != row]
    torch.testing.assert_close(stretched[others, : rewards.shape[1]], base[others], atol=1e-4, rtol=1e-4)


@settings(max_examples=60, deadline=None)
@given(groups(grid=True), st.floats(0.1, 20), st.floats(-20, 20), st.sampled_from(["inverse_length", "uniform"]))
def test_affine_maps_of_rewards_leave_advantages_unchanged(batch, scale, shift, weighting):
    rewards, mask, index = batch
    base, _ = compute_bot_grpo_advantage(rewards, mask, index, never_broadcast(weighting))
    mapped, _ = compute_bot_grpo_advantage((scale * rewards + shift) * mask, mask, index, never_broadcast(weighting))
    # single-row groups use mean 0, std 1 (verl's convention), which is not affine invariant
    labels, counts = np.unique(index, return_counts=True)
    shared = np.isin(index, labels[counts > 1])
    torch.testing.assert_close(mapped[shared], base[shared], atol=1e-4, rtol=1e-4)


@settings(max_examples=60, deadline=None)
@given(groups(), st.floats(-1e4, 1e4, allow_nan=False, width=32), st.sampled_from(["auto", "never"]))
def test_a_group_of_equal_token_rewards_gets_exactly_zero(batch, value, broadcast):
    rewards, mask, _ = batch
    index = np.array(["g"] * len(rewards), dtype=object)
    advantages, _ = compute_bot_grpo_advantage(value * mask, mask, index, algorithm_config(outcome_broadcast=broadcast))
    assert torch.count_nonzero(advantages) == 0


@settings(max_examples=60, deadline=None)
@given(groups(), st.floats(-1e4, 1e4, allow_nan=False, width=32), st.data())
def test_a_group_of_equal_reward_sums_gets_exactly_zero_when_broadcast(batch, value, data):
    # "always" compares row sums: one reward of ``value`` per row, anywhere in it, makes them all equal.
    _, mask, _ = batch
    index = np.array(["g"] * len(mask), dtype=object)
    rewards = torch.zeros_like(mask)
    for row in range(len(mask)):
        rewards[row, data.draw(st.integers(0, mask.shape[1] - 1))] = value
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast="always"))
    assert torch.count_nonzero(advantages) == 0


# ---------------------------------------------------------------- bad input


def test_non_finite_rewards_name_the_rows():
    rewards = torch.zeros(4, 3)
    rewards[2, 1] = float("nan")
    rewards[3, 0] = float("inf")
    with pytest.raises(ValueError, match=r"non-finite .* rows \[2, 3\]"):
        compute_bot_grpo_advantage(rewards, torch.ones(4, 3), np.array(list("aabb"), dtype=object))


def test_rewards_whose_squared_sums_overflow_are_refused_with_the_limit():
    rewards = torch.zeros(4, 3)
    rewards[1, 2] = 3e18  # finite in float32, its square is not
    with pytest.raises(ValueError, match=r"overflow.*\|r\| up to 3e\+18, limit"):
        compute_bot_grpo_advantage(rewards, torch.ones(4, 3), np.array(list("aabb"), dtype=object))
    large = torch.randn(4, 3, dtype=torch.float64) * 1e30  # float64 rewards keep float64 headroom
    advantages, _ = compute_bot_grpo_advantage(large, torch.ones(4, 3), np.array(list("aabb"), dtype=object))
    assert torch.isfinite(advantages).all()


# Every way a tensor's value reaches the host (a device-to-host sync on an accelerator).


@pytest.mark.parametrize("broadcast", ["auto", "always", "never"])
@pytest.mark.parametrize("dense", [True, False])
def test_one_host_sync_per_call_and_inputs_left_untouched(monkeypatch, broadcast, dense):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(3), dense=dense)
    mask = mask.long()  # as verl's agent loop builds it
    before = rewards.clone(), mask.clone()
    syncs = count_host_reads(monkeypatch)
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(outcome_broadcast=broadcast))
    monkeypatch.undo()
    assert len(syncs) == 1, syncs
    assert torch.equal(rewards, before[0]) and torch.equal(mask, before[1])
    expected = reference_bot_grpo(rewards, mask.float(), index, outcome_broadcast=broadcast)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("rewards", "mask", "index", "message"),
    [
        (torch.zeros(2, 3), torch.ones(2, 4), ["a", "b"], "response_mask shape"),
        (
            torch.zeros(2, 3),
            torch.ones(2, 3),
            ["a"],
            r"index must hold one group label per row: shape \(2,\), got .* \(1,\)",
        ),
        (torch.zeros(6), torch.ones(6), list("abcdef"), r"\(batch, response_length\)"),
        (torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3), ["a", "b"], "floating-point"),
    ],
)
def test_shape_and_type_errors(rewards, mask, index, message):
    with pytest.raises(ValueError, match=message):
        compute_bot_grpo_advantage(rewards, mask, np.array(index, dtype=object))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"weigting": "uniform"}, r"option\(s\) \['weigting'\]; did you mean 'weighting'\? Allowed .*'weighting'"),
        ({"weighting": "sqrt"}, r"weighting='sqrt' is not one of \['inverse_length', 'uniform'\]"),
        ({"outcome_broadcast": "yes"}, r"outcome_broadcast='yes' is not one of \['auto', 'always', 'never'\]"),
        ({"epsilon": 0}, "epsilon=0 must be a positive number"),
    ],
)
def test_option_errors_list_the_allowed_values(options, message):
    with pytest.raises(ValueError, match=message):
        compute_bot_grpo_advantage(
            torch.zeros(2, 2), torch.ones(2, 2), np.array(["a", "a"]), algorithm_config(**options)
        )


def test_options_are_read_from_dict_and_missing_config_gives_defaults():
    assert BoTGRPOConfig.from_algorithm_config(None) == BoTGRPOConfig()
    assert BoTGRPOConfig.from_algorithm_config({"bot_grpo": {"weighting": "uniform"}}).weighting == "uniform"
    rewards, mask, index = random_batch(torch.Generator().manual_seed(2))
    with_eps, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(epsilon=10.0))
    expected = reference_bot_grpo(rewards, mask, index, eps=10.0)
    torch.testing.assert_close(with_eps.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
def test_empty_batches_give_empty_advantages_and_are_still_checked(shape):
    index = np.array(list("aab")[: shape[0]], dtype=object)
    advantages, returns = compute_bot_grpo_advantage(torch.zeros(shape, dtype=torch.float64), torch.zeros(shape), index)
    assert advantages.shape == shape and advantages.dtype == torch.float64 and returns is advantages
    with pytest.raises(ValueError, match="index must hold one group label per row"):
        compute_bot_grpo_advantage(torch.zeros(shape), torch.zeros(shape), np.array(["a"] * (shape[0] + 1)))
    with pytest.raises(ValueError, match="epsilon=-1 must be a positive number"):
        compute_bot_grpo_advantage(torch.zeros(shape), torch.zeros(shape), index, algorithm_config(epsilon=-1))


# ---------------------------------------------------------------- return-to-go credit (ablation)


@pytest.mark.parametrize("seed", range(3))
def test_return_to_go_credit_is_the_suffix_mean_of_token_advantages(seed):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed))
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(credit="return_to_go"))
    expected = reference_suffix_mean(reference_bot_grpo(rewards, mask, index), mask)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("broadcast", ["auto", "never"])
def test_return_to_go_credit_on_one_reward_per_row(seed, broadcast):
    # The outcome computation writes its advantages over the mask unless return_to_go still needs it.
    rewards, mask, index = one_reward_per_row_batch(seed)
    options = algorithm_config(outcome_broadcast=broadcast, credit="return_to_go")
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, options)
    expected = reference_suffix_mean(reference_bot_grpo(rewards, mask, index, outcome_broadcast=broadcast), mask)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


def test_return_to_go_credit_equals_grpo_on_outcome_rewards():
    rewards, mask, index = random_batch(torch.Generator().manual_seed(4), dense=False, gaps=False, empty_rows=False)
    ours, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config(credit="return_to_go"))
    theirs, _ = compute_grpo_outcome_advantage(rewards, mask, index)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
