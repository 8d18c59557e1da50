"""Learning-signal metrics and the no-signal warning (bot_grpo_verl/learning_signal.py)."""

import numpy as np
import torch

from bot_grpo_verl.learning_signal import NO_SIGNAL_STEPS, NoSignalWatch, learning_signal_metrics


def test_metrics_count_silent_groups_and_tokens_over_valid_tokens_only():
    advantages = torch.tensor([[0.0, 0.0, 9.0], [0.0, 0.0, 0.0], [1.0, -1.0, 0.0], [0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 1, 0]])  # row 0's 9.0 is padding
    uids = np.array(["a", "a", "b", "b"], dtype=object)
    metrics = learning_signal_metrics(advantages, mask, uids)
    assert metrics["learning_signal/zero_advantage_groups"] == 0.5  # group a: all zero; b: not
    assert np.isclose(metrics["learning_signal/zero_advantage_tokens"], 7 / 10)
    valid = np.array([0, 0, 0, 0, 0, 1, -1, 0, 0.5, 0])
    assert np.isclose(metrics["learning_signal/advantage_std"], valid.std())


def test_the_watch_warns_once_after_a_streak_and_a_signal_resets_it():
    watch = NoSignalWatch()
    silent, signal = {"learning_signal/zero_advantage_groups": 1.0}, {"learning_signal/zero_advantage_groups": 0.4}
    said = [watch.update(silent) for _ in range(NO_SIGNAL_STEPS - 1)] + [watch.update(signal)]
    assert said == [None] * NO_SIGNAL_STEPS
    said = [watch.update(silent) for _ in range(NO_SIGNAL_STEPS + 2)]
    assert said[: NO_SIGNAL_STEPS - 1] == [None] * (NO_SIGNAL_STEPS - 1)
    assert (
        "no learning signal for 3 steps" in said[NO_SIGNAL_STEPS - 1]
        and "+preset=bot_grpo" in said[NO_SIGNAL_STEPS - 1]
    )
    assert said[NO_SIGNAL_STEPS:] == [None, None]  # said once
