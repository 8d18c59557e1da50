"""The checks of a run that selects the plugin, on verl's composed configs and reward managers: start-up
mismatches, token rewards that a manager drops, and samples whose reward failed (stop or skip)."""

import logging
import math
from types import SimpleNamespace

import pytest
from conftest import verl_config
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
from verl.trainer.ppo.reward import resolve_reward_manager_cls
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, PPOTrainer

from bot_grpo_verl.options import OptionError
from bot_grpo_verl.plugin import estimators
from bot_grpo_verl.reward.manager import REWARD_ERROR_KEY, failed_sample
from bot_grpo_verl.run_checks import (
    SKIPPED_METRIC,
    SPREAD_ESTIMATORS,
    STEP_END_ESTIMATORS,
    check_batch,
    check_startup,
    overrides_for,
)
from bot_grpo_verl.verl_compat.trainer_checks import VERL_OUTCOME_ESTIMATORS, BatchVerdict, reward_infos, without
from recipes.algorithms import ALGORITHMS

SPANS = {"score": 1.0, "acc": 1.0, "spans": [(0, 3, 0.5)]}
SCORED = {"score": 0.0, "acc": 0.0, "span_coverage": 0.5}


def checked_startup(caplog, *overrides):
    """The warnings ``check_startup`` logs for the run of ``overrides`` (it raises for a run it stops)."""
    config = verl_config(*overrides)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bot_grpo_verl.run_checks"):
        check_startup(config, resolve_reward_manager_cls(config))
    return [record.getMessage() for record in caplog.records]


def checked_batch(caplog, infos, overrides, first=True):
    """(verdict, warnings) of ``check_batch`` for the run of ``overrides`` and the samples' reward extra info."""
    config = verl_config(*overrides)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bot_grpo_verl.run_checks"):
        verdict = check_batch(config, resolve_reward_manager_cls(config), infos, first)
    return verdict, [record.getMessage() for record in caplog.records]


def failure(uid: str) -> dict:
    """The reward extra info of a sample whose reward failed, as the bot_token manager reports it."""
    message = f"bot_token reward failed for sample uid={uid} data_source='t': ValueError: score must be a number"
    return failed_sample(message, 4)["reward_extra_info"]


def test_every_estimator_of_the_plugin_reads_one_placement():
    assert sorted(SPREAD_ESTIMATORS + STEP_END_ESTIMATORS) == sorted(estimators())


@pytest.mark.parametrize("estimator", sorted(estimators()))
def test_the_fix_named_for_an_estimator_is_how_the_recipes_run_it_and_passes_the_checks(caplog, estimator):
    assert tuple(overrides_for(estimator).split()) == ALGORITHMS[estimator].overrides
    assert checked_startup(caplog, *overrides_for(estimator).split()) == []


def test_the_outcome_estimators_are_verls_and_score_a_response_by_its_token_sum():
    assert set(VERL_OUTCOME_ESTIMATORS) <= set(ADV_ESTIMATOR_REGISTRY)  # the plugin's guard checks the sum


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.adv_estimator=grpo"],
        ["algorithm.adv_estimator=grpo", "reward.reward_manager.name=dapo"],
        ["algorithm.adv_estimator=gae", "+preset=bot_grpo"],
        ["+preset=[bot_grpo,cpu]"],
    ],
)
def test_runs_that_fit_pass_silently(caplog, overrides):
    assert checked_startup(caplog, *overrides) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algorithm.adv_estimator=pure"], "reads token rewards, which the 'naive' reward manager does not write.*"),
        (["algorithm.adv_estimator=grpo_token_mean", "reward.reward_manager.name=dapo"], "'dapo' reward manager"),
        (["+preset=bot_grpo", "algorithm.adv_estimator=grpo"], "trains on that sum.*reward.reward_manager.name=naive"),
        (["+preset=pure", "algorithm.adv_estimator=rloo"], "rloo sums each response's token rewards"),
        (["+preset=bot_grpo", "reward.bot_token.placement=step_end"], "set reward.bot_token.placement=spread"),
        (["+preset=bot_grpo", "algorithm.adv_estimator=ps_grpo"], "placement is spread.*placement=step_end$"),
        (["+preset=pure", "algorithm.use_kl_in_reward=true"], "use_kl_in_reward=true overwrites"),
    ],
    ids=[
        "pure_naive",
        "baseline_dapo",
        "bot_token_grpo",
        "bot_token_rloo",
        "step_end_bot_grpo",
        "spread_ps_grpo",
        "kl",
    ],
)
def test_runs_that_cannot_be_meant_stop_with_one_line_naming_the_fix(caplog, overrides, message):
    with pytest.raises(ValueError, match=message) as stopped:
        checked_startup(caplog, *overrides)
    assert "\n" not in str(stopped.value) and str(stopped.value).startswith("bot-grpo-verl: ")


