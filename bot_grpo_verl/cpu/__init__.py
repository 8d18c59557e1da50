"""CPU mode: verl's real trainer (FSDP2 over gloo, a ``transformers`` rollout) on a host without accelerator.

The run chooses it, not the host: ``BOT_GRPO_CPU=1`` in a process's environment switches it on there. The
``cpu`` hydra preset (``+preset=[bot_grpo,cpu]``) passes that variable to every Ray worker of the run through
``ray_kwargs.ray_init.runtime_env.env_vars``; a run that starts Ray itself before verl does (so that verl
does not pass the preset's ``runtime_env``) exports ``BOT_GRPO_CPU=1`` before starting Ray.

:func:`activate` runs from the ``verl.plugins`` entry point, i.e. in every process that imports verl: when
the variable is on, it selects the CPU platform (:mod:`bot_grpo_verl.verl_compat.cpu_platform`) and applies
the workarounds of :mod:`bot_grpo_verl.verl_compat.cpu_patches`, once per process, before verl's engine
modules cache the device name. The plugin registers the ``hf_cpu`` rollout (:mod:`bot_grpo_verl.cpu.rollout`)
in every process (a name only); it refuses to run where the CPU mode is off (:func:`require_active`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_VAR = "BOT_GRPO_CPU"
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")

_active = False


def requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the run asks for the CPU mode in this process: ``BOT_GRPO_CPU`` is on (unset is off).

    ``environ`` defaults to ``os.environ`` as it is at the call: libraries may rebind ``os.environ``."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV_VAR, "").strip().lower()
    if value not in _ON + _OFF:
        raise ValueError(f"{ENV_VAR}={environ[ENV_VAR]!r} is not one of {_ON + _OFF[1:]} (or unset: off)")
    return value in _ON


def activate() -> bool:
    """Apply the CPU mode in this process if :func:`requested`; return whether it is active (idempotent)."""
    global _active
    if not _active and requested():
        from bot_grpo_verl.verl_compat import cpu_patches

        cpu_patches.apply_all()
        _active = True
    return _active


def is_active() -> bool:
    """Whether :func:`activate` turned the CPU mode on in this process."""
    return _active


def require_active() -> None:
    """Raise unless the CPU mode is on in this process: the ``hf_cpu`` rollout runs in the CPU mode only."""
    if not _active:
        raise RuntimeError(
            f"bot-grpo-verl: rollout.name=hf_cpu needs the CPU mode, which is off in this process (pid {os.getpid()}): "
            f"{ENV_VAR}=1 was not in its environment. The 'cpu' preset (+preset=[bot_grpo,cpu]) passes it to every "
            "Ray worker through ray_kwargs.ray_init.runtime_env.env_vars, which verl applies only when it starts "
            f"Ray itself; if Ray was started before (ray start, ray.init, a cluster), export {ENV_VAR}=1 before "
            "starting it, or use the preset with a Ray that verl starts."
        )
