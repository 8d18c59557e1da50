"""The ``verl.plugins`` entry point: registers BoT-GRPO with verl on ``import verl``.

verl swallows exceptions raised while loading plugins (a debug log only), so a failure here is
printed to stderr in every process that imports verl and re-raised; ``python -m bot_grpo_verl check``
imports this module again to show the whole traceback.
"""

from __future__ import annotations

import sys

from bot_grpo_verl import ESTIMATOR_NAME


def register() -> None:
    """Register the ``bot_grpo`` and ``pure`` estimators, the same-information baselines
    (:mod:`bot_grpo_verl.baselines`) and the ``bot_token`` reward manager, and adapt verl's internals."""
    from bot_grpo_verl.cpu import activate as activate_cpu_mode
    from bot_grpo_verl.verl_compat import apply_adapters, check_verl_version

    check_verl_version()
    activate_cpu_mode()  # first: verl's engine modules cache the device name when imported
    from verl.trainer.ppo.core_algos import register_adv_est

    import bot_grpo_verl.reward_manager  # noqa: F401  (registers the bot_token reward manager)
    from bot_grpo_verl.baselines import ESTIMATORS as BASELINES
    from bot_grpo_verl.estimator import compute_bot_grpo_advantage
    from bot_grpo_verl.pure import compute_pure_advantage

    # verl's registry accepts the same function again and refuses a different one under our names.
    register_adv_est(ESTIMATOR_NAME)(compute_bot_grpo_advantage)
    register_adv_est("pure")(compute_pure_advantage)
    for name, estimator in BASELINES.items():
        register_adv_est(name)(estimator)
    apply_adapters()


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