def test_bot_grpo_without_token_rewards_is_grpo_and_is_told_so(caplog):
    (warning,) = checked_startup(caplog, "algorithm.adv_estimator=bot_grpo")
    assert "trains exactly as grpo" in warning and warning.endswith("add +preset=bot_grpo")


def test_step_rewards_for_an_estimator_of_verl_that_reads_tokens_are_told_where_they_sit(caplog):
    (warning,) = checked_startup(caplog, "+preset=pure", "algorithm.adv_estimator=gae")
    assert "read by ps_grpo and pure; algorithm.adv_estimator=gae sees each step's reward on its last" in warning


def test_spans_dropped_by_the_manager_stop_a_token_estimator_at_the_first_batch(caplog):
    infos = [SCORED, SPANS]
    with pytest.raises(
        ValueError, match=r"returns 'spans', which the 'naive' reward manager drops.*\+preset=bot_grpo$"
    ):
        checked_batch(caplog, infos, ["algorithm.adv_estimator=bot_grpo"])
    assert checked_batch(caplog, infos, ["algorithm.adv_estimator=bot_grpo"], first=False) == (BatchVerdict(), [])


def test_spans_dropped_by_the_manager_of_an_outcome_run_are_reported_once(caplog):
    overrides = ["+preset=cpu", "algorithm.adv_estimator=grpo"]  # the CPU preset selects the plugin
    verdict, (warning,) = checked_batch(caplog, [{"token_rewards": [1.0]}, SCORED], overrides)
    assert verdict == BatchVerdict() and "'token_rewards', which the 'naive' reward manager drops" in warning
    assert checked_batch(caplog, [SCORED], overrides) == (BatchVerdict(), [])


def test_a_failed_reward_stops_the_run_with_the_uid_the_problem_and_the_fix(caplog):
    infos = [SCORED, failure("u1"), failure("u2")]
    with pytest.raises(RuntimeError) as stopped:
        checked_batch(caplog, infos, ["+preset=bot_grpo"], first=False)
    message = str(stopped.value)
    assert message.startswith("bot-grpo-verl: bot_token reward failed for sample uid=u1 data_source='t': ValueError")
    assert message.endswith(
        "fix the reward function (what it may return: docs/token-rewards.md#the-contract; 'bot-grpo-verl "
        "check-reward FILE' tries it on real rows in seconds), or set reward.bot_token.on_error=skip to leave such "
        "samples out"
    )
    assert checked_batch(caplog, [SCORED, SPANS], ["+preset=bot_grpo"]) == (BatchVerdict(), [])


def test_with_on_error_skip_failed_samples_are_left_out_and_counted(caplog):
    overrides = ["+preset=bot_grpo", "reward.bot_token.on_error=skip"]
    verdict, (warning,) = checked_batch(caplog, [failure("u1"), SCORED, failure("u2"), SCORED], overrides)
    assert verdict == BatchVerdict(left_out=(0, 2), metrics={SKIPPED_METRIC: 2})
    assert warning.startswith("bot-grpo-verl: left 2 of 4 samples out of the batch") and "uid=u1" in warning
    assert checked_batch(caplog, [SCORED], overrides) == (BatchVerdict(metrics={SKIPPED_METRIC: 0}), [])
    with pytest.raises(RuntimeError, match="every sample of the batch failed its reward, the first: .*uid=u1"):
        checked_batch(caplog, [failure("u1"), failure("u2")], overrides)


