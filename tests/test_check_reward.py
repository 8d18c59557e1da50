"""``bot-grpo-verl check-reward``: every shipped reward tried (fully where it needs no server or model), a reward
that raises or returns a bad value named with its file and line, in seconds; and the plugin's log level."""

import json
import logging
import resource
import subprocess
import sys
import time

import pandas as pd
import pytest

from bot_grpo_verl import set_log_level
from bot_grpo_verl.__main__ import main
from bot_grpo_verl.shipped_rewards import rewards_dir

RAISES = """TABLE = {}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": TABLE["my_lookup_table"]}
"""
BOOL_SCORE = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": ground_truth in solution_str}
"""
LIMIT_S = 10.0


def check(capsys, *argv):
    """(exit status, printed lines) of ``bot-grpo-verl check-reward ARGV``."""
    status = main(["check-reward", *map(str, argv)])
    return status, capsys.readouterr().out.splitlines()


def calls(lines):
    """The table's rows: (row, response, score)."""
    rows = [line.split() for line in lines]
    return [tuple(row[:3]) for row in rows if len(row) == 8 and row[0].isdigit() and row[1].isdigit()]


def test_arithmetic_steps_runs_on_a_generated_group(capsys):
    status, lines = check(capsys, rewards_dir() / "arithmetic_steps.py")
    assert status == 0 and lines[-1] == "OK (4 call(s))", lines
    assert calls(lines) == [("0", "0", "1"), ("0", "1", "0"), ("0", "2", "0"), ("0", "3", "0")]


def test_tool_arithmetic_runs_on_a_data_file_and_its_needs_are_named(capsys, tmp_path):
    rows = [{"data_source": "calc", "reward_model": {"ground_truth": "6"}, "extra_info": {"values": [3, 6]}}]
    (tmp_path / "rows.jsonl").write_text(json.dumps(rows[0]) + "\n")
    status, lines = check(capsys, rewards_dir() / "tool_arithmetic.py", "--data", tmp_path / "rows.jsonl",
                          "--response", "\\boxed{6}", "--response", "no answer")  # fmt: skip
    assert status == 0 and calls(lines) == [("0", "0", "1"), ("0", "1", "0")], lines
    (tmp_path / "rows.jsonl").write_text(json.dumps({**rows[0], "extra_info": {}}) + "\n")
    status, lines = check(capsys, rewards_dir() / "tool_arithmetic.py", "--data", tmp_path / "rows.jsonl")
    assert status == 1 and any("row 0: the tool_arithmetic reward cannot score this row: extra_info['values']" in line
                               for line in lines), lines  # fmt: skip


def test_react_tsx_runs_on_a_parquet_of_verl_rows(capsys, tmp_path):
    rows = [{"data_source": "react", "prompt": [{"role": "user", "content": "a button"}],
             "reward_model": {"ground_truth": None}, "extra_info": {"index": 0}}]  # fmt: skip
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    status, lines = check(capsys, rewards_dir() / "react_tsx.py", "--data", tmp_path / "rows.parquet",
                          "--reward-kwargs", "level=syntax", "region=line")  # fmt: skip
    assert status == 0, lines
    assert [score for _, response, score in calls(lines) if response == "2"] == ["1"]  # the code compiles


@pytest.mark.parametrize(
    ("reward", "kwargs", "message"),
    [
        ("react_tsx", ["levle=types"], "unknown react_tsx option(s) ['levle']; did you mean 'level'?"),
        ("math_prm", ["prm_formatt=qwen"], "unknown math_prm option(s) ['prm_formatt']; did you mean 'prm_format'?"),
        ("arithmetic_steps", ['{"noise": -1}'], "noise=-1 is out of range"),
    ],
)
def test_a_shipped_rewards_options_are_checked_before_it_is_called(capsys, reward, kwargs, message):
    status, lines = check(capsys, rewards_dir() / f"{reward}.py", "--reward-kwargs", *kwargs)
    assert status == 1 and calls(lines) == [], lines
    assert any(line.startswith(f"PROBLEM: reward_kwargs of {reward}: ") and message in line for line in lines), lines


def test_a_bad_return_value_names_the_function_that_returned_it(capsys, tmp_path):
    (tmp_path / "reward.py").write_text(BOOL_SCORE)
    status, lines = check(capsys, tmp_path / "reward.py", "--response", "4")
    assert status == 1
    assert any("score must be a number" in line and f"{tmp_path / 'reward.py'}:2)" in line for line in lines), lines


def timed(command: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished command, its CPU seconds, its wall seconds)."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - start
    return done, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), wall


@pytest.mark.slow
def test_a_reward_that_raises_is_named_with_its_file_and_line_within_seconds(tmp_path):
    """Timed by the CPU time of the command (its wall time on an idle machine; a loaded one stretches the wall time
    most), against loading a reward the way verl does (importing verl's loader), which it cannot beat."""
    (tmp_path / "reward.py").write_text(RAISES)
    done, cpu, wall = timed([sys.executable, "-m", "bot_grpo_verl", "check-reward", str(tmp_path / "reward.py")])
    _, least, _ = timed([sys.executable, "-c", "import verl.trainer.ppo.reward"])
    assert done.returncode == 1
    where = f'at {tmp_path / "reward.py"}:5 in compute_score: return {{"score": TABLE["my_lookup_table"]}}'
    assert where in done.stdout
    assert f'File "{tmp_path / "reward.py"}", line 5, in compute_score' in done.stdout
    assert cpu < max(LIMIT_S, least + 3.0), (cpu, least, wall)
    print(f"check-reward on a reward that raises: {cpu:.1f} s CPU ({wall:.1f} s wall); importing verl's loader alone: "
          f"{least:.1f} s CPU")  # fmt: skip


@pytest.mark.parametrize(("variable", "level"), [(None, logging.WARNING), ("INFO", logging.INFO),
                                                 ("error", logging.ERROR), ("nonsense", logging.WARNING)])  # fmt: skip
def test_the_plugins_loggers_follow_verls_log_level_variable(monkeypatch, variable, level):
    environ = {} if variable is None else {"VERL_LOGGING_LEVEL": variable}
    try:
        set_log_level(environ)
        assert logging.getLogger("bot_grpo_verl.run_checks").getEffectiveLevel() == level
    finally:
        set_log_level()
