"""Multi-output agent sessions through verl V1's real ``compute_advantage_for_multi_trajectories``: a plugin
estimator counts each session once (its final output), as verl's ``grpo`` does (issue 27, item 3)."""

import logging
import random

import numpy as np
import pytest
import torch
from conftest import verl_config
from reference import reference_bot_grpo
from verl import DataProto
from verl.trainer.ppo.v1 import trainer_base, utils

from bot_grpo_verl import selection
from bot_grpo_verl.plugin import estimators
from bot_grpo_verl.verl_compat.sessions import adapt_multi_output_sessions, final_outputs

LENGTH = 12


@pytest.fixture(autouse=True, scope="module")
def adapted():
    adapt_multi_output_sessions(frozenset(estimators()))


def sessions_batch(seed: int, outcome: bool):
    """Rows of 5 prompts x 4 sessions x 1-3 outputs, shuffled: ``(keys, rewards, mask, uids, final_rows)``.
    Outcome rows carry one score on their last valid token; token rows a random reward on every token. The
    outputs before a session's last carry rewards of their own, which neither estimator may use."""
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    rows = [
        (f"uid{prompt}", session, index, outputs)
        for prompt in range(5)
        for session in range(4)
        for outputs in [rng.randint(1, 3)]
        for index in range(outputs)
    ]
    rng.shuffle(rows)
    mask = torch.zeros(len(rows), LENGTH)
    for row in range(len(rows)):
        mask[row, : rng.randint(1, LENGTH)] = 1
    if outcome:
        scores = torch.randint(0, 3, (len(rows),), generator=generator).double()
        last = mask.cumsum(-1).argmax(-1)
        rewards = torch.zeros(len(rows), LENGTH, dtype=torch.float64)
        rewards[torch.arange(len(rows)), last] = scores
    else:
        rewards = torch.randn(len(rows), LENGTH, generator=generator, dtype=torch.float64) * mask
    keys = [f"{uid}_{session}_{index}" for uid, session, index, _ in rows]
    finals = [row for row, (_, _, index, outputs) in enumerate(rows) if index == outputs - 1]
    return keys, rewards, mask, np.array([uid for uid, *_ in rows], dtype=object), finals


def verl_v1_advantages(function, keys, rewards, mask, uids, estimator, norm_by_std=True):
    config = verl_config(
        f"algorithm.adv_estimator={estimator}", f"algorithm.norm_adv_by_std_in_grpo={str(norm_by_std).lower()}"
    ).algorithm
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": uids}
    )
    return function(
        data, batch_keys=keys, adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_by_std, config=config
    ).batch["advantages"]


def session_of(keys):
    return [key.rsplit("_", 1)[0] for key in keys]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("function", [utils.compute_advantage_for_multi_trajectories, "trainer_base"])
def test_bot_grpo_equals_verls_grpo_on_outcome_rewards_output_for_output(seed, norm_by_std, function):
    function = trainer_base.compute_advantage_for_multi_trajectories if function == "trainer_base" else function
    batch = sessions_batch(seed, outcome=True)
    ours = verl_v1_advantages(function, *batch[:4], "bot_grpo", norm_by_std)
    grpo = verl_v1_advantages(function, *batch[:4], "grpo", norm_by_std)
    torch.testing.assert_close(ours.double(), grpo.double(), atol=1e-6, rtol=0)
    assert torch.count_nonzero(grpo) > 0


@pytest.mark.parametrize("seed", range(4))
def test_token_rewards_credit_the_final_output_and_share_its_mean_with_the_others(seed):
    keys, rewards, mask, uids, finals = sessions_batch(seed, outcome=False)
    ours = verl_v1_advantages(utils.compute_advantage_for_multi_trajectories, keys, rewards, mask, uids, "bot_grpo")
    expected_finals = reference_bot_grpo(rewards[finals], mask[finals], uids[finals])  # one bag member per session
    final_of = dict(zip(session_of([keys[row] for row in finals]), range(len(finals)), strict=True))
    for row, session in enumerate(session_of(keys)):
        final = expected_finals[final_of[session]]
        if row in finals:
            expected = final
        else:
            valid = mask[finals[final_of[session]]].bool()
            expected = final[valid].mean() * mask[row].double()
        torch.testing.assert_close(ours[row].double(), expected, atol=1e-5, rtol=0)


def test_a_batch_of_single_output_sessions_is_the_plain_estimator():
    keys, rewards, mask, uids, _ = sessions_batch(7, outcome=False)
    single = [f"{key.rsplit('_', 1)[0]}x{row}_0" for row, key in enumerate(keys)]  # every row its own session
    ours = verl_v1_advantages(utils.compute_advantage_for_multi_trajectories, single, rewards, mask, uids, "bot_grpo")
    torch.testing.assert_close(ours.double(), reference_bot_grpo(rewards, mask, uids), atol=1e-5, rtol=0)


def test_other_estimators_take_verls_own_path():
    batch = sessions_batch(3, outcome=True)
    wrapped = verl_v1_advantages(utils.compute_advantage_for_multi_trajectories, *batch[:4], "grpo")
    original = verl_v1_advantages(utils.compute_advantage_for_multi_trajectories.__wrapped__, *batch[:4], "grpo")
    torch.testing.assert_close(wrapped, original, atol=0, rtol=0)


@pytest.fixture
def selected_late(monkeypatch):
    """This process as a trainer whose run selects the plugin by its estimator alone: not selected when verl calls
    it (the adapters, already in place here, are bypassed by calling verl's own function)."""
    monkeypatch.setattr(selection, "_selected", False)
    monkeypatch.setattr(selection, "_hooks", [])
    return utils.compute_advantage_for_multi_trajectories.__wrapped__


def test_a_run_selected_at_its_first_estimate_refuses_multi_output_sessions_naming_the_fix(selected_late):
    batch = sessions_batch(3, outcome=True)
    with pytest.raises(RuntimeError, match=r"several outputs.*\+preset=bot_grpo.*BOT_GRPO_SELECTED=1"):
        verl_v1_advantages(selected_late, *batch[:4], "bot_grpo")


def test_a_run_selected_at_its_first_estimate_is_warned_and_estimates_single_output_sessions(selected_late, caplog):
    keys, rewards, mask, uids, _ = sessions_batch(5, outcome=False)
    single = [f"{key.rsplit('_', 1)[0]}x{row}_0" for row, key in enumerate(keys)]
    with caplog.at_level(logging.WARNING, logger="bot_grpo_verl.plugin"):
        ours = verl_v1_advantages(selected_late, single, rewards, mask, uids, "bot_grpo")
        torch.testing.assert_close(ours.double(), reference_bot_grpo(rewards, mask, uids), atol=1e-5, rtol=0)
        verl_v1_advantages(selected_late, single, rewards, mask, uids, "bot_grpo")
    warnings = [record for record in caplog.records if record.name == "bot_grpo_verl.plugin"]
    assert [record.levelname for record in warnings] == ["WARNING"]  # once
    assert "the plugin was selected at the run's first advantage computation" in warnings[0].getMessage()


def test_final_outputs_are_the_highest_index_of_each_session():
    assert final_outputs(["a_0_0", "a_0_2", "b_1_0", "a_0_1", "a_1_0"]) == ([1, 2, 4], [0, 0, 1, 0, 2])


@pytest.mark.parametrize("key", ["a_0", "a_0_x", "nounderscore", "_0_1"])
def test_a_key_that_is_not_uid_session_index_is_refused_naming_it(key):
    with pytest.raises(ValueError, match=f"batch key '{key}' is not verl V1's"):
        final_outputs(["a_0_0", key])
