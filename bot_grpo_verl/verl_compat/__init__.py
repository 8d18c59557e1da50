"""Every coupling of the plugin to verl internals, one module per seam, behind one guard.

The estimators and the reward manager use verl's public extension points (``register_adv_est``, the
reward-manager registry, ``RewardManagerBase.assemble_rm_scores``). Where verl 0.9.1 has none, a seam
here touches its internals, after checking with :func:`~.guard.require` that they still look as expected:

- :mod:`.guard`: the supported verl versions, the one exception (:class:`UnsupportedVerl`), the checks;
- :mod:`.agent_loop`: token rewards into ``rm_scores`` (``AgentLoopOutput.as_dict``), and the response mask
  to the reward worker (``AgentLoopWorker._compute_score``), for the runs that select the plugin only;
- :mod:`.metrics`: reward extra info in the training metrics (``PPOTrainer._compute_metrics``), for
  the runs that select the plugin only;
- :mod:`.sessions`: multi-output agent sessions counted once by the plugin's estimators
  (``compute_advantage_for_multi_trajectories``), for the runs with a plugin estimator only;
- :mod:`.token_dump`: token ids, rewards and advantages beside verl's rollout dump
  (``PPOTrainer._log_rollout_data``), for the runs that select the plugin only;
- :mod:`.trainer_checks`: the checks of :mod:`bot_grpo_verl.run_checks` at start-up (``PPOTrainer.init``) and
  on every sampled batch (the trainer's replay buffer), for the runs that select the plugin only; before
  ``init``, :mod:`.ray_nodes`: the plugin registered on every node of the Ray cluster;
- :mod:`.ray_nodes` also in verl's driver (``main_ppo.run_ppo``): the run's configuration checked before Ray starts,
  the nodes before the trainer is placed; applied by :mod:`bot_grpo_verl.driver` (from hydra's search-path plugin and
  the presets' callback), not by :func:`apply_adapters`;
- :mod:`.cpu_platform` and :mod:`.cpu_patches`: the CPU mode (:mod:`bot_grpo_verl.cpu`) only, which also
  applies :mod:`.validation_metrics` (verl's validation bootstrap vectorised: same numbers, less time).

:func:`apply_adapters` applies the first five once per process, when a run first selects the plugin there
(:mod:`bot_grpo_verl.selection`); the CPU mode's are applied where the run asks for it (:mod:`bot_grpo_verl.cpu`).
Importing this package does not import verl. ``docs/verl-seams.md`` lists every seam with the verl internal it
relies on, the release it was checked against and the smallest verl change that would retire it, and links the
patches against verl (``patches/verl-0.9.1/``) that retire the small ones.
"""

from __future__ import annotations

from collections.abc import Collection

from bot_grpo_verl.verl_compat.agent_loop import adapt_agent_loop_output, adapt_reward_inputs
from bot_grpo_verl.verl_compat.guard import SUPPORTED_VERL, UnsupportedVerl, check_verl_version, installed_verl_version
from bot_grpo_verl.verl_compat.metrics import RunSelector, adapt_training_metrics, reward_extra_metrics
from bot_grpo_verl.verl_compat.sessions import adapt_multi_output_sessions
from bot_grpo_verl.verl_compat.token_dump import adapt_rollout_dump
from bot_grpo_verl.verl_compat.trainer_checks import RunChecks, adapt_trainer_checks

__all__ = [
    "SUPPORTED_VERL",
    "RunChecks",
    "RunSelector",
    "UnsupportedVerl",
    "apply_adapters",
    "check_verl_version",
    "installed_verl_version",
    "reward_extra_metrics",
]


def apply_adapters(selects: RunSelector, estimator_names: Collection[str], checks: RunChecks) -> None:
    """Check verl's version and apply the adapters of the reward path (idempotent).

    Args:
        selects: whether a run uses the plugin, from its estimator name and reward manager class; the
            training-metrics, rollout-dump and trainer-checks adapters act on those runs only.
        estimator_names: the plugin's estimators, which the multi-output sessions adapter acts on.
        checks: what the trainer checks of such a run, at start-up and on every batch.
    """
    check_verl_version()
    adapt_agent_loop_output()
    adapt_reward_inputs(selects)
    adapt_multi_output_sessions(estimator_names)
    adapt_training_metrics(selects)
    adapt_rollout_dump(selects)
    adapt_trainer_checks(selects, checks)
