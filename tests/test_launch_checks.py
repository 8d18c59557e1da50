"""The checks of a run's configuration in verl's driver (``bot_grpo_verl/launch_checks.py``) on configs composed as
``main_ppo`` composes them: each class of mistake named with its key (and the closest valid one), a correct run
passes, the plugin's options take ``key=value`` and ``+key=value`` alike. ``tests/test_launch_checks_e2e.py`` runs
them through verl's real driver."""

import json

import pandas as pd
import pytest
from conftest import verl_config

from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig
from bot_grpo_verl.launch_checks import LaunchError, check_launch, first_rows, launch_problems, uses_plugin
from bot_grpo_verl.options import OptionError
from bot_grpo_verl.shipped_rewards import SHIPPED, rewards_dir, shipped_name

REWARD = "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n    return 1.0\n"


@pytest.fixture
def files(tmp_path):
    """A reward file and a data file of two rows, whose extra_info has no 'instruction' and no 'values'."""
    (tmp_path / "reward.py").write_text(REWARD)
    rows = [{"data_source": "t", "prompt": [{"role": "user", "content": "2+2"}],
             "reward_model": {"ground_truth": "4"}, "extra_info": {"index": index}} for index in range(2)]  # fmt: skip
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    return tmp_path


def config(files, *overrides):
    return verl_config(
        f"reward.custom_reward_function.path={files / 'reward.py'}",
        f"data.train_files={files / 'train.parquet'}",
        f"data.val_files={files / 'train.parquet'}",
        *overrides,
    )


@pytest.mark.parametrize("plus", ["", "+"])
def test_the_plugins_options_take_key_and_plus_key_with_the_preset(files, plus):
    composed = config(files, "+preset=bot_grpo", f"{plus}algorithm.bot_grpo.weighting=uniform")
    assert BoTGRPOConfig.from_algorithm_config(composed.algorithm) == BoTGRPOConfig(weighting="uniform")
    assert launch_problems(composed) == [] and uses_plugin(composed)


def test_a_run_without_the_plugin_passes_and_does_not_use_it(files):
    composed = config(files)
    assert launch_problems(composed) == [] and not uses_plugin(composed)


REACT = str(rewards_dir() / "react_tsx.py")
MISTAKES = {
    "estimator option typo": (("+preset=bot_grpo", "+algorithm.bot_grpo.weighing=uniform"),
                              "unknown algorithm.bot_grpo option(s) ['weighing']; did you mean 'weighting'?"),
    "without a preset": (("algorithm.adv_estimator=bot_grpo", "+algorithm.bot_grpo.epsilom=0.1"),
                         "unknown algorithm.bot_grpo option(s) ['epsilom']; did you mean 'epsilon'?"),
    "pure option value": (("+preset=pure", "algorithm.pure.credit=max"),
                          "algorithm.pure.credit='max' is not one of ['min', 'sum']"),
    "manager option typo": (("+preset=bot_grpo", "+reward.bot_token.on_eror=skip"),
                            "unknown reward.bot_token option(s) ['on_eror']; did you mean 'on_error'?"),
    "norm_adv_by_std_in_grpo": (("+preset=bot_grpo", "algorithm.norm_adv_by_std_in_grpo='false'"),
                                "algorithm.norm_adv_by_std_in_grpo='false' must be a bool, got str"),
    "section typo": (("+algorithm.bot_grop.weighting=uniform",),
                     "algorithm.bot_grop is no section of the plugin's options: did you mean algorithm.bot_grpo?"),
    "estimator name typo": (("algorithm.adv_estimator=bot_grop",),
                            "algorithm.adv_estimator=bot_grop is not registered: did you mean bot_grpo?"),
    "manager name typo": (("reward.reward_manager.name=bot_tokn",),
                          "reward.reward_manager.name=bot_tokn is not registered: did you mean bot_token?"),
    "run shape": (("+preset=bot_grpo", "algorithm.adv_estimator=grpo"),
                  "algorithm.adv_estimator=grpo sums each response's token rewards into one score"),
    "reward function name": (("reward.custom_reward_function.name=compute_scor",),
                             "defines no such function at its top level; did you mean name=compute_score?"),
    "shipped reward option typo": ((f"reward.custom_reward_function.path={REACT}",
                                    "+reward.custom_reward_function.reward_kwargs.levle=types"),
                                   "reward_kwargs of react_tsx: unknown react_tsx option(s) ['levle']; did you mean "
                                   "'level'?"),
    "judge data": ((f"reward.custom_reward_function.path={REACT}",
                    "+reward.custom_reward_function.reward_kwargs.render=true",
                    "+reward.custom_reward_function.reward_kwargs.judge_endpoint=http://127.0.0.1:9/v1",
                    "+reward.custom_reward_function.reward_kwargs.judge_model=judge"),
                   "row 0: the react_tsx reward cannot score it: the judge (judge_endpoint=http://127.0.0.1:9/v1) "
                   "needs the request in extra_info['instruction'], got None"),
    "tool_arithmetic data": ((f"reward.custom_reward_function.path={rewards_dir() / 'tool_arithmetic.py'}",),
                             "extra_info['values'] must list the problem's value after each operation, got None"),
}  # fmt: skip


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_is_named_with_its_key(files, mistake):
    overrides, message = MISTAKES[mistake]
    composed = config(files, *overrides)
    problems = launch_problems(composed)
    assert problems and all(message in problem for problem in problems), problems
    with pytest.raises(LaunchError) as raised:
        check_launch(composed)
    assert isinstance(raised.value, OptionError) and message in str(raised.value)


def test_a_reward_file_that_does_not_parse_is_named_with_its_line(files):
    (files / "reward.py").write_text("def compute_score(:\n")
    (problem,) = launch_problems(config(files))
    assert f"at {files / 'reward.py'}:1" in problem


def test_a_math_reward_needs_a_ground_truth_unless_told_to_score_without(files):
    rows = pd.read_parquet(files / "train.parquet")
    rows["reward_model"] = [{"ground_truth": None}] * len(rows)
    rows.to_parquet(files / "train.parquet")
    path = f"reward.custom_reward_function.path={rewards_dir() / 'math_prm.py'}"
    assert all("reward_model.ground_truth is missing" in problem for problem in launch_problems(config(files, path)))
    process_only = "+reward.custom_reward_function.reward_kwargs.missing_ground_truth=process_only"
    assert launch_problems(config(files, path, process_only)) == []


def test_first_rows_reads_parquet_jsonl_and_json_arrays(tmp_path):
    rows = [{"data_source": "t", "index": index} for index in range(5)]
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    (tmp_path / "rows.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    for name in ("rows.parquet", "rows.jsonl", "rows.json"):
        assert first_rows(tmp_path / name, 3) == rows[:3], name
    with pytest.raises(ValueError, match="not .csv"):
        first_rows(tmp_path / "rows.csv", 3)


def test_every_shipped_reward_is_known_by_its_installed_path_and_no_other():
    for name in SHIPPED:
        assert shipped_name(rewards_dir() / f"{name}.py") == name
        assert shipped_name(f"file://{rewards_dir() / f'{name}.py'}") == name
    assert shipped_name(rewards_dir() / "calculator.py") is None and shipped_name("/elsewhere/react_tsx.py") is None
