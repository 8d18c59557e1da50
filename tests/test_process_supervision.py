"""``ps_grpo`` and ``pure`` end to end: a real reward function's result, through the ``bot_token`` manager's
``step_end`` placement and ``rm_scores`` assembly, into the estimator, against references written from their
sources: DeepSeekMath section 4.1.3 (arXiv:2402.03300) for ``ps_grpo``, the authors' code for ``pure``
(:mod:`pure_reference`).

The references find each response's steps on their own: a step is a span of the reward's result that owns a
token (ownership by :func:`reference.reference_token_values`, prefix decodes), ending at the last token it
owns; a response whose spans own no token is one step valued at its score, on its last token.
"""

import math
import shutil

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from pure_reference import authors_pure_advantages, authors_whitened
from reference import reference_token_values
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from benchmarks.local_tokenizers import byte_level_bpe
from bot_grpo_verl.reward.alignment import token_char_ranges
from bot_grpo_verl.reward.manager import (
    BoTTokenRewardManager,
    TokenRewardConfig,
    TokenRewardScore,
    aligned_token_rewards,
)
from bot_grpo_verl.rewards import arithmetic_steps

STEP_END = TokenRewardConfig(placement="step_end")
EPS = 1e-6


def reference_steps(tokenizer, ids, result):
    """(end token, value) of each step of one response, found from ``result`` as the module docstring says."""
    spans = (result.get("spans") or []) if isinstance(result, dict) else []
    score = result["score"] if isinstance(result, dict) else result
    owners = reference_token_values(tokenizer, ids, [(a, b, k) for k, (a, b, _) in enumerate(spans)], None)
    ends = {}
    for t, owner in enumerate(owners):
        if owner is not None:
            ends[owner] = t
    if not ends:
        return [(len(ids) - 1, float(score))] if ids else []
    return sorted((t, float(spans[k][2])) for k, t in ends.items())


def reference_ps_grpo(steps, lengths, groups, norm_by_std=True):
    """Section 4.1.3: per group, every step reward normalised by the mean and std of all the group's step
    rewards (Bessel-corrected, as verl's ``grpo``; mean 0 and std 1 for a group of one response; std 1 without
    ``norm_by_std``), and a token's advantage the sum of the normalised rewards of its response's steps ending
    at or after it."""
    advantages = np.zeros((len(steps), max(lengths)))
    for group in set(groups):
        rows = [i for i, g in enumerate(groups) if g == group]
        bag = [value for i in rows for _, value in steps[i]]
        alone = len(rows) == 1
        mean = 0.0 if alone else sum(bag) / len(bag)
        std = 1.0 if alone else math.sqrt(sum((v - mean) ** 2 for v in bag) / (len(bag) - 1))
        scale = std + EPS if norm_by_std else 1.0
        for i in rows:
            for t in range(lengths[i]):
                advantages[i, t] = sum((value - mean) / scale for end, value in steps[i] if end >= t)
    return advantages


def through_the_manager(tokenizer, responses, results):
    """``token_level_rewards`` (B, T) and ``response_mask`` as verl hands them to the estimator: each result
    aligned with ``placement=step_end`` and written by :meth:`BoTTokenRewardManager.assemble_rm_scores`."""
    scores = []
    for ids, result in zip(responses, results, strict=True):
        rewards, _ = aligned_token_rewards(result, *token_char_ranges(tokenizer, ids), STEP_END)
        scores.append(TokenRewardScore(float(result["score"] if isinstance(result, dict) else result), rewards))
    width = max(map(len, responses))
    padded = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids in responses])
    mask = (torch.arange(width) < torch.tensor([len(ids) for ids in responses]).unsqueeze(-1)).long()
    prompts = torch.ones(len(responses), 3, dtype=torch.long)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": padded,
            "attention_mask": torch.cat([torch.ones_like(prompts), mask], 1),
        }
    )
    return BoTTokenRewardManager.assemble_rm_scores(data, scores), mask


