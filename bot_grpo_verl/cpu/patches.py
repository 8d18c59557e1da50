"""Every workaround of verl internals that the CPU mode needs, in one module.

verl 0.9.1 runs its trainer on CUDA/NPU only. Each function below makes one piece of it work on a
CPU-only host, prefers verl's public extension points (platform registry, rollout registry, env vars),
names the verl function it works around, and first checks that verl still has the shape it relies on:
if verl changed, :class:`VerlInternalsChanged` names the function instead of a silent misbehaviour.
:func:`bot_grpo_verl.cpu.activate` applies them once per process; ``tests/test_cpu_patches.py``
checks each against the installed verl.
"""

from __future__ import annotations

import importlib
import inspect
import os
import platform as host_platform
import resource
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import psutil
import torch

ROLLOUT_NAME = "hf_cpu"
"""``actor_rollout_ref.rollout.name`` of the ``transformers`` rollout in :mod:`bot_grpo_verl.cpu.rollout`."""

FSDP_ENGINE_MODULE = "verl.workers.engine.fsdp.transformer_impl"


class VerlInternalsChanged(RuntimeError):
    """The installed verl no longer has the internal a CPU-mode workaround relies on."""


def require(condition: bool, verl_function: str, expected: str) -> None:
    """Raise :class:`VerlInternalsChanged` naming ``verl_function`` unless ``condition`` holds."""
    if not condition:
        raise VerlInternalsChanged(
            f"bot-grpo-verl CPU mode: {verl_function} changed in the installed verl ({expected} no longer "
            "holds); this workaround must be revisited for this verl version. Set BOT_GRPO_CPU=0 to run without it."
        )


def source_of(obj: Any) -> str:
    """The source text of a verl function or class (empty when it is not available)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


# --- 1. platform ---------------------------------------------------------------------------------


class CPUDeviceModule:
    """Stands in for ``torch.cuda`` where verl calls ``get_torch_device().<fn>()`` (verl.utils.device).

    Caches and streams do not exist on CPU, so those calls are no-ops; memory queries report this
    process's resident memory (RSS), so verl's ``perf/max_memory_allocated_gb`` metric shows the peak
    RSS of each worker. ``is_available()`` is False: there is no accelerator, which makes verl's memory
    helpers (verl.utils.memory_utils) skip GPU-only tuning. Anything else comes from ``torch.cpu``.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def set_device(device: Any) -> None:
        return None

    @staticmethod
    def synchronize(device: Any = None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        return None

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return psutil.Process().memory_info().rss

    memory_reserved = memory_allocated

    @staticmethod
    def max_memory_allocated(device: Any = None) -> int:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB, updated lazily
        return max(peak, psutil.Process().memory_info().rss)

    max_memory_reserved = max_memory_allocated

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return host_platform.processor() or host_platform.machine() or "cpu"

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)


def cpu_platform_class() -> type:
    """verl.plugin.platform.PlatformBase subclass for a CPU-only host.

    device ``cpu``, collective backend ``gloo``. The Ray resource stays ``GPU``: verl's resource pools
    count only accelerators, so Ray is started with a logical ``num_gpus`` and every training worker
    holds one logical GPU. ``current_device()`` returns ``"cpu"`` rather than an index because verl
    passes ``get_device_id()`` straight to ``.to()`` and ``torch.device()``.
    """
    from verl.plugin.platform import PlatformBase

    device_module = CPUDeviceModule()

    class PlatformCPU(PlatformBase):
        device_name = "cpu"
        vendor_name = "cpu"
        device_module = property(lambda self: device_module)

        def is_available(self) -> bool:
            return True

        def current_device(self) -> str:
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return []

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> None:
            return None

    return PlatformCPU


