"""The PURE baseline estimator against its definition, through verl's dispatch."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from reference import reference_pure
from test_estimator import count_host_reads, random_batch
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

from bot_grpo_verl.pure import compute_pure_advantage


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("temperature", "credit"), [(0.1, "min"), (1.0, "min"), (10.0, "min"), (0.1, "sum")])
def test_matches_the_definition(seed, temperature, credit):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(seed), num_groups=4, max_group=6)
    config = OmegaConf.create({"pure": {"temperature": temperature, "credit": credit}})
    advantages, returns = compute_pure_advantage(rewards, mask, index, config)
    expected_advantages, expected_returns = reference_pure(rewards, mask, index, temperature, credit)
    torch.testing.assert_close(advantages.double(), expected_advantages, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(returns.double(), expected_returns, atol=1e-5, rtol=1e-5)


def test_low_temperature_values_a_response_by_its_worst_token():
    rewards = torch.tensor([[1.0, -0.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    mask = torch.ones(2, 4)
    config = OmegaConf.create({"pure": {"temperature": 0.01}})
    _, returns = compute_pure_advantage(rewards, mask, np.array(["a", "a"], dtype=object), config)
    torch.testing.assert_close(returns[:, 0], torch.tensor([-0.5, 1.0]), atol=1e-4, rtol=0)
    # the softmin weight sits on the worst token: what follows it carries almost none of the value
    torch.testing.assert_close(returns[0], torch.tensor([-0.5, -0.5, 0.0, 0.0]), atol=1e-4, rtol=0)


def test_verl_dispatches_pure_by_name_and_rejects_bad_options():
    assert get_adv_estimator_fn("pure") is compute_pure_advantage
    rewards, mask, index = random_batch(torch.Generator().manual_seed(5))
    config = OmegaConf.create({"adv_estimator": "pure", "pure": {"temperature": 0.5}})
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": index}
    )
    data = compute_advantage(data, adv_estimator="pure", config=config)
    torch.testing.assert_close(
        data.batch["advantages"].double(), reference_pure(rewards, mask, index, 0.5)[0], atol=1e-5, rtol=1e-5
    )
    with pytest.raises(ValueError, match=r"unknown algorithm.pure option\(s\) \['temp'\]"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"temp": 1}}))
    with pytest.raises(ValueError, match="temperature=0 must be a positive number"):
        compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"temperature": 0}}))


def test_the_baseline_covers_only_what_is_left_of_a_response():
    # Equal responses: every token's return equals the others' reward per token times the tokens left,
    # so all advantages vanish (a baseline fixed per response would credit the late tokens).
    rewards = torch.full((3, 5), 0.7)
    advantages, returns = compute_pure_advantage(rewards, torch.ones(3, 5), np.array(["a"] * 3, dtype=object))
    assert torch.count_nonzero(returns) == 15
    torch.testing.assert_close(advantages, torch.zeros(3, 5), atol=1e-6, rtol=0)
    # After a response's worst token its min-form return is ~0; the baseline it meets shrinks with it.
    rewards = torch.tensor([[1.0, -1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    advantages, _ = compute_pure_advantage(rewards, torch.ones(2, 4), np.array(["a", "a"], dtype=object))
    assert advantages[0, -1].abs() < advantages[0, 2].abs() < advantages[0, 1].abs()


def test_sum_credit_returns_the_plain_return_to_go():
    # Same rewards as the min-form example above: the sum-form return counts every step, so the bad
    # step's penalty is offset by the good steps after it (what PURE argues a PRM's reward lets a policy game).
    rewards = torch.tensor([[1.0, -0.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    config = OmegaConf.create({"pure": {"credit": "sum"}})
    advantages, returns = compute_pure_advantage(rewards, torch.ones(2, 4), np.array(["a", "a"], dtype=object), config)
    torch.testing.assert_close(returns, torch.tensor([[2.5, 1.5, 2.0, 1.0], [4.0, 3.0, 2.0, 1.0]]))
    # leave-one-out: each row's baseline is the other row's reward per token (1.0 and 2.5 / 4)
    torch.testing.assert_close(advantages[0], returns[0] - 1.0 * torch.tensor([4.0, 3.0, 2.0, 1.0]))
    torch.testing.assert_close(advantages[1], returns[1] - 0.625 * torch.tensor([4.0, 3.0, 2.0, 1.0]))


def test_unknown_credit_is_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match=r"algorithm.pure.credit='max' is not one of \['min', 'sum'\]"):
        compute_pure_advantage(
            torch.zeros(2, 2), torch.ones(2, 2), np.array(["a", "a"]), OmegaConf.create({"pure": {"credit": "max"}})
        )


@pytest.mark.parametrize("credit", ["min", "sum"])
def test_one_host_sync_per_call_and_inputs_left_untouched(monkeypatch, credit):
    rewards, mask, index = random_batch(torch.Generator().manual_seed(3))
    mask = mask.long()
    before = rewards.clone(), mask.clone()
    reads = count_host_reads(monkeypatch)
    advantages, _ = compute_pure_advantage(rewards, mask, index, OmegaConf.create({"pure": {"credit": credit}}))
    monkeypatch.undo()
    assert len(reads) == 1, reads
    assert torch.equal(rewards, before[0]) and torch.equal(mask, before[1])
    expected, _ = reference_pure(rewards, mask, index, 0.1, credit)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)