def estimate(name, rewards, mask, groups, config=None):
    """Advantages from verl's own dispatch, as its trainer calls it."""
    config = OmegaConf.create({"adv_estimator": name, **(config or {})})
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": np.array(groups, dtype=object)},
    )
    return compute_advantage(data, adv_estimator=name, config=config).batch["advantages"].double().numpy()


@pytest.fixture(scope="module")
def tokenizer():
    return byte_level_bpe()


def encode(tokenizer, text, eos=True):
    return tokenizer.encode(text, add_special_tokens=False) + ([tokenizer.eos_token_id] if eos else [])


def arithmetic(text, truth="21"):
    return arithmetic_steps.compute_score("arith", text, truth)


RIGHT = "12 + 30 = 42\n\n42 - 21 = 21\n\nThe answer is \\boxed{21}."
WRONG_STEP = "12 + 30 = 41\n\n42 - 21 = 21\n\nThe answer is \\boxed{21}."
WRONG_ANSWER = "12 + 30 = 42\n\n42 - 21 = 20\n\nThe answer is \\boxed{20}."
TRUNCATED = "12 + 30 = 42\n\n42 - 21 = 2"
MULTI_BYTE = "12 + 30 = 42\n\n数学 🚀 とても\n\nÉtape finale : \\boxed{21}."


def arithmetic_group(tokenizer, eos):
    texts = [RIGHT, WRONG_STEP, WRONG_ANSWER, TRUNCATED, MULTI_BYTE]
    return [encode(tokenizer, text, eos) for text in texts], [arithmetic(text) for text in texts]


def react_group(tokenizer):
    react_tsx = pytest.importorskip("bot_grpo_verl.rewards.react_tsx")
    texts = [
        "```tsx\nexport default function A() { return <div>ok</div>; }\n```",
        "```tsx\nexport default function B() { return <div>ok</div>; }\n```",
        "```tsx\nexport default function C() {\n  const x = 1;\n  return <div>{x</div>;\n}\n```",
        "Here it is:\n```tsx\nexport default function D() { return <span>hi</span> }\n```\nDone.",
    ]
    return [encode(tokenizer, text) for text in texts], [react_tsx.compute_score("react_tsx", text) for text in texts]


def cases(tokenizer):
    """(name, responses, results, groups): every case family of issue 25, each a batch of one or two groups."""
    with_eos = arithmetic_group(tokenizer, eos=True)
    without_eos = arithmetic_group(tokenizer, eos=False)
    yield (
        "arithmetic with and without EOS",
        with_eos[0] + without_eos[0],
        with_eos[1] + without_eos[1],
        [0] * 5 + [1] * 5,
    )
    same = [encode(tokenizer, RIGHT)] * 3
    yield "zero-variance steps", same, [arithmetic(RIGHT)] * 3, [0] * 3
    outcome_only = [encode(tokenizer, text) for text in (RIGHT, WRONG_ANSWER, TRUNCATED)]
    yield "outcome-only rewards", outcome_only, [1.0, 0.0, 0.0], [0] * 3
    if shutil.which("node") is not None:
        responses, results = react_group(tokenizer)
        yield "compiled and failed TSX", responses, results, [0] * 4


def test_the_case_families_hold_what_they_claim(tokenizer):
    results = {name: results for name, _, results, _ in cases(tokenizer)}
    arithmetic_results = results["arithmetic with and without EOS"][:5]
    assert [r["score"] for r in arithmetic_results] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert [r["steps_correct"] for r in arithmetic_results] == [2.0, 1.0, 1.0, 1.0, 1.0]
    if "compiled and failed TSX" in results:
        assert [r["compiled"] for r in results["compiled and failed TSX"]] == [1, 1, 0, 1]
        assert not results["compiled and failed TSX"][0]["spans"] and results["compiled and failed TSX"][2]["spans"]


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_ps_grpo_equals_section_4_1_3_on_every_case_family(tokenizer, norm_by_std):
    for name, responses, results, groups in cases(tokenizer):
        rewards, mask = through_the_manager(tokenizer, responses, results)
        advantages = estimate("ps_grpo", rewards, mask, groups, {"norm_adv_by_std_in_grpo": norm_by_std})
        steps = [reference_steps(tokenizer, ids, result) for ids, result in zip(responses, results, strict=True)]
        expected = reference_ps_grpo(steps, [len(ids) for ids in responses], groups, norm_by_std)
        np.testing.assert_allclose(advantages, expected, atol=2e-5, err_msg=name)


