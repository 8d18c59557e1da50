"""The token-credit task family: problem generation, the per-item reward against an independent computation, its
label noise measured, its matrix registration, and a reduced build of its assets read by verl's RLHFDataset."""

import random
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import verl_config
from tiny_demo import TINY as DEMO_TINY

from benchmarks import matrix
from benchmarks import token_credit as study
from bot_grpo_verl.reward.manager import TokenRewardConfig, aligned_token_rewards
from bot_grpo_verl.reward.token_rewards import parse_reward_result
from bot_grpo_verl.rewards import token_credit
from demo.assets import build_assets, install_warm_start
from demo.tiny_model import response_ids, train_tokenizer
from demo.token_credit import (
    ALPHABET,
    KINDS,
    MAX_ITEMS,
    MIN_ITEMS,
    TOKEN_CREDIT,
    Transformation,
    generate_transformations,
    transformation_metrics,
)
from demo.training import TreeCpu

ROOT = Path(__file__).resolve().parents[1]
TINY = replace(DEMO_TINY, vocab_size=300, max_position_embeddings=160, max_response_tokens=72)


def score(text, ground_truth="b f a c", **options):
    return token_credit.compute_score("token_credit", text, ground_truth, {}, **options)


def labels(result):
    return [value for _, _, value in result["spans"]]


def all_labels(result):
    """The items' labels, then the stop's (the EOS's)."""
    return [*labels(result), result["uncovered"]]


# ---------------------------------------------------------------- problem generation


def test_each_kind_is_written_and_solved_as_specified():
    items = tuple("cafb")
    assert Transformation("reverse", items).prompt == "reverse: c a f b"
    assert Transformation("reverse", items).response == "b f a c"
    assert Transformation("sort", items).response == "a b c f"
    replace_a = Transformation("replace", (*items, "a"), "a", "d")
    assert (replace_a.prompt, replace_a.response) == ("replace a with d: c a f b a", "c d f b d")


@pytest.mark.parametrize(
    "arguments",
    [
        ("rotate", ("a",)),
        ("sort", ()),
        ("sort", ("z",)),
        ("sort", ("ab",)),
        ("replace", ("a",)),
        ("replace", ("a",), "b", "c"),
        ("replace", ("a",), "a", "a"),
        ("sort", ("a",), "a", "b"),
    ],
)
def test_malformed_problems_are_refused(arguments):
    with pytest.raises(ValueError):
        Transformation(*arguments)


def test_generated_problems_are_exact_deterministic_distinct_and_span_the_lengths():
    problems = generate_transformations(600, seed=3)
    assert problems == generate_transformations(600, seed=3) != generate_transformations(600, seed=4)
    assert len({problem.prompt for problem in problems}) == 600
    assert [problem.kind for problem in problems[:6]] == [*KINDS, *KINDS]
    lengths = [len(problem.items) for problem in problems]
    assert min(lengths) == MIN_ITEMS and max(lengths) == MAX_ITEMS
    for problem in problems:
        instruction, letters = problem.prompt.split(": ")
        letters = letters.split(" ")
        expected = {  # from the prompt's text alone
            "reverse": letters[::-1],
            "sort": sorted(letters),
        }.get(instruction) or [instruction.split()[3] if x == instruction.split()[1] else x for x in letters]
        assert problem.response.split(" ") == expected


def test_every_answer_letter_is_one_token_of_the_trained_tokenizer():
    problems = generate_transformations(200, seed=0)
    texts = [text for p in problems for text in (f"user\n{p.prompt}", f"assistant\n{p.response}")]
    tokenizer = train_tokenizer(texts, 300)
    for problem in problems[:50]:
        assert len(response_ids(tokenizer, problem.response)) == len(problem.items) + 1  # + EOS
    assert MIN_ITEMS + 1 == 8 and MAX_ITEMS + 1 == 64  # the 8-64 response tokens


# ---------------------------------------------------------------- the reward


