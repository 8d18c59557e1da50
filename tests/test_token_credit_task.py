"""The token-credit task family: problem generation, the per-item reward against an independent computation, its
label noise measured, its matrix registration, and a reduced build of its assets read by verl's RLHFDataset."""

import json
import random
import shutil
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
    TOKEN_CREDIT_PREFIX,
    Transformation,
    generate_transformations,
    transformation_metrics,
)
from demo.training import TreeCpu

ROOT = Path(__file__).resolve().parents[1]
TINY = replace(DEMO_TINY, vocab_size=300, max_position_embeddings=160, max_response_tokens=72)


def score(text, ground_truth="b f a c", extra_info=None, **options):
    return token_credit.compute_score("token_credit", text, ground_truth, extra_info or {}, **options)


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
        ("sort", ("a", "b"), None, None, 0),  # a right answer holds at least one letter
        ("sort", ("a", "b"), None, None, 2, 1),  # written shorter than the minimum
        ("sort", ("a", "b"), None, None, 1, 3),  # written longer than the list
        ("sort", ("a", "b"), None, None, 3),  # a minimum beyond the list
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


def test_free_length_problems_ask_for_their_minimum_and_write_prefixes_of_every_allowed_length():
    problems = generate_transformations(600, seed=3, min_items=MIN_ITEMS)
    assert problems == generate_transformations(600, seed=3, min_items=MIN_ITEMS)
    assert len({problem.prompt for problem in problems}) == 600
    spare = []  # letters each written answer leaves out
    for problem in problems:
        instruction, letters = problem.prompt.split(": ")
        assert instruction.endswith(f", at least {MIN_ITEMS}") and letters.split(" ") == list(problem.items)
        truth, info = problem.reference
        assert truth == " ".join(problem.target) and info["min_items"] == MIN_ITEMS == problem.min_items
        assert truth.startswith(problem.response) and MIN_ITEMS <= len(problem.response.split()) <= len(problem.items)
        spare.append(len(problem.items) - len(problem.response.split()))
    assert min(spare) == 0 and max(spare) > 40  # some whole answers, some far shorter
    fixed = generate_transformations(600, seed=3)
    assert all(problem.min_items is problem.answer_items is None for problem in fixed)
    assert all("min_items" not in problem.reference[1] for problem in fixed)
    assert [problem.items for problem in fixed[:1]] == [problem.items for problem in problems[:1]]  # the same draws


def test_every_answer_letter_is_one_token_of_the_trained_tokenizer():
    problems = generate_transformations(200, seed=0)
    texts = [text for p in problems for text in (f"user\n{p.prompt}", f"assistant\n{p.response}")]
    tokenizer = train_tokenizer(texts, 300)
    for problem in problems[:50]:
        assert len(response_ids(tokenizer, problem.response)) == len(problem.items) + 1  # + EOS
    assert MIN_ITEMS + 1 == 8 and MAX_ITEMS + 1 == 64  # the issue's 8-64 response tokens


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
    ("response", "expected", "stopped_right", "items_correct"),
    [
        ("b f", [1, 1], True, 1.0),  # a prefix of the minimum's length is right
        ("b f a", [1, 1, 1], True, 1.0),
        ("b f a c", [1, 1, 1, 1], True, 1.0),
        ("b", [1], False, 0.5),  # too short: answers for the minimum's 2 letters
        ("b f a c c", [1, 1, 1, 1, 0], False, 1.0),  # past the end
        ("b x a", [1, 0, 1], True, 2 / 3),
        ("", [], False, 0.0),
    ],
)
def test_free_length_answers_are_right_as_any_long_enough_prefix(response, expected, stopped_right, items_correct):
    result = score(response, extra_info={"min_items": 2})
    assert labels(result) == expected == reference_labels(response, "b f a c")
    assert result["uncovered"] == float(stopped_right)
    assert result["score"] == result["acc"] == float(stopped_right and all(expected))
    assert result["items_correct"] == pytest.approx(items_correct)


