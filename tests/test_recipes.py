"""The paper-scale recipes against verl's real config and reward path, and the data scripts on local samples.

Nothing here downloads: recipes are only composed, data comes from small JSONL files written by the tests.
"""

import asyncio
import copy
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import verl_config
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto

from benchmarks.local_tokenizers import byte_level_bpe
from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig
from bot_grpo_verl.estimators.pure import PUREConfig
from bot_grpo_verl.reward.manager import TokenRewardConfig
from recipes import algorithms, report
from recipes.data import prepare_aime, prepare_react
from recipes.data.common import DataError
from recipes.launch import command, keep_earlier_metrics

ROOT = Path(__file__).resolve().parents[1]
from recipes.launch import main as launch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

PARSER = OverridesParser.create()
# The keys that define an algorithm (the issue's list): two algorithms' configs may differ only here.
ALGORITHM_KEYS = (
    "algorithm.",
    "actor_rollout_ref.actor.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high",
    "actor_rollout_ref.actor.loss_agg_mode",
    "actor_rollout_ref.actor.loss_scale_factor",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
    "reward.reward_manager.name",
    "reward.bot_token.",
    "reward.reward_kwargs.",
    "reward.custom_reward_function.path",
    "reward.custom_reward_function.reward_kwargs.token_reward_path",
    "trainer.experiment_name",  # the run's name
    "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",  # the run's folder: its metrics
    "trainer.validation_data_dir",  # and its validation samples
    "ray_kwargs.ray_init.runtime_env.env_vars.BOT_GRPO_SELECTED",  # the plugin's presets select it in every worker
)
# Keys verl's config does not define and that a recipe adds on purpose ('+'); anything else must exist.
NEW_KEYS = (
    "reward.custom_reward_function.reward_kwargs.",  # options of the reward function
    "reward.reward_kwargs.",  # verl's dapo reward manager reads its overlong settings here
    "data.apply_chat_template_kwargs.",  # an empty dict in verl's config
    "ray_kwargs.ray_init.runtime_env.env_vars.",  # the environment of verl's processes (the metrics file's path)
)
PRODUCT = [(t, m, a) for t in algorithms.TASKS for m in algorithms.MODELS for a in algorithms.ALGORITHMS]
# Composing costs ~0.5 s of YAML parsing a call: every algorithm with one model, every other model with DAPO
# (whose overrides are the most). Model and algorithm overrides name disjoint keys (checked on PRODUCT).
FIRST_MODEL, *OTHER_MODELS = algorithms.MODELS
COMPOSED = [(t, FIRST_MODEL, a) for t in algorithms.TASKS for a in algorithms.ALGORITHMS]
COMPOSED += [(t, m, "dapo") for t in algorithms.TASKS for m in OTHER_MODELS]


@pytest.fixture(scope="module")
def composed():
    """Compose verl's ``ppo_trainer`` with the given overrides, once per distinct list (seed 0)."""
    cache = {}

    def get(*overrides):
        if overrides not in cache:
            cache[overrides] = verl_config(*overrides)
        return cache[overrides]

    return get


def recipe(task, model, algorithm, seed=0):
    return tuple(algorithms.overrides(task, model, algorithm, seed, ROOT / algorithms.TASKS[task].data_dir))


def flat(config) -> dict:
    """``{"a.b.c": leaf}`` of a config, interpolations unresolved, lists as leaves."""
    out = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            out[prefix[:-1]] = node

    walk(OmegaConf.to_container(config, resolve=False), "")
    return out


MISSING = object()


@pytest.mark.parametrize(("task", "model", "algorithm"), PRODUCT)
def test_every_recipe_sets_each_key_once_and_adds_only_keys_new_by_design(task, model, algorithm):
    overrides = [PARSER.parse_override(text) for text in recipe(task, model, algorithm)]
    keys = [override.key_or_group for override in overrides]
    assert len(keys) == len(set(keys)), "a key is set twice"
    for override in overrides:
        if override.is_add():
            assert override.key_or_group == "preset" or override.key_or_group.startswith(NEW_KEYS), override.input_line
    assert keys.count("preset") == (algorithms.ALGORITHMS[algorithm].reward == "token")


@pytest.mark.parametrize(("task", "model", "algorithm"), COMPOSED)
def test_recipes_compose_against_verls_config_and_every_key_holds_its_value(composed, task, model, algorithm):
    overrides = recipe(task, model, algorithm)
    config = composed(*overrides)
    plain = composed()
    for text in overrides:
        override = PARSER.parse_override(text)
        key = override.key_or_group
        if key == "preset":  # a config group of this package, not a key
            assert override.value() in ("bot_grpo", "pure") and "preset" not in config
            continue
        if override.is_add():  # new by design: verl's own config has no such key
            assert OmegaConf.select(plain, key, default=MISSING) is MISSING, text
        value = OmegaConf.select(config, key, default=MISSING)
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        assert value == override.value(), text
    assert config.actor_rollout_ref.rollout.name == "vllm"