@pytest.mark.parametrize("on_error", ["stop", "skip"])
def test_a_reward_that_refuses_its_options_stops_the_run_once_as_a_configuration_error(caplog, on_error):
    refused = failed_sample("the reward function refused its options (first seen with sample uid=u1): unknown", 4, True)
    infos = [SCORED, refused["reward_extra_info"], refused["reward_extra_info"], failure("u2")]
    with pytest.raises(OptionError) as stopped:
        checked_batch(caplog, infos, ["+preset=bot_grpo", f"reward.bot_token.on_error={on_error}"], first=False)
    message = str(stopped.value)
    assert message.startswith("bot-grpo-verl: configuration error: the reward function refused its options")
    assert message.count("refused") == 1 and "uid=u2" not in message and "on_error" not in message
    assert message.endswith(
        "fix reward.custom_reward_function.reward_kwargs ('bot-grpo-verl check-reward FILE "
        "--reward-kwargs ...' checks them in seconds)"
    )


def test_a_failed_sample_keeps_the_filter_metric_and_no_reward():
    info = failure("u1")
    assert math.isnan(info["acc"]) and math.isnan(info["score"]) and "uid=u1" in info[REWARD_ERROR_KEY]


def test_the_batch_as_transfer_queue_returns_it():
    class Wrapped:  # some TransferQueue backends wrap each sample's extra fields
        data = {"reward_extra_info": SPANS}

    extra_fields = [Wrapped(), {"reward_extra_info": SCORED}, {}, None]
    assert reward_infos(extra_fields) == [SPANS, SCORED, {}, {}]
    from transfer_queue.metadata import KVBatchMeta

    batch = KVBatchMeta(keys=["a_0_0", "a_1_0", "b_0_0"], tags=[{"n": 0}, {"n": 1}, {"n": 2}], partition_id="train")
    batch.extra_info["temperature"] = 1.0
    kept = without(batch, (1,))
    assert (kept.keys, kept.tags, kept.partition_id) == (["a_0_0", "b_0_0"], [{"n": 0}, {"n": 2}], "train")
    assert kept.extra_info == {"temperature": 1.0}


class ReplayBuffer:
    def sample(self, global_steps, partition_id, batch_size):
        raise AssertionError("not called here")


def initialised_trainer(monkeypatch, *overrides):
    """verl's V1 trainer after the plugin's ``PPOTrainer.init``, its set-up (workers, models) left out."""
    monkeypatch.setattr(PPOTrainer, "_setup", lambda self: None)
    config = verl_config(*overrides)
    trainer = object.__new__(TRAINER_REGISTRY[config.trainer.v1.trainer_mode])
    trainer.config, trainer.replay_buffer = config, ReplayBuffer()
    trainer.reward_loop_manager = SimpleNamespace(reward_manager_cls=resolve_reward_manager_cls(config))
    monkeypatch.setattr(type(trainer), "on_init_end", lambda self: None)
    trainer.init()
    return trainer


def test_a_run_that_does_not_select_the_plugin_keeps_verls_init_and_sampling(monkeypatch):
    assert PPOTrainer.init.__bot_grpo_adapter__
    trainer = initialised_trainer(monkeypatch, "algorithm.adv_estimator=grpo", "reward.reward_manager.name=dapo")
    assert "sample" not in vars(trainer.replay_buffer)  # the class's method: not wrapped


def test_a_run_that_selects_the_plugin_is_checked_at_init_and_on_every_batch(monkeypatch):
    trainer = initialised_trainer(monkeypatch, "+preset=bot_grpo")
    assert vars(trainer.replay_buffer)["sample"].__wrapped__.__func__ is ReplayBuffer.sample
    with pytest.raises(ValueError, match="reads token rewards, which the 'naive' reward manager does not write"):
        initialised_trainer(monkeypatch, "algorithm.adv_estimator=grpo_token_min")
