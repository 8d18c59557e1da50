"""The demo's run logic: verl overrides per algorithm, progress lines, held-out dumps read per prompt,
intervals, the summary and the plot."""

import dataclasses
import json
import statistics
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import verl_config
from PIL import Image

from bot_grpo_verl.__main__ import main
from demo import run, training
from demo.held_out import HeldOutCurve, Validation, mean_interval, solved
from recipes.algorithms import OUTCOME_REWARD

PROMPTS = ("Write a React component `A`.", "Write a React component `AB`.", "Write a React component `C`.")
PROBLEMS = {prompt: ("test", row) for row, prompt in enumerate(PROMPTS)}
ASSETS = SimpleNamespace(
    train_parquet=Path("/d/train.parquet"),
    val_parquet=Path("/d/val.parquet"),
    test_parquet=Path("/d/test.parquet"),
    model_dir=Path("/d/model"),
)


def write_dump(folder: Path, step: int, correct: dict[str, list[int]]) -> None:
    """A verl validation dump: one line per sample, the prompt inside the chat template, ``acc`` 0 or 1."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"input": f"<|im_start|>user\n{prompt}<|im_end|>\n", "output": "x", "acc": float(acc)})
        for prompt, accs in correct.items()
        for acc in accs
    ]
    (folder / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


def test_mean_interval_is_the_normal_interval_over_problems():
    values = np.array([0.25, 0.5, 1.0, 0.75, 0.0])
    mean, half = mean_interval(values)
    assert mean == pytest.approx(statistics.fmean(values))
    assert half == pytest.approx(1.959964 * statistics.stdev(values) / len(values) ** 0.5, rel=1e-6)
    assert mean_interval(np.full(7, 0.4)) == pytest.approx((0.4, 0.0))
    with pytest.raises(ValueError, match="at least 2 problems"):
        mean_interval(np.array([0.5]))


def test_a_paired_change_is_tighter_than_the_spread_of_problems():
    before = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5])
    after = np.minimum(before + 0.25, 1.0)  # every problem improves by about the same amount
    change = mean_interval(after - before)
    assert change[0] == pytest.approx(np.mean(after - before))
    assert change[1] < mean_interval(before)[1] / 3


def test_held_out_curve_reads_dumps_in_step_order_per_prompt(tmp_path):
    folder = tmp_path / "validation"
    write_dump(folder, 10, {PROMPTS[0]: [1, 1], PROMPTS[1]: [0, 1], PROMPTS[2]: [1, 1]})
    write_dump(folder, 0, {PROMPTS[0]: [0, 1], PROMPTS[1]: [0, 0], PROMPTS[2]: [1, 0]})
    write_dump(folder, 2, {PROMPTS[2]: [1, 1], PROMPTS[0]: [1, 0], PROMPTS[1]: [1, 0]})
    curve = HeldOutCurve.read(folder, PROBLEMS, "test")
    assert curve.steps.tolist() == [0, 2, 10] and curve.samples == 2
    np.testing.assert_allclose(curve.rates, [[0.5, 0.0, 0.5], [0.5, 0.5, 1.0], [1.0, 0.5, 1.0]])


def test_held_out_curve_refuses_missing_or_unequal_samples(tmp_path):
    with pytest.raises(ValueError, match="no validation dumps"):
        HeldOutCurve.read(tmp_path, PROBLEMS, "test")
    write_dump(tmp_path, 0, {PROMPTS[0]: [1, 1], PROMPTS[1]: [1], PROMPTS[2]: [0, 0]})
    with pytest.raises(ValueError, match="sampled unequally"):
        HeldOutCurve.read(tmp_path, PROBLEMS, "test")


def demo_run(name: str, rates: list[list[float]], samples: int = 4) -> run.DemoRun:
    steps = np.arange(len(rates)) * 10
    train = [float(step) for step in range(1, int(steps[-1]) + 1)]
    curve = HeldOutCurve(steps, np.array(rates), samples)
    as_asked = HeldOutCurve(steps, np.array(rates) / 2, samples)  # half of the compiling samples as asked
    return run.DemoRun(name, train, [0.5] * len(train), curve, as_asked)


def test_summary_lines_give_each_change_and_the_difference_between_runs_paired_by_prompt():
    grpo = demo_run("grpo", [[0.0, 0.5, 0.25, 1.0], [0.25, 0.5, 0.5, 1.0]])
    bot = demo_run("bot_grpo", [[0.0, 0.5, 0.25, 1.0], [0.5, 1.0, 0.5, 1.0]])
    lines = run.summary_lines([grpo, bot], "test")
    assert lines[0].startswith("held-out compile rate, 4 test prompts x 4 samples")
    change = mean_interval(np.array([0.5, 0.5, 0.25, 0.0]))
    assert lines[2] == (
        f"  bot_grpo: step 0 0.438 ± {mean_interval(bot.held_out.rates[0])[1]:.3f} -> step 10 0.750 ± "
        f"{mean_interval(bot.held_out.rates[1])[1]:.3f}; change +0.312 ± {change[1]:.3f}"
    )
    difference = mean_interval(np.array([0.25, 0.5, 0.0, 0.0]))
    assert lines[3] == f"  bot_grpo - grpo at step 10: +0.188 ± {difference[1]:.3f}"
    assert lines[4].startswith("compiles as asked")
    assert lines[6] == (
        f"  bot_grpo: step 0 0.219 ± {mean_interval(bot.as_asked.rates[0])[1]:.3f} -> step 10 0.375 ± "
        f"{mean_interval(bot.as_asked.rates[1])[1]:.3f}; change +0.156 ± {change[1] / 2:.3f}"
    )
    assert len(run.summary_lines([grpo], "test")) == 4


def test_summary_json_and_plot_hold_both_runs(tmp_path):
    runs = [demo_run("grpo", [[0.2, 0.4, 0.6], [0.4, 0.4, 0.7]]), demo_run("bot_grpo", [[0.2, 0.4, 0.6], [0.6] * 3])]
    result = run.summary(runs, "test")
    assert result["prompts"] == 3 and result["samples"] == 4 and result["split"] == "test"
    assert result["bot_grpo"]["held_out"]["steps"] == [0, 10]
    assert result["bot_grpo"]["held_out"]["rate"] == pytest.approx([0.4, 0.6])
    assert result["grpo"]["held_out"]["change"]["mean"] == pytest.approx(0.1)
    assert result["grpo"]["as_asked"]["rate"] == pytest.approx([0.2, 0.25])
    assert len(result["grpo"]["train"]["compile_rate"]) == 10
    run.plot(runs, "test", tmp_path / "demo.png")
    with Image.open(tmp_path / "demo.png") as image:
        assert image.size == (960, 864)


def axis_curves(axis) -> dict[str, list[float]]:
    """``{legend label: y values}`` of an axis' labelled lines."""
    return {
        line.get_label(): list(line.get_ydata()) for line in axis.get_lines() if not line.get_label().startswith("_")
    }


