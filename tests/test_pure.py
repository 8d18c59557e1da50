"""The PURE baseline estimator against its definition, through verl's dispatch (the authors' code is checked in
``test_process_supervision.py``)."""

import numpy as np
import pytest
import torch
from estimator_batches import count_host_reads, random_batch
from omegaconf import OmegaConf
from pure_reference import authors_whitened
from reference import reference_pure
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

from bot_grpo_verl.estimators.pure import compute_pure_advantage


def step_layout(generator, **kwargs):
    """``random_batch`` with about half of the valid tokens ending no step (-0.0)."""
    rewards, mask, index = random_batch(generator, **kwargs)
    return rewards.where(torch.rand(rewards.shape, generator=generator) < 0.5, -0.0), mask, index


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("temperature", "credit"), [(0.1, "min"), (1.0, "min"), (10.0, "min"), (0.1, "sum")])
def test_matches_the_definition(seed, temperature, credit):
    rewards, mask, index = step_layout(torch.Generator().manual_seed(seed), num_groups=4, max_group=6)
    config = {"temperature": temperature, "credit": credit}
    raw, returns = compute_pure_advantage(rewards, mask, index, unwhitened(config))
    expected_advantages, expected_returns = reference_pure(rewards, mask, index, temperature, credit)
    torch.testing.assert_close(raw.double(), expected_advantages, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(returns.double(), expected_returns, atol=1e-5, rtol=1e-5)
    whitened, whitened_returns = compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": config}))
    torch.testing.assert_close(whitened.double(), authors_whitened(expected_advantages, mask), atol=1e-5, rtol=1e-5)
    assert torch.equal(whitened_returns, returns), "whitening changes the advantages only"


def unwhitened(options: dict | None = None):
    """``algorithm`` config with ``pure``'s ``options`` and its batch whitening off (the raw returns)."""
    return OmegaConf.create({"pure": {**(options or {}), "batch_whitening": False}})


def test_whitening_gives_the_batch_zero_mean_and_unit_variance_over_its_nonzero_tokens():
    rewards, mask, index = step_layout(torch.Generator().manual_seed(7), num_groups=5, max_group=6)
    raw, _ = compute_pure_advantage(rewards, mask, index, unwhitened())
    whitened, _ = compute_pure_advantage(rewards, mask, index)
    counted = mask.bool() & (raw != 0)
    assert counted.sum() > 20 and torch.equal(whitened != 0, counted), "the zero tokens stay 0, no other"
    assert abs(whitened[counted].double().mean().item()) < 1e-5
    # the authors' variance sums the squares over every valid token, the zero ones included, over the non-zero count
    mean = raw[counted].double().mean()
    scale = (((raw.double() - mean) ** 2 * mask).sum() / counted.sum()).sqrt()
    torch.testing.assert_close(whitened[counted].double(), (raw[counted].double() - mean) / scale, atol=1e-5, rtol=1e-5)


def test_whitening_a_batch_without_signal_gives_zeros_not_nan():
    rewards = torch.tensor([[-0.0, 0.0, -0.0, 0.0]] * 4)  # steps of reward 0: every return and advantage is 0
    advantages, _ = compute_pure_advantage(rewards, torch.ones(4, 4), np.array(["a"] * 4, dtype=object))
    assert torch.equal(advantages, torch.zeros(4, 4))


def test_batch_whitening_takes_a_bool_only():
    rewards, mask, index = step_layout(torch.Generator().manual_seed(2))
    with pytest.raises(ValueError, match=r"algorithm.pure.batch_whitening='false' must be a bool"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"batch_whitening": "false"}}))


def test_low_temperature_values_a_response_by_its_worst_step():
    rewards = torch.tensor([[-0.0, 1.0, -0.0, -0.5, -0.0, 1.0], [-0.0, 1.0, -0.0, 1.0, -0.0, 1.0]])
    mask = torch.ones(2, 6)
    config = unwhitened({"temperature": 0.01})
    _, returns = compute_pure_advantage(rewards, mask, np.array(["a", "b"], dtype=object), config)
    torch.testing.assert_close(returns[:, 0], torch.tensor([-0.5, 1.0]), atol=1e-4, rtol=0)
    # the softmin weight sits on the worst step: the steps after it carry almost none of the value
    torch.testing.assert_close(returns[0], torch.tensor([-0.5, -0.5, -0.5, -0.5, 0.0, 0.0]), atol=1e-4, rtol=0)


