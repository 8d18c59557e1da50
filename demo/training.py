"""verl's real trainer on a CPU: the settings every CPU run shares, the training process, and its metrics.

Both the demo (:mod:`demo.run`) and the benchmark matrix (:mod:`benchmarks.matrix`) train through here:
:func:`base_overrides` gives the model, data, batch and trainer settings, :func:`run_verl` runs
``python -m verl.trainer.main_ppo`` with progress lines and a stall guard, and :func:`read_metrics` reads
the metrics verl's file logger wrote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

COMPILE_RATE = "reward_extra/compiled/mean"
REACT_SUCCESS = (COMPILE_RATE, "compile rate")  # the React task's success metric and its name on screen
TOKEN_REWARD = "reward_extra/token_reward_mean/mean"
STEP_TIME = "timing_s/step"
HELD_OUT_RATE = re.compile(r"val-core/.+/(acc|reward)/mean@\d+")
MAX_PROMPT_LENGTH = 64
MAX_RESPONSE_LENGTH = 160
PROMPTS_PER_STEP = 8  # prompts (groups of rollouts) per training step
STALL_SECONDS = 900  # a run that logs no step for this long is stopped (see run_verl)

Curve = tuple[list[float], list[float]]  # (steps, values)


def base_overrides(
    assets,
    steps: int,
    out: Path,
    seed: int,
    max_prompt_length: int = MAX_PROMPT_LENGTH,
    max_response_length: int = MAX_RESPONSE_LENGTH,
) -> list[str]:
    """The CPU run's data, model, batch and trainer settings: shared by the demo and every algorithm of the
    CPU benchmark (presets and the reward function come on top). A task with shorter sequences sets its own
    token budgets (verl pads every response to ``max_response_length``, so the update's cost follows it)."""
    return [
        f"data.train_files={assets.train_parquet}",
        f"data.val_files={assets.val_parquet}",
        f"data.train_batch_size={PROMPTS_PER_STEP}",
        f"data.max_prompt_length={max_prompt_length}",
        f"data.max_response_length={max_response_length}",
        f"data.seed={seed}",
        f"actor_rollout_ref.model.path={assets.model_dir}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "actor_rollout_ref.actor.use_kl_loss=false",
        f"trainer.total_training_steps={steps}",
        "trainer.logger=[console,file]",
        "trainer.project_name=bot_grpo_demo",
        f"trainer.experiment_name=seed{seed}",
        f"trainer.default_local_dir={out / 'checkpoints'}",
        f"trainer.rollout_data_dir={out / 'rollouts'}",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
    ]


def merge_presets(overrides: list[str]) -> list[str]:
    """Hydra takes one ``+preset=``: gather every ``+preset=NAME`` into ``+preset=[NAME,...]``."""
    presets = [override.split("=", 1)[1] for override in overrides if override.startswith("+preset=")]
    names = [name for preset in presets for name in preset.strip("[]").split(",") if name]
    rest = [override for override in overrides if not override.startswith("+preset=")]
    return [f"+preset=[{','.join(dict.fromkeys(names))}]", *rest]


def verl_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


class TreeCpu:
    """CPU seconds (user + system) of a process and all its descendants, read with psutil whenever :meth:`sample` is
    called: each process counts at its last sample, so a process that lives and ends between two samples is missed
    and one that ends after a sample loses its time since then (sampled every 10 s, the error is small against the
    minutes of a run's Ray workers)."""

    def __init__(self):
        self.seconds: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU seconds at the last sample

    def sample(self, pid: int) -> None:
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for process in processes:
            try:
                times = process.cpu_times()
                self.seconds[(process.pid, process.create_time())] = times.user + times.system
            except psutil.Error:
                continue

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def run_verl(
    overrides: list[str],
    out: Path,
    steps: int,
    echo_progress: bool = True,
    label: str = "",
    success: tuple[str, str] = REACT_SUCCESS,
    stall_seconds: float = STALL_SECONDS,
) -> list[dict]:
    """Run ``main_ppo`` with ``overrides``; verl's metrics go to ``out/metrics.jsonl``, its output to
    ``out/verl.log``, its CPU seconds (:class:`TreeCpu`) to ``out/cpu_seconds``. Prints a progress line per step
    and per validation (prefixed by ``label``; ``success`` as in :func:`progress_lines`); returns the metrics, or
    raises naming the log when verl fails, logs fewer than ``steps`` training steps, or logs none for
    ``stall_seconds`` (then verl and every process it started are stopped: e.g. DAPO's dynamic sampling on verl
    V1 regenerates without bound once every group scores alike)."""
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    # BOT_GRPO_CPU=1: the CPU mode in verl's driver too (the cpu preset switches it on in the Ray workers only)
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics_path), "RAY_TMPDIR": ray_tmp, "BOT_GRPO_CPU": "1"}
    command = verl_command(overrides)
    (out / "command.txt").write_text(" ".join(command) + "\n")
    done = threading.Event()
    progress = (metrics_path, steps, done, echo_progress, label, success)
    follower = threading.Thread(target=follow, args=progress, daemon=True)
    follower.start()
    cpu = TreeCpu()
    try:
        with open(out / "verl.log", "w") as log:
            returncode = wait_logging(command, log, env, metrics_path, stall_seconds, cpu)
    finally:
        (out / "cpu_seconds").write_text(f"{cpu.total:.1f}\n")
        done.set()
        follower.join()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    rows = read_metrics(metrics_path)
    trained = len(training_rows(rows))
    if returncode != 0 or trained < steps:
        tail = "\n".join((out / "verl.log").read_text(errors="replace").splitlines()[-30:])
        how = f"exited {returncode}" if returncode is not None else f"logged nothing for {stall_seconds:.0f} s, stopped"
        raise RuntimeError(f"verl {how} after {trained}/{steps} steps; log {out / 'verl.log'}:\n{tail}")
    return rows


