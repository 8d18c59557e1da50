"""Bad and unusual inputs to both estimators (``bot_grpo`` and ``pure``): each case gets a clear
``ValueError`` naming the problem, or a defined result checked against the loop references or an
equivalent well-formed input. Never a torch error, never a silently wrong number."""

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from pure_reference import authors_whitened
from reference import reference_bot_grpo, reference_pure

from bot_grpo_verl.estimators.bot_grpo import compute_bot_grpo_advantage
from bot_grpo_verl.estimators.pure import compute_pure_advantage
from bot_grpo_verl.options import check_option

ESTIMATORS = {"bot_grpo": compute_bot_grpo_advantage, "pure": compute_pure_advantage}


def reference(name, rewards, mask, index):
    """The loop reference of estimator ``name`` with default options (``pure``'s whitened as its authors' code does)."""
    if name == "bot_grpo":
        return reference_bot_grpo(rewards, mask, index)
    return authors_whitened(reference_pure(rewards, mask, index, 0.1)[0], mask)


UNWHITENED = OmegaConf.create({"pure": {"batch_whitening": False}})
"""``pure``'s raw returns, for the properties of the returns themselves."""


def batch(rows=4, length=5, seed=0):
    """Dense rewards, right padding, one empty-free group pair: ``["a", "a", "b", "b", ...]``; the even columns
    hold -0.0, so that ``pure`` sees steps on the odd ones (``bot_grpo`` reads them as 0)."""
    generator = torch.Generator().manual_seed(seed)
    mask = (torch.arange(length)[None, :] < torch.tensor([5, 3, 4, 2] * (rows // 4))[:, None]).float()
    rewards = torch.randn(rows, length, generator=generator) * mask
    rewards = rewards.where(torch.arange(length) % 2 == 1, -0.0)
    index = np.array([f"g{i // 2}" for i in range(rows)], dtype=object)
    return rewards, mask, index


def with_mask_value(value, dtype=torch.float32):
    rewards, mask, index = batch()
    mask = mask.to(dtype)
    mask[1, 0] = value
    return rewards, mask, index


def with_reward(value, row=2, column=1):
    rewards, mask, index = batch()
    rewards[row, column] = value
    return rewards, mask, index


def with_index(index):
    rewards, mask, _ = batch()
    return rewards, mask, index


# ---------------------------------------------------------------- clear errors, both estimators

MASK_ERROR = r"response_mask must be bool or hold only 0 and 1 .* found \[{}\] in rows \[1\]"

ERRORS = {
    # masks: a selection, not a weight
    "mask times 2": (lambda: (batch()[0], batch()[1] * 2, batch()[2]), r"response_mask must be bool or hold only 0"),
    "mask 0.5": (lambda: with_mask_value(0.5), MASK_ERROR.format("0.5")),
    "mask NaN": (lambda: with_mask_value(math.nan), MASK_ERROR.format("nan")),
    "mask inf": (lambda: with_mask_value(math.inf), MASK_ERROR.format("inf")),
    "mask -1": (lambda: with_mask_value(-1.0), MASK_ERROR.format("-1.0")),
    "int mask 2": (lambda: with_mask_value(2, torch.long), MASK_ERROR.format("2")),
    "int mask -1": (lambda: with_mask_value(-1, torch.int32), MASK_ERROR.format("-1")),
    "mask shape": (lambda: (batch()[0], batch()[1][:, :4], batch()[2]), r"response_mask shape \(4, 4\) does not match"),
    "mask device": (
        lambda: (batch()[0], batch()[1].to("meta"), batch()[2]),
        r"response_mask is on meta, token_level_rewards on cpu",
    ),
    # index: one hashable label per row
    "index str": (lambda: with_index("aabb"), r"index must hold one group label per row, got a str: 'aabb'"),
    "index bytes": (lambda: with_index(b"aabb"), r"index must hold one group label per row, got a bytes"),
    "index None": (lambda: with_index(None), r"index must hold one group label per row: shape \(4,\), got NoneType"),
    "index 0-d": (lambda: with_index(np.array("a")), r"shape \(4,\), got ndarray of shape \(\)"),
    "index 2-D": (lambda: with_index(np.array([["a"], ["a"], ["b"], ["b"]])), r"got ndarray of shape \(4, 1\)"),
    "index short": (lambda: with_index(np.array(["a", "a", "b"])), r"shape \(4,\), got ndarray of shape \(3,\)"),
    "index long": (lambda: with_index(["a"] * 5), r"shape \(4,\), got list of shape \(5,\)"),
    "index set": (lambda: with_index({"a", "b"}), r"got set of shape \(\)"),
    "index unhashable": (lambda: with_index([["a"], ["a", "b"], ["b"], []]), r"index labels must be hashable"),
    # rewards
    "reward NaN": (lambda: with_reward(math.nan), r"non-finite values \(NaN or inf\) in rows \[2\]"),
    "reward inf": (lambda: with_reward(math.inf, row=3), r"non-finite values \(NaN or inf\) in rows \[3\]"),
    "reward -inf": (lambda: with_reward(-math.inf, row=0), r"non-finite values \(NaN or inf\) in rows \[0\]"),
    "reward 1e38": (lambda: with_reward(1e38), r"overflow: \|r\| up to 1e\+38, limit .* in torch.float32"),
    "reward -3e18": (lambda: with_reward(-3e18), r"overflow: \|r\| up to 3e\+18, limit"),
    "NaN on a masked token": (lambda: with_reward(math.nan, row=3, column=4), r"non-finite .* rows \[3\]"),
    "int rewards": (lambda: (batch()[0].long(), batch()[1], batch()[2]), r"floating-point tensor, got torch.int64"),
    "bool rewards": (lambda: (batch()[0] > 0, batch()[1], batch()[2]), r"floating-point tensor, got torch.bool"),
    "1-D rewards": (
        lambda: (batch()[0][0], batch()[1][0], batch()[2]),
        r"\(batch, response_length\), got shape \(5,\)",
    ),
    "3-D rewards": (
        lambda: (batch()[0][None], batch()[1][None], batch()[2]),
        r"\(batch, response_length\), got shape \(1, 4, 5\)",
    ),
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("case", ERRORS)
def test_bad_input_is_a_clear_error(estimator, case):
    build, message = ERRORS[case]
    with pytest.raises(ValueError, match=message):
        ESTIMATORS[estimator](*build())


# ---------------------------------------------------------------- clear errors, options

BOT_GRPO_OPTION_ERRORS = {
    "epsilon inf": ({"bot_grpo": {"epsilon": math.inf}}, r"algorithm.bot_grpo.epsilon=inf must be a finite float"),
    "epsilon nan": ({"bot_grpo": {"epsilon": math.nan}}, r"algorithm.bot_grpo.epsilon=nan must be a finite float"),
    "epsilon True": ({"bot_grpo": {"epsilon": True}}, r"algorithm.bot_grpo.epsilon=True must be a finite float"),
    "epsilon str": ({"bot_grpo": {"epsilon": "1e-6"}}, r"epsilon='1e-6' must be a finite float, got str"),
    "epsilon negative": ({"bot_grpo": {"epsilon": -1e-6}}, r"epsilon=-1e-06 must be a positive number"),
    "weighting int": ({"bot_grpo": {"weighting": 1}}, r"algorithm.bot_grpo.weighting=1 must be a str, got int"),
    "section not a mapping": ({"bot_grpo": 3}, r"algorithm.bot_grpo must be a mapping of options, got 3"),
    "norm by std 'false'": (
        {"norm_adv_by_std_in_grpo": "false"},
        r"algorithm.norm_adv_by_std_in_grpo='false' must be a bool, got str",
    ),
    "norm by std 0": ({"norm_adv_by_std_in_grpo": 0}, r"algorithm.norm_adv_by_std_in_grpo=0 must be a bool, got int"),
}

PURE_OPTION_ERRORS = {
    "temperature True": ({"pure": {"temperature": True}}, r"algorithm.pure.temperature=True must be a finite float"),
    "temperature inf": ({"pure": {"temperature": math.inf}}, r"algorithm.pure.temperature=inf must be a finite float"),
    "temperature zero": ({"pure": {"temperature": 0.0}}, r"algorithm.pure.temperature=0.0 must be a positive number"),
    "temperature str": ({"pure": {"temperature": "0.1"}}, r"temperature='0.1' must be a finite float, got str"),
    # -r / T overflows float32: the rewards (|r| ~ 1) exceed T * max / 2 = 0.017
    "temperature 1e-40": ({"pure": {"temperature": 1e-40}}, r"overflow: \|r\| up to .*, limit 0.017"),
    "credit unknown": ({"pure": {"credit": "max"}}, r"algorithm.pure.credit='max' is not one of \['min', 'sum'\]"),
    "credit bool": ({"pure": {"credit": False}}, r"algorithm.pure.credit=False must be a str, got bool"),
}


@pytest.mark.parametrize(
    ("estimator", "case"),
    [("bot_grpo", case) for case in BOT_GRPO_OPTION_ERRORS] + [("pure", case) for case in PURE_OPTION_ERRORS],
)
def test_bad_option_is_a_clear_error_naming_the_full_key(estimator, case):
    options, message = {**BOT_GRPO_OPTION_ERRORS, **PURE_OPTION_ERRORS}[case]
    with pytest.raises(ValueError, match=message):
        ESTIMATORS[estimator](*batch(), OmegaConf.create(options) if case != "section not a mapping" else options)


# ---------------------------------------------------------------- defined results: the same as a well-formed input


def same_as(build, equivalent):
    return build, equivalent


def contiguous():
    return batch(rows=8, length=6)


def labels(values):
    rewards, mask, _ = batch()
    return rewards, mask, values


EQUIVALENT = {
    # masks in any dtype that holds 0/1 select the same tokens
    "bool mask": same_as(lambda: (batch()[0], batch()[1].bool(), batch()[2]), batch),
    "int64 mask": same_as(lambda: (batch()[0], batch()[1].long(), batch()[2]), batch),
    "uint8 mask": same_as(lambda: (batch()[0], batch()[1].to(torch.uint8), batch()[2]), batch),
    "float64 mask": same_as(lambda: (batch()[0], batch()[1].double(), batch()[2]), batch),
    # index: grouped by Python equality, as verl's grpo does; any sequence of labels
    "labels 1 and '1' are two groups": same_as(
        lambda: labels(np.array([1, 1, "1", "1"], dtype=object)), lambda: labels(np.array(["x", "x", "y", "y"]))
    ),
    "labels 1, 1.0, np.int64(1) are one group": same_as(
        lambda: labels(np.array([1, 1.0, np.int64(1), 1], dtype=object)), lambda: labels(np.array(["x"] * 4))
    ),
    "list index": same_as(lambda: labels(["g0", "g0", "g1", "g1"]), batch),
    "tuple index": same_as(lambda: labels(("g0", "g0", "g1", "g1")), batch),
    "integer index": same_as(lambda: labels(np.array([7, 7, 3, 3])), batch),
    "tensor index": same_as(lambda: labels(torch.tensor([7, 7, 3, 3])), batch),
    "None labels are one group": same_as(lambda: labels([None, None, "b", "b"]), batch),
    # layouts and dtypes
    "non-contiguous rewards and mask": same_as(
        lambda: tuple(x.t().contiguous().t() if torch.is_tensor(x) else x for x in contiguous()), contiguous
    ),
    "strided rows": same_as(
        lambda: (contiguous()[0][::2], contiguous()[1][::2], contiguous()[2][::2]),
        lambda: (contiguous()[0][::2].contiguous(), contiguous()[1][::2].contiguous(), contiguous()[2][::2]),
    ),
    "float16 rewards": same_as(
        lambda: (batch()[0].half(), batch()[1], batch()[2]), lambda: (batch()[0].half().float(), *batch()[1:])
    ),
    "bfloat16 rewards": same_as(
        lambda: (batch()[0].bfloat16(), batch()[1], batch()[2]), lambda: (batch()[0].bfloat16().float(), *batch()[1:])
    ),
    # rewards on masked tokens take no part
    "rewards on masked tokens": same_as(lambda: (batch()[0].where(batch()[1] == 1, 5.0), *batch()[1:]), batch),
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("case", EQUIVALENT)
def test_unusual_input_gives_the_result_of_its_well_formed_equivalent(estimator, case):
    build, equivalent = EQUIVALENT[case]
    config = OmegaConf.create({"bot_grpo": {"outcome_broadcast": "never"}})
    advantages, _ = ESTIMATORS[estimator](*build(), config)
    expected, _ = ESTIMATORS[estimator](*equivalent(), config)
    assert advantages.dtype == torch.float32
    torch.testing.assert_close(advantages, expected, atol=1e-6, rtol=1e-6)
    rewards, mask, index = equivalent()
    torch.testing.assert_close(advantages.double(), reference(estimator, rewards, mask, index), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- defined results: what the contract says


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_empty_rows_and_an_all_masked_group_get_zero_and_leave_the_others_alone(estimator):
    rewards, mask, index = batch(rows=8)
    mask[0] = 0.0  # one empty row in group g0
    mask[6:] = 0.0  # group g3: every row empty
    rewards = rewards + 1.0  # rewards on masked tokens must not count
    advantages, _ = ESTIMATORS[estimator](rewards, mask, index)
    assert torch.count_nonzero(advantages[0]) == 0 and torch.count_nonzero(advantages[6:]) == 0
    torch.testing.assert_close(advantages.double(), reference(estimator, rewards, mask, index), atol=1e-5, rtol=1e-5)


def test_single_row_groups_use_mean_zero_and_std_one_in_bot_grpo():
    rewards, mask, _ = batch()
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, np.array(["a", "b", "c", "d"]))
    torch.testing.assert_close(advantages, rewards * mask / (1 + 1e-6))


def test_single_row_groups_have_no_baseline_in_pure():
    rewards, mask, _ = batch()
    advantages, returns = compute_pure_advantage(rewards, mask, np.array(["a", "b", "c", "d"]), UNWHITENED)
    steps = (rewards != 0) & mask.bool()
    torch.testing.assert_close(advantages, returns.masked_fill(steps, 0.0))
    weights = torch.softmax((-rewards / 0.1).masked_fill(~steps, -math.inf), dim=-1)
    torch.testing.assert_close(returns[:, 0], (weights * rewards.where(steps, 0.0)).sum(dim=-1))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_large_float64_rewards_keep_float64_headroom(estimator):
    rewards, mask, index = batch()
    rewards = rewards.double() * 1e30
    config = UNWHITENED if estimator == "pure" else None  # the authors' whitening squares in float32
    advantages, _ = ESTIMATORS[estimator](rewards, mask, index, config)
    assert advantages.dtype == torch.float64 and torch.isfinite(advantages).all()
    expected = reference_pure(rewards, mask, index, 0.1)[0] if config else reference(estimator, rewards, mask, index)
    torch.testing.assert_close(advantages / expected.abs().max(), expected / expected.abs().max(), atol=1e-9, rtol=0)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_subnormal_rewards_give_finite_advantages(estimator):
    rewards, mask, index = batch()
    advantages, _ = ESTIMATORS[estimator](rewards * 1e-40, mask, index)
    assert torch.isfinite(advantages).all()


def test_tiny_pure_temperature_within_the_bound_is_the_min_form():
    # T = 1e-30 is fine for |r| <= 1.7e8: the softmin puts all weight on each row's worst step, so without
    # a baseline (one row per group) the return of the first token is that step's reward.
    rewards, mask, _ = batch()
    config = OmegaConf.create({"pure": {"temperature": 1e-30}})
    _, returns = compute_pure_advantage(rewards, mask, np.array(["a", "b", "c", "d"]), config)
    worst = rewards.masked_fill((mask == 0) | (rewards == 0), math.inf).amin(dim=-1)
    torch.testing.assert_close(returns[:, 0], worst)


def test_an_integer_epsilon_is_a_number():
    rewards, mask, index = batch()
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, OmegaConf.create({"bot_grpo": {"epsilon": 1}}))
    expected = reference_bot_grpo(rewards, mask, index, eps=1.0)
    torch.testing.assert_close(advantages.double(), expected, atol=1e-5, rtol=1e-5)


def test_outcome_reward_times_two_mask_used_to_flip_signs_and_is_now_refused():
    # The reproducer of the issue: with ``mask * 2`` the outcome advantages came out negated.
    rewards, mask, index = batch()
    outcome = torch.zeros_like(rewards)
    outcome[torch.arange(4), mask.sum(-1).long() - 1] = torch.tensor([1.0, 0.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="response_mask must be bool or hold only 0 and 1"):
        compute_bot_grpo_advantage(outcome, mask * 2, index)


# ---------------------------------------------------------------- the option type layer itself

OPTION_TYPES = [
    # (annotation, value, accepted)
    (float, 1, True),
    (float, np.float32(0.5), True),
    (float, 10**400, False),
    (float, None, False),
    (float | None, None, True),
    (float | None, "1", False),
    (int, 3, True),
    (int, np.int64(3), True),
    (int, 3.0, False),
    (int, True, False),
    (int | None, None, True),
    (bool, False, True),
    (bool, "true", False),
    (bool, 1, False),
    (str, "x", True),
    (str, 1, False),
    (str | None, None, True),
    (tuple[float, float] | None, [1, 2], True),  # left to the dataclass's own check
]


@pytest.mark.parametrize(("annotation", "value", "accepted"), OPTION_TYPES, ids=repr)
def test_option_types(annotation, value, accepted):
    if accepted:
        check_option("section.key", value, annotation)
    else:
        with pytest.raises(ValueError, match=r"^section\.key=.* must be a"):
            check_option("section.key", value, annotation)
