"""Installing the plugin leaves a verl run that does not select it as verl made it.

In a fresh interpreter, on a host without accelerator and on a simulated one with a GPU, ``import verl`` with the
plugin installed leaves the environment and every verl function the plugin can adapt exactly as without it;
a run that selects the plugin (its estimator, its reward manager's score, the CPU mode) adapts them then.

verl's real ``PPOTrainer._compute_metrics`` runs over a real TransferQueue holding a step's samples as
verl's agent loop and trainer write them (plus one of verl's synthetic padding rows), with a spy on
``transfer_queue.kv_batch_get``. With and without the plugin's wrapper (verl's original function), a
plain GRPO run logs the same metrics and makes the same reads; a run that selects the plugin's
estimators or reward manager also gets ``reward_extra/<key>/mean`` over its real samples.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest
import ray
import transfer_queue as tq
from conftest import environment_without_cpu_mode, verl_config
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.trainer.ppo.metric_utils import RolloutMoELoadBalanceMetricsAccumulator
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.reward import resolve_reward_manager_cls
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY, PPOTrainer
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from bot_grpo_verl import selection

# (prompt ids, response ids, outcome, the reward function's extra info) of one step's samples
SAMPLES = [
    ([5, 6, 7], [8, 9], 1.0, {"acc": 1.0, "span_coverage": 0.5, "verdict": "right"}),
    ([5, 6], [9, 9, 9, 2], 0.0, {"acc": 0.0, "span_coverage": 1.0, "verdict": "wrong"}),
    ([7], [4, 2], 0.0, {"acc": 0.0, "span_coverage": 0.0, "verdict": "wrong"}),
]
EXPECTED = {"reward_extra/acc/mean": 1 / 3, "reward_extra/span_coverage/mean": 0.5}  # real samples only
BATCH_MULTIPLE = 4  # verl adds one synthetic padding row, a copy of the first sample's extra fields
TIMING = {"step": 2.0, "gen": 1.0}


pytestmark = pytest.mark.slow  # a Ray cluster for verl's TransferQueue, fresh verl interpreters


# --------------------------------------------------------------------------- a fresh interpreter, both ways

PROBE = """
import json, os, sys
environment = dict(os.environ)
if os.environ.get("PROBE_GPU_HOST"):  # a host with a GPU, as torch and verl's platform detection see it
    import torch
    torch.cuda.is_available = lambda: True
import verl
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.plugin.platform import PlatformRegistry
from verl.trainer.ppo import metric_utils
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1 import trainer_base, utils as v1_utils
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils import distributed
from verl.workers.engine.fsdp import transformer_impl

def identity(obj):
    code = getattr(obj, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code else ()
    names = [getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)]
    return [*names, *where, repr(getattr(obj, "__defaults__", None))]

def state():
    return {
        "environment": {key: value for key, value in os.environ.items() if environment.get(key) != value},
        "AgentLoopOutput.as_dict": identity(AgentLoopOutput.as_dict),
        "PPOTrainer._compute_metrics": identity(PPOTrainer._compute_metrics),
        "PPOTrainer._log_rollout_data": identity(PPOTrainer._log_rollout_data),
        "PPOTrainer.init": identity(PPOTrainer.init),
        "v1.utils.compute_advantage_for_multi_trajectories": identity(
            v1_utils.compute_advantage_for_multi_trajectories
        ),
        "v1.trainer_base.compute_advantage_for_multi_trajectories": identity(
            trainer_base.compute_advantage_for_multi_trajectories
        ),
        "metric_utils.bootstrap_metric": identity(metric_utils.bootstrap_metric),
        "initialize_global_process_group_ray": identity(distributed.initialize_global_process_group_ray),
        "ReplayBuffer.__init__": identity(ReplayBuffer.__init__),
        "transformer_impl.CPUOffloadPolicy": identity(transformer_impl.CPUOffloadPolicy),
        "platforms": sorted(PlatformRegistry.registered_names()),
    }

states = {"imported": state(), "gpu": PlatformRegistry.get("nvidia")().is_platform_available(use_smi_check=True)}
if sys.argv[1] == "estimator":
    import numpy as np, torch
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    get_adv_estimator_fn("bot_grpo")(torch.ones(2, 3), torch.ones(2, 3), np.array(["a", "a"], dtype=object))
    states["selected"] = state()
elif sys.argv[1] == "reward_manager":
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    manager = get_reward_manager_cls("bot_token")
    states["resolved"] = state()  # resolving it by name selects nothing
    sys.modules[manager.__module__].TokenRewardScore(1.0, [0.5, 0.5])  # a score arrives (an agent-loop worker)
    states["selected"] = state()
