"""Every coupling of the plugin to verl internals, in one module, behind a check of verl's version.

Public extension points carry the estimator (``register_adv_est``) and the reward manager (verl's
reward-manager registry, ``RewardManagerBase.assemble_rm_scores``). Two places of verl 0.9.1 have
none, and get a small wrapper here, applied once per process by :func:`apply_adapters`:

- ``AgentLoopOutput.as_dict`` (``verl/experimental/agent_loop/agent_loop.py``) writes a sample's reward
  on its last response token; the wrapper writes the token rewards of a ``TokenRewardScore`` instead
  (streaming reward path of the V1 trainer, training and validation).
- ``PPOTrainer._compute_metrics`` (``verl/trainer/ppo/v1/trainer_base.py``) logs no reward extra info on
  training steps; the wrapper adds the mean of each scalar key as ``reward_extra/<key>/mean``.

Each wrapper checks that what it relies on is still there and raises :class:`VerlInternalsChanged`
naming the verl function otherwise.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet

SUPPORTED_VERL = SpecifierSet(">=0.9.1,<0.10")
METRIC_PREFIX = "reward_extra/"


class VerlVersionError(RuntimeError):
    """The installed verl is not a version this plugin was tested against."""


class VerlInternalsChanged(RuntimeError):
    """A verl internal that an adapter wraps no longer looks as the adapter expects."""


def installed_verl_version() -> str | None:
    try:
        return version("verl")
    except PackageNotFoundError:
        return None


def check_verl_version() -> str:
    """Return the installed verl version, or raise :class:`VerlVersionError` naming what is supported."""
    found = installed_verl_version()
    if found is None:
        raise VerlVersionError(f"verl is not installed; bot-grpo-verl needs verl{SUPPORTED_VERL}")
    if found not in SUPPORTED_VERL:
        raise VerlVersionError(
            f"bot-grpo-verl supports verl{SUPPORTED_VERL} but verl {found} is installed; "
            f"install a supported verl or a bot-grpo-verl release made for verl {found}"
        )
    return found


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise VerlInternalsChanged(
            f"verl {installed_verl_version()} changed {what}; bot-grpo-verl cannot deliver token rewards "
            f"through it. Install verl{SUPPORTED_VERL} or an updated bot-grpo-verl."
        )


def _wrap_once(owner: type, name: str, make_wrapper) -> None:
    original = getattr(owner, name)
    if getattr(original, "__bot_grpo_adapter__", False):
        return
    wrapper = functools.wraps(original)(make_wrapper(original))
    wrapper.__bot_grpo_adapter__ = True
    setattr(owner, name, wrapper)


def adapt_agent_loop_output() -> None:
    """Make ``AgentLoopOutput.as_dict`` write a ``TokenRewardScore``'s token rewards as ``rm_scores``."""
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    fields = AgentLoopOutput.model_fields
    _require(
        {"reward_score", "response_ids", "response_mask"} <= set(fields) and hasattr(AgentLoopOutput, "as_dict"),
        "verl.experimental.agent_loop.agent_loop.AgentLoopOutput (fields reward_score/response_ids, as_dict)",
    )

    def make_wrapper(as_dict):
        def dense_as_dict(self):
            output = as_dict(self)
            token_rewards = getattr(self.reward_score, "token_rewards", None)
            # Earlier outputs of a multi-output session share the final output's score: they keep
            # verl's last-token reward, as with any other reward manager.
            if token_rewards is not None and len(token_rewards) == len(self.response_ids):
                output["rm_scores"] = torch.tensor(token_rewards, dtype=torch.float32)
            return output

        return dense_as_dict

    _wrap_once(AgentLoopOutput, "as_dict", make_wrapper)


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


def adapt_training_metrics() -> None:
    """Make the V1 trainer log the mean of every scalar reward-extra-info key on training steps."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    parameters = list(inspect.signature(PPOTrainer._compute_metrics).parameters)
    _require(
        parameters[:3] == ["self", "batch", "metrics"] and hasattr(tq, "kv_batch_get"),
        "verl.trainer.ppo.v1.trainer_base.PPOTrainer._compute_metrics(self, batch, metrics, ...)",
    )

    def make_wrapper(compute_metrics):
        def compute_metrics_with_reward_extra(self, batch, metrics, *args, **kwargs):
            result = compute_metrics(self, batch, metrics, *args, **kwargs)
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
            metrics.update(reward_extra_metrics(list(data["extra_fields"])))
            return result

        return compute_metrics_with_reward_extra

    _wrap_once(PPOTrainer, "_compute_metrics", make_wrapper)


def apply_adapters() -> None:
    """Apply every adapter (idempotent); called by the plugin in each process that imports verl."""
    check_verl_version()
    adapt_agent_loop_output()
    adapt_training_metrics()
