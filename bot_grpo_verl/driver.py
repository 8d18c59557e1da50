"""What the plugin does in verl's driver process (``python -m verl.trainer.main_ppo``): a Hydra callback.

verl's driver loads the plugin (``import verl``) but runs none of it: a run selects the plugin in its Ray workers
(:mod:`bot_grpo_verl.selection`). The presets name :class:`CheckRayNodes` in ``hydra.callbacks``, so that Hydra
calls it in the driver once the run's config is composed, before verl's ``main`` starts Ray; it makes verl's
``run_ppo`` check that every node of the Ray cluster has the plugin before the trainer is placed on one of them
(:mod:`bot_grpo_verl.verl_compat.ray_nodes`).
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback

MAIN_PPO = "verl.trainer.main_ppo"


class CheckRayNodes(Callback):
    """Hydra callback (``hydra.callbacks.bot_grpo_ray_nodes._target_`` in the presets)."""

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        """Adapt the module of Hydra's task function when it is verl's ``main_ppo`` (``__main__`` under
        ``python -m``); another app's is left alone (the trainer still checks the nodes before placing workers)."""
        from bot_grpo_verl.verl_compat.ray_nodes import adapt_run_ppo

        module = sys.modules.get(getattr(kwargs.get("task_function"), "__module__", ""))
        if getattr(getattr(module, "__spec__", None), "name", None) == MAIN_PPO:
            adapt_run_ppo(module)