print("PROBE " + json.dumps(states))
"""

REWARD_PATH = {
    "AgentLoopOutput.as_dict",
    "PPOTrainer._compute_metrics",
    "PPOTrainer._log_rollout_data",
    "PPOTrainer.init",
    "v1.utils.compute_advantage_for_multi_trajectories",
    "v1.trainer_base.compute_advantage_for_multi_trajectories",
}
CPU_MODE = {
    "environment",
    "metric_utils.bootstrap_metric",
    "initialize_global_process_group_ray",
    "ReplayBuffer.__init__",
    "transformer_impl.CPUOffloadPolicy",
    "platforms",
}


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory) -> dict:
    """The environment of a simulated GPU host: an ``nvidia-smi`` on the path (verl's platform probe)."""
    folder = tmp_path_factory.mktemp("gpu-host")
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    return {"PROBE_GPU_HOST": "1", "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def probe(selection: str, host: dict, **environment: str) -> dict:
    """The probe's states (``imported``, then ``selected`` when ``selection`` selects the plugin) in a fresh
    interpreter, without the variables of this process's CPU mode unless given."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, selection],
        capture_output=True,
        text=True,
        timeout=600,
        env={**environment_without_cpu_mode(), **host, **environment},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "bot-grpo-verl: could not register" not in result.stderr, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


def changed(state: dict, verl_alone: dict) -> set[str]:
    return {key for key in verl_alone if state[key] != verl_alone[key]}


@pytest.mark.parametrize("host", ["cpu_host", "gpu_host"])
def test_importing_verl_with_the_plugin_changes_nothing_until_a_run_selects_it(host, request):
    environment = request.getfixturevalue("gpu_host") if host == "gpu_host" else {}
    verl_alone_states = probe("none", environment, VERL_USE_EXTERNAL_PLUGINS="none")
    assert verl_alone_states["gpu"] is (host == "gpu_host")  # verl's own probe sees the host as simulated
    verl_alone = verl_alone_states["imported"]
    by_estimator = probe("estimator", environment)
    by_reward_manager = probe("reward_manager", environment)
    for states in (by_estimator, by_reward_manager):
        assert states["imported"] == states.get("resolved", verl_alone) == verl_alone  # as verl made them
        assert changed(states["selected"], verl_alone) == REWARD_PATH  # the reward path only, not the CPU mode
    by_environment = probe("none", environment, BOT_GRPO_SELECTED="1")["imported"]  # what the presets pass
    assert changed(by_environment, verl_alone) == REWARD_PATH
    in_cpu_mode = probe("none", environment, BOT_GRPO_CPU="1")["imported"]
    assert changed(in_cpu_mode, verl_alone) == REWARD_PATH | CPU_MODE  # the run asked for it: the host does not matter
    assert {"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda"}.items() <= in_cpu_mode["environment"].items()


# --------------------------------------------------------------------------- the training metrics, in process


@pytest.fixture(scope="module")
def transfer_queue():
    selection.select()  # this process plays a run that selects the plugin: its adapters are in place
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    ray.init(num_cpus=4, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
    try:
        tq.init()
        yield
        tq.close()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def reads(monkeypatch):
    """The ``select_fields`` of every ``transfer_queue.kv_batch_get`` call, with the keys read."""
    calls = []
    kv_batch_get = tq.kv_batch_get

    def spy(keys, partition_id, select_fields=None):
        calls.append((tuple(keys), select_fields and tuple(select_fields)))
        return kv_batch_get(keys=keys, partition_id=partition_id, select_fields=select_fields)

    monkeypatch.setattr(tq, "kv_batch_get", spy)
    return calls


def trainer_for(config) -> PPOTrainer:
    """verl's V1 trainer with the state ``_compute_metrics`` reads, as its ``__init__`` and ``_setup`` set it
    (without workers; verl's ``RewardLoopManager`` holds the class it resolves from the config)."""
    trainer = object.__new__(TRAINER_REGISTRY[config.trainer.v1.trainer_mode])
    trainer.config = config
    trainer.use_critic = False
    trainer._rollout_moe_lb_metrics_accumulator = RolloutMoELoadBalanceMetricsAccumulator(
        model_config=config.actor_rollout_ref.model
    )
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)
    trainer.reward_loop_manager = SimpleNamespace(reward_manager_cls=resolve_reward_manager_cls(config))
    return trainer


def put_step(uid: str):
    """Write a step's samples as verl's agent loop (``AgentLoopWorkerTQ._agent_loop_postprocess``) and
    trainer (advantages, returns, token-level rewards) do, then pad the batch with verl's own function."""
    fields, tags = [], []
    for prompt_ids, response_ids, outcome, extra_info in SAMPLES:
        output = AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=[1] * len(response_ids),
            reward_score=outcome,
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields={"reward_extra_info": extra_info, "min_global_steps": 1, "max_global_steps": 1},
        ).as_dict()
        rewards = output["rm_scores"]
        fields.append({**output, "token_level_rewards": rewards, "advantages": rewards, "returns": rewards})
        tags.append({"status": "success", "global_steps": 1, "min_global_steps": 1, "max_global_steps": 1})
    keys = [f"{uid}_{session}_0" for session in range(len(SAMPLES))]
    batch = tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
    return upsample_batch_to_divisible_size(batch, BATCH_MULTIPLE, eos_token_id=2)


def step_metrics(compute_metrics, trainer, batch, reads):
    """The metrics ``compute_metrics`` logs for ``batch`` and the TransferQueue reads it makes."""
    reads.clear()
    metrics = {}
    compute_metrics(trainer, batch, metrics, dict(TIMING), global_steps=2, epoch=0)
    return metrics, list(reads)


def with_and_without_the_plugin(uid, reads, *overrides):
    """(metrics, reads) of one step through the plugin's wrapper, then through verl's original function."""
    wrapped = PPOTrainer._compute_metrics
    assert wrapped.__bot_grpo_adapter__ and wrapped.__wrapped__ is not wrapped  # the plugin wrapped it
    trainer, batch = trainer_for(verl_config(*overrides)), put_step(uid)
    assert len(batch) == len(SAMPLES) + 1 and batch.tags[-1]["is_padding"]
    return step_metrics(wrapped, trainer, batch, reads), step_metrics(wrapped.__wrapped__, trainer, batch, reads)


@pytest.mark.parametrize(
    "overrides",
    [["algorithm.adv_estimator=grpo"], ["algorithm.adv_estimator=grpo", "reward.reward_manager.name=dapo"]],
    ids=["naive_manager", "dapo_manager"],
)
def test_a_plain_grpo_run_logs_and_reads_exactly_as_without_the_plugin(transfer_queue, reads, overrides):
    (metrics, run_reads), (verl_metrics, verl_reads) = with_and_without_the_plugin("plain", reads, *overrides)
    assert metrics.keys() == verl_metrics.keys() and not any(key.startswith("reward_extra/") for key in metrics)
    np.testing.assert_equal(metrics, verl_metrics)
    assert run_reads == verl_reads and all("extra_fields" not in fields for _, fields in run_reads)
    assert len(verl_reads) == 1  # verl's own read of the step


@pytest.mark.parametrize(
    "overrides",
    [
        ["+preset=bot_grpo"],
        ["algorithm.adv_estimator=grpo", "reward.reward_manager.name=bot_token"],
        ["algorithm.adv_estimator=grpo_token_mean"],
        ["algorithm.adv_estimator=pure"],
        ["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.name=hf_cpu"],
    ],
    ids=["preset", "bot_token_manager_with_grpo", "baseline_estimator", "pure_estimator", "cpu_mode_rollout"],
)
def test_a_run_that_selects_the_plugin_gets_the_reward_extra_metrics(transfer_queue, reads, overrides):
    (metrics, run_reads), (verl_metrics, verl_reads) = with_and_without_the_plugin("bot", reads, *overrides)
    ours = {key: value for key, value in metrics.items() if key.startswith("reward_extra/")}
    assert ours == pytest.approx(EXPECTED)  # the string "verdict" is no metric; the padding row is left out
    signal = {key for key in metrics if key.startswith("learning_signal/")}
    assert signal == {
        f"learning_signal/{name}" for name in ("zero_advantage_groups", "zero_advantage_tokens", "advantage_std")
    }
    assert metrics.keys() - ours.keys() - signal == verl_metrics.keys()
    real_keys = verl_reads[0][0][: len(SAMPLES)]
    assert run_reads == [*verl_reads, (real_keys, ("extra_fields", "advantages", "response_mask"))]


def test_the_decision_is_made_once_per_trainer(transfer_queue, reads):
    trainer, batch = trainer_for(verl_config("algorithm.adv_estimator=grpo")), put_step("once")
    assert "reward_extra/acc/mean" not in step_metrics(PPOTrainer._compute_metrics, trainer, batch, reads)[0]
    trainer.config.algorithm.adv_estimator = "bot_grpo"  # a later change of the config is not looked at
    assert "reward_extra/acc/mean" not in step_metrics(PPOTrainer._compute_metrics, trainer, batch, reads)[0]
