"""CPU mode: verl's real trainer (FSDP2 over gloo, a ``transformers`` rollout) on a host without accelerator.

:func:`activate` runs from the ``verl.plugins`` entry point, i.e. in every process that imports verl
(driver, Ray workers). It selects the CPU platform (:mod:`bot_grpo_verl.verl_compat.cpu_platform`),
applies the workarounds of :mod:`bot_grpo_verl.verl_compat.cpu_patches` and registers the rollout of
:mod:`bot_grpo_verl.cpu.rollout`, once per process, and only when

- ``BOT_GRPO_CPU`` is ``1`` (forced on), or
- ``BOT_GRPO_CPU`` is unset and the host has no accelerator by verl's own detection
  (and ``VERL_PLATFORM`` does not name one).

``BOT_GRPO_CPU=0`` forces it off. The first process to decide writes its decision to ``BOT_GRPO_CPU`` so
that the Ray workers it starts (which inherit its environment) decide the same way, even CPU-only actors
on a GPU host. The run's config comes from the ``cpu`` hydra preset (``+preset=[bot_grpo,cpu]``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_VAR = "BOT_GRPO_CPU"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

_active: bool | None = None

SERVER_ADAPTER = "bot_grpo_verl.cpu.rollout.HFServerAdapter"
"""Dotted path of the rollout's in-worker adapter, which verl imports when a worker builds its rollout."""


def load_replica() -> type:
    """The rollout's replica class, imported when verl first asks for it (not on every ``import verl``)."""
    from bot_grpo_verl.cpu.rollout import HFRolloutReplica

    return HFRolloutReplica


def requested(environ: Mapping[str, str] | None = None) -> bool | None:
    """The user's ``BOT_GRPO_CPU`` choice: True (on), False (off) or None (unset: detect).

    ``environ`` defaults to ``os.environ`` as it is at the call: libraries may rebind ``os.environ``."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return None
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"{ENV_VAR}={environ[ENV_VAR]!r} is not one of {_ON + _OFF} (or unset to auto-detect)")


def should_activate() -> bool:
    """Decide, without side effects, whether this process runs verl in CPU mode."""
    choice = requested()
    if choice is not None:
        return choice
    if os.environ.get("VERL_PLATFORM", "").strip().lower() not in ("", "cpu"):
        return False
    from bot_grpo_verl.verl_compat.cpu_platform import accelerator_present

    return not accelerator_present()


def activate() -> bool:
    """Apply the CPU mode in this process if :func:`should_activate`; return whether it is active.

    Idempotent: the decision and the patches are made once per process.
    """
    global _active
    if _active is None:
        decision = should_activate()
        os.environ[ENV_VAR] = "1" if decision else "0"
        if decision:
            from bot_grpo_verl.verl_compat import cpu_patches

            cpu_patches.apply_all(SERVER_ADAPTER, load_replica)
        _active = decision
    return _active


def is_active() -> bool:
    """Whether :func:`activate` turned the CPU mode on in this process."""
    return bool(_active)
