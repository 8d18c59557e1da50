"""What the plugin does in verl's driver process (``python -m verl.trainer.main_ppo``), before Ray starts.

verl's driver loads the plugin (``import verl``) but runs none of it: a run selects the plugin in its Ray workers
(:mod:`bot_grpo_verl.selection`). Once hydra has composed the run's config, :func:`adapt_main_ppo` makes verl's
``run_ppo`` first check the configuration (:func:`check_run`: every option of the plugin, a shipped reward's options
and data rows, :mod:`bot_grpo_verl.launch_checks`), so that a mistake ends the run within seconds of its launch,
before Ray starts; and, for a run that names the plugin, check that every node of the Ray cluster has the plugin
before the trainer is placed on one of them (:mod:`bot_grpo_verl.verl_compat.ray_nodes`).

Two hooks of hydra's call it, both in the driver, both before verl's ``main`` runs: the plugin's search-path plugin
(``hydra_plugins/bot_grpo_verl``), which hydra runs in every app while it builds the config search path (a run that
names the plugin without a preset: ``algorithm.adv_estimator=bot_grpo``), and :class:`CheckRayNodes`, the presets'
hydra callback. Another hydra app is left alone; so is a ``main_ppo`` that no longer looks as expected (the guard of
:mod:`bot_grpo_verl.verl_compat` raises naming it).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from hydra.experimental.callback import Callback

MAIN_PPO = "verl.trainer.main_ppo"


def check_run(config) -> bool:
    """Raise :class:`~bot_grpo_verl.launch_checks.LaunchError` for a configuration the run cannot train with;
    return whether the run uses the plugin (its nodes are then checked once Ray is up)."""
    from bot_grpo_verl.launch_checks import check_launch, uses_plugin

    check_launch(config)
    return uses_plugin(config)


def adapt_main_ppo(module: ModuleType | None) -> None:
    """Adapt ``run_ppo`` of ``module`` when it is verl's ``main_ppo`` (``__main__`` under ``python -m``); idempotent."""
    if getattr(getattr(module, "__spec__", None), "name", None) != MAIN_PPO:
        return
    from bot_grpo_verl.verl_compat.ray_nodes import adapt_run_ppo

    adapt_run_ppo(module, check_run)


class CheckRayNodes(Callback):
    """Hydra callback (``hydra.callbacks.bot_grpo_ray_nodes._target_`` in the presets)."""

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        """Adapt the module of Hydra's task function when it is verl's ``main_ppo``."""
        adapt_main_ppo(sys.modules.get(getattr(kwargs.get("task_function"), "__module__", "")))