def test_the_plot_draws_held_out_success_and_training_metric_on_their_own_axes():
    runs = [demo_run("grpo", [[0.2, 0.4, 0.6], [0.4, 0.4, 0.7]]), demo_run("bot_grpo", [[0.2, 0.4, 0.6], [0.6] * 3])]
    drawn = run.figure(runs, "test")  # the React reward: compile rate held out and in training
    held_out, train = drawn.axes
    assert held_out.get_ylabel() == "held-out compile rate" and train.get_ylabel() == "compile rate"
    assert held_out.get_ylim() == train.get_ylim() == (0, 1)
    assert axis_curves(held_out) == {
        "grpo: compile rate": pytest.approx([0.4, 0.5]),
        "grpo: compiles as asked": pytest.approx([0.2, 0.25]),
        "bot_grpo: compile rate": pytest.approx([0.4, 0.6]),
        "bot_grpo: compiles as asked": pytest.approx([0.2, 0.3]),
    }
    assert set(axis_curves(train)) == {
        f"{name}: compile rate, {run.SMOOTHING}-step mean" for name in ("grpo", "bot_grpo")
    }
    assert train.get_xlabel() == "training step" and held_out.get_shared_x_axes().joined(held_out, train)

    # A reward of one's own: the held-out success rate above, verl's summed token reward per rollout (not a rate,
    # here 2.5 a rollout) on its own scale below.
    summed = dataclasses.replace(runs[0], train_rate=[2.5] * len(runs[0].train_steps))
    held_out, train = run.figure([summed], "test", run.DemoReward(Path("r.py")), "r.py on react_tsx").axes
    assert held_out.get_ylabel() == "held-out success rate (acc, else score, above 0.5)"
    assert held_out.get_ylim() == (0, 1) and train.get_ylim()[1] > 2.5
    assert train.get_ylabel() == "summed token reward per rollout" == run.SCORE_SUCCESS[1]
    assert run.SCORE_SUCCESS[0] == "critic/score/mean"  # verl's mean over rollouts of their summed token rewards
    (smoothed,) = axis_curves(train).values()
    assert smoothed == pytest.approx([2.5] * (len(summed.train_steps) - run.SMOOTHING + 1))
    assert list(axis_curves(held_out)) == ["grpo: success rate (acc, else score, above 0.5)", "grpo: compiles as asked"]


