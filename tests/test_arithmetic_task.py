"""The arithmetic demo task: exact problem generation, the exact step verifier reward (also through verl's own
loader), and a reduced build of its assets read by verl's RLHFDataset."""

import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf
from tiny_demo import TINY as DEMO_TINY

from bot_grpo_verl.reward.token_rewards import parse_reward_result
from bot_grpo_verl.rewards import arithmetic_steps
from demo import arithmetic, assets
from demo.arithmetic import Problem, generate_problems
from demo.assets import build_assets
from demo.tasks import ARITHMETIC, answer_metrics

ROOT = Path(__file__).resolve().parents[1]
REWARD_PATH = str(ROOT / "bot_grpo_verl" / "rewards" / "arithmetic_steps.py")

PROBLEM = Problem((17, 25, 3, 40), ("+", "*", "-"))
RESPONSE = "17 + 25 = 42\n\n42 * 3 = 126\n\n126 - 40 = 86\n\nThe answer is \\boxed{86}."
# Character ranges of RESPONSE's four steps (each with its trailing blank line).
RANGES = [(0, 14), (14, 28), (28, 43), (43, 68)]
TINY = replace(DEMO_TINY, vocab_size=300, max_position_embeddings=128)


def score(text, ground_truth="86", **options):
    return arithmetic_steps.compute_score("arithmetic", text, ground_truth, {}, **options)


def span_values(result):
    return [value for _, _, value in result["spans"]]


# ---------------------------------------------------------------- problem generation


def test_the_example_problem_is_written_as_specified():
    assert PROBLEM.prompt == "Compute (17 + 25) * 3 - 40."
    assert PROBLEM.response == RESPONSE and PROBLEM.answer == 86 and PROBLEM.kind == "3_ops"
    assert [RESPONSE[start:end] for start, end in RANGES][-1] == "The answer is \\boxed{86}."


@pytest.mark.parametrize("difficulty", [arithmetic.STANDARD, arithmetic.HARD], ids=["standard", "hard"])
def test_generated_problems_are_exact_deterministic_and_distinct(difficulty):
    problems = generate_problems(90, seed=5, difficulty=difficulty)
    assert problems == generate_problems(90, seed=5, difficulty=difficulty) != generate_problems(90, seed=6)
    assert len({problem.prompt for problem in problems}) == 90
    lengths = range(difficulty.min_operations, difficulty.max_operations + 1)
    assert {problem.kind for problem in problems} == {f"{n}_ops" for n in lengths}
    assert {operation for problem in problems for operation in problem.operations} == {"+", "-", "*"}
    for problem in problems:
        expression = problem.prompt.removeprefix("Compute ").removesuffix(".")
        # Python's own precedence on the printed expression: the parentheses encode left-to-right order.
        assert eval(expression, {"__builtins__": {}}) == problem.answer  # noqa: S307 - our generated text
        lines = problem.response.split("\n\n")
        assert lines[-1] == f"The answer is \\boxed{{{problem.answer}}}."
        value = problem.numbers[0]
        for line, operation, number in zip(lines[:-1], problem.operations, problem.numbers[1:], strict=True):
            left, shown_operation, right, equals, result = line.split(" ")
            assert (int(left), shown_operation, int(right), equals) == (value, operation, number, "=")
            value = eval(f"{value} {operation} {number}", {"__builtins__": {}})  # noqa: S307
            assert int(result) == value and 0 <= value <= difficulty.max_value
        assert score(problem.response, str(problem.answer))["steps_correct"] == len(problem.operations)


def test_generation_rejects_bad_input():
    with pytest.raises(ValueError, match="corpus size"):
        generate_problems(-1, seed=0)
    with pytest.raises(ValueError, match="min_operations"):
        arithmetic.Difficulty(min_operations=5, max_operations=4)
    with pytest.raises(ValueError, match="max_value"):
        arithmetic.Difficulty(min_operations=1, max_operations=2, max_value=10)
    with pytest.raises(ValueError, match="one more number"):
        Problem((1, 2), ("+", "-"))
    with pytest.raises(ValueError, match="unknown operation"):
        arithmetic.apply(1, "/", 2)


# ---------------------------------------------------------------- the reward


def test_correct_response_every_step_plus_one_and_the_answer_carries_the_outcome():
    result = score(RESPONSE)
    assert result == {
        "score": 1.0,
        "spans": [(*RANGES[0], 1.0), (*RANGES[1], 1.0), (*RANGES[2], 1.0), (*RANGES[3], 1.0)],
        "acc": 1.0,
        "steps": 3.0,
        "steps_correct": 3.0,
        "answer_found": 1.0,
        "answer_refused": 0.0,
    }
    parsed = parse_reward_result(result, len(RESPONSE))
    assert parsed.score == 1.0 and len(parsed.spans) == 4
    assert score(RESPONSE, ground_truth=86) == result  # an int ground truth is accepted too


