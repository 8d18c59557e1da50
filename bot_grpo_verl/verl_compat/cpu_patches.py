"""The workarounds of verl internals that the CPU mode needs, besides its platform (:mod:`.cpu_platform`).

verl 0.9.1 runs its trainer on CUDA/NPU only. Each function below makes one piece of it work on a
CPU-only host, prefers verl's public extension points (rollout registry, env vars), names the verl
function it works around, and first checks (:func:`~bot_grpo_verl.verl_compat.guard.require`) that verl
still has the shape it relies on. :func:`bot_grpo_verl.cpu.activate` applies them once per process, only
in the CPU mode; the plugin registers the rollout's name (:func:`register_rollout`) in every process, and the
rollout sets its replica's server through :func:`set_replica_server`. ``tests/test_cpu_patches.py`` checks
each against the installed verl.
"""

from __future__ import annotations

import importlib
import inspect
import os
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bot_grpo_verl.verl_compat.cpu_platform import use_cpu_platform
from bot_grpo_verl.verl_compat.guard import require, source_of
from bot_grpo_verl.verl_compat.validation_metrics import vectorise_validation_bootstrap

ROLLOUT_NAME = "hf_cpu"
"""``actor_rollout_ref.rollout.name`` under which the CPU mode's ``transformers`` rollout is registered."""

FSDP_ENGINE_MODULE = "verl.workers.engine.fsdp.transformer_impl"


# --- 1. process group backend ----------------------------------------------------------------------


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


# --- 2. replay-buffer polling ----------------------------------------------------------------------

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


# --- 3. FSDP engines -------------------------------------------------------------------------------


def import_engines_quietly() -> None:
    """Import verl.workers.engine without its five UserWarnings about optional engines (torchtitan, veomni,
    automodel, mindspeed, megatron) that a CPU host does not have: they were printed by every process of a run."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"verl\.workers\.engine$")
        importlib.import_module("verl.workers.engine")


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


# --- 4. rollout ------------------------------------------------------------------------------------


def register_rollout(server_adapter: str, load_replica: Callable[[], type]) -> None:
    """Register a rollout as ``rollout.name=hf_cpu``: ``server_adapter`` the dotted path of its in-worker
    ``BaseRollout``, ``load_replica`` returns its ``RolloutReplica`` class when verl first asks for it.

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
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = server_adapter
    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, load_replica)


def set_replica_server(replica: Any, server: Any, address: str) -> None:
    """Make ``server`` (a Ray actor handle) and ``address`` the server of ``replica``, a
    verl.workers.rollout.replica.RolloutReplica, as its ``launch_servers`` must.

    verl's replicas expose their server through the read-only properties ``server_handle`` and
    ``server_address``, which return the private attributes ``_server_handle`` and ``_server_address``;
    verl has no setter.
    """
    from verl.workers.rollout.replica import RolloutReplica

    require(
        "return self._server_handle" in source_of(RolloutReplica.server_handle.fget)
        and "return self._server_address" in source_of(RolloutReplica.server_address.fget),
        "verl.workers.rollout.replica.RolloutReplica.server_handle/server_address",
        "they return the attributes _server_handle and _server_address",
    )
    replica._server_handle = server
    replica._server_address = address


def apply_all() -> None:
    """Select the CPU platform, apply every workaround and make verl's validation metrics cheap
    (:mod:`.validation_metrics`: same numbers) (idempotent)."""
    use_cpu_platform()
    use_gloo_backend()
    import_engines_quietly()  # after the platform (the engines cache the device name), before anything imports them
    poll_replay_buffer_often()
    select_fsdp_engines()
    unpin_fsdp2_offload(importlib.import_module(FSDP_ENGINE_MODULE))
    vectorise_validation_bootstrap()
