"""The CPU mode's workarounds of verl internals, against the installed verl: each one works, and each one
fails loudly (naming the verl function) when verl no longer has the shape it relies on."""

import inspect
import os
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from conftest import verl_config
from verl.utils import distributed
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.device import get_device_id, get_device_name, get_nccl_backend, get_resource_name, get_torch_device
from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp import transformer_impl
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import get_rollout_replica_class

import bot_grpo_verl.cpu as cpu_mode
from bot_grpo_verl.cpu.rollout import HFRolloutReplica, HFServerAdapter
from bot_grpo_verl.plugin import SERVER_ADAPTER, load_replica
from bot_grpo_verl.verl_compat import UnsupportedVerl, cpu_patches
from bot_grpo_verl.verl_compat.cpu_platform import use_cpu_platform

pytestmark = pytest.mark.skipif(not cpu_mode.is_active(), reason="the test process runs without the CPU mode")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def single_rank_group(monkeypatch):
    """A one-process group created by verl's own initialize_global_process_group_ray."""
    for key, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "RANK": "0",
        "WORLD_SIZE": "1",
    }.items():
        monkeypatch.setenv(key, value)
    distributed.initialize_global_process_group_ray(timeout_second=60)
    yield
    dist.destroy_process_group()


def test_the_plugin_turned_the_cpu_mode_on_and_verl_sees_a_cpu_platform():
    assert cpu_mode.is_active() and os.environ[cpu_mode.ENV_VAR] == "1"
    assert (get_device_name(), get_device_id(), get_nccl_backend(), get_resource_name()) == (
        "cpu",
        "cpu",
        "gloo",
        "GPU",
    )
    assert torch.zeros(1).to(get_device_id()).device.type == "cpu"
    assert transformer_impl.device_name == "cpu"  # cached at import: the platform was chosen before


def test_the_device_module_reports_process_memory_and_no_accelerator():
    device = get_torch_device()
    assert device.is_available() is False
    assert device.max_memory_allocated() >= device.memory_allocated() > 10 << 20
    free, total = device.mem_get_info()
    assert 0 < free <= total
    device.empty_cache(), device.synchronize(), device.set_device(0)


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("yes", True), ("0", False), ("off", False), ("", False)])
def test_bot_grpo_cpu_env_var_switches_the_mode(monkeypatch, value, expected):
    monkeypatch.setenv(cpu_mode.ENV_VAR, value)
    assert cpu_mode.requested() is expected


def test_the_mode_is_off_unless_the_run_asks_for_it(monkeypatch):
    monkeypatch.delenv(cpu_mode.ENV_VAR)
    assert cpu_mode.requested() is False  # whatever the host: no accelerator here, and still off


def test_a_bad_bot_grpo_cpu_value_is_an_error(monkeypatch):
    monkeypatch.setenv(cpu_mode.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="BOT_GRPO_CPU='maybe'"):
        cpu_mode.requested()


def test_the_hf_cpu_rollout_refuses_a_process_without_the_cpu_mode_and_names_the_fix(monkeypatch):
    monkeypatch.setattr(cpu_mode, "_active", False)
    for build in (load_replica, lambda: HFServerAdapter(None, None, None)):
        with pytest.raises(RuntimeError, match=r"BOT_GRPO_CPU=1 .*ray_kwargs\.ray_init\.runtime_env\.env_vars"):
            build()


def test_activation_is_idempotent():
    defaults = distributed.initialize_global_process_group_ray.__defaults__
    cpu_patches.apply_all()
    assert cpu_mode.activate() is True
    assert distributed.initialize_global_process_group_ray.__defaults__ == defaults == (None, "gloo")


def test_verl_process_group_comes_up_with_gloo(single_rank_group):
    assert dist.get_backend() == "gloo"
    tensor = torch.ones(3)
    dist.all_reduce(tensor)
    assert tensor.tolist() == [1.0, 1.0, 1.0]


