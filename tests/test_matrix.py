"""The CPU benchmark matrix: every algorithm's run composes against verl's config with the CPU preset."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_module

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("matrix", REPO / "benchmarks" / "matrix.py")
matrix = importlib.util.module_from_spec(spec)
sys.modules["matrix"] = matrix  # its dataclass looks its module up there
spec.loader.exec_module(matrix)

EXPECTED = {  # algorithm -> (estimator, reward manager)
    "grpo": ("grpo", "naive"),
    "dr_grpo": ("grpo", "naive"),
    "dapo": ("grpo", "dapo"),
    "gspo": ("grpo", "naive"),
    "pure": ("pure", "bot_token"),
    "bot_grpo": ("bot_grpo", "bot_token"),
    "bot_grpo_uniform": ("bot_grpo", "bot_token"),
}


def test_merge_presets_gathers_every_preset_once():
    merged = matrix.merge_presets(["+preset=cpu", "a=1", "+preset=[bot_grpo,cpu]", "b=2"])
    assert merged == ["+preset=[cpu,bot_grpo]", "a=1", "b=2"]


@pytest.mark.parametrize("algorithm", sorted(EXPECTED))
def test_every_algorithm_run_composes_with_the_cpu_preset(algorithm, tmp_path):
    assets = SimpleNamespace(train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", model_dir="/m")
    overrides = matrix.run_overrides(matrix.TASKS["react"], assets, algorithm, 1, 5, tmp_path)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    assert (config.algorithm.adv_estimator, config.reward.reward_manager.name) == EXPECTED[algorithm]
    assert config.actor_rollout_ref.rollout.name == "hf_cpu"  # the CPU preset
    assert config.trainer.total_training_steps == 5 and config.data.seed == 1
    assert config.data.max_response_length == matrix.MAX_RESPONSE_LENGTH


@pytest.mark.parametrize(("cell", "options"), [("bot_grpo@noisy", {"noise": 1.0}), ("grpo@unbounded", {"scale": 10.0})])
def test_reward_variants_of_the_stability_study_reach_the_reward_function(cell, options, tmp_path):
    assets = SimpleNamespace(train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", model_dir="/m")
    overrides = matrix.run_overrides(matrix.TASKS["arith"], assets, cell, 0, 5, tmp_path)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    kwargs = dict(config.reward.custom_reward_function.reward_kwargs)
    assert {key: float(kwargs[key]) for key in options} == options
    assert str(matrix.ARITHMETIC_STEPS) in (config.reward.custom_reward_function.path, kwargs.get("token_reward_path"))
    assert config.trainer.experiment_name == f"{cell}-seed0"


def test_arith_runs_validate_before_and_after_training_with_enough_samples_for_pass_at_k(tmp_path):
    assets = SimpleNamespace(train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", model_dir="/m")
    overrides = matrix.run_overrides(matrix.TASKS["arith"], assets, "grpo", 0, 7, tmp_path)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    assert config.trainer.val_before_train and config.trainer.test_freq == 7
    assert config.trainer.validation_data_dir == str(tmp_path / "validation")
    assert config.actor_rollout_ref.rollout.val_kwargs.n == max(matrix.TASKS["arith"].pass_at_k)
    assert config.actor_rollout_ref.rollout.val_kwargs.temperature == 1.0


def test_react_runs_do_not_validate(tmp_path):
    assets = SimpleNamespace(train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", model_dir="/m")
    overrides = matrix.run_overrides(matrix.TASKS["react"], assets, "grpo", 0, 7, tmp_path)
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    assert config.trainer.test_freq == -1 and not config.trainer.val_before_train
