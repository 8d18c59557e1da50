"""The CPU benchmark matrix: every algorithm's run composes against verl's config with the CPU preset."""

import hashlib
import json
import subprocess
from types import SimpleNamespace

import pytest
from conftest import verl_config

from benchmarks import matrix
from bot_grpo_verl.rewards import react_tsx

ASSETS = SimpleNamespace(
    train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", test_parquet="/d/test.parquet", model_dir="/m"
)
EXPECTED = {  # algorithm -> (estimator, reward manager)
    "grpo": ("grpo", "naive"),
    "dr_grpo": ("grpo", "naive"),
    "dapo": ("grpo", "dapo"),
    "gspo": ("grpo", "naive"),
    "pure": ("pure", "bot_token"),
    "bot_grpo": ("bot_grpo", "bot_token"),
    "bot_grpo_uniform": ("bot_grpo", "bot_token"),
    "grpo_token_mean": ("grpo_token_mean", "bot_token"),
    "grpo_token_min": ("grpo_token_min", "bot_token"),
    "ps_grpo": ("ps_grpo", "bot_token"),
    "bot_grpo_shuffled": ("bot_grpo_shuffled", "bot_token"),
    "pure_sum": ("pure", "bot_token"),
}


def test_merge_presets_gathers_every_preset_once():
    merged = matrix.merge_presets(["+preset=cpu", "a=1", "+preset=[bot_grpo,cpu]", "b=2"])
    assert merged == ["+preset=[cpu,bot_grpo]", "a=1", "b=2"]


@pytest.mark.parametrize("algorithm", sorted(EXPECTED))
def test_every_algorithm_run_composes_with_the_cpu_preset(algorithm, tmp_path):
    overrides = matrix.run_overrides(matrix.TASKS["react"], ASSETS, algorithm, 1, 5, tmp_path)
    config = verl_config(*overrides)
    assert (config.algorithm.adv_estimator, config.reward.reward_manager.name) == EXPECTED[algorithm]
    assert config.actor_rollout_ref.rollout.name == "hf_cpu"  # the CPU preset
    assert config.trainer.total_training_steps == 5 and config.data.seed == 1
    assert config.data.max_response_length == matrix.MAX_RESPONSE_LENGTH


@pytest.mark.parametrize(("cell", "options"), [("bot_grpo@noisy", {"noise": 1.0}), ("grpo@unbounded", {"scale": 10.0})])
def test_reward_variants_of_the_stability_study_reach_the_reward_function(cell, options, tmp_path):
    overrides = matrix.run_overrides(matrix.TASKS["arith"], ASSETS, cell, 0, 5, tmp_path)
    config = verl_config(*overrides)
    kwargs = dict(config.reward.custom_reward_function.reward_kwargs)
    assert {key: float(kwargs[key]) for key in options} == options
    assert str(matrix.ARITHMETIC_STEPS) in (config.reward.custom_reward_function.path, kwargs.get("token_reward_path"))
    assert config.trainer.experiment_name == f"{cell}-seed0"


@pytest.mark.parametrize("variant", sorted(matrix.REACT_VARIANTS))
def test_every_react_variant_is_a_valid_set_of_react_tsx_options(variant, tmp_path):
    cell = f"bot_grpo@{variant}" if variant else "bot_grpo"
    config = verl_config(*matrix.run_overrides(matrix.TASKS["react"], ASSETS, cell, 0, 5, tmp_path))
    kwargs = dict(config.reward.custom_reward_function.reward_kwargs)
    options = react_tsx.parse_options(kwargs)
    assert (options.render, options.requirements_score) == {
        "": (False, "all"),
        "composed": (True, "all"),
        "composed_graded": (True, "fraction"),
        "composed_named": (True, "fraction_named"),
    }[variant]


def test_protocol_runs_set_their_learning_rate_and_validate_on_the_held_out_splits(tmp_path):
    validation = matrix.Validation(("val", "test"), every=4, samples=8)
    overrides = matrix.run_overrides(matrix.TASKS["arith_hard"], ASSETS, "ps_grpo", 0, 32, tmp_path, 3e-5, validation)
    config = verl_config(*overrides)
    assert config.actor_rollout_ref.actor.optim.lr == 3e-5
    assert list(config.data.val_files) == ["/d/val.parquet", "/d/test.parquet"]
    assert config.trainer.val_before_train and config.trainer.test_freq == 4
    assert config.trainer.validation_data_dir == str(tmp_path / "validation")
    assert config.actor_rollout_ref.rollout.val_kwargs.n == 8
    assert config.actor_rollout_ref.rollout.val_kwargs.temperature == 1.0
    assert config.algorithm.adv_estimator == "ps_grpo" and config.reward.reward_manager.name == "bot_token"
    assert config.trainer.experiment_name == "ps_grpo-seed0-lr3e-05"