def accelerator_present() -> bool:
    """Whether this host has an accelerator, by verl's own host-level detection.

    verl.plugin.platform.platform_manager._detect_platform_name probes each registered platform with
    ``is_platform_available(use_smi_check=True)``, which also sees GPUs from CPU-only Ray actors (where
    ``torch.cuda.is_available()`` is False); the same probe is used here, before the CPU platform exists.
    """
    from verl.plugin.platform import PlatformRegistry

    require(hasattr(PlatformRegistry, "registered_names"), "PlatformRegistry.registered_names", "it exists")
    if torch.cuda.is_available():
        return True
    for name in PlatformRegistry.registered_names():
        if name == "cpu":
            continue
        try:
            if PlatformRegistry.get(name)().is_platform_available(use_smi_check=True):
                return True
        except Exception:  # a platform whose runtime is absent (e.g. torch_npu) is simply not present
            continue
    return False


def use_cpu_platform() -> None:
    """Register the CPU platform through verl.plugin.platform.PlatformRegistry.register and select it.

    The platform is selected with ``VERL_PLATFORM=cpu`` (verl's documented override, inherited by Ray
    workers) and, if verl already cached another platform in this process, with ``set_platform``.
    """
    from verl.plugin.platform import PlatformRegistry, get_platform, set_platform

    require(callable(getattr(PlatformRegistry, "register", None)), "PlatformRegistry.register", "it exists")
    require(
        "VERL_PLATFORM" in source_of(sys.modules["verl.plugin.platform.platform_manager"]._detect_platform_name),
        "verl.plugin.platform.platform_manager._detect_platform_name",
        "it honours VERL_PLATFORM",
    )
    chosen = os.environ.get("VERL_PLATFORM", "").strip().lower()
    if chosen not in ("", "cpu"):
        raise RuntimeError(f"BOT_GRPO_CPU asks for the CPU mode but VERL_PLATFORM={chosen!r}; unset one of them")
    if PlatformRegistry.get("cpu") is None:
        PlatformRegistry.register(platform="cpu")(cpu_platform_class())
    os.environ["VERL_PLATFORM"] = "cpu"
    if get_platform().device_name != "cpu":
        set_platform(PlatformRegistry.get("cpu")())


# --- 2. process group backend ----------------------------------------------------------------------


def set_default(function: Any, parameter: str, value: Any, verl_default: Any, verl_function: str) -> None:
    """Change the default of ``parameter`` of ``function`` from ``verl_default`` to ``value``, in place.

    Changing the function object (not a module attribute) reaches every module that imported it by name.
    """
    found = inspect.signature(function).parameters.get(parameter)
    require(
        found is not None and found.default in (verl_default, value) and function.__kwdefaults__ is None,
        verl_function,
        f"it takes {parameter}={verl_default!r} as a positional-or-keyword parameter",
    )
    names = list(inspect.signature(function).parameters)
    defaults = dict(zip(names[len(names) - len(function.__defaults__) :], function.__defaults__, strict=True))
    defaults[parameter] = value
    function.__defaults__ = tuple(defaults.values())


def use_gloo_backend() -> None:
    """Make verl.utils.distributed.initialize_global_process_group_ray default to ``backend="gloo"``.

    Without a ``backend`` argument it builds ``f"cpu:gloo,{device}:{backend}"``, which on CPU becomes
    ``cpu:gloo,cpu:gloo`` and torch rejects ("Duplicate device type cpu").
    """
    from verl.utils import distributed

    function = distributed.initialize_global_process_group_ray
    name = "verl.utils.distributed.initialize_global_process_group_ray"
    require("backend or" in source_of(function), name, "it falls back to 'cpu:gloo,{device}:{backend}'")
    set_default(function, "backend", "gloo", None, name)


# --- 3. replay-buffer polling ----------------------------------------------------------------------

REPLAY_BUFFER_POLL_S = 0.05
"""Seconds between the V1 trainer's checks for finished rollouts (verl polls every 2 s)."""


def poll_replay_buffer_often() -> None:
    """Make verl.trainer.ppo.v1.replay_buffer.ReplayBuffer poll every :data:`REPLAY_BUFFER_POLL_S`.

    The V1 trainer waits for a step's rollouts by sleeping ``poll_interval`` (2 s, not configurable)
    between checks, so on a small CPU run each step's generation takes a multiple of 2 s whatever the
    rollout needs: most of the step time.
    """
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    name = "verl.trainer.ppo.v1.replay_buffer.ReplayBuffer.__init__"
    require("time.sleep(self.poll_interval)" in source_of(ReplayBuffer), name, "it sleeps poll_interval per check")
    set_default(ReplayBuffer.__init__, "poll_interval", REPLAY_BUFFER_POLL_S, 2.0, name)