def reference_labels(response: str, truth: str) -> list[float]:
    """Independent per-item labels: compare the whitespace-split lists position by position."""
    got, want = response.split(), truth.split()
    return [float(i < len(want) and got[i] == want[i]) for i in range(len(got))]


def test_a_right_answer_scores_one_with_every_label_one_and_spans_tiling_it():
    result = score("b f a c")
    assert (result["score"], result["acc"], result["items_correct"], result["length_error"]) == (1.0, 1.0, 1.0, 0.0)
    assert result["spans"] == [(0, 1, 1.0), (1, 3, 1.0), (3, 5, 1.0), (5, 7, 1.0)]
    assert result["uncovered"] == 1.0


@pytest.mark.parametrize(
    ("response", "expected", "items_correct"),
    [
        ("b f x c", [1, 1, 0, 1], 0.75),  # one wrong letter, stopped at the right length
        ("b a c", [1, 0, 0], 0.25),  # a dropped letter shifts every later one
        ("b f a c c", [1, 1, 1, 1, 0], 1.0),  # one past the end
        ("b f", [1, 1], 0.5),  # stopped early
        ("", [], 0.0),
    ],
)
def test_wrong_answers_score_zero_with_their_letters_labelled_in_place(response, expected, items_correct):
    result = score(response)
    assert result["score"] == result["acc"] == 0.0
    assert labels(result) == expected == reference_labels(response, "b f a c")
    assert result["items_correct"] == items_correct
    assert result["length_error"] == len(expected) - 4
    assert result["uncovered"] == float(len(expected) == 4)  # the stop: right only at the reference's length


def test_the_reward_matches_the_independent_labels_on_random_answers():
    rng = random.Random(0)
    for problem in generate_transformations(200, seed=1):
        target = list(problem.response.split())
        for _ in range(rng.randint(0, 3)):  # substitutions, drops and insertions
            where = rng.randrange(len(target) + 1)
            edit = rng.choice(("sub", "drop", "insert"))
            if edit == "insert" or where == len(target):
                target.insert(where, rng.choice(ALPHABET))
            elif edit == "drop":
                del target[where]
            else:
                target[where] = rng.choice(ALPHABET)
        response = rng.choice((" ", "  ", "\n")).join(target) + rng.choice(("", " "))
        result = score(response, problem.response)
        assert labels(result) == reference_labels(response, problem.response)
        assert result["score"] == float(response.split() == problem.response.split())
        assert result["uncovered"] == float(len(response.split()) == len(problem.items))
        covered = "".join(response[start:end] for start, end, _ in result["spans"])
        assert covered == response.rstrip()  # tiling up to the last item


@pytest.mark.parametrize(
    ("response", "expected"),
    [("b f x c", [1.0, 1.0, 0.0, 1.0, 1.0]), ("b f", [1.0, 1.0, 0.0]), ("b f a c c", [1.0, 1.0, 1.0, 1.0, 0.0, 0.0])],
    ids=["wrong letter, right stop", "stopped early", "stopped late"],
)
def test_spans_become_one_reward_per_letter_token_and_the_stops_label_on_eos(response, expected):
    ranges = np.array([[0, 1], *[[i - 1, i + 1] for i in range(2, len(response), 2)], [len(response)] * 2])
    assert "".join(response[start:end] for start, end in ranges) == response  # " x" tokens, then an EOS
    result = score(response)
    parsed = parse_reward_result(result, len(response))
    assert parsed.score == 0.0 and parsed.uncovered == expected[-1]
    rewards, info = aligned_token_rewards(result, response, ranges, TokenRewardConfig())
    assert rewards.tolist() == expected  # the outcome (0) is on no token: the EOS carries whether it stopped right
    steps, _ = aligned_token_rewards(result, response, ranges, TokenRewardConfig(placement="step_end"))
    assert steps.tolist() == expected  # each letter a step, and the stop one more (ps_grpo, pure)


