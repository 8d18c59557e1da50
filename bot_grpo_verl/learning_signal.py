"""Is there anything to learn from this step? Metrics of the advantages the update used, and a warning when a run
has had none for several steps (every group uniform, or token rewards that only restate the score).

:func:`learning_signal_metrics` is logged every step for runs that use the plugin (:mod:`bot_grpo_verl.verl_compat`
reads the step's advantages from TransferQueue); :class:`NoSignalWatch` turns a streak of steps without signal into
one warning that says why it may be.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

PREFIX = "learning_signal/"
NO_SIGNAL_STEPS = 3
"""Steps in a row without any nonzero advantage after which :class:`NoSignalWatch` warns."""


def learning_signal_metrics(advantages: torch.Tensor, response_mask: torch.Tensor, uids) -> dict[str, float]:
    """What the step's update had to learn from.

    Args:
        advantages: (B, T), as the update used them.
        response_mask: (B, T), 0/1.
        uids: (B,), each row's prompt group.

    Returns:
        ``learning_signal/zero_advantage_groups``: the fraction of prompt groups whose every valid token has zero
        advantage (no gradient from them); ``.../zero_advantage_tokens``: the fraction of valid tokens with zero
        advantage; ``.../advantage_std``: the spread of the valid tokens' advantages.
    """
    valid = response_mask.bool()
    zero = (advantages == 0) & valid
    row_zero = (zero.sum(dim=-1) == valid.sum(dim=-1)).cpu().numpy()
    groups = np.unique(np.asarray(uids, dtype=object).astype(str), return_inverse=True)[1]
    group_zero = np.ones(groups.max() + 1 if len(groups) else 0, dtype=bool)
    np.logical_and.at(group_zero, groups, row_zero)
    values = advantages[valid].double()
    return {
        f"{PREFIX}zero_advantage_groups": float(group_zero.mean()) if len(group_zero) else 1.0,
        f"{PREFIX}zero_advantage_tokens": float(zero.sum() / valid.sum().clamp(min=1)),
        f"{PREFIX}advantage_std": float(values.std(unbiased=False)) if values.numel() else 0.0,
    }


@dataclass
class NoSignalWatch:
    """Counts steps in a row whose every group had zero advantage; says once, at :data:`NO_SIGNAL_STEPS`, why."""

    steps: int = NO_SIGNAL_STEPS
    streak: int = 0
    warned: bool = False
    history: list[float] = field(default_factory=list)

    def update(self, metrics: dict[str, float]) -> str | None:
        """The warning to log after this step's ``metrics``, or None."""
        silent = metrics[f"{PREFIX}zero_advantage_groups"] == 1.0
        self.streak = self.streak + 1 if silent else 0
        if self.streak < self.steps or self.warned:
            return None
        self.warned = True
        return (
            f"bot-grpo-verl: no learning signal for {self.streak} steps in a row (every group's advantages are 0, "
            "so the gradient is 0). Usual causes: every rollout of a prompt scores alike (too easy or too hard a "
            "task), token rewards that only restate the score (spans valued at the score), or a reward manager that "
            "drops the spans (use +preset=bot_grpo)."
        )