# --- 4. FSDP engines -------------------------------------------------------------------------------


def select_fsdp_engines() -> None:
    """Let verl.workers.engine.base.EngineRegistry.get_engine_cls find the FSDP engines on CPU.

    verl registers FSDPEngineWithLMHead / FSDPEngineWithValueHead for devices ``cuda`` and ``npu`` only;
    its own ``VERL_ENGINE_DEVICE`` override makes the lookup use the ``cuda`` entries, whose code is
    device-agnostic once the platform says ``cpu``. A value the user set is kept.
    """
    from verl.workers.engine.base import EngineRegistry

    require(
        "VERL_ENGINE_DEVICE" in source_of(EngineRegistry.get_engine_cls),
        "verl.workers.engine.base.EngineRegistry.get_engine_cls",
        "it honours VERL_ENGINE_DEVICE",
    )
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")


def unpinned_cpu_offload_policy(pin_memory: bool = True):
    """A torch FSDP2 ``CPUOffloadPolicy`` that never pins memory (pinning needs an accelerator); verl's
    ``pin_memory`` argument is accepted and ignored."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    return CPUOffloadPolicy(pin_memory=False)


def unpin_fsdp2_offload(module: ModuleType) -> None:
    """Work around FSDPEngine._build_fsdp_module (verl.workers.engine.fsdp.transformer_impl).

    For FSDP2 forward-only engines (the reference policy) it forces ``CPUOffloadPolicy(pin_memory=True)``,
    and pinned memory needs an accelerator. The module's ``CPUOffloadPolicy`` name is replaced by
    :func:`unpinned_cpu_offload_policy`; parameters stay on CPU either way.
    """
    build = getattr(getattr(module, "FSDPEngine", None), "_build_fsdp_module", None)
    require(
        getattr(module, "CPUOffloadPolicy", None) is not None
        and "CPUOffloadPolicy(pin_memory=True)" in source_of(build),
        "verl.workers.engine.fsdp.transformer_impl.FSDPEngine._build_fsdp_module",
        "it builds CPUOffloadPolicy(pin_memory=True) from the module-level name CPUOffloadPolicy",
    )
    module.CPUOffloadPolicy = unpinned_cpu_offload_policy


# --- 5. rollout ------------------------------------------------------------------------------------


def register_rollout() -> None:
    """Register the ``transformers`` rollout as ``rollout.name=hf_cpu``.

    The replica (server side) goes through verl's public verl.workers.rollout.replica.RolloutReplicaRegistry;
    the in-worker adapter has no public registry: verl.workers.rollout.base.get_rollout_class reads the
    module-level dict ``_ROLLOUT_REGISTRY`` keyed by ``(name, mode)``, so the entry is added there.
    """
    from verl.workers.rollout import base, replica

    require(
        isinstance(getattr(base, "_ROLLOUT_REGISTRY", None), dict)
        and "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in source_of(base.get_rollout_class),
        "verl.workers.rollout.base.get_rollout_class",
        "it resolves adapters from _ROLLOUT_REGISTRY[(name, mode)]",
    )
    require(
        callable(getattr(replica.RolloutReplicaRegistry, "register", None)),
        "verl.workers.rollout.replica.RolloutReplicaRegistry.register",
        "it exists",
    )
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "bot_grpo_verl.cpu.rollout.HFServerAdapter"
    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)


def _load_replica() -> type:
    from bot_grpo_verl.cpu.rollout import HFRolloutReplica

    return HFRolloutReplica


def apply_all() -> None:
    """Apply every workaround (idempotent)."""
    use_cpu_platform()
    use_gloo_backend()
    poll_replay_buffer_often()
    select_fsdp_engines()
    unpin_fsdp2_offload(importlib.import_module(FSDP_ENGINE_MODULE))
    register_rollout()