def test_a_wrong_step_is_minus_one_and_a_wrong_answer_scores_zero():
    wrong_step = RESPONSE.replace("42 * 3 = 126", "42 * 3 = 136")
    assert span_values(score(wrong_step)) == [1.0, -1.0, 1.0, 1.0]
    assert score(wrong_step)["steps_correct"] == 2.0 and score(wrong_step)["score"] == 1.0
    wrong_answer = RESPONSE.replace("\\boxed{86}", "\\boxed{87}")
    result = score(wrong_answer)
    assert span_values(result) == [1.0, 1.0, 1.0, 0.0]
    assert (result["score"], result["acc"], result["answer_found"]) == (0.0, 0.0, 1.0)
    assert score(RESPONSE.replace("\\boxed{86}", "\\boxed{86.0}"))["score"] == 1.0  # math-verify, not strings


def test_unparseable_steps_and_a_missing_box():
    chatty = RESPONSE.replace("42 * 3 = 126", "then times three is 126")
    assert span_values(score(chatty)) == [1.0, -1.0, 1.0, 1.0]
    unboxed = RESPONSE.replace("\\boxed{86}", "86")
    result = score(unboxed)
    assert span_values(result) == [1.0, 1.0, 1.0, -1.0]  # the last line is now just an unparseable step
    assert (result["score"], result["steps"], result["answer_found"]) == (0.0, 4.0, 0.0)


@pytest.mark.parametrize(
    ("step", "correct"),
    [
        ("3 - 5 = -2", True),
        ("  12*4=48 ", True),
        ("-3 * -4 = 12", True),
        ("2 * 3 = 7", False),
        ("2 ** 3 = 8", False),
        ("6 / 2 = 3", False),
        ("1 + 1 = 2 = 2", False),
        ("1 + 1 = 2.0", False),
        ("9" * 31 + " + 1 = 1" + "0" * 31, False),  # over 30 digits: not parsed
        ("__import__('os') = 0", False),
    ],
)
def test_check_step_is_exact_integer_arithmetic(step, correct):
    assert arithmetic_steps.check_step(step) is correct


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_and_whitespace_responses(text):
    result = score(text)
    assert (result["score"], result["answer_found"], result["steps_correct"]) == (0.0, 0.0, 0.0)
    assert result["spans"] == ([(0, len(text), -1.0)] if text else [])
    assert result["steps"] == (1.0 if text else 0.0)


def test_scale_and_clip_change_the_steps_only():
    wrong_step = RESPONSE.replace("42 * 3 = 126", "42 * 3 = 136")
    assert span_values(score(wrong_step, scale=3.0)) == [3.0, -3.0, 3.0, 1.0]
    assert span_values(score(wrong_step, scale=3.0, clip=2.0)) == [2.0, -2.0, 2.0, 1.0]
    assert span_values(score(wrong_step, step_value=0.5)) == [0.5, -0.5, 0.5, 1.0]
    assert score(wrong_step, scale=3.0)["score"] == 1.0


def test_noise_is_deterministic_per_text_and_has_the_requested_spread():
    noisy, again = score(RESPONSE, noise=0.5), score(RESPONSE, noise=0.5)
    assert noisy == again
    assert span_values(noisy)[-1] == 1.0 and len(set(span_values(noisy)[:3])) == 3
    assert span_values(score(RESPONSE + " ", noise=0.5)) != span_values(noisy)
    long = "\n\n".join(["2 + 2 = 4"] * 400 + ["The answer is \\boxed{4}."])
    deviations = [value - 1.0 for value in span_values(score(long, "4", noise=0.5))[:-1]]
    assert abs(statistics.fmean(deviations)) < 0.08
    assert statistics.stdev(deviations) == pytest.approx(0.5, rel=0.15)
    clipped = span_values(score(long, "4", noise=0.5, clip=1.2))[:-1]
    assert max(clipped) == 1.2 and min(clipped) >= -1.2


def test_bad_arguments_and_verl_kwargs():
    for ground_truth in (None, " ", True, 8.6):
        with pytest.raises(ValueError, match="ground_truth"):
            score(RESPONSE, ground_truth)
    with pytest.raises(ValueError, match="math-verify cannot parse"):
        score(RESPONSE, "\\frac{")
    with pytest.raises(ValueError, match="solution_str"):
        score(None)
    assert score(RESPONSE, reward_router_address=None)["score"] == 1.0