@pytest.mark.parametrize("flip", [0.1, 0.3])
def test_noisy_labels_flip_at_the_asked_rate_stably_per_sample_and_leave_the_score_exact(flip):
    problems = generate_transformations(400, seed=2)
    flipped = total = 0
    for problem in problems:
        response = problem.response if len(problem.items) % 2 else problem.response[::-1]  # some wrong ones
        clean, noisy = score(response, problem.response), score(response, problem.response, flip=flip)
        assert noisy == score(response, problem.response, flip=flip)  # the same sample, the same flips
        assert (noisy["score"], noisy["acc"], noisy["items_correct"]) == (
            clean["score"],
            clean["acc"],
            clean["items_correct"],
        )
        changed = [a != b for a, b in zip(all_labels(clean), all_labels(noisy), strict=True)]
        assert noisy["flipped"] == pytest.approx(sum(changed) / len(changed))
        flipped, total = flipped + sum(changed), total + len(changed)
    # ~14,000 labels: the binomial standard error is under 0.004 (the stops' 400 among them)
    assert abs(flipped / total - flip) < 0.015


def test_options_and_arguments_are_checked():
    for options in ({"flip": 1.0}, {"flip": -0.1}, {"flip": True}, {"flip": "0.1"}, {"noise": 0.1}):
        with pytest.raises(ValueError):
            score("a", **options)
    for truth in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="ground_truth"):
            score("a", truth)
    with pytest.raises(ValueError, match="solution_str"):
        score(None)


def test_sample_metrics_count_exact_answers_letters_and_lengths():
    problems = [Transformation("reverse", tuple("cafb")), Transformation("sort", tuple("cafb"))]
    metrics = transformation_metrics(["b f a c", "a b c"], problems)
    assert metrics == {"accuracy": 0.5, "item_accuracy": (1.0 + 0.75) / 2, "length_match_rate": 0.5}


# ---------------------------------------------------------------- the matrix


@pytest.mark.parametrize(("cell", "flip"), [("bot_grpo", None), ("bot_grpo@flip10", 0.1), ("grpo@flip30", 0.3)])
def test_the_matrix_runs_the_task_with_its_budgets_and_label_noise(cell, flip, tmp_path):
    assets = type("Assets", (), {"train_parquet": "/t", "val_parquet": "/v", "test_parquet": "/s", "model_dir": "/m"})
    config = verl_config(*matrix.run_overrides(matrix.TASKS["token_credit"], assets, cell, 0, 5, tmp_path))
    assert (config.data.max_prompt_length, config.data.max_response_length) == (96, 72)
    kwargs = dict(config.reward.custom_reward_function.get("reward_kwargs") or {})
    assert (float(kwargs["flip"]) if "flip" in kwargs else None) == flip
    assert str(matrix.TOKEN_CREDIT_REWARD) in (
        config.reward.custom_reward_function.path,
        kwargs.get("token_reward_path"),
    )


def test_dapo_overlong_shaping_follows_the_tasks_response_budget(tmp_path):
    assets = type("Assets", (), {"train_parquet": "/t", "val_parquet": "/v", "test_parquet": "/s", "model_dir": "/m"})
    config = verl_config(*matrix.run_overrides(matrix.TASKS["token_credit"], assets, "dapo", 0, 5, tmp_path))
    kwargs = config.reward.reward_kwargs
    assert (kwargs.max_resp_len, kwargs.overlong_buffer_cfg.len) == (72, 14)


# ---------------------------------------------------------------- assets


def test_a_reduced_build_writes_disjoint_splits_verl_reads(tmp_path):
    built = build_assets(tmp_path, task=TOKEN_CREDIT, settings=TINY, progress=lambda message: None)
    frames = {split: pd.read_parquet(getattr(built, f"{split}_parquet")) for split in ("train", "val", "test")}
    prompts = {split: {row[0]["content"] for row in frame.prompt} for split, frame in frames.items()}
    assert sum(map(len, prompts.values())) == len(set.union(*prompts.values()))  # disjoint splits
    for row in frames["val"].itertuples():
        problem, truth = row.prompt[0]["content"], row.reward_model["ground_truth"]
        assert token_credit.compute_score("token_credit", truth, truth)["acc"] == 1.0
        assert row.extra_info["items"] == len(problem.split(": ")[1].split()) == len(truth.split())
    metrics = built.metrics
    assert {"accuracy", "item_accuracy", "length_match_rate"} <= set(metrics)
    assert metrics["solution_tokens"]["max"] <= 64 and np.isfinite(metrics["sft_loss_after"])


