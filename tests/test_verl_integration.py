"""The plugin through the real installed verl: dispatch, V1 path, hydra, discovery, loud failures."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import verl_config
from estimator_batches import random_batch
from reference import reference_bot_grpo
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig, compute_bot_grpo_advantage
from bot_grpo_verl.verl_compat import SUPPORTED_VERL, UnsupportedVerl, check_verl_version, guard


def data_proto(rewards, mask, index):
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": index},
    )


def test_verl_resolves_the_estimator_by_name():
    assert get_adv_estimator_fn("bot_grpo").__wrapped__ is compute_bot_grpo_advantage


@pytest.mark.parametrize("weighting", ["inverse_length", "uniform"])
def test_verl_compute_advantage_dispatches_to_bot_grpo(weighting):
    config = verl_config("+preset=bot_grpo", f"algorithm.bot_grpo.weighting={weighting}").algorithm
    rewards, mask, index = random_batch(torch.Generator().manual_seed(7))
    data = compute_advantage(data_proto(rewards, mask, index), adv_estimator=config.adv_estimator, config=config)
    expected = reference_bot_grpo(rewards, mask, index, weighting=weighting)
    torch.testing.assert_close(data.batch["advantages"].double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(data.batch["returns"], data.batch["advantages"])


def test_verl_v1_multi_trajectory_path_gives_the_reference():
    config = verl_config("algorithm.adv_estimator=bot_grpo", "algorithm.norm_adv_by_std_in_grpo=false").algorithm
    rewards, mask, index = random_batch(torch.Generator().manual_seed(8))
    batch_keys = [f"{uid}_{row}_0" for row, uid in enumerate(index)]  # V1: {uid}_{session}_{index}, one output each
    data = compute_advantage_for_multi_trajectories(
        data_proto(rewards, mask, index),
        batch_keys=batch_keys,
        adv_estimator=config.adv_estimator,
        norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo,
        config=config,
    )
    expected = reference_bot_grpo(rewards, mask, index, norm_by_std=False)
    torch.testing.assert_close(data.batch["advantages"].double(), expected, atol=1e-5, rtol=1e-5)


def test_hydra_plus_syntax_sets_options_on_verls_struct_config():
    config = verl_config(
        "algorithm.adv_estimator=bot_grpo",
        "+algorithm.bot_grpo.weighting=uniform",
        "+algorithm.bot_grpo.outcome_broadcast=never",
    ).algorithm
    assert config.adv_estimator == "bot_grpo"
    rewards, mask, index = random_batch(torch.Generator().manual_seed(9))
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, config)
    expected = reference_bot_grpo(rewards, mask, index, weighting="uniform", outcome_broadcast="never")
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


def test_hydra_preset_sets_the_estimator_and_its_defaults():
    config = verl_config("+preset=bot_grpo").algorithm
    assert config.adv_estimator == "bot_grpo"
    # every option listed at null, its default, so that hydra takes it with or without '+'
    assert dict(config.bot_grpo) == dict.fromkeys(("weighting", "outcome_broadcast", "epsilon", "credit"))
    assert BoTGRPOConfig.from_algorithm_config(config) == BoTGRPOConfig(
        weighting="inverse_length", outcome_broadcast="auto", epsilon=1e-6, credit="token"
    )


def test_an_unknown_option_from_hydra_is_a_clear_error():
    config = verl_config("+preset=bot_grpo", "+algorithm.bot_grpo.normalise=true").algorithm
    with pytest.raises(ValueError, match=r"unknown algorithm.bot_grpo option\(s\) \['normalise'\]"):
        compute_bot_grpo_advantage(torch.zeros(2, 2), torch.ones(2, 2), np.array(["a", "a"]), config)


def run_python(code, **env):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


@pytest.mark.slow
def test_a_fresh_interpreter_that_only_imports_verl_resolves_bot_grpo():
    result = run_python(
        "import verl\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
        "print(get_adv_estimator_fn('bot_grpo').__module__)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "bot_grpo_verl.estimators.bot_grpo"


@pytest.mark.slow
def test_a_ray_worker_process_resolves_bot_grpo():
    import tempfile

    import ray

    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    ray.init(num_cpus=1, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
    try:

        @ray.remote
        def resolve_in_worker():
            import verl  # noqa: F401
            from verl.trainer.ppo.core_algos import get_adv_estimator_fn

            return os.getpid(), get_adv_estimator_fn("bot_grpo").__module__

        pid, module = ray.get(resolve_in_worker.remote(), timeout=120)
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert pid != os.getpid()
    assert module == "bot_grpo_verl.estimators.bot_grpo"


def test_a_broken_plugin_is_loud_although_verl_swallows_the_error():
    # Poison one of our modules, then import verl as any recipe would.
    result = run_python(
        "import sys; sys.modules['bot_grpo_verl.estimators.bot_grpo'] = None\n"
        "import verl\n"
        "from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY\n"
        "print('bot_grpo' in ADV_ESTIMATOR_REGISTRY)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert "ERROR" in result.stderr and "bot-grpo-verl: could not register with verl" in result.stderr
    assert "python -m bot_grpo_verl check" in result.stderr


@pytest.mark.slow
def test_check_command_reports_a_healthy_install():
    result = subprocess.run(
        [sys.executable, "-m", "bot_grpo_verl", "check"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bot_grpo: registered" in result.stdout
    assert "verl          0.9.1" in result.stdout
    assert result.stdout.strip().endswith("OK")


@pytest.mark.slow
def test_check_command_shows_why_the_plugin_failed():
    result = run_python(
        "import sys; sys.modules['bot_grpo_verl.estimators.bot_grpo'] = None\n"
        "from bot_grpo_verl.__main__ import main; sys.exit(main(['check']))"
    )
    assert result.returncode == 1
    assert "NOT REGISTERED" in result.stdout
    assert "the plugin failed to load" in result.stderr and "ModuleNotFoundError" in result.stderr


@pytest.mark.parametrize("found", ["0.9.0", "0.10.0", None])
def test_an_unsupported_verl_is_refused_with_the_supported_range(monkeypatch, found):
    monkeypatch.setattr(guard, "installed_verl_version", lambda: found)
    with pytest.raises(
        UnsupportedVerl, match=rf"supports verl(>=0.9.1,<0.10|<0.10,>=0.9.1), the installed verl is {found or 'none'}"
    ):
        check_verl_version()


def test_the_installed_verl_is_supported():
    import verl

    assert verl.__version__ in SUPPORTED_VERL
    assert check_verl_version() == verl.__version__


@pytest.mark.parametrize("found", ["0.9.1", "0.9.7"])
def test_any_verl_in_the_supported_range_is_accepted(monkeypatch, found):
    monkeypatch.setattr(guard, "installed_verl_version", lambda: found)
    assert found in SUPPORTED_VERL and check_verl_version() == found


def test_a_changed_verl_internal_is_refused_naming_it_the_range_and_the_installed_verl():
    with pytest.raises(UnsupportedVerl) as refused:
        guard.require(False, "verl.some.function", "it takes x")
    message = str(refused.value)
    assert "verl.some.function changed (it takes x no longer holds)" in message
    assert "verl>=0.9.1,<0.10" in message or "verl<0.10,>=0.9.1" in message
    assert "the installed verl is 0.9.1" in message


@pytest.mark.slow
@pytest.mark.parametrize("first", ["bot_grpo_verl.reward.manager", "bot_grpo_verl.heatmap"])
def test_importing_our_modules_before_verl_still_registers_everything(first):
    # importing the reward manager imports verl, which loads the plugin, which needs the half-imported manager
    result = run_python(
        f"import {first}\n"
        "from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls\n"
        "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
        "print(get_reward_manager_cls('bot_token').__name__, get_adv_estimator_fn('bot_grpo').__name__)"
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr, result.stderr
    assert result.stdout.split() == ["BoTTokenRewardManager", "compute_bot_grpo_advantage"]
