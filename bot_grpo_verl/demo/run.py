"""The main job: verl's real trainer runs BoT-GRPO with token-level compiler rewards on a CPU.

Builds (or reuses) the demo assets, runs ``python -m verl.trainer.main_ppo`` with ``+preset=[bot_grpo,cpu]``
and the React/TSX compile reward, prints one progress line per training step, and writes verl's
metrics (JSONL), a plot of compile rate and reward per step (PNG), and a heat-map of the last step's
rollouts coloured by token reward and advantage (HTML and PNG, :mod:`bot_grpo_verl.heatmap`).

    python -m bot_grpo_verl.demo.run --steps 30 --out runs/demo [hydra overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bot_grpo_verl import heatmap
from bot_grpo_verl.demo.assets import REACT_TSX, build_assets

COMPILE_RATE = "reward_extra/compiled/mean"
OUTCOME = "reward_extra/score/mean"
TOKEN_REWARD = "reward_extra/token_reward_mean/mean"
STEP_TIME = "timing_s/step"
MAX_RESPONSE_LENGTH = 160


def base_overrides(assets, steps: int, out: Path, seed: int) -> list[str]:
    """The CPU run's data, model, batch and trainer settings: shared by the demo and every algorithm of the
    CPU benchmark (presets and the reward function come on top)."""
    return [
        f"data.train_files={assets.train_parquet}",
        f"data.val_files={assets.val_parquet}",
        "data.train_batch_size=8",
        "data.max_prompt_length=64",
        f"data.max_response_length={MAX_RESPONSE_LENGTH}",
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


def verl_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


def run_verl(overrides: list[str], out: Path, steps: int, echo_progress: bool = True) -> list[dict]:
    """Run ``main_ppo`` with ``overrides``; verl's metrics go to ``out/metrics.jsonl``, its output to
    ``out/verl.log``. Prints a progress line per step; returns the metrics, or raises naming the log."""
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics_path), "RAY_TMPDIR": ray_tmp}
    command = verl_command(overrides)
    (out / "command.txt").write_text(" ".join(command) + "\n")
    done = threading.Event()
    follower = threading.Thread(target=follow, args=(metrics_path, steps, done, echo_progress), daemon=True)
    follower.start()
    try:
        with open(out / "verl.log", "w") as log:
            returncode = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    finally:
        done.set()
        follower.join()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    rows = read_metrics(metrics_path)
    if returncode != 0 or len(rows) < steps:
        tail = "\n".join((out / "verl.log").read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"verl exited {returncode} after {len(rows)}/{steps} steps; log {out / 'verl.log'}:\n{tail}")
    return rows


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


def progress_line(row: dict, steps: int) -> str:
    def show(key: str, fmt: str) -> str:
        return format(row[key], fmt) if key in row else "n/a"

    return (
        f"step {row['step']:>3}/{steps}  compile rate {show(COMPILE_RATE, '.2f')}  "
        f"outcome {show(OUTCOME, '.2f')}  mean token reward {show(TOKEN_REWARD, '+.3f')}  "
        f"step time {show(STEP_TIME, '.1f')} s"
    )


def follow(path: Path, steps: int, done: threading.Event, echo: bool = True) -> None:
    shown = 0
    while not done.wait(2.0) or shown < len(read_metrics(path)):
        rows = read_metrics(path)
        for row in rows[shown:]:
            if echo:
                print(progress_line(row, steps), flush=True)
        shown = len(rows)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row["step"] for row in rows]
    figure, (rate_axis, reward_axis) = plt.subplots(1, 2, figsize=(10, 3.8))
    rate_axis.plot(steps, [row.get(COMPILE_RATE) for row in rows], marker="o")
    rate_axis.set_ylim(0, 1)
    rate_axis.set_xlabel("training step")
    rate_axis.set_ylabel("compile rate (training rollouts)")
    for key, label in ((OUTCOME, "outcome score"), (TOKEN_REWARD, "mean token reward")):
        reward_axis.plot(steps, [row.get(key) for row in rows], marker="o", label=label)
    reward_axis.set_xlabel("training step")
    reward_axis.set_ylabel("reward")
    reward_axis.legend()
    figure.suptitle("BoT-GRPO on CPU: tiny Qwen2 learning React/TSX components, token-level compiler rewards")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="training steps")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="metrics, plot and logs go here")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"), help="demo assets cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="extra hydra overrides for verl")
    args = parser.parse_args(argv)

    out = args.out.resolve()
    assets = build_assets(args.cache_dir, seed=args.seed)
    print(f"assets: {assets.root} (SFT warm start compile rate {assets.metrics.get('compile_rate')})", flush=True)
    overrides = [
        "+preset=[bot_grpo,cpu]",
        *base_overrides(assets, args.steps, out, args.seed),
        f"reward.custom_reward_function.path={REACT_TSX}",
        "reward.custom_reward_function.name=compute_score",
        *args.overrides,
    ]
    print(f"running verl ({args.steps} steps); full log: {out / 'verl.log'}", flush=True)
    started = time.monotonic()
    rows = run_verl(overrides, out, args.steps)
    plot(rows, out / "demo.png")
    elapsed = time.monotonic() - started
    print(f"done: {len(rows)} steps in {elapsed:.0f} s; metrics {out / 'metrics.jsonl'}, plot {out / 'demo.png'}")
    last_rollouts = out / "rollouts" / f"{args.steps}.jsonl"
    heatmap.main(
        [
            str(last_rollouts),
            f"--tokenizer={assets.tokenizer_dir}",
            f"--reward-fn={REACT_TSX}:compute_score",
            "--limit=16",
            f"--out={out / 'heatmap.html'}",
            f"--png={out / 'heatmap.png'}",
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