def test_free_length_rewards_match_an_independent_check_on_random_answers():
    rng = random.Random(5)
    for problem in generate_transformations(200, seed=6, min_items=MIN_ITEMS):
        truth, info = problem.reference
        written = problem.response.split()[: rng.randint(1, len(problem.items) + 2)]
        if rng.random() < 0.5:
            written[rng.randrange(len(written))] = rng.choice(ALPHABET)
        response = " ".join(written)
        result = score(response, truth, info)
        prefix = truth.split()[: len(written)] == written
        assert result["score"] == float(prefix and MIN_ITEMS <= len(written) <= len(problem.items))
        assert labels(result) == reference_labels(response, truth)
        assert score(response, truth, info, flip=0.3)["score"] == result["score"]  # noise leaves the score exact


@pytest.mark.parametrize("min_items", [0, 5, 2.0, True, "2", -1])
def test_a_bad_minimum_is_refused_by_name(min_items):
    with pytest.raises(ValueError, match="min_items"):
        score("b f", extra_info={"min_items": min_items})


def test_without_a_minimum_the_whole_answer_is_asked_for():
    assert score("b f", extra_info={"min_items": None}) == score("b f") == score("b f", extra_info={"kind": "x"})
    assert score("b f")["uncovered"] == 0.0


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
    free = [Transformation("reverse", tuple("cafb"), min_items=2), Transformation("sort", tuple("cafb"), min_items=2)]
    metrics = transformation_metrics(["b f", "a"], free)
    assert metrics == {"accuracy": 0.5, "item_accuracy": (1.0 + 0.5) / 2, "length_match_rate": 0.5}


# ---------------------------------------------------------------- the matrix


@pytest.mark.parametrize("task", ["token_credit", "token_credit_prefix"])
@pytest.mark.parametrize(("cell", "flip"), [("bot_grpo", None), ("bot_grpo@flip10", 0.1), ("grpo@flip30", 0.3)])
def test_the_matrix_runs_the_task_with_its_budgets_and_label_noise(task, cell, flip, tmp_path):
    assets = type("Assets", (), {"train_parquet": "/t", "val_parquet": "/v", "test_parquet": "/s", "model_dir": "/m"})
    assert matrix.TASKS[task].assets.name == task
    config = verl_config(*matrix.run_overrides(matrix.TASKS[task], assets, cell, 0, 5, tmp_path))
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


@pytest.mark.parametrize("task", [TOKEN_CREDIT, TOKEN_CREDIT_PREFIX], ids=lambda task: task.name)
def test_a_reduced_build_writes_disjoint_splits_verl_reads(task, tmp_path):
    built = build_assets(tmp_path, task=task, settings=TINY, progress=lambda message: None)
    frames = {split: pd.read_parquet(getattr(built, f"{split}_parquet")) for split in ("train", "val", "test")}
    prompts = {split: {row[0]["content"] for row in frame.prompt} for split, frame in frames.items()}
    assert sum(map(len, prompts.values())) == len(set.union(*prompts.values()))  # disjoint splits
    fewest = MIN_ITEMS if task is TOKEN_CREDIT_PREFIX else None
    for row in frames["val"].itertuples():
        problem, truth, info = row.prompt[0]["content"], row.reward_model["ground_truth"], row.extra_info
        assert info["items"] == len(problem.split(": ")[1].split()) == len(truth.split())
        assert info.get("min_items") == fewest
        shortest = " ".join(truth.split()[: fewest or len(truth.split())])
        assert token_credit.compute_score("token_credit", shortest, truth, info)["acc"] == 1.0
        assert token_credit.compute_score("token_credit", shortest[:-2], truth, info)["acc"] == 0.0
    corpus = [json.loads(line) for line in (Path(built.root) / "sft_corpus.jsonl").read_text().splitlines()]
    left_out = [len(line["prompt"].split(": ")[1].split()) - len(line["response"].split()) for line in corpus]
    assert (max(left_out) > 0) == (task is TOKEN_CREDIT_PREFIX)  # the free-length corpus writes prefixes
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


def kept_warm_start(task) -> Path:
    """The committed build of ``task`` the queue starts from (the one whose manifest names it)."""
    (kept,) = [
        path.parent
        for path in (study.STUDY_RESULTS / "warm-starts").glob("*/manifest.json")
        if json.loads(path.read_text())["task"] == task.name
    ]
    return kept