def test_the_table_refuses_inconsistent_rows():
    react = algorithms.TASKS["react"]
    with pytest.raises(ValueError, match="one full sequence"):
        dataclasses.replace(react, max_tokens_per_gpu=react.max_prompt_length + react.max_response_length - 1)
    with pytest.raises(ValueError, match="multiple of ppo_mini_batch_size"):
        dataclasses.replace(react, ppo_mini_batch_size=react.train_batch_size - 1)
    with pytest.raises(ValueError, match="reward must be one of"):
        algorithms.Algorithm(("algorithm.adv_estimator=grpo",), "dense", "?")
    with pytest.raises(ValueError, match="unknown model 'gpt'"):
        algorithms.overrides("react", "gpt", "grpo", 0, ROOT)


def test_a_misspelled_key_does_not_compose(composed):
    with pytest.raises(ConfigCompositionException):
        composed(*recipe("react", FIRST_MODEL, "grpo"), "actor_rollout_ref.actor.clip_ratio_hihg=0.28")


@pytest.mark.parametrize("task", algorithms.TASKS)
def test_algorithms_differ_only_in_algorithm_keys(composed, task):
    reference = flat(composed(*recipe(task, FIRST_MODEL, "grpo")))
    for algorithm in algorithms.ALGORITHMS:
        config = flat(composed(*recipe(task, FIRST_MODEL, algorithm)))
        differing = {key for key in reference.keys() | config.keys() if reference.get(key) != config.get(key)}
        assert not sorted(key for key in differing if not key.startswith(ALGORITHM_KEYS)), algorithm
        assert algorithm == "grpo" or differing - {"trainer.experiment_name"}, f"{algorithm} is grpo"


