"""The CPU platform: verl's device layer on a host without accelerator.

verl 0.9.1 selects a platform (device, collective backend, device module) through its public
``verl.plugin.platform.PlatformRegistry``; it knows CUDA and NPU only. :func:`use_cpu_platform` registers
and selects a CPU platform (``device_name="cpu"``, gloo) when a run asks for the CPU mode
(:mod:`bot_grpo_verl.cpu`).
"""

from __future__ import annotations

import os
import platform as host_platform
import resource
import sys
from contextlib import contextmanager
from typing import Any

import psutil
import torch

from bot_grpo_verl.verl_compat.guard import require, source_of


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


def use_cpu_platform() -> None:
    """Register the CPU platform through verl.plugin.platform.PlatformRegistry.register and select it.

    The platform is selected with ``VERL_PLATFORM=cpu`` (verl's documented override, inherited by Ray
    workers) and, if verl already cached another platform in this process, with ``set_platform``.
    """
    from verl.plugin.platform import PlatformRegistry, get_platform, set_platform

    require(
        callable(getattr(PlatformRegistry, "register", None)),
        "verl.plugin.platform.PlatformRegistry.register",
        "it exists",
    )
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
