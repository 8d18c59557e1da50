"""The ``verl.plugins`` entry point: registers BoT-GRPO's names with verl on ``import verl``, and nothing else.

Importing verl with the plugin installed registers the estimators, the ``bot_token`` reward manager and the
``hf_cpu`` rollout under their names; no verl function is wrapped or replaced and no environment variable is
written until a run selects the plugin in the process (:mod:`bot_grpo_verl.selection`): one of its
estimators is called, its reward manager is built or scores, or the run asks for the CPU mode
(``BOT_GRPO_CPU=1``, :mod:`bot_grpo_verl.cpu`).

verl swallows exceptions raised while loading plugins (a debug log only), so a failure here is
logged as an error (``bot_grpo_verl.plugin``) in every process that imports verl and re-raised;
``python -m bot_grpo_verl check`` imports this module again to show the whole traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot_grpo_verl import ESTIMATOR_NAME

logger = logging.getLogger(__name__)


def estimators() -> dict[str, Callable]:
    """The advantage estimators the plugin registers, by ``algorithm.adv_estimator`` name: ``bot_grpo``,
    ``pure`` and the same-information baselines (:mod:`bot_grpo_verl.estimators.baselines`)."""
    from bot_grpo_verl.estimators.baselines import ESTIMATORS as BASELINES
    from bot_grpo_verl.estimators.bot_grpo import compute_bot_grpo_advantage
    from bot_grpo_verl.estimators.pure import compute_pure_advantage

    return {ESTIMATOR_NAME: compute_bot_grpo_advantage, "pure": compute_pure_advantage, **BASELINES}


def selects_plugin(config, reward_manager_cls: type) -> bool:
    """Whether a verl run (its trainer ``config``) uses the plugin: one of its estimators, its reward manager or
    a subclass, or its CPU-mode rollout (``+preset=cpu``, whatever the estimator)."""
    from omegaconf import OmegaConf

    from bot_grpo_verl.reward.manager import BoTTokenRewardManager
    from bot_grpo_verl.verl_compat.cpu_patches import ROLLOUT_NAME

    return (
        config.algorithm.adv_estimator in estimators()
        or issubclass(reward_manager_cls, BoTTokenRewardManager)
        or OmegaConf.select(config, "actor_rollout_ref.rollout.name", throw_on_missing=False) == ROLLOUT_NAME
    )


SERVER_ADAPTER = "bot_grpo_verl.cpu.rollout.HFServerAdapter"
"""Dotted path of the ``hf_cpu`` rollout's in-worker adapter, which verl imports when a worker builds its rollout."""


def load_replica() -> type:
    """The ``hf_cpu`` rollout's replica class, imported when verl first asks for it (not on every ``import verl``),
    in the CPU mode only."""
    from bot_grpo_verl import cpu

    cpu.require_active()
    from bot_grpo_verl.cpu.rollout import HFRolloutReplica

    return HFRolloutReplica


def adapt_verl() -> None:
    """What a process does when a run first selects the plugin in it: adapt verl's reward path and trainer."""
    from bot_grpo_verl.run_checks import RUN_CHECKS
    from bot_grpo_verl.verl_compat import apply_adapters

    apply_adapters(selects_plugin, frozenset(estimators()), RUN_CHECKS)


def selected_late() -> None:
    """A run selected the plugin at its first advantage computation in this process (the trainer's): the
    trainer was set up without the plugin. Refuse a step whose multi-output sessions verl already routed past
    the plugin; otherwise warn once what the run went without."""
    from bot_grpo_verl.verl_compat.sessions import refuse_unadapted_multi_output_step

    refuse_unadapted_multi_output_step(LATE_SELECTION)
    logger.warning(f"bot-grpo-verl: {LATE_SELECTION}")


LATE_SELECTION = (
    "the plugin was selected at the run's first advantage computation, after verl had set up its trainer "
    "without the plugin's start-up checks (estimator, reward manager and placement that do not fit; reward "
    "failures per batch). Select it from the start: use a preset of the plugin (+preset=bot_grpo, "
    "+preset=pure, +preset=cpu), or set BOT_GRPO_SELECTED=1 in the run's Ray workers "
    "(ray_kwargs.ray_init.runtime_env.env_vars, or the environment of a Ray cluster started before verl)."
)


def register() -> None:
    """Register the estimators, the ``bot_token`` reward manager and the ``hf_cpu`` rollout by name; switch the
    CPU mode on, and select the plugin, where the run asked for it (``BOT_GRPO_CPU``, ``BOT_GRPO_SELECTED``)."""
    from bot_grpo_verl import cpu, selection
    from bot_grpo_verl.verl_compat import check_verl_version
    from bot_grpo_verl.verl_compat.cpu_patches import register_rollout

    check_verl_version()
    cpu.activate()  # first: verl's engine modules cache the device name when imported
    from verl.trainer.ppo.core_algos import register_adv_est

    import bot_grpo_verl.reward.manager  # noqa: F401  (registers the bot_token reward manager)

    # verl's registry accepts the same function again and refuses a different one under our names.
    for name, estimator in estimators().items():
        register_adv_est(name)(selection.selecting(estimator, late=selected_late))
    register_rollout(SERVER_ADAPTER, load_replica)
    selection.on_selection(adapt_verl)
    if cpu.is_active() or selection.requested():
        selection.select()


try:
    register()
except Exception as error:
    logger.error(
        f"bot-grpo-verl: could not register with verl ({type(error).__name__}: {error}). "
        "'algorithm.adv_estimator=bot_grpo' will be unknown to verl; run 'python -m bot_grpo_verl check'."
    )
    raise