def wait_logging(
    command: list[str], log, env: dict, progress: Path, stall_seconds: float, cpu: TreeCpu | None = None
) -> int | None:
    """Run ``command`` in a session of its own; its exit status, or None when ``progress`` (a file it appends
    to) has not changed for ``stall_seconds``, in which case the whole session is killed. ``cpu`` samples the
    process tree's CPU time every 10 s."""
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    last = time.monotonic()
    seen = None
    while True:
        if cpu is not None:
            cpu.sample(process.pid)
        try:
            return process.wait(timeout=min(10.0, stall_seconds))
        except subprocess.TimeoutExpired:
            state = progress.stat().st_mtime_ns if progress.exists() else None
            if state != seen:
                seen, last = state, time.monotonic()
            elif time.monotonic() - last > stall_seconds:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return None


def read_metrics(path: Path) -> list[dict]:
    """verl's file-logger lines, ``{"step": s, "data": {...}}``, as ``[{"step": s, **data}]``."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            rows.append({"step": record["step"], **record["data"]})
    return rows


def training_rows(rows: list[dict]) -> list[dict]:
    """The rows of training steps (verl logs the validation before training as a row of its own, step 0)."""
    return [row for row in rows if STEP_TIME in row]


def held_out_rate(row: dict) -> float | None:
    """The row's held-out success rate (verl's ``val-core/<source>/acc/mean@n``), None without validation."""
    return next((value for key, value in row.items() if HELD_OUT_RATE.fullmatch(key)), None)


def progress_lines(row: dict, steps: int, success: tuple[str, str] = REACT_SUCCESS) -> list[str]:
    """What one metrics row shows on screen: its training step and, when it holds one, its validation.
    ``success``: the training rollouts' success metric (verl's key) and its name on screen."""

    def show(key: str, fmt: str) -> str:
        return format(row[key], fmt) if key in row else "n/a"

    lines = []
    if STEP_TIME in row:
        lines.append(
            f"step {row['step']:>3}/{steps}  {success[1]} {show(success[0], '.2f')}  "
            f"mean token reward {show(TOKEN_REWARD, '+.3f')}  step time {show(STEP_TIME, '.1f')} s"
        )
    rate = held_out_rate(row)
    if rate is not None:
        lines.append(f"step {row['step']:>3}/{steps}  held-out {success[1]} {rate:.3f}")
    return lines


def follow(path: Path, steps: int, done: threading.Event, echo: bool, label: str, success: tuple[str, str]) -> None:
    shown = 0
    while not done.wait(2.0) or shown < len(read_metrics(path)):
        rows = read_metrics(path)
        for row in rows[shown:]:
            for line in progress_lines(row, steps, success) if echo else ():
                print(f"{label}{line}", flush=True)
        shown = len(rows)


def moving_average(curve: Curve, window: int) -> Curve:
    """The curve averaged over ``window`` consecutive points, each value placed at its window's last step."""
    steps, values = curve
    if window <= 1 or len(values) < window:
        return curve
    averaged = np.convolve(values, np.ones(window) / window, mode="valid")
    return list(steps[window - 1 :]), [float(value) for value in averaged]
