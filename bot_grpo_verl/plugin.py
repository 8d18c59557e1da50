"""The ``verl.plugins`` entry point: registers BoT-GRPO with verl on ``import verl``.

verl swallows exceptions raised while loading plugins (a debug log only), so a failure here is
printed to stderr in every process that imports verl and re-raised; ``python -m bot_grpo_verl check``
imports this module again to show the whole traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from bot_grpo_verl import ESTIMATOR_NAME


def estimators() -> dict[str, Callable]:
    """The advantage estimators the plugin registers, by ``algorithm.adv_estimator`` name: ``bot_grpo``,
    ``pure`` and the same-information baselines (:mod:`bot_grpo_verl.baselines`)."""
    from bot_grpo_verl.baselines import ESTIMATORS as BASELINES
    from bot_grpo_verl.estimator import compute_bot_grpo_advantage
    from bot_grpo_verl.pure import compute_pure_advantage

    return {ESTIMATOR_NAME: compute_bot_grpo_advantage, "pure": compute_pure_advantage, **BASELINES}


def selects_plugin(config, reward_manager_cls: type) -> bool:
    """Whether a verl run (its trainer ``config``) uses the plugin: one of its estimators, its reward manager or
    a subclass, or its CPU-mode rollout (``+preset=cpu``, whatever the estimator)."""
    from omegaconf import OmegaConf

    from bot_grpo_verl.reward_manager import BoTTokenRewardManager
    from bot_grpo_verl.verl_compat.cpu_patches import ROLLOUT_NAME

    return (
        config.algorithm.adv_estimator in estimators()
        or issubclass(reward_manager_cls, BoTTokenRewardManager)
        or OmegaConf.select(config, "actor_rollout_ref.rollout.name", throw_on_missing=False) == ROLLOUT_NAME
    )


def register() -> None:
    """Register the estimators and the ``bot_token`` reward manager, and adapt verl's internals."""
    from bot_grpo_verl.cpu import activate as activate_cpu_mode
    from bot_grpo_verl.verl_compat import apply_adapters, check_verl_version

    check_verl_version()
    activate_cpu_mode()  # first: verl's engine modules cache the device name when imported
    from verl.trainer.ppo.core_algos import register_adv_est

    import bot_grpo_verl.reward_manager  # noqa: F401  (registers the bot_token reward manager)
    from bot_grpo_verl.run_checks import RUN_CHECKS

    # verl's registry accepts the same function again and refuses a different one under our names.
    for name, estimator in estimators().items():
        register_adv_est(name)(estimator)
    apply_adapters(selects_plugin, frozenset(estimators()), RUN_CHECKS)


try:
    register()
except Exception as error:
    print(
        f"bot-grpo-verl: ERROR: could not register with verl ({type(error).__name__}: {error}). "
        "'algorithm.adv_estimator=bot_grpo' will be unknown to verl; run 'python -m bot_grpo_verl check'.",
        file=sys.stderr,
        flush=True,
    )
    raise