@pytest.mark.slow  # a fresh interpreter importing verl: ~10 s
def test_loads_and_runs_through_verls_custom_reward_loader(tmp_path):
    """A fresh interpreter outside the repository, as a verl reward worker: verl's get_custom_reward_fn
    loads the file by path and merges reward_kwargs into the call."""
    script = f"""
import json
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn
config = OmegaConf.create({{"reward": {{"custom_reward_function": {{
    "path": {REWARD_PATH!r}, "name": "compute_score", "reward_kwargs": {{"scale": 2.0, "noise": 0.25}}}}}}}})
fn = get_custom_reward_fn(config)
print(json.dumps(fn(data_source="arithmetic", solution_str={RESPONSE!r}, ground_truth="86", extra_info={{}})))
"""
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    expected = score(RESPONSE, scale=2.0, noise=0.25)
    assert {**result, "spans": [tuple(span) for span in result["spans"]]} == expected
    assert span_values(expected) != [2.0, 2.0, 2.0, 1.0]  # the noise reached the worker's call


# ---------------------------------------------------------------- the assets


def test_answer_metrics_measure_answers_and_steps():
    problems = generate_problems(4, seed=1)
    responses = [problem.response for problem in problems]
    perfect = answer_metrics(responses, problems)
    assert perfect == {"accuracy": 1.0, "answer_found_rate": 1.0, "step_accuracy": 1.0}
    responses[0] = responses[0].replace("\\boxed{", "\\boxed{1")  # a wrong answer
    responses[1] = "no idea"  # one wrong step, no answer
    steps = sum(len(problem.operations) for problem in problems) - len(problems[1].operations) + 1
    assert answer_metrics(responses, problems) == {
        "accuracy": 0.5,
        "answer_found_rate": 0.75,
        "step_accuracy": (steps - 1) / steps,
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("arithmetic_cache")
    return build_assets(cache_dir, task=ARITHMETIC, seed=2, settings=TINY, progress=lambda message: None)


def test_reduced_build_writes_arithmetic_rows_that_verls_rlhf_dataset_reads(built, tmp_path):
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    assert json.loads(built.manifest.read_text())["task"] == "arithmetic"
    assert built.root.name == assets.cache_key(TINY, 2, ARITHMETIC) != assets.cache_key(TINY, 2)
    problems = generate_problems(sum((TINY.val_prompts, TINY.train_prompts, TINY.test_prompts, TINY.sft_examples)), 2)
    frame = pd.read_parquet(built.train_parquet)
    assert len(frame) == TINY.train_prompts and set(frame.data_source) == {"arithmetic"}
    assert set(frame.ability) == {"math"}
    train = problems[TINY.val_prompts : TINY.val_prompts + TINY.train_prompts]
    for problem, reward_model, info in zip(train, frame.reward_model, frame.extra_info, strict=True):
        assert reward_model["ground_truth"] == str(problem.answer)
        assert info["question"] == problem.prompt and info["kind"] == problem.kind and info["split"] == "train"
    sft = [json.loads(line) for line in built.sft_corpus.read_text().splitlines()]
    assert [row["response"] for row in sft] == [problem.response for problem in problems[-TINY.sft_examples :]]

    tokenizer = hf_tokenizer(str(built.tokenizer_dir))
    config = OmegaConf.create({"max_prompt_length": 64, "filter_overlong_prompts": True, "cache_dir": str(tmp_path)})
    dataset = RLHFDataset(str(built.val_parquet), tokenizer, config)
    assert len(dataset) == TINY.val_prompts
    item = dataset[0]
    assert item["data_source"] == "arithmetic" and item["reward_model"]["ground_truth"] == str(problems[0].answer)
    text = tokenizer.apply_chat_template(item["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert text == f"<|im_start|>user\n{problems[0].prompt}<|im_end|>\n<|im_start|>assistant\n"
    response = tokenizer(problems[0].response, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(response) == problems[0].response
    # Qwen2's pre-tokenizer splits numbers into single digits, so every number is spelt digit by digit.
    assert tokenizer.tokenize("126") == ["1", "2", "6"]

    metrics = built.metrics
    assert metrics["sft_loss_after"] < metrics["sft_loss_before"]
    assert metrics["eval_samples"] == TINY.eval_samples
    assert {"accuracy", "answer_found_rate", "step_accuracy"} <= set(metrics)
    assert all(0.0 <= metrics[key] <= 1.0 for key in ("accuracy", "answer_found_rate", "step_accuracy"))
