"""The plugin's checks of a run on verl's driver: at start-up, and on every batch the trainer samples.

verl 0.9.1 has no hook between a trainer's set-up and its first rollout, nor between its replay buffer and the
steps that use a batch. The wrapper of ``PPOTrainer.init`` (``verl/trainer/ppo/v1/trainer_base.py``), installed in
a trainer process that selected the plugin, first checks that every node of the Ray cluster has the plugin
(:mod:`.ray_nodes`: before ``init`` places any worker); then, for a run that selects the plugin only, it runs the
start-up check once the trainer is set up (before any rollout), then wraps its replay buffer's ``sample``, which
hands the trainer its training and its validation batches: each batch's ``reward_extra_info`` is read from
TransferQueue once and given to the batch check, which may stop the run, or leave samples out (they are cleared
from TransferQueue, as verl clears a batch it is done with).
The rules are :mod:`bot_grpo_verl.run_checks`; this module only knows where verl keeps things.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once
from bot_grpo_verl.verl_compat.metrics import RunSelector, run_selection
from bot_grpo_verl.verl_compat.ray_nodes import require_plugin_on_every_node

VERL_OUTCOME_ESTIMATORS = (
    "grpo",
    "grpo_vectorized",
    "grpo_passk",
    "gpg",
    "opo",
    "reinforce_plus_plus_baseline",
    "rloo",
    "rloo_vectorized",
)
"""verl's estimators that reduce each response's token rewards to their sum (one score per response)."""


@dataclass(frozen=True)
class BatchVerdict:
    """What a batch check decided: the positions of the samples to leave out, and metrics for the step's log."""

    left_out: tuple[int, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunChecks:
    """The checks a run that selects the plugin gets.

    Attributes:
        startup: ``startup(config, reward_manager_cls)``, once before the first rollout: logs what the run
            should know, raises when it cannot be what its user meant.
        batch: ``batch(config, reward_manager_cls, reward_infos, first)`` on every sampled batch, with each
            sample's ``reward_extra_info`` in batch order and whether it is the run's first batch; returns a
            :class:`BatchVerdict` or raises to stop the run.
    """

    startup: Callable[[Any, type], None]
    batch: Callable[[Any, type, list[dict], bool], BatchVerdict]


def reward_infos(extra_fields) -> list[dict]:
    """Each sample's ``reward_extra_info`` from its ``extra_fields`` as TransferQueue returns them ({} if none)."""
    found = []
    for extra in extra_fields:
        extra = getattr(extra, "data", extra)  # a NonTensorData wrapper on some TransferQueue backends
        info = extra.get("reward_extra_info") if isinstance(extra, dict) else None
        found.append(info if isinstance(info, dict) else {})
    return found


def without(batch, positions: tuple[int, ...]):
    """``batch`` (a ``KVBatchMeta``) without the samples at ``positions``."""
    left_out = set(positions)
    kept = [number for number in range(len(batch.keys)) if number not in left_out]
    return type(batch)(
        keys=[batch.keys[number] for number in kept],
        tags=[batch.tags[number] for number in kept],
        partition_id=batch.partition_id,
        fields=batch.fields,
        extra_info=batch.extra_info,
    )


def check_sampled_batches(replay_buffer, check: Callable[[list[dict], bool], BatchVerdict]) -> None:
    """Make ``replay_buffer.sample`` (this instance only) hand each batch to ``check`` before the trainer sees it."""
    import transfer_queue as tq

    sample = replay_buffer.sample
    first = True

    @functools.wraps(sample)
    def checked_sample(*args, **kwargs):
        nonlocal first
        batch, metrics = sample(*args, **kwargs)
        if not batch.keys:
            return batch, metrics
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        verdict = check(reward_infos(data["extra_fields"]), first)
        first = False
        if verdict.left_out:
            tq.kv_clear(keys=[batch.keys[number] for number in verdict.left_out], partition_id=batch.partition_id)
            batch = without(batch, verdict.left_out)
        return batch, {**metrics, **verdict.metrics}

    replay_buffer.sample = checked_sample


def adapt_trainer_checks(selects: RunSelector, checks: RunChecks) -> None:
    """Make the V1 trainer run ``checks`` on the runs ``selects`` picks (see the module docstring)."""
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    require(
        list(inspect.signature(PPOTrainer.init).parameters) == ["self"]
        and "self.replay_buffer = self._build_replay_buffer()" in source_of(PPOTrainer.__init__)
        and "self.reward_loop_manager = RewardLoopManager(" in source_of(PPOTrainer._setup),
        "verl.trainer.ppo.v1.trainer_base.PPOTrainer.init",
        "init() sets up the reward loop manager, after __init__ built the replay buffer",
    )
    sample_parameters = ["self", "global_steps", "partition_id", "batch_size"]
    require(
        list(inspect.signature(ReplayBuffer.sample).parameters) == sample_parameters
        and source_of(PPOTrainer).count("self.replay_buffer.sample(") == 2,
        "verl.trainer.ppo.v1.replay_buffer.ReplayBuffer.sample",
        "the trainer samples its training and validation batches with sample(global_steps, partition_id, batch_size)",
    )
    require(
        all(
            "scores = token_level_rewards.sum(dim=-1)" in source_of(core_algos.get_adv_estimator_fn(name))
            for name in VERL_OUTCOME_ESTIMATORS
        ),
        "verl.trainer.ppo.core_algos",
        f"the estimators {list(VERL_OUTCOME_ESTIMATORS)} score a response by the sum of its token rewards",
    )
    selected = run_selection(selects)

    def make_wrapper(init):
        def init_then_check(self):
            require_plugin_on_every_node()  # before init() places workers on the nodes
            result = init(self)
            if selected(self):
                config, manager_cls = self.config, self.reward_loop_manager.reward_manager_cls
                checks.startup(config, manager_cls)
                check_sampled_batches(self.replay_buffer, functools.partial(checks.batch, config, manager_cls))
            return result

        return init_then_check

    wrap_once(PPOTrainer, "init", make_wrapper)