def test_a_compiled_response_is_one_step_and_an_arithmetic_outcome_counts_once(tokenizer):
    react = dict(((name, (responses, results)) for name, responses, results, _ in cases(tokenizer)))
    if "compiled and failed TSX" in react:
        responses, results = react["compiled and failed TSX"]
        rewards, mask = through_the_manager(tokenizer, responses, results)
        advantages = estimate("ps_grpo", rewards, mask, [0] * 4)
        compiled = advantages[0, : len(responses[0])]
        assert np.allclose(compiled, compiled[0]), "a compiled response is one step: one advantage on every token"
    ids = encode(tokenizer, WRONG_ANSWER)
    rewards, _ = aligned_token_rewards(arithmetic(WRONG_ANSWER), *token_char_ranges(tokenizer, ids), STEP_END)
    steps = [value for value in rewards if not (value == 0 and math.copysign(1.0, value) < 0)]
    assert steps == [1.0, -1.0, 0.0], "two checked steps and the wrong answer's 0, no second outcome on EOS"


def authors_steps(tokenizer, responses, results):
    steps = [reference_steps(tokenizer, ids, result) for ids, result in zip(responses, results, strict=True)]
    return [[value for _, value in row] for row in steps], [[end for end, _ in row] for row in steps]


@pytest.mark.parametrize("temperature", [0.1, 1.0])
def test_pure_equals_the_authors_computation_on_every_case_family(tokenizer, temperature):
    for name, responses, results, groups in cases(tokenizer):
        group_size = groups.count(groups[0])
        rewards, mask = through_the_manager(tokenizer, responses, results)
        advantages = estimate("pure", rewards, mask, groups, {"pure": {"temperature": temperature}})
        values, ends = authors_steps(tokenizer, responses, results)
        raw = authors_pure_advantages(values, ends, [len(ids) for ids in responses], group_size, temperature)
        expected = authors_whitened(raw, mask[:, : raw.shape[1]])
        np.testing.assert_allclose(advantages, expected.numpy(), atol=2e-5, err_msg=name)


@pytest.mark.parametrize("whitening", [False, True])
def test_pure_equals_the_authors_computation_on_random_step_layouts(whitening):
    """Without the batch whitening on a few step values, so that returns cancel to 0 often; with it on step values
    that cancel only by design. The whitening leaves out the tokens whose advantage is exactly 0, and a return that
    is 0 in exact arithmetic comes out as 0 or as 2.5e-8 depending on the order of float32 sums, in the authors'
    code as in ours."""
    generator = np.random.default_rng(0)
    for _ in range(20):
        group_size, groups = int(generator.integers(2, 6)), int(generator.integers(1, 4))
        lengths = generator.integers(1, 30, group_size * groups).tolist()
        ends = [
            sorted(generator.choice(length, int(generator.integers(1, min(length, 5) + 1)), replace=False).tolist())
            for length in lengths
        ]
        draw = (lambda n: generator.uniform(-1, 1, n)) if whitening else (lambda n: generator.choice(STEP_VALUES, n))
        values = [draw(len(row)).tolist() for row in ends]
        rewards = torch.full((len(lengths), max(lengths)), -0.0)
        for i, (row_ends, row_values) in enumerate(zip(ends, values, strict=True)):
            rewards[i, row_ends] = torch.tensor(row_values) + 0.0
        mask = (torch.arange(max(lengths)) < torch.tensor(lengths).unsqueeze(-1)).long()
        index = [g for g in range(groups) for _ in range(group_size)]
        advantages = estimate("pure", rewards, mask, index, {"pure": {"batch_whitening": whitening}})
        expected = authors_pure_advantages(values, ends, lengths, group_size)
        expected = authors_whitened(expected, mask) if whitening else expected
        np.testing.assert_allclose(advantages, expected.numpy(), atol=2e-5)


STEP_VALUES = [-1.0, -0.5, 0.0, 0.3, 1.0]
