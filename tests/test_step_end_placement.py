"""The ``step_end`` placement of the bot_token manager: step rewards on each step's last token, every other token
marked as no step (-0.0), for ``ps_grpo`` and ``pure``."""

import numpy as np
import pytest
import torch

from bot_grpo_verl.estimators.baselines import compute_ps_grpo_advantage
from bot_grpo_verl.reward.manager import TokenRewardConfig, aligned_token_rewards
from bot_grpo_verl.reward.step_layout import is_step_end, step_end_rewards

# Five tokens of two characters each over "ab\n\ncd\n\nef".
RANGES = np.array([[0, 2], [2, 4], [4, 6], [6, 8], [8, 10]])


def test_each_step_value_lands_on_its_last_token_even_when_neighbours_share_it():
    rewards, covered = step_end_rewards(RANGES, [(0, 4, 1.0), (4, 8, 1.0), (8, 10, 0.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert covered.all()


def test_uncovered_tokens_end_no_step_and_a_zero_step_stays_a_step():
    rewards, covered = step_end_rewards(RANGES, [(0, 4, -1.0), (4, 6, 0.0)], score=0.5, text_length=10)
    assert rewards.tolist() == [0.0, -1.0, 0.0, 0.0, 0.0]
    assert is_step_end(rewards).tolist() == [False, True, True, False, False]  # no outcome on the uncovered end
    assert covered.tolist() == [True, True, True, False, False]


def test_valued_uncovered_tokens_are_one_more_step_ending_at_the_last_of_them():
    rewards, covered = step_end_rewards(RANGES, [(2, 4, 1.0), (4, 6, 0.0)], 0.5, 10, uncovered=-0.0)
    assert is_step_end(rewards).tolist() == [False, True, True, False, True]  # -0.0 given: stored as a 0 step
    assert rewards.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0] and covered.tolist() == [False, True, True, False, False]
    rewards, _ = step_end_rewards(RANGES, [], score=0.5, text_length=10, uncovered=2.0)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0] and is_step_end(rewards).sum() == 1


def test_the_manager_gives_uncovered_tokens_their_value_and_clips_it():
    ranges, text = np.vstack([RANGES, [[10, 10]]]), "ab\n\ncd\n\nef"  # a sixth token: EOS, no characters
    result = {"score": 0.0, "spans": [(0, 10, 1.0)], "uncovered": 3.0}
    rewards, info = aligned_token_rewards(result, text, ranges, TokenRewardConfig(clip_range=(-1.0, 1.0)))
    assert rewards.tolist() == [1.0] * 6 and info["span_coverage"] == 5 / 6  # the EOS: 3 clipped, not the score
    rewards, _ = aligned_token_rewards(result, text, ranges, TokenRewardConfig(placement="step_end"))
    assert rewards.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 3.0] and is_step_end(rewards).sum() == 2


@pytest.mark.parametrize("spans", [[], [(3, 4, 9.0)]], ids=["no spans", "spans that own no token"])
def test_a_response_without_steps_is_one_step_valued_at_its_outcome(spans):
    rewards, _ = step_end_rewards(RANGES, spans, score=0.0, text_length=10)
    assert is_step_end(rewards).tolist() == [False, False, False, False, True]
    assert rewards[-1] == 0.0


def test_the_manager_places_steps_clips_their_values_and_refuses_token_rewards():
    ranges, text = np.vstack([RANGES, [[10, 10]]]), "ab\n\ncd\n\nef"  # a sixth token: EOS, no characters
    options = TokenRewardConfig(placement="step_end", clip_range=(-0.5, 0.5))
    rewards, info = aligned_token_rewards({"score": 1.0, "spans": [(0, 4, -2.0), (4, 10, 1.0)]}, text, ranges, options)
    assert rewards.tolist() == [0.0, -0.5, 0.0, 0.0, 0.5, 0.0] and is_step_end(rewards).sum() == 2
    assert info["token_reward_mean"] == 0.0 and info["score"] == 1.0
    rewards, _ = aligned_token_rewards(-0.0, text, ranges, options)  # a user's -0.0 score is a step of 0
    assert is_step_end(rewards).tolist() == [False] * 5 + [True]
    with pytest.raises(ValueError, match="placement=step_end needs spans .* 'token_rewards' mark no steps"):
        aligned_token_rewards({"score": 1.0, "token_rewards": [0.0] * 6}, text, ranges, options)


def test_overlapping_spans_end_at_the_last_token_assigned_to_them():
    rewards, _ = step_end_rewards(RANGES, [(0, 10, 5.0), (2, 4, 7.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 7.0, 0.0, 0.0, 5.0]


def test_a_span_that_owns_no_token_gives_nothing_and_empty_responses_stay_empty():
    rewards, _ = step_end_rewards(RANGES, [(3, 4, 9.0), (0, 10, 2.0)], score=0.0, text_length=10)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0] and is_step_end(rewards).sum() == 1
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