# What each algorithm must set (its paper's settings, verl 0.9.1 keys), checked on the composed config.
EXPECTED = {
    "grpo": {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": True,
             "reward.reward_manager.name": "naive"},
    "dr_grpo": {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": False,
                "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum-norm",
                "actor_rollout_ref.actor.loss_scale_factor": "max_response_length"},
    "dapo": {"actor_rollout_ref.actor.clip_ratio_low": 0.2, "actor_rollout_ref.actor.clip_ratio_high": 0.28,
             "actor_rollout_ref.actor.loss_agg_mode": "token-mean", "algorithm.filter_groups.enable": True,
             "algorithm.filter_groups.metric": "acc", "reward.reward_manager.name": "dapo",
             "reward.reward_kwargs.max_resp_len": "max_response_length",
             "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
             "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0},
    "gspo": {"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo", "actor_rollout_ref.actor.clip_ratio_low": 3e-4,
             "actor_rollout_ref.actor.clip_ratio_high": 4e-4,
             "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean"},
    "pure": {"algorithm.adv_estimator": "pure", "algorithm.pure.temperature": 0.1,
             "reward.reward_manager.name": "bot_token"},
    "bot_grpo": {"algorithm.adv_estimator": "bot_grpo", "algorithm.bot_grpo.weighting": "inverse_length",
                 "algorithm.bot_grpo.credit": "token", "reward.reward_manager.name": "bot_token"},
    "bot_grpo_uniform": {"algorithm.adv_estimator": "bot_grpo", "algorithm.bot_grpo.weighting": "uniform"},
    "bot_grpo_no_std": {"algorithm.adv_estimator": "bot_grpo", "algorithm.norm_adv_by_std_in_grpo": False},
    "bot_grpo_return_to_go": {"algorithm.adv_estimator": "bot_grpo", "algorithm.bot_grpo.credit": "return_to_go"},
    "grpo_token_mean": {"algorithm.adv_estimator": "grpo_token_mean", "reward.reward_manager.name": "bot_token"},
    "grpo_token_min": {"algorithm.adv_estimator": "grpo_token_min", "reward.reward_manager.name": "bot_token"},
    "ps_grpo": {"algorithm.adv_estimator": "ps_grpo", "reward.bot_token.placement": "step_end",
                "reward.reward_manager.name": "bot_token"},
    "bot_grpo_shuffled": {"algorithm.adv_estimator": "bot_grpo_shuffled", "reward.bot_token.placement": "spread"},
    "pure_sum": {"algorithm.adv_estimator": "pure", "algorithm.pure.credit": "sum"},
}  # fmt: skip
OUTCOME = ("grpo", "dr_grpo", "dapo", "gspo")
PLUGIN_OPTIONS = {
    "algorithm.bot_grpo.": lambda config: BoTGRPOConfig.from_algorithm_config(config.algorithm),
    "algorithm.pure.": lambda config: PUREConfig.from_algorithm_config(config.algorithm),
    "reward.bot_token.": lambda config: TokenRewardConfig.from_reward_config(config.reward),
}


def effective(config, key: str):
    """The value a run reads for ``key``: the plugin's options as their dataclass reads them (a preset lists an
    option at its default as null), any other key as composed."""
    prefix = next((prefix for prefix in PLUGIN_OPTIONS if key.startswith(prefix)), None)
    if prefix is None:
        return OmegaConf.select(config, key)
    return getattr(PLUGIN_OPTIONS[prefix](config), key[len(prefix) :])


@pytest.mark.parametrize("task", algorithms.TASKS)
def test_each_algorithm_has_its_papers_settings(composed, task):
    assert set(EXPECTED) == set(algorithms.ALGORITHMS)
    for algorithm, expected in EXPECTED.items():
        config = composed(*recipe(task, FIRST_MODEL, algorithm))
        for key, value in expected.items():
            value = config.data.max_response_length if value == "max_response_length" else value
            assert effective(config, key) == value, (algorithm, key)
        path = Path(config.reward.custom_reward_function.path)
        if algorithm in OUTCOME:  # scalar outcome through the wrapper, same function underneath
            assert path == ROOT / "recipes" / "outcome_reward.py"
            path = Path(config.reward.custom_reward_function.reward_kwargs.token_reward_path)
        assert path == ROOT / algorithms.TASKS[task].reward_path and path.is_file()
    dapo = composed(*recipe(task, FIRST_MODEL, "dapo"))
    assert 0 < dapo.reward.reward_kwargs.overlong_buffer_cfg.len < dapo.data.max_response_length


INNER_REWARD = textwrap.dedent(
    """
    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        assert kwargs.get("prm_backend") == "endpoint", kwargs  # the task's options arrive
        score = float(ground_truth in solution_str)
        return {"score": score, "spans": [(0, 1, -1.0)] * (len(solution_str) % 3), "chars": len(solution_str)}

    def with_acc(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": -1.0, "acc": 0.0}

    def bad_span(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 1.0, "spans": [(0, 10**6, 1.0)]}

    async def async_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return 1.0
    """
)


@pytest.fixture(scope="module")
def inner_reward(tmp_path_factory):
    path = tmp_path_factory.mktemp("reward") / "inner.py"
    path.write_text(INNER_REWARD)
    return path


def dapo_sample(tokenizer, response_tokens: int, ground_truth: str) -> DataProto:
    """One finished sample as verl's agent loop hands it to a reward manager."""
    prompt = torch.tensor(tokenizer.encode("Solve:", add_special_tokens=False))
    word = tokenizer.encode(" 42", add_special_tokens=False)
    responses = torch.tensor((word * response_tokens)[:response_tokens])
    input_ids = torch.cat([prompt, responses])
    batch = TensorDict(
        {
            "prompts": prompt[None],
            "responses": responses[None],
            "input_ids": input_ids[None],
            "attention_mask": torch.ones_like(input_ids)[None],
        },
        batch_size=1,
    )
    non_tensor = {
        "data_source": np.array(["aime_2024"]),
        "reward_model": np.array([{"ground_truth": ground_truth, "style": "rule"}]),
        "extra_info": np.array([{"index": 0}]),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def test_dapo_recipe_shapes_overlong_rewards_through_verls_dapo_manager(composed, inner_reward):
    from verl.trainer.ppo.reward import load_reward_manager

    config = composed(
        *recipe("aime", FIRST_MODEL, "dapo"),
        f"reward.custom_reward_function.reward_kwargs.token_reward_path={inner_reward}",
    )
    tokenizer = byte_level_bpe()
    budget, buffer = config.data.max_response_length, config.reward.reward_kwargs.overlong_buffer_cfg.len
    lengths = {"short": 100, "in_buffer": budget - buffer // 2, "full": budget}

    async def run():
        manager = load_reward_manager(config, tokenizer)
        assert type(manager).__name__ == "DAPORewardManager"
        return {name: await manager.run_single(dapo_sample(tokenizer, n, "42")) for name, n in lengths.items()}

    results = asyncio.run(run())
    for name, expected_penalty in {"short": 0.0, "in_buffer": -(buffer - buffer // 2) / buffer, "full": -1.0}.items():
        assert results[name]["reward_score"] == pytest.approx(1.0 + expected_penalty)
        assert results[name]["reward_extra_info"]["acc"] == 1.0 and "spans" not in results[name]["reward_extra_info"]


def test_outcome_wrapper_keeps_score_and_scalars_and_stacks_like_verl(inner_reward):
    from verl.utils.import_utils import load_module

    wrapper = load_module(str(ROOT / "recipes" / "outcome_reward.py"))  # by path, as verl loads it
    common = {"data_source": "x", "ground_truth": "7", "token_reward_path": str(inner_reward)}
    options = {"prm_backend": "endpoint"}
    results = [wrapper.compute_score(solution_str=text, **common, **options) for text in ("a 7", "b 77 c", "nope")]
    assert results[0] == {"acc": 1.0, "chars": 3.0, "score": 1.0}
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0]
    # verl's agent loop stacks every reward_extra_info key into one array: ragged spans would fail here
    for key in results[0]:
        assert np.array([r[key] for r in results]).shape == (3,)
    assert wrapper.compute_score(solution_str="x", **common, token_reward_name="with_acc") == {
        "acc": 0.0,
        "score": -1.0,
    }
    with pytest.raises(ValueError, match="out of range"):
        wrapper.compute_score(solution_str="x", **common, token_reward_name="bad_span")
    with pytest.raises(TypeError, match="coroutine"):
        wrapper.compute_score(solution_str="x", **common, token_reward_name="async_score")


@pytest.mark.parametrize("task", algorithms.TASKS)
def test_verl_loads_the_recipes_reward_functions_and_they_accept_the_options(composed, task):
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.import_utils import load_module

    token = get_custom_reward_fn(composed(*recipe(task, FIRST_MODEL, "bot_grpo")))
    options = dict(token.args[1])
    as_hydra_reads_them = {key: yaml.safe_load(value) for key, value in algorithms.TASKS[task].reward_options}
    assert token.args[0].__name__ == "compute_score" and options == as_hydra_reads_them
    outcome = get_custom_reward_fn(composed(*recipe(task, FIRST_MODEL, "gspo")))
    assert outcome.args[1] == {"token_reward_path": str(ROOT / algorithms.TASKS[task].reward_path), **options}
    module = load_module(str(ROOT / algorithms.TASKS[task].reward_path))
    parse = module.parse_options if task == "react" else module.MathPRMConfig.from_kwargs
    parse(options)  # each reward function validates its options: an unknown name or bad value raises


def test_run_sh_prints_one_command_per_algorithm_with_the_launchers_overrides():
    env = {**os.environ, "DRY_RUN": "1", "PYTHON": sys.executable, "MODEL": "smollm3-3b", "SEED": "3"}
    for task in algorithms.TASKS:
        out = subprocess.run(
            ["bash", str(ROOT / "recipes" / task / "run.sh"), "trainer.nnodes=2"],
            env=env,
            cwd="/",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        data_dir = ROOT / algorithms.TASKS[task].data_dir  # run.sh works from the repository root
        expected = [command(task, "smollm3-3b", a, 3, data_dir, ["trainer.nnodes=2"]) for a in algorithms.ALGORITHMS]
        assert [shlex.split(line) for line in out.splitlines()] == expected


def test_launch_runs_every_seed_of_the_task_by_default(capsys, tmp_path):
    assert (
        launch(
            [
                "--task",
                "aime",
                "--model",
                "phi4-mini-reasoning",
                "--algorithm",
                "pure",
                "--dry-run",
                "--data-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    seeds = algorithms.TASKS["aime"].seeds
    assert [shlex.split(line) for line in lines] == [
        command("aime", "phi4-mini-reasoning", "pure", seed, tmp_path, []) for seed in seeds
    ]
    assert shlex.quote(f"data.train_files='{tmp_path / 'train.parquet'}'") in lines[0]
    with pytest.raises(SystemExit):
        launch(["--task", "aime", "--model", "gpt-5", "--algorithm", "pure"])


def test_launch_runs_the_commands_in_sequence_when_asked_and_stops_at_the_first_failure(monkeypatch, tmp_path):
    ran = []

    def run(argv, check):
        ran.append(argv)
        return subprocess.CompletedProcess(argv, returncode=0 if len(ran) == 1 else 3)

    monkeypatch.setattr(subprocess, "run", run)
    where = ["--data-dir", str(tmp_path), "--runs-dir", str(tmp_path / "runs")]
    assert launch(["--task", "react", "--model", "qwen2.5-3b", "--algorithm", "dapo", "--sequential", *where]) == 3
    seeds = algorithms.TASKS["react"].seeds
    assert ran == [command("react", "qwen2.5-3b", "dapo", seed, tmp_path, [], tmp_path / "runs") for seed in seeds[:2]]
    # verl's file logger does not make its folder: the launcher does, before the run
    assert sorted(path.name for path in (tmp_path / "runs" / "react" / "qwen2.5-3b" / "dapo").iterdir()) == [
        "seed0",
        "seed1",
    ]


def test_launch_starts_one_run_and_refuses_more_unless_asked(monkeypatch, tmp_path, capsys):
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda argv, check: ran.append(argv) or subprocess.CompletedProcess(argv, 0))
    where = ["--data-dir", str(tmp_path), "--runs-dir", str(tmp_path / "runs")]
    assert launch(["--task", "aime", "--model", "smollm3-3b", "--algorithm", "pure", *where]) == 2
    assert ran == [] and capsys.readouterr().err.startswith("PROBLEM: this would start 3 runs one after the other")
    assert launch(["--task", "aime", "--model", "smollm3-3b", "--algorithm", "pure", "--seed", "1", *where]) == 0
    assert ran == [command("aime", "smollm3-3b", "pure", 1, tmp_path, [], tmp_path / "runs")]


def test_run_sh_without_seed_refuses_to_start_every_algorithm_and_seed(tmp_path):
    """The default plan (every algorithm x every seed) is refused before anything starts; a ``python`` on PATH
    that records its calls shows that only the launcher ran."""
    calls = tmp_path / "calls"
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("SEED", "ALGORITHM", "DRY_RUN", "SEQUENTIAL")}
    env |= {"PATH": f"{shim.parent}:{env['PATH']}", "PYTHONPATH": str(ROOT)}
    env.pop("PYTHON", None)
    process = subprocess.run(
        ["bash", str(ROOT / "recipes" / "react" / "run.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    runs = len(algorithms.ALGORITHMS) * len(algorithms.TASKS["react"].seeds)
    assert process.returncode == 2, process.stderr
    assert process.stderr.startswith(f"PROBLEM: this would start {runs} runs one after the other") and runs == 42
    assert "ALGORITHM=bot_grpo SEED=0" in process.stderr and "SEQUENTIAL=1" in process.stderr
    assert process.stdout == "" and calls.read_text().splitlines() == [
        "-m recipes.launch --task react --model qwen2.5-3b --algorithm all"
    ]


@pytest.mark.parametrize(("task", "algorithm"), [("react", "grpo"), ("aime", "bot_grpo")])
def test_every_recipe_keeps_its_metrics_and_validation_samples_in_its_run_folder(composed, task, algorithm):
    config = composed(*recipe(task, FIRST_MODEL, algorithm))
    folder = algorithms.run_folder(algorithms.RUNS, task, FIRST_MODEL, algorithm, 0)
    assert folder == ROOT / "runs" / "recipes" / task / FIRST_MODEL / algorithm / "seed0"
    assert list(config.trainer.logger) == ["console", "file"]
    environment = config.ray_kwargs.ray_init.runtime_env.env_vars  # what verl's trainer process gets
    assert environment["VERL_FILE_LOGGER_PATH"] == str(folder / "metrics.jsonl")
    assert config.trainer.validation_data_dir == str(folder / "validation")
    assert config.trainer.val_before_train and config.data.val_files.endswith("test.parquet")


def test_verls_file_logger_writes_where_the_recipe_says(tmp_path, monkeypatch):
    """verl's own Tracking with the recipe's logger list and environment writes the JSONL lines the report reads."""
    from verl.utils.tracking import Tracking

    from demo.training import read_metrics

    (logger,) = [text for text in recipe("react", FIRST_MODEL, "grpo") if text.startswith("trainer.logger=")]
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracking = Tracking("bot-grpo-react", "run", default_backend=PARSER.parse_override(logger).value())
    tracking.log({"val-core/react_tsx/reward/mean@4": 0.25}, step=0)
    tracking.log({"critic/score/mean": 0.5, "timing_s/step": 3.0}, step=1)
    del tracking
    assert read_metrics(path) == [
        {"step": 0, "val-core/react_tsx/reward/mean@4": 0.25},
        {"step": 1, "critic/score/mean": 0.5, "timing_s/step": 3.0},
    ]


def test_a_resumed_run_keeps_the_metrics_of_its_earlier_start(tmp_path):
    folder = tmp_path / "react" / "m" / "grpo" / "seed0"
    assert keep_earlier_metrics(folder) is None and folder.is_dir()
    (folder / "metrics.jsonl").write_text('{"step": 1, "data": {"x": 1}}\n')
    assert keep_earlier_metrics(folder) == folder / "metrics.1.jsonl"
    (folder / "metrics.jsonl").write_text('{"step": 1, "data": {"x": 2}}\n{"step": 2, "data": {"x": 3}}\n')
    assert keep_earlier_metrics(folder) == folder / "metrics.2.jsonl"
    (folder / "metrics.jsonl").write_text("")
    assert keep_earlier_metrics(folder) is None  # an empty file: nothing to keep
    (folder / "metrics.jsonl").write_text('{"step": 2, "data": {"y": 4}}\n')
    assert report.metric_rows(folder) == [{"step": 1, "x": 2}, {"step": 2, "x": 3, "y": 4}]


# ---------------------------------------------------------------------------------------------------
# Data scripts

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_jsonl(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def rlhf_dataset(parquet: Path, tmp_path: Path):
    """verl's RLHFDataset over ``parquet`` with a local tokenizer (HF datasets cache kept in tmp_path)."""
    import datasets
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = copy.deepcopy(byte_level_bpe())
    tokenizer.chat_template = CHAT_TEMPLATE
    config = OmegaConf.create(
        {
            "max_prompt_length": 4096,
            "filter_overlong_prompts": True,
            "filter_overlong_prompts_workers": 1,
            "cache_dir": str(tmp_path / "verl"),
        }
    )
    previous, datasets.config.HF_DATASETS_CACHE = datasets.config.HF_DATASETS_CACHE, str(tmp_path / "hf")
    try:
        return RLHFDataset(str(parquet), tokenizer, config)
    finally:
        datasets.config.HF_DATASETS_CACHE = previous


def react_records():
    requests = [f"Build a counter component number {i} with a reset button." for i in range(10)]
    records = [
        {
            "messages": [
                {"role": "system", "content": "ignored"},
                {"role": "user", "content": f"  {r} "},
                {"role": "assistant", "content": "```tsx\n...\n```"},
            ]
        }
        for r in requests
    ]
    records += [records[3], {"messages": [{"role": "user", "content": "   "}]}, {"messages": []}]
    return requests, records


def test_prepare_react_writes_verl_rows_that_rlhf_dataset_reads(tmp_path):
    requests, records = react_records()
    source = write_jsonl(tmp_path / "react.jsonl", records)
    train, test = prepare_react.main(["--source", source, "--test-size", "3", "--out-dir", str(tmp_path / "out")])
    train_rows, test_rows = pd.read_parquet(train), pd.read_parquet(test)
    assert (len(train_rows), len(test_rows)) == (7, 3)  # blank and duplicate requests dropped
    seen = [row["instruction"] for row in train_rows.extra_info] + [row["instruction"] for row in test_rows.extra_info]
    assert sorted(seen) == sorted(requests)
    dataset = rlhf_dataset(train, tmp_path)
    assert len(dataset) == 7
    item = dataset[2]
    assert item["data_source"] == "react_tsx" and item["index"] == 2 and item["extra_info"]["split"] == "train"
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]
    assert item["raw_prompt"][0]["content"] == prepare_react.SYSTEM_PROMPT
    assert item["raw_prompt"][1]["content"] == item["extra_info"]["instruction"] in requests
    assert item["reward_model"] == {"style": "rule", "ground_truth": ""}
    # the same seed gives the same split; --max-train truncates the training split only
    again = prepare_react.main(
        [
            "--source",
            source,
            "--test-size",
            "3",
            "--max-train",
            "2",
            "--system-prompt",
            "",
            "--out-dir",
            str(tmp_path / "again"),
        ]
    )
    assert list(pd.read_parquet(again[1]).prompt.map(lambda p: p[0]["content"])) == [
        row["instruction"] for row in test_rows.extra_info
    ]
    assert len(pd.read_parquet(again[0])) == 2


def test_prepare_react_names_a_missing_field(tmp_path):
    source = write_jsonl(tmp_path / "react.jsonl", [{"prompt": "x"}])
    with pytest.raises(DataError, match=r"react.jsonl:1 has no field 'messages' \(fields: \['prompt'\]\)"):
        prepare_react.main(["--source", source, "--out-dir", str(tmp_path)])


AIME = [
    {"problem": "Find the remainder when 2^10 is divided by 1000.", "answer": "024"},
    {"problem": "How many positive divisors does 2024 have?", "answer": 16},
]


def test_prepare_aime_writes_train_and_aime_test_rows_that_rlhf_dataset_reads(tmp_path):
    train_records = [{"question": f"What is {i} + {i}?", "final": str(2 * i)} for i in range(5)]
    train_records += [{"question": AIME[1]["problem"], "final": "16"}, {"question": "Blank answer?", "final": None}]
    train_source = write_jsonl(tmp_path / "math.jsonl", train_records)
    test_source = write_jsonl(tmp_path / "aime.jsonl", AIME)
    train, test = prepare_aime.main(
        [
            "--train-source",
            train_source,
            "--train-problem-field",
            "question",
            "--train-answer-field",
            "final",
            "--test-source",
            test_source,
            "--out-dir",
            str(tmp_path / "out"),
        ]
    )
    train_rows = pd.read_parquet(train)
    assert len(train_rows) == 5  # the AIME problem and the blank answer are dropped
    assert [row["ground_truth"] for row in train_rows.reward_model] == [str(2 * i) for i in range(5)]
    dataset = rlhf_dataset(test, tmp_path)
    assert len(dataset) == 2
    items = [dataset[0], dataset[1]]
    assert [item["reward_model"]["ground_truth"] for item in items] == ["24", "16"]
    assert items[0]["data_source"] == "aime_2024" and items[0]["extra_info"]["question"] == AIME[0]["problem"]
    assert items[1]["raw_prompt"] == [
        {"role": "user", "content": f"{AIME[1]['problem']}\n\n{prepare_aime.INSTRUCTION}"}
    ]
    assert "\\boxed{}" in prepare_aime.INSTRUCTION and "blank line" in prepare_aime.INSTRUCTION


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("2.5", "integers 0-999"),
        ("1000", "integers 0-999"),
        (None, "blank or missing answer"),
        (float("nan"), "blank or missing answer"),
        ("None", "blank or missing answer"),
        (False, "the answer must be a string, got bool"),
        ([16], "the answer must be a string, got list"),
    ],
)
def test_prepare_aime_refuses_a_test_answer_that_is_not_an_aime_answer(tmp_path, answer, message):
    test_source = write_jsonl(tmp_path / "aime.jsonl", [AIME[0], {"problem": "p", "answer": answer}])
    train_source = write_jsonl(tmp_path / "math.jsonl", [{"problem": "q", "answer": "1"}])
    with pytest.raises(DataError, match=f"aime.jsonl:2: .*{re.escape(message)}"):
        prepare_aime.main(["--train-source", train_source, "--test-source", test_source, "--out-dir", str(tmp_path)])
    assert not list(tmp_path.glob("*.parquet"))


def test_prepare_aime_drops_and_counts_every_kind_of_bad_training_row(tmp_path, capsys):
    bad = [None, float("nan"), "None", "nan", " ", False, True, ["1"], {"a": 1}, 2.5]
    records = [{"problem": f"q{i}", "answer": answer} for i, answer in enumerate(bad)]
    records += [{"problem": problem, "answer": "1"} for problem in (None, float("nan"), "null", 7)]
    records += [{"problem": "good", "answer": 12}, {"problem": "good too", "answer": 3.0}]
    train_source = write_jsonl(tmp_path / "math.jsonl", records)
    test_source = write_jsonl(tmp_path / "aime.jsonl", AIME)
    train, _ = prepare_aime.main(
        ["--train-source", train_source, "--test-source", test_source, "--out-dir", str(tmp_path)]
    )
    assert [row["ground_truth"] for row in pd.read_parquet(train).reward_model] == ["12", "3"]
    out = capsys.readouterr().out
    assert "16 rows, 14 dropped (5 blank or missing answer; 3 blank or missing problem; 2 the answer must be" in out
    for reason in ("list", "dict", "float"):
        assert f"1 the answer must be a string, got {reason}" in out
    assert "1 the problem must be a string, got int" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"problem": "p", "answer": "1"}\n{"problem": oops}\n', r"math.jsonl:2: not valid JSON"),
        (b'{"problem": "p", "answer": "1"}\n\n[1, 2]\n', r"math.jsonl:3: expected a JSON object \(one row\), got list"),
        (b'{"problem": "caf\xe9", "answer": "1"}\n', r"math.jsonl is not UTF-8 text"),
    ],
)
def test_unreadable_training_files_are_named_with_their_line_and_nothing_is_written(tmp_path, content, message):
    (tmp_path / "math.jsonl").write_bytes(content)
    test_source = write_jsonl(tmp_path / "aime.jsonl", AIME)
    args = ["--train-source", str(tmp_path / "math.jsonl"), "--test-source", test_source, "--out-dir", str(tmp_path)]
    with pytest.raises(DataError, match=message):
        prepare_aime.main(args)
    assert not list(tmp_path.glob("*.parquet"))


def test_an_empty_test_file_writes_nothing_and_the_command_prints_one_problem_line(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train.parquet").write_bytes(b"previous")
    (tmp_path / "aime.jsonl").write_text("")
    train_source = write_jsonl(tmp_path / "math.jsonl", [{"problem": "q", "answer": "1"}])
    args = [
        "--train-source",
        train_source,
        "--test-source",
        str(tmp_path / "aime.jsonl"),
        "--out-dir",
        str(tmp_path / "out"),
    ]
    process = subprocess.run(
        [sys.executable, "-m", "recipes.data.prepare_aime", *args], capture_output=True, text=True, cwd=REPO
    )
    assert process.returncode == 1
    assert process.stderr.strip().splitlines() == [
        f"PROBLEM: no rows left for ['test'] (see the counts above); nothing written to {tmp_path / 'out'}"
    ]
    assert (tmp_path / "out" / "train.parquet").read_bytes() == b"previous"


@pytest.mark.parametrize("module", [prepare_aime, prepare_react])
def test_a_negative_max_train_is_refused(module, capsys):
    with pytest.raises(SystemExit):
        module.parse_args(["--max-train", "-1"])
    assert "invalid non_negative value: '-1'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "folder",
    ["a,b", "[x]", 'it\'s "q"', "#c", "${oc.env:HOME}", "ünï 数据", "back\\slash", "trail\\", "x=y"],
)
def test_launch_quotes_the_data_paths_so_that_hydra_reads_them_back_exactly(tmp_path, folder):
    data_dir = tmp_path / folder
    argv = command("react", "qwen2.5-3b", "bot_grpo", 0, data_dir, [])
    data = [argument for argument in argv if argument.startswith(("data.train_files=", "data.val_files="))]
    config = verl_config(*data)
    assert config.data.train_files == str(data_dir.resolve() / "train.parquet")
    assert config.data.val_files == str(data_dir.resolve() / "test.parquet")


def test_run_all_without_a_task_prints_one_problem_line():
    process = subprocess.run(["bash", str(REPO / "recipes/run_all.sh")], capture_output=True, text=True)
    assert process.returncode == 2
    assert process.stderr.splitlines() == [
        "PROBLEM: no task given; usage: bash recipes/run_all.sh TASK [overrides] (TASK: react or aime)"
    ]


def test_the_aime_run_with_the_prm_on_its_own_gpu_divides_its_batches_over_seven():
    """recipes/README.md's command for the PRM on GPU 7 of the training node, as a dry run: the batch and the mini
    batch, in rollouts, divide over 7 GPUs, with as many updates a step as the 8-GPU recipe."""
    extra = ("trainer.n_gpus_per_node=7", "data.train_batch_size=112", "actor_rollout_ref.actor.ppo_mini_batch_size=28")
    config = verl_config(*recipe("aime", FIRST_MODEL, "bot_grpo"), *extra)
    gpus, rollouts = config.trainer.n_gpus_per_node * config.trainer.nnodes, config.actor_rollout_ref.rollout.n
    batch, mini_batch = (
        config.data.train_batch_size * rollouts,
        config.actor_rollout_ref.actor.ppo_mini_batch_size * rollouts,
    )
    assert batch % gpus == 0 and mini_batch % gpus == 0
    eight = verl_config(*recipe("aime", FIRST_MODEL, "bot_grpo"))
    assert batch // mini_batch == eight.data.train_batch_size // eight.actor_rollout_ref.actor.ppo_mini_batch_size
    readme = (ROOT / "recipes" / "README.md").read_text()
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 bash recipes/aime/run.sh " + " ".join(extra[:1]) in readme


def write_gpu_run(folder: Path, requests: list[str], correct: dict[int, list[int]], logged: list[list[int]]) -> None:
    """A recipe run's record as verl leaves it: file-logger parts (``logged``: the steps of each start, earlier
    first; step 0 is the validation before training) and validation dumps of 2 samples a request, ``correct``
    giving per validation step how many of each request's samples score 1."""
    names = [f"metrics.{number}.jsonl" for number in range(1, len(logged))] + ["metrics.jsonl"]
    folder.mkdir(parents=True)
    for name, steps in zip(names, logged, strict=True):
        lines = [
            {"step": step, "data": {"timing_s/step": 2.0, "response_length/mean": 100.0 + step} if step else {}}
            for step in steps
        ]
        (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "validation").mkdir()
    for step, counts in correct.items():
        samples = [
            {
                "input": f"<|im_start|>system\nOne TSX component.<|im_end|>\n<|im_start|>user\n{request}<|im_end|>\n",
                "output": "```tsx\n...\n```",
                "score": float(sample < count),
                "step": step,
            }
            for request, count in zip(requests, counts, strict=True)
            for sample in range(2)
        ]
        (folder / "validation" / f"{step}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


def test_the_recipes_logs_become_the_protocols_report(tmp_path, capsys):
    """Synthetic GPU runs (two algorithms x two seeds, one resumed, one unfinished) through ``recipes.report``: the
    report holds each finished run once, with the Pass@1 its validation samples give."""
    requests = [f"Build a counter component number {i}." for i in range(3)]
    data = tmp_path / "data"
    data.mkdir()
    prompts = [[{"role": "system", "content": "One TSX component."}, {"role": "user", "content": r}] for r in requests]
    pd.DataFrame({"prompt": prompts}).to_parquet(data / "test.parquet")
    runs = tmp_path / "runs" / "react" / FIRST_MODEL
    grpo, bot = {0: [1, 0, 0], 4: [1, 1, 0]}, {0: [1, 0, 0], 4: [2, 1, 1]}  # successes of 2 samples per request
    write_gpu_run(runs / "grpo" / "seed0", requests, grpo, [[0, 1, 2, 3, 4]])
    write_gpu_run(runs / "grpo" / "seed1", requests, grpo, [[0, 1, 2, 3], [2, 3, 4]])  # resumed after step 2
    write_gpu_run(runs / "bot_grpo" / "seed0", requests, bot, [[0, 1, 2, 3, 4, 5]])  # cut at --steps 4
    write_gpu_run(runs / "bot_grpo" / "seed1", requests, bot, [[0, 1, 2, 3, 4]])
    write_gpu_run(runs / "bot_grpo" / "seed2", requests, {0: [1, 0, 0]}, [[0, 1, 2]])  # unfinished
    out = tmp_path / "report"
    argv = ["--task", "react", "--model", FIRST_MODEL, "--runs-dir", str(tmp_path / "runs"), "--data-dir", str(data)]
    assert report.main([*argv, "--steps", "4", "--out", str(out), "--boot", "200", "--ks", "1,2"]) == 0
    printed = capsys.readouterr().out
    assert "left out, not at step 4: bot_grpo seed2 (reached step 2)" in printed
    assert sorted(path.name for path in (out / "react" / "runs").iterdir()) == [
        "bot_grpo__lrbase__seed0.json",
        "bot_grpo__lrbase__seed1.json",
        "grpo__lrbase__seed0.json",
        "grpo__lrbase__seed1.json",
    ]
    resumed = json.loads((out / "react" / "runs" / "grpo__lrbase__seed1.json").read_text())
    assert resumed["steps"] == 5 and resumed["train"]["response_length/mean"] == [None, 101.0, 102.0, 103.0, 104.0]
    assert resumed["held_out"]["4"] == {"test": [[2, 1], [2, 1], [2, 0]]}
    summary = json.loads((out / "react" / "summary.json").read_text())
    assert summary["split"] == "test" and summary["baseline"] == "grpo" and summary["ks"] == [1, 2]
    cells = summary["cells"]
    assert cells["grpo"]["steps"] == cells["bot_grpo"]["steps"] == [0.0, 4.0]
    assert cells["grpo"]["seeds"] == cells["bot_grpo"]["seeds"] == [0, 1]
    assert cells["grpo"]["final"]["pass@1"]["estimate"] == pytest.approx(1 / 3)
    assert cells["bot_grpo"]["final"]["pass@1"]["estimate"] == pytest.approx(2 / 3)
    assert cells["bot_grpo"]["change"]["pass@1"]["estimate"] == pytest.approx(2 / 3 - 1 / 6)
    (versus,) = [c for c in summary["comparisons"] if c["cell"] == "bot_grpo" and c["versus"] == "grpo"]
    assert versus["pass@1"]["estimate"] == pytest.approx(1 / 3)
    assert {path.name for path in (out / "react").iterdir()} >= {"summary.md", "curves.png", "forest.png"}
    assert (out / "react" / "summary.md").read_text() in printed


def test_the_report_names_what_is_missing(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    prompt = [{"role": "user", "content": "Same request."}]
    argv = ["--task", "aime", "--model", FIRST_MODEL, "--runs-dir", str(tmp_path / "runs"), "--data-dir", str(data)]
    pd.DataFrame({"prompt": [prompt]}).to_parquet(data / "test.parquet")
    assert report.main(argv) == 1
    steps = algorithms.TASKS["aime"].total_training_steps
    assert capsys.readouterr().err == (
        f"PROBLEM: no run of aime with {FIRST_MODEL} reached step {steps} under {tmp_path / 'runs'}\n"
    )
    pd.DataFrame({"prompt": [prompt, prompt]}).to_parquet(data / "test.parquet")
    assert report.main(argv) == 1
    assert "rows 0 and 1 ask the same prompt" in capsys.readouterr().err