def test_an_in_reward_kl_penalty_is_refused():
    rewards, mask, index = step_layout(torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="use_kl_in_reward=true overwrites"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"use_kl_in_reward": True}))


def test_verl_dispatches_pure_by_name_and_rejects_bad_options():
    assert get_adv_estimator_fn("pure").__wrapped__ is compute_pure_advantage
    rewards, mask, index = step_layout(torch.Generator().manual_seed(5))
    config = OmegaConf.create({"adv_estimator": "pure", "pure": {"temperature": 0.5}})
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": index}
    )
    data = compute_advantage(data, adv_estimator="pure", config=config)
    expected = authors_whitened(reference_pure(rewards, mask, index, 0.5)[0], mask)
    torch.testing.assert_close(data.batch["advantages"].double(), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"unknown algorithm.pure option\(s\) \['temp'\]"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"temp": 1}}))
    with pytest.raises(ValueError, match="temperature=0 must be a positive number"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"temperature": 0}}))


def test_the_baseline_is_charged_per_token_of_each_step_and_the_step_ends_get_none():
    # Three equal responses, steps of 0.7 ending at tokens 1 and 4: the softmin weighs them 1/2 each, so
    # each response's value is 0.7 and the others' reward per token 1.4 / 10; step 1 has 1 token before its
    # end, step 2 has 2, so the credited step rewards are 0.35 - 0.14 and 0.35 - 0.28.
    rewards = torch.tensor([[-0.0, 0.7, -0.0, -0.0, 0.7]] * 3)
    index = np.array(["a"] * 3, dtype=object)
    advantages, returns = compute_pure_advantage(rewards, torch.ones(3, 5), index, unwhitened())
    torch.testing.assert_close(returns, torch.tensor([[0.28, 0.28, 0.07, 0.07, 0.07]] * 3))
    torch.testing.assert_close(advantages, torch.tensor([[0.28, 0.0, 0.07, 0.07, 0.0]] * 3))


def test_sum_credit_returns_the_plain_return_to_go_of_the_steps():
    # steps of 2 tokens each, the second token ending the step
    rewards = torch.tensor([[-0.0, 1.0, -0.0, -0.5, -0.0, 1.0], [-0.0, 1.0, -0.0, 1.0, -0.0, 1.0]])
    config = unwhitened({"credit": "sum"})
    advantages, returns = compute_pure_advantage(rewards, torch.ones(2, 6), np.array(["a", "a"], dtype=object), config)
    # leave-one-out reward per token: the other row's sum over its 6 tokens (3/6 and 1.5/6), one token per step
    first = torch.tensor([1.0, -0.5, 1.0]) - 0.5
    second = torch.tensor([1.0, 1.0, 1.0]) - 0.25
    suffix = lambda steps: steps.flip(0).cumsum(0).flip(0).repeat_interleave(2)  # noqa: E731
    torch.testing.assert_close(returns, torch.stack([suffix(first), suffix(second)]))
    torch.testing.assert_close(advantages, returns * torch.tensor([1.0, 0.0] * 3))


def test_unknown_credit_is_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match=r"algorithm.pure.credit='max' is not one of \['min', 'sum'\]"):
        compute_pure_advantage(
            torch.zeros(2, 2), torch.ones(2, 2), np.array(["a", "a"]), OmegaConf.create({"pure": {"credit": "max"}})
        )


@pytest.mark.parametrize("credit", ["min", "sum"])
def test_one_host_sync_per_call_and_inputs_left_untouched(monkeypatch, credit):
    rewards, mask, index = step_layout(torch.Generator().manual_seed(3))
    mask = mask.long()
    before = rewards.clone(), mask.clone()
    reads = count_host_reads(monkeypatch)
    advantages, _ = compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"credit": credit}}))
    monkeypatch.undo()
    assert len(reads) == 1, reads
    assert torch.equal(rewards, before[0]) and torch.equal(mask, before[1])
    expected = authors_whitened(reference_pure(rewards, mask, index, 0.1, credit)[0], mask)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