def test_fsdp2_reference_offload_policy_runs_on_cpu(single_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    policy = transformer_impl.CPUOffloadPolicy(pin_memory=True)  # what FSDPEngine asks for the ref model
    assert policy.pin_memory is False
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    inputs = torch.randn(3, 4)
    expected = module(inputs)
    fully_shard(module, mesh=init_device_mesh("cpu", (1,)), offload_policy=policy)
    torch.testing.assert_close(module(inputs), expected)


def test_the_v1_replay_buffer_polls_often():
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    polling = inspect.signature(ReplayBuffer.__init__).parameters["poll_interval"].default
    assert polling == cpu_patches.REPLAY_BUFFER_POLL_S < 2.0


def test_verl_finds_the_fsdp_engines_on_cpu():
    assert EngineRegistry.get_engine_cls("language_model", "fsdp2") is transformer_impl.FSDPEngineWithLMHead


def test_the_rollout_is_registered_with_both_verl_registries():
    assert rollout_base.get_rollout_class(cpu_patches.ROLLOUT_NAME, "async") is HFServerAdapter
    assert get_rollout_replica_class(cpu_patches.ROLLOUT_NAME) is HFRolloutReplica


def _no_backend_fallback(timeout_second=None):
    return None


class _OldReplayBuffer:
    def __init__(self, trainer_mode, poll_interval: float = 2.0):
        self.poll_interval = poll_interval


def register_hf_cpu_rollout():
    cpu_patches.register_rollout(SERVER_ADAPTER, load_replica)


class _OldEngineRegistry:
    @classmethod
    def get_engine_cls(cls, model_type, backend):
        return None


@pytest.mark.parametrize(
    ("apply", "target", "attribute", "replacement", "verl_function"),
    [
        (
            cpu_patches.use_gloo_backend,
            distributed,
            "initialize_global_process_group_ray",
            _no_backend_fallback,
            "initialize_global_process_group_ray",
        ),
        (
            cpu_patches.poll_replay_buffer_often,
            __import__("verl.trainer.ppo.v1.replay_buffer", fromlist=["x"]),
            "ReplayBuffer",
            _OldReplayBuffer,
            "ReplayBuffer.__init__",
        ),
        (
            cpu_patches.select_fsdp_engines,
            __import__("verl.workers.engine.base", fromlist=["x"]),
            "EngineRegistry",
            _OldEngineRegistry,
            "EngineRegistry.get_engine_cls",
        ),
        (register_hf_cpu_rollout, rollout_base, "_ROLLOUT_REGISTRY", None, "get_rollout_class"),
    ],
)
def test_each_workaround_fails_loudly_when_verl_changed(
    monkeypatch, apply, target, attribute, replacement, verl_function
):
    monkeypatch.setattr(target, attribute, replacement)
    with pytest.raises(UnsupportedVerl, match=verl_function):
        apply()


def test_the_offload_workaround_fails_loudly_when_verl_stops_pinning():
    changed = SimpleNamespace(CPUOffloadPolicy=object, FSDPEngine=SimpleNamespace(_build_fsdp_module=inspect.isclass))
    with pytest.raises(UnsupportedVerl, match="FSDPEngine._build_fsdp_module"):
        cpu_patches.unpin_fsdp2_offload(changed)


def test_the_platform_workaround_fails_loudly_when_verl_ignores_verl_platform(monkeypatch):
    import verl.plugin.platform.platform_manager as manager

    monkeypatch.setattr(manager, "_detect_platform_name", lambda: "nvidia")
    with pytest.raises(UnsupportedVerl, match="_detect_platform_name"):
        use_cpu_platform()


def test_the_cpu_preset_composes_with_verls_ppo_trainer():
    config = verl_config("+preset=[bot_grpo,cpu]")
    actor_rollout_ref = config.actor_rollout_ref
    assert config.algorithm.adv_estimator == "bot_grpo"
    assert actor_rollout_ref.rollout.name == cpu_patches.ROLLOUT_NAME
    assert (actor_rollout_ref.actor.strategy, actor_rollout_ref.ref.strategy) == ("fsdp2", "fsdp2")
    assert actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert config.ray_kwargs.ray_init.num_gpus == config.trainer.n_gpus_per_node == 1
    rollout = omega_conf_to_dataclass(actor_rollout_ref.rollout)
    assert (rollout.tensor_model_parallel_size, rollout.dtype) == (1, "fp32")
    engine = omega_conf_to_dataclass(actor_rollout_ref.ref.fsdp_config)
    assert engine.mixed_precision["param_dtype"] == "fp32" and engine.use_torch_compile is False


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with ``env``, without what this process's CPU mode put in its environment."""
    inherited = {key: value for key, value in os.environ.items() if key not in ("VERL_PLATFORM", "VERL_ENGINE_DEVICE")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**inherited, **env}
    )


@pytest.mark.slow  # fresh interpreters importing verl
def test_verls_warnings_about_engines_a_cpu_host_lacks_are_not_printed_in_cpu_mode_only():
    code = "import verl, verl.workers.engine"
    assert "engine is not available" not in run_python(code, BOT_GRPO_CPU="1").stderr
    assert "megatron engine is not available" in run_python(code, BOT_GRPO_CPU="0").stderr  # verl's, unchanged


@pytest.mark.slow  # a fresh interpreter importing TransferQueue
def test_transfer_queue_does_not_warn_at_every_transfer_with_the_cpu_presets_workers_environment():
    env_vars = verl_config("+preset=cpu").ray_kwargs.ray_init.runtime_env.env_vars
    code = (
        "from transfer_queue.client import TQ_NUM_THREADS\n"
        "from transfer_queue.utils.common import limit_pytorch_auto_parallel_threads\n"
        "with limit_pytorch_auto_parallel_threads(target_num_threads=TQ_NUM_THREADS):\n"
        "    pass\n"
    )
    result = run_python(code, **{key: str(value) for key, value in env_vars.items()})
    assert result.returncode == 0 and "should not exceed" not in result.stderr, result.stderr