@pytest.mark.parametrize("task", [TOKEN_CREDIT, TOKEN_CREDIT_PREFIX], ids=lambda task: task.name)
def test_the_studys_kept_warm_starts_are_builds_of_todays_tasks(task, tmp_path):
    """``compare`` and the queue start from them: a change of a task's settings must fail here, not in a run."""
    kept = kept_warm_start(task)
    assert task is TOKEN_CREDIT_PREFIX or kept == study.KEPT_WARM_START
    root = install_warm_start(tmp_path, kept, task=task, progress=lambda message: None)
    assert build_assets(tmp_path, task=task, progress=lambda message: None).root == root
    assert study.start_problem(json.loads((kept / "manifest.json").read_text())["metrics"]) is None


# ---------------------------------------------------------------- the queue

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
case "$*" in
*" warm-start "*) mkdir -p "$BUILT" && echo '{"task": "token_credit_prefix"}' > "$BUILT/manifest.json" ;;
*edge-rates*) echo "bot_grpo 1e-05" ;;
*threshold.json*) echo 400 ;;
esac
"""


def run_queue(repo: Path, task: str, stage: str) -> tuple[int, list[str], str]:
    """``benchmarks/token_credit_queue.sh`` in a copy of its folder with a Python that records its calls."""
    (repo / "benchmarks").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "benchmarks" / "token_credit_queue.sh", repo / "benchmarks")
    fake = repo / "python.sh"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    calls = repo / "calls.txt"
    calls.unlink(missing_ok=True)
    kept = repo / "benchmarks/results/token-credit/warm-starts/0123456789abcdef"
    environment = {"PATH": "/usr/bin:/bin", "PY": str(fake), "CALLS": str(calls), "BUILT": str(kept), "TASK": task}
    done = subprocess.run(["bash", "benchmarks/token_credit_queue.sh", stage], cwd=repo, env=environment)
    log = (repo / "runs/token-credit/queue.log").read_text() if (repo / "runs").exists() else ""
    return done.returncode, calls.read_text().splitlines() if calls.exists() else [], log


def test_the_queue_builds_the_free_length_warm_start_once_then_runs_each_stage_from_it(tmp_path):
    repo = tmp_path / "repo"
    status, calls, log = run_queue(repo, "token_credit_prefix", "final")
    assert status == 1 and calls == [] and "no kept warm start of token_credit_prefix" in log
    status, calls, _ = run_queue(repo, "token_credit_prefix", "sweep")
    kept = "--warm-start benchmarks/results/token-credit/warm-starts/0123456789abcdef"
    assert status == 0 and len(calls) == 2
    assert calls[0].startswith("-m benchmarks.token_credit --task token_credit_prefix warm-start")
    assert "--task token_credit_prefix --algorithms grpo,bot_grpo,bot_grpo_uniform --lrs" in calls[1]
    assert calls[1].endswith(kept)
    status, calls, _ = run_queue(repo, "token_credit_prefix", "edge")  # kept: never built again
    assert status == 0 and "--sweep benchmarks/results/token-credit/token_credit_prefix/sweep.json" in calls[0]
    assert "--algorithms bot_grpo --lrs 1e-05" in calls[1] and calls[1].endswith(kept)
    status, calls, _ = run_queue(repo, "token_credit_prefix", "final")
    assert status == 0 and "token_credit_prefix/threshold.json" in calls[0]
    assert "--algorithms grpo,bot_grpo,bot_grpo_uniform --chosen-lrs" in calls[1] and "--steps 400" in calls[1]


def test_the_queue_runs_the_main_task_from_its_kept_warm_start_and_refuses_an_unknown_task(tmp_path):
    status, calls, _ = run_queue(tmp_path, "token_credit", "final")
    assert status == 0 and len(calls) == 2  # no build
    cells = "grpo,grpo_token_mean,bot_grpo,bot_grpo_uniform,bot_grpo_shuffled,dapo,ps_grpo,pure,bot_grpo@flip10"
    assert f"--algorithms {cells},bot_grpo@flip30 " in calls[1]
    assert calls[1].endswith("--warm-start benchmarks/results/token-credit/warm-starts/c2dea09be119fd63")
    assert run_queue(tmp_path, "token_credit_typo", "sweep")[:2] == (2, [])