def test_a_sweep_can_skip_the_validation_before_training(tmp_path):
    validation = matrix.parse_validation("val", 16, 4, before=False)
    overrides = matrix.run_overrides(matrix.TASKS["arith"], ASSETS, "grpo", 0, 32, tmp_path, 1e-5, validation)
    config = verl_config(*overrides)
    assert not config.trainer.val_before_train and config.trainer.test_freq == 16
    assert list(config.data.val_files) == ["/d/val.parquet"]
    assert config.actor_rollout_ref.rollout.val_kwargs.n == 4


def test_runs_without_validation_do_not_validate(tmp_path):
    overrides = matrix.run_overrides(matrix.TASKS["react"], ASSETS, "grpo", 0, 7, tmp_path)
    config = verl_config(*overrides)
    assert config.trainer.test_freq == -1 and not config.trainer.val_before_train
    assert config.actor_rollout_ref.actor.optim.lr == 1e-4  # the base settings'


def test_held_out_counts_assign_each_sample_to_its_problem_and_split(tmp_path):
    problems = {"Compute 3 + 4.": ("val", 0), "Compute 13 + 4.": ("val", 1), "Compute 3 + 4 * 2.": ("test", 0)}
    samples = [
        ("Compute 3 + 4.", 1.0),
        ("Compute 3 + 4.", 0.0),
        ("Compute 13 + 4.", 1.0),
        ("Compute 3 + 4 * 2.", 0.0),
        ("Compute 3 + 4 * 2.", 1.0),
        ("Compute 3 + 4 * 2.", 1.0),
    ]
    dump = tmp_path / "4.jsonl"
    lines = [json.dumps({"input": f"<|im_start|>user\n{p}<|im_end|>\n", "acc": acc}) for p, acc in samples]
    dump.write_text("\n".join(lines) + "\n")
    assert matrix.held_out_counts(dump, problems) == {"val": [[2, 1], [1, 1]], "test": [[3, 2]]}
    dump.write_text(json.dumps({"input": "Compute 9 - 9.", "acc": 1.0}) + "\n")
    with pytest.raises(ValueError, match="matches no held-out problem"):
        matrix.held_out_counts(dump, problems)


def test_react_records_compiles_as_asked_beside_the_compile_rate(tmp_path):
    reference = "```tsx\nexport function A() {\n  return <ul>{xs.map((x) => <li key={x}>{x}</li>)}</ul>;\n}\n```"
    asked = reference.replace("xs.map", "items.map")  # other names, same elements: as asked
    template = "```tsx\nexport function B() {\n  return <strong>{x}</strong>;\n}\n```"  # compiles, not as asked
    generic = (
        "```tsx\nconst [n, setN] = useState<number>(0);\nreturn <ul><li>{n}</li></ul>;\n```"  # no <number> element
    )
    problems = {"Write a list A.": ("test", 0), "Write a list C.": ("test", 1)}
    samples = [("A", asked, 1.0), ("A", template, 1.0), ("A", reference, 0.0), ("C", generic, 1.0)]
    dump = tmp_path / "10.jsonl"
    lines = [
        json.dumps({"input": f"user\nWrite a list {p}.", "output": o, "gts": reference, "acc": a})
        for p, o, a in samples
    ]
    dump.write_text("\n".join(lines) + "\n")
    assert matrix.held_out_record(dump, problems, matrix.TASKS["react"].as_asked) == {
        "test": [[3, 2], [1, 1]],
        "test:as_asked": [[3, 1], [1, 1]],
    }
    assert matrix.held_out_record(dump, problems, matrix.TASKS["arith"].as_asked) == {"test": [[3, 2], [1, 1]]}


def test_runs_go_seed_by_seed_at_every_lr_or_at_each_cells_chosen_one(tmp_path):
    assert matrix.plan_runs(["grpo", "bot_grpo"], [1e-5, 1e-4], [0, 1]) == [
        ("grpo", 1e-5, 0), ("bot_grpo", 1e-5, 0), ("grpo", 1e-4, 0), ("bot_grpo", 1e-4, 0),
        ("grpo", 1e-5, 1), ("bot_grpo", 1e-5, 1), ("grpo", 1e-4, 1), ("bot_grpo", 1e-4, 1),
    ]  # fmt: skip
    sweep = tmp_path / "sweep.json"
    chosen = {"grpo": {"lr": 3e-05, "chosen_by": "grpo"}, "dr_grpo": {"lr": 3e-05, "chosen_by": "grpo"},
              "bot_grpo": {"lr": 0.0001, "chosen_by": "bot_grpo"}}  # fmt: skip
    sweep.write_text(json.dumps({"task": "arith", "chosen": chosen}))
    assert matrix.plan_runs(["bot_grpo", "dr_grpo"], [None], [100, 101], matrix.chosen_lrs(sweep)) == [
        ("bot_grpo", 1e-4, 100), ("dr_grpo", 3e-5, 100), ("bot_grpo", 1e-4, 101), ("dr_grpo", 3e-5, 101),
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"no chosen learning rate for \['pure'\]"):
        matrix.plan_runs(["grpo", "pure"], [None], [100], matrix.chosen_lrs(sweep))


