"""Reward extra info and the learning signal in the training metrics of the runs that use the plugin.

verl 0.9.1 logs a reward function's extra info (``reward_extra_info``) in validation only, and has no
extension point for training metrics. The wrapper of ``PPOTrainer._compute_metrics``
(``verl/trainer/ppo/v1/trainer_base.py``) adds the mean of each scalar key as
``reward_extra/<key>/mean`` and the step's learning signal (:mod:`bot_grpo_verl.learning_signal`: silent groups
and tokens, the advantages' spread; a warning after a streak of steps without signal), reading the samples'
``extra_fields``, ``advantages`` and ``response_mask`` from TransferQueue once per step.

It does so only for a run that selects the plugin (one of its estimators, its reward manager or a subclass,
or its CPU-mode rollout), decided from the trainer's config at its first step; any other run keeps verl's metrics and
TransferQueue reads exactly.
"""

from __future__ import annotations

import inspect
import logging
import numbers
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from bot_grpo_verl.learning_signal import NoSignalWatch, learning_signal_metrics
from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once

logger = logging.getLogger(__name__)
METRIC_PREFIX = "reward_extra/"

RunSelector = Callable[[Any, type], bool]
"""``selects(config, reward_manager_cls)``: whether a run with the trainer's ``config`` and the reward manager
class verl resolved from ``reward.reward_manager`` uses the plugin."""


def reward_extra_metrics(extra_fields: list) -> dict[str, float]:
    """``reward_extra/<key>/mean`` over the samples' scalar ``reward_extra_info`` values.

    Args:
        extra_fields: one agent-loop ``extra_fields`` dict (or None) per sample.
    """
    values: dict[str, list[float]] = {}
    for extra in extra_fields:
        info = extra.get("reward_extra_info", {}) if isinstance(extra, dict) else {}
        for key, value in info.items():
            if isinstance(value, numbers.Real):
                values.setdefault(key, []).append(float(value))
    return {f"{METRIC_PREFIX}{key}/mean": sum(found) / len(found) for key, found in values.items()}


def sample_keys(batch) -> list[str]:
    """The TransferQueue keys of a step's real samples: verl's synthetic padding rows (tag ``is_padding``)
    copy the first sample's extra fields, so they are left out as verl leaves them out of its metrics."""
    return [key for key, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding", False)]


def run_selection(selects: RunSelector) -> Callable[[Any], bool]:
    """``selected(trainer)``: whether ``selects`` picks the trainer's run, decided once per trainer from its
    config and the reward manager class its reward loop resolved."""
    decisions: WeakKeyDictionary = WeakKeyDictionary()

    def selected(trainer) -> bool:
        if trainer not in decisions:
            decisions[trainer] = selects(trainer.config, trainer.reward_loop_manager.reward_manager_cls)
        return decisions[trainer]

    return selected


def adapt_training_metrics(selects: RunSelector) -> None:
    """Make the V1 trainer log ``reward_extra/<key>/mean`` on the training steps of the runs ``selects`` picks."""
    import transfer_queue as tq
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    require(
        list(inspect.signature(PPOTrainer._compute_metrics).parameters)[:3] == ["self", "batch", "metrics"]
        and hasattr(tq, "kv_batch_get"),
        "verl.trainer.ppo.v1.trainer_base.PPOTrainer._compute_metrics",
        "it takes (self, batch, metrics, ...) of a TransferQueue batch read with transfer_queue.kv_batch_get",
    )
    require(
        "self.reward_loop_manager = RewardLoopManager(" in source_of(PPOTrainer)
        and "self.reward_manager_cls = resolve_reward_manager_cls(config)" in source_of(RewardLoopManager.__init__),
        "verl.experimental.reward_loop.reward_loop.RewardLoopManager",
        "the trainer's reward_loop_manager holds the run's reward manager class as reward_manager_cls",
    )
    selected = run_selection(selects)
    watches: WeakKeyDictionary = WeakKeyDictionary()

    def make_wrapper(compute_metrics):
        def compute_metrics_with_reward_extra(self, batch, metrics, *args, **kwargs):
            result = compute_metrics(self, batch, metrics, *args, **kwargs)
            if selected(self):
                keys = sample_keys(batch)
                fields = ["extra_fields", "advantages", "response_mask"]
                data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
                metrics.update(reward_extra_metrics(list(data["extra_fields"])))
                advantages, mask = (data[name].to_padded_tensor(0) for name in ("advantages", "response_mask"))
                signal = learning_signal_metrics(advantages, mask, [key.rsplit("_", 2)[0] for key in keys])
                metrics.update(signal)
                warning = watches.setdefault(self, NoSignalWatch()).update(signal)
                if warning is not None:
                    logger.warning(warning)
            return result

        return compute_metrics_with_reward_extra

    wrap_once(PPOTrainer, "_compute_metrics", make_wrapper)