def test_progress_shows_training_steps_and_validations():
    validation_only = {"step": 0, "val-core/react_tsx/acc/mean@4": 0.4812}
    assert training.progress_lines(validation_only, 60) == ["step   0/60  held-out compile rate 0.481"]
    both = {
        "step": 10,
        training.COMPILE_RATE: 0.5,
        training.TOKEN_REWARD: -0.1,
        training.STEP_TIME: 3.0,
        "val-core/x/acc/mean@4": 0.6,
    }
    lines = training.progress_lines(both, 60)
    assert lines == [
        "step  10/60  compile rate 0.50  mean token reward -0.100  step time 3.0 s",
        "step  10/60  held-out compile rate 0.600",
    ]
    assert training.training_rows([validation_only, both]) == [both]
    arith = {"step": 4, "reward_extra/acc/mean": 0.25, training.STEP_TIME: 2.0, "val-core/arith/acc/mean@4": 0.5}
    assert training.progress_lines(arith, 32, ("reward_extra/acc/mean", "solve rate")) == [
        "step   4/32  solve rate 0.25  mean token reward n/a  step time 2.0 s",
        "step   4/32  held-out solve rate 0.500",
    ]


@pytest.mark.parametrize("algorithm", ["bot_grpo", "grpo"])
def test_demo_overrides_compose_in_verl_with_held_out_validation(tmp_path, algorithm):
    validation = Validation(("test",), every=10, samples=4)
    overrides = run.demo_overrides(ASSETS, algorithm, 60, tmp_path, 3, validation)
    config = verl_config(*overrides)
    assert list(config.data.val_files) == ["/d/test.parquet"]
    assert config.trainer.val_before_train and config.trainer.test_freq == 10
    assert config.actor_rollout_ref.rollout.val_kwargs.n == 4
    assert config.actor_rollout_ref.rollout.val_kwargs.temperature == 1.0
    assert config.trainer.validation_data_dir == str(tmp_path / "validation")
    assert config.trainer.total_training_steps == 60 and config.data.seed == 3
    token_level = algorithm == "bot_grpo"
    assert config.algorithm.adv_estimator == algorithm
    assert (config.reward.reward_manager.name == "bot_token") == token_level
    assert config.reward.custom_reward_function.path.endswith("react_tsx.py") == token_level
    with pytest.raises(ValueError, match="unknown algorithm"):
        run.demo_overrides(ASSETS, "nope", 60, tmp_path, 3, validation)


def test_a_run_that_logs_nothing_for_too_long_is_stopped_with_everything_it_started(tmp_path):
    progress, marker = tmp_path / "metrics.jsonl", f"stall-test-{tmp_path.name}"
    child = f"exec -a {marker} sleep 300"  # a process of the run's own, like a Ray worker
    stalls = f"echo step >> {progress}; bash -c '{child}' & sleep 300"
    with open(tmp_path / "log", "w") as log:
        assert training.wait_logging(["bash", "-c", stalls], log, {}, progress, stall_seconds=1.0) is None
    assert progress.read_text() == "step\n"
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1  # none left
    steady = f"for i in 1 2 3 4 5 6; do echo step >> {progress}; sleep 0.5; done; exit 3"
    with open(tmp_path / "log", "w") as log:  # slower than the stall limit in all, but never silent that long
        assert training.wait_logging(["bash", "-c", steady], log, {}, progress, stall_seconds=1.5) == 3


