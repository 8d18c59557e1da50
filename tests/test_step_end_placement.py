"""The ``step_end`` placement of the bot_token manager: step rewards on each step's last token, for ``ps_grpo``."""

import numpy as np
import pytest
import torch

from bot_grpo_verl.baselines import compute_ps_grpo_advantage
from bot_grpo_verl.reward_manager import TokenRewardConfig, step_end_rewards

# Five tokens of two characters each over "ab\n\ncd\n\nef".
RANGES = np.array([[0, 2], [2, 4], [4, 6], [6, 8], [8, 10]])


def test_each_step_value_lands_on_its_last_token_even_when_neighbours_share_it():
    rewards, covered = step_end_rewards(RANGES, [(0, 4, 1.0), (4, 8, 1.0), (8, 10, 0.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert covered.all()


def test_an_uncovered_last_token_carries_the_outcome_score():
    rewards, covered = step_end_rewards(RANGES, [(0, 4, -1.0)], score=0.5, text_length=10)
    assert rewards.tolist() == [0.0, -1.0, 0.0, 0.0, 0.5]
    assert covered.tolist() == [True, True, False, False, False]


def test_overlapping_spans_end_at_the_last_token_assigned_to_them():
    rewards, _ = step_end_rewards(RANGES, [(0, 10, 5.0), (2, 4, 7.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 7.0, 0.0, 0.0, 5.0]


def test_a_span_that_owns_no_token_gives_nothing_and_empty_responses_stay_empty():
    rewards, _ = step_end_rewards(RANGES, [(3, 4, 9.0), (0, 10, 2.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0]
    rewards, covered = step_end_rewards(np.zeros((0, 2), dtype=int), [], score=1.0, text_length=0)
    assert rewards.shape == covered.shape == (0,)


def test_ps_grpo_on_the_step_end_layout_counts_equal_neighbouring_steps_separately():
    # Two responses of one prompt: steps (+1, +1, outcome 1) and (+1, -1, outcome 0).
    first, _ = step_end_rewards(RANGES, [(0, 4, 1.0), (4, 8, 1.0), (8, 10, 1.0)], 1.0, 10)
    second, _ = step_end_rewards(RANGES, [(0, 4, 1.0), (4, 8, -1.0), (8, 10, 0.0)], 0.0, 10)
    rewards = torch.tensor(np.stack([first, second]), dtype=torch.float32)
    mask = torch.ones_like(rewards)
    advantages, _ = compute_ps_grpo_advantage(rewards, mask, np.array(["p", "p"], dtype=object))
    steps = np.array([1.0, 1.0, 1.0, 1.0, -1.0, 0.0])  # all six steps of the group
    normalised = (steps - steps.mean()) / (steps.std(ddof=1) + 1e-6)
    expected = np.array(
        [
            [normalised[0:3].sum()] * 2 + [normalised[1:3].sum()] * 2 + [normalised[2]],
            [normalised[3:6].sum()] * 2 + [normalised[4:6].sum()] * 2 + [normalised[5]],
        ]
    )
    np.testing.assert_allclose(advantages.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"placement": "middle"}, "placement='middle'"), ({"placement": "step_end", "outcome_weight": 0.5}, "step_end")],
)
def test_bad_placement_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        TokenRewardConfig(**options)