# ---------------------------------------------------------------- the CPU cost of a run

GRANDCHILD = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(2)"


def test_a_runs_cpu_seconds_count_its_descendants():
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {GRANDCHILD!r}])"
    process = subprocess.Popen([sys.executable, "-c", child])
    cpu = TreeCpu()
    while process.poll() is None:
        cpu.sample(process.pid)
        time.sleep(0.2)
    assert 0.5 <= cpu.total < 5  # the grandchild's 0.6 s, counted once however often it was sampled


# ---------------------------------------------------------------- the study's commands


@pytest.mark.parametrize(("accuracy", "fine"), [(0.0, False), (0.09, False), (0.1, True), (0.3, True), (0.31, False)])
def test_only_a_modest_warm_start_may_start_the_study(accuracy, fine):
    problem = study.start_problem({"accuracy": accuracy, "eval_samples": 128})
    assert (problem is None) == fine
    assert fine or f"{accuracy:.3f} of 128" in problem


def test_compare_runs_one_seed_of_the_three_cells_on_validation_then_reports_them(tmp_path, monkeypatch):
    calls = {}
    monkeypatch.setattr(matrix, "run_matrix", lambda *args: calls.setdefault("matrix", args))
    monkeypatch.setattr(study.protocol_report, "main", lambda argv: calls.setdefault("report", argv) and 0)
    assert study.main(["compare", "--steps", "6", "--lr", "1e-3", "--seed", "4", "--out", str(tmp_path)]) == 0
    task, plan, steps, runs, _, validation, results, commit, kept = calls["matrix"]
    assert (task, steps, runs, results, commit) == ("token_credit", 6, tmp_path / "runs", tmp_path / "results", False)
    assert kept == study.KEPT_WARM_START
    assert sorted(plan) == [(cell, 1e-3, 4) for cell in ("bot_grpo", "bot_grpo_shuffled", "grpo")]
    assert validation.splits == ("val",) and validation.before
    report = calls["report"]
    assert report[report.index("--results") + 1] == str(tmp_path / "results")
    assert report[report.index("--split") + 1] == "val"  # the study's test split stays unread


def test_compare_runs_each_cell_at_the_studys_chosen_rate_once_the_sweep_is_committed(tmp_path):
    sweep = tmp_path / "sweep.json"
    runs, report = study.compare_arguments(6, None, 0, 2, 2, tmp_path, sweep=sweep)
    assert runs[runs.index("--lrs") + 1] == "3e-05" and "--lrs-from-sweep" not in report  # no sweep yet
    sweep.write_text("{}")
    runs, report = study.compare_arguments(6, None, 0, 2, 2, tmp_path, sweep=sweep)
    assert runs[runs.index("--chosen-lrs") + 1] == report[report.index("--lrs-from-sweep") + 1] == str(sweep)
    runs, report = study.compare_arguments(6, 1e-4, 0, 2, 2, tmp_path, sweep=sweep)
    assert runs[runs.index("--lrs") + 1] == "0.0001" and "--chosen-lrs" not in runs  # an asked rate wins


def test_the_studys_kept_warm_start_is_a_build_of_todays_task(tmp_path):
    """``compare`` and the queue start from it: a change of the task's settings must fail here, not in a run."""
    root = install_warm_start(tmp_path, study.KEPT_WARM_START, task=TOKEN_CREDIT, progress=lambda message: None)
    assert build_assets(tmp_path, task=TOKEN_CREDIT, progress=lambda message: None).root == root