def test_a_users_reward_file_function_and_options_reach_verl(tmp_path):
    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text(
        "def score_it(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return 1.0\n"
    )
    reward = run.user_reward(f"{reward_file}:score_it", ["scale=2.0", "mode=strict"])
    assert reward == run.DemoReward(reward_file, "score_it", (("scale", "2.0"), ("mode", "strict")))
    validation = Validation(("test",), every=10, samples=4)
    for algorithm, path in (("bot_grpo", str(reward_file)), ("grpo", str(OUTCOME_REWARD))):
        config = verl_config(*run.demo_overrides(ASSETS, algorithm, 60, tmp_path, 3, validation, reward))
        function = config.reward.custom_reward_function
        assert function.path == path and function.reward_kwargs.scale == 2.0 and function.reward_kwargs.mode == "strict"
        assert function.name == "score_it" if algorithm == "bot_grpo" else function.reward_kwargs.token_reward_name
    assert run.user_reward(str(reward_file), []).name == "compute_score"
    with pytest.raises(ValueError, match="no reward file"):
        run.user_reward(str(tmp_path / "missing.py"), [])
    with pytest.raises(ValueError, match=r"KEY=VALUE, got \['scale'\]"):
        run.user_reward(str(reward_file), ["scale"])


def test_a_reward_without_acc_counts_its_score_and_shows_no_as_asked_lines(tmp_path):
    plain = run.DemoRun("bot_grpo", [1.0], [0.5], demo_run("x", [[0.0, 1.0], [1.0, 1.0]]).held_out, None)
    lines = run.summary_lines([plain], "test", run.DemoReward(Path("r.py")).held_out)
    assert lines[0].startswith("held-out success rate (acc, else score, above 0.5), 2 test prompts")
    assert len(lines) == 2 and "as_asked" not in run.summary([plain], "test", run.SCORE_SUCCESS)["bot_grpo"]
    assert solved({"score": 0.9}) and not solved({"score": 0.9, "acc": 0.0})
    run.plot([plain], "test", tmp_path / "demo.png", run.DemoReward(Path("r.py")), "my_reward.py on react_tsx")
    assert (tmp_path / "demo.png").stat().st_size > 0


def test_every_task_has_its_demo_reward_and_the_agentic_one_runs_verls_tool_loop(tmp_path):
    assert set(run.TASK_REWARDS) == set(run.TASKS)
    task = run.TASKS["tool_arithmetic"]
    validation = Validation(("test",), every=10, samples=4)
    reward = run.TASK_REWARDS[task.name]
    config = verl_config(*run.demo_overrides(ASSETS, "bot_grpo", 60, tmp_path, 3, validation, reward, task.rollout))
    rollout = config.actor_rollout_ref.rollout
    assert rollout.multi_turn.enable and rollout.agent.default_agent_loop == "tool_agent"
    assert config.reward.custom_reward_function.path.endswith("tool_arithmetic.py")


def test_a_failed_run_of_ones_own_reward_names_the_check_reward_command_that_tries_it(tmp_path, capsys):
    reward_file = tmp_path / "my reward.py"
    reward_file.write_text("def score_it(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                           "    return 1.0\n")  # fmt: skip
    reward = run.user_reward(f"{reward_file}:score_it", ["scale=2.0"])
    command = run.check_reward_command(reward, tmp_path / "tokenizer")
    assert command == (f"bot-grpo-verl check-reward '{reward_file}' --name score_it --reward-kwargs scale=2.0 "
                       f"--tokenizer {tmp_path / 'tokenizer'}")  # fmt: skip
    status = main(["check-reward", str(reward_file), "--name", "score_it"])
    assert status == 0 and capsys.readouterr().out.splitlines()[-1] == "OK (4 call(s))"