def test_an_unknown_cell_or_a_task_without_held_out_problems_is_refused(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown algorithm"):
        matrix.run_matrix("arith", [("grpo", None, 0), ("nope", None, 0)], 1, tmp_path, tmp_path, None, None, False)
    without = matrix.CpuTask(matrix.REACT, matrix.REACT_TSX, "reward_extra/compiled/mean", 0.8, {"": ()}, False)
    monkeypatch.setitem(matrix.TASKS, "no_held_out", without)
    with pytest.raises(ValueError, match="no held-out problems"):
        matrix.run_matrix("no_held_out", [("grpo", None, 0)], 1, tmp_path, tmp_path, matrix.Validation(), None, False)


def test_a_run_summary_is_committed_alone_in_the_repository_that_holds_it(tmp_path):
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "other.txt").write_text("staged, not ours\n")
    git("add", "other.txt")
    summary = tmp_path / "runs" / "grpo__lr0.0001__seed0.json"
    summary.parent.mkdir()
    summary.write_text("{}\n")
    matrix.commit(summary, "benchmark run: arith grpo")
    assert git("log", "--format=%s") == "benchmark run: arith grpo\n"
    assert git("show", "--name-only", "--format=").split() == ["runs/grpo__lr0.0001__seed0.json"]
    assert git("diff", "--cached", "--name-only").split() == ["other.txt"]


def test_runs_are_added_to_committed_ones_only_from_the_same_warm_start(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    assets = SimpleNamespace(model_dir=model)
    warm_start = matrix.warm_start_sha256(assets)
    assert warm_start == hashlib.sha256(b"weights").hexdigest()
    summaries = tmp_path / "results" / "arith" / "runs"
    summaries.mkdir(parents=True)
    matrix.check_warm_start(summaries, warm_start)  # nothing committed yet
    (summaries / matrix.run_file_name("grpo", 1e-5, 0)).write_text(json.dumps({"warm_start_sha256": warm_start}))
    matrix.check_warm_start(summaries, warm_start)
    other = rf"another warm start \({warm_start[:16]}: 1 runs, e\.g\. grpo__lr1e-05__seed0"
    with pytest.raises(ValueError, match=other):
        matrix.check_warm_start(summaries, "0" * 64)

    (summaries / matrix.run_file_name("pure", None, 1)).write_text(json.dumps({"task": "arith"}))
    with pytest.raises(ValueError, match=r"not recorded: 1 runs, e\.g\. pure__lrbase__seed1"):
        matrix.check_warm_start(summaries, warm_start)
    # the matrix refuses before it trains anything, and only when it has a run left to add
    monkeypatch.setattr(matrix, "build_assets", lambda *args, **kwargs: assets)
    monkeypatch.setattr(matrix, "run_verl", lambda *args, **kwargs: pytest.fail("trained despite the refusal"))

    def run(plan):
        matrix.run_matrix("arith", plan, 1, tmp_path, tmp_path, None, tmp_path / "results", False)

    with pytest.raises(ValueError, match="another warm start"):
        run([("grpo", 1e-5, 0), ("grpo", 1e-5, 1)])
    run([("grpo", 1e-5, 0), ("pure", None, 1)])


def test_a_run_summary_records_the_spread_of_response_lengths_within_each_prompt_group(tmp_path):
    def rollout(uid, index, length):
        return json.dumps({"key": f"{uid}_{index}_0", "response_ids": [7] * length})

    rows = [{"step": 0, "data": {"val-core/acc": 0.1}}]
    rows += [{"step": step, "data": {"timing_s/step": 1.0}} for step in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    dumps = tmp_path / "rollouts"
    dumps.mkdir()
    # step 1: lengths 2 and 4 (std 1) in one group, 3 and 3 (std 0) in the other; step 2: 1, 1, 7 (std 2*sqrt(2))
    lines = [rollout("a", 0, 2), rollout("b", 0, 3), rollout("a", 1, 4), rollout("b", 1, 3)]
    (dumps / "1.tokens.jsonl").write_text("\n".join(lines) + "\n")
    (dumps / "2.tokens.jsonl").write_text("\n".join([rollout("c", 0, 1), rollout("c", 1, 1), rollout("c", 2, 7)]))
    (dumps / "2.jsonl").write_text("not a token dump\n")
    summary = matrix.run_summary(tmp_path, "token_credit", "bot_grpo", 1e-4, 0, None, "0" * 64)
    assert summary["train"][matrix.WITHIN_GROUP_LENGTH_STD] == [None, 0.5, pytest.approx(2 * 2**0.5)]
    assert summary["train"]["timing_s/step"] == [None, 1.0, 1.0]

    (dumps / "1.tokens.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"1\.tokens\.jsonl holds no rollout"):
        matrix.run_summary(tmp_path, "token_credit", "bot_grpo", 1e-4, 0, None, "0" * 64)
    for dump in dumps.iterdir():
        dump.unlink()
    summary = matrix.run_summary(tmp_path, "token_credit", "grpo", 1e-4, 0, None, "0" * 64)
    assert matrix.WITHIN_GROUP_LENGTH_STD not in summary["train"]
