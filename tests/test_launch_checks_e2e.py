"""A user's configuration mistakes end a real ``python -m verl.trainer.main_ppo`` within seconds of its launch, before
Ray starts, with one message naming the key (and the closest valid one): the plugin's options given with and without
``+`` and with and without a preset, a shipped reward's ``reward_kwargs``, and the data a judge needs.

Each launch is timed by the CPU time of its process (what its wall time is on an idle machine: the driver runs one
thread until Ray starts; a shared machine's load only stretches the wall time, which is printed too), against the
launch that hydra itself refuses (an override of a key that does not exist): the least a launch costs, importing
verl and composing the config.
"""

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cpu_assets import save_tiny_model, trainer_overrides, write_dataset, write_reward_function

from bot_grpo_verl.shipped_rewards import rewards_dir

pytestmark = pytest.mark.slow  # fresh verl interpreters: ~10 s each on an idle machine

LIMIT_S = 15.0
"""The time from launch to the error that the checks promise (docs/bad-input.md)."""
SLACK_S = 5.0
"""What the checks may add to the least a launch costs."""
REACT_TSX = rewards_dir() / "react_tsx.py"
JUDGE = (
    "+reward.custom_reward_function.reward_kwargs.render=true",
    "+reward.custom_reward_function.reward_kwargs.judge_endpoint=http://127.0.0.1:9/v1",
    "+reward.custom_reward_function.reward_kwargs.judge_model=judge",
)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("launch")
    save_tiny_model(root / "model")
    write_dataset(root / "train.parquet", rows=4)
    write_dataset(root / "val.parquet", rows=4, seed=1)
    write_reward_function(root / "reward.py")
    return root


def child_cpu_s() -> float:
    """CPU seconds (user and system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def launch(root: Path, *overrides: str) -> tuple[int, str, tuple[float, float], bool]:
    """(exit code, output, (CPU, wall) seconds from launch to exit, whether Ray started a session) of verl's trainer
    with the test's CPU run and ``overrides``."""
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *trainer_overrides(root, root / "model", ray_dir)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    try:
        start, cpu = time.monotonic(), child_cpu_s()
        done = subprocess.run([*command, *overrides], cwd=root, env=env, capture_output=True, text=True, timeout=600)
        elapsed = (child_cpu_s() - cpu, time.monotonic() - start)
        ray_started = any(Path(ray_dir).glob("session_*"))
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    return done.returncode, done.stdout + done.stderr, elapsed, ray_started


@pytest.fixture(scope="module")
def least_launch_s(root) -> float:
    """CPU seconds of a launch that hydra refuses (verl imported, the config composed, no check of ours)."""
    returncode, output, (cpu, _), _ = launch(root, "algorithm.bot_grpo.weighting=uniform")
    assert returncode != 0 and "Could not override 'algorithm.bot_grpo.weighting'" in output, output[-2000:]
    return cpu


MISTAKES = {
    "estimator option typo, with + and the preset": (
        ("+preset=[bot_grpo,cpu]", "+algorithm.bot_grpo.weighing=uniform"),
        r"unknown algorithm.bot_grpo option\(s\) \['weighing'\]; did you mean 'weighting'\?",
    ),
    "estimator option typo, without a preset": (
        ("algorithm.adv_estimator=bot_grpo", "+algorithm.bot_grpo.weighing=uniform"),
        r"unknown algorithm.bot_grpo option\(s\) \['weighing'\]; did you mean 'weighting'\?",
    ),
    "estimator option out of range": (
        ("+preset=[pure,cpu]", "algorithm.pure.temperature=0"),
        r"algorithm.pure.temperature=0 must be a positive number",
    ),
    "manager option typo": (
        ("+preset=[bot_grpo,cpu]", "+reward.bot_token.on_eror=skip"),
        r"unknown reward.bot_token option\(s\) \['on_eror'\]; did you mean 'on_error'\?",
    ),
    "shipped reward option typo": (
        ("+preset=[bot_grpo,cpu]", f"reward.custom_reward_function.path={REACT_TSX}",
         "+reward.custom_reward_function.reward_kwargs.levle=types"),
        r"reward_kwargs of react_tsx: unknown react_tsx option\(s\) \['levle'\]; did you mean 'level'\?",
    ),
    "a judge's data without the request": (
        ("+preset=[bot_grpo,cpu]", f"reward.custom_reward_function.path={REACT_TSX}", *JUDGE),
        r"data.train_files \S+train.parquet row 0: the react_tsx reward cannot score it: the judge .* needs the "
        r"request in extra_info\['instruction'\], got None",
    ),
}  # fmt: skip


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_configuration_mistake_ends_the_launch_before_ray_starts_naming_the_key(root, least_launch_s, mistake):
    overrides, message = MISTAKES[mistake]
    returncode, output, (cpu, wall), ray_started = launch(root, *overrides)
    assert returncode != 0 and re.search(message, output), output[-3000:]
    assert re.search(r"bot-grpo-verl: the run.s configuration has \d+ problem\(s\), found before Ray started", output)
    assert not ray_started and "ray init kwargs" not in output  # verl prints it just before ray.init
    assert cpu < LIMIT_S and cpu < least_launch_s + SLACK_S, (cpu, least_launch_s)
    print(f"{mistake}: {cpu:.1f} s CPU ({wall:.1f} s wall) from launch to the error; a launch hydra refuses: "
          f"{least_launch_s:.1f} s CPU")  # fmt: skip
