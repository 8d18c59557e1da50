"""The main job: verl's real trainer learns React/TSX components on a CPU, judged on held-out prompts.

Builds (or reuses) the demo assets, then for each algorithm (default BoT-GRPO; ``--algorithms grpo,bot_grpo``
runs GRPO beside it on the same seed) runs ``python -m verl.trainer.main_ppo`` with ``+preset=cpu``, the
React/TSX compile reward as the algorithm consumes it (:mod:`recipes.algorithms`) and verl's held-out
validation: before training and every ``--val-every`` steps, ``--val-n`` temperature-1 samples of each
test prompt. It prints one line per step and per validation, and writes per algorithm verl's metrics
(JSONL), validation dumps and a heat-map of the last step's rollouts (:mod:`bot_grpo_verl.heatmap`), and
for the whole demo a plot (held-out compile rate with its 95% interval, smoothed training compile rate)
and ``summary.json``. The last lines give each algorithm's held-out change with its interval.

    python -m demo.run --steps 60 --out runs/demo [--algorithms grpo,bot_grpo] [hydra overrides ...]
"""

from __future__ import annotations

import argparse
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot_grpo_verl import heatmap
from demo.assets import build_assets
from demo.held_out import HeldOutCurve, Validation, mean_interval, problem_index, solved, validation_overrides
from demo.tasks import (
    ARITHMETIC,
    ARITHMETIC_HARD,
    ARITHMETIC_STEPS,
    REACT,
    REACT_COMPILE_ONLY,
    REACT_TSX,
    TASKS,
)
from recipes.algorithms import ALGORITHMS, algorithm_keys, reward_function_overrides

COMPILE_RATE = "reward_extra/compiled/mean"
REACT_SUCCESS = (COMPILE_RATE, "compile rate")  # the React task's success metric and its name on screen
SCORE_SUCCESS = (
    "critic/score/mean",
    "reward per rollout",
)  # any reward: verl's mean over rollouts of their summed rewards
TOKEN_REWARD = "reward_extra/token_reward_mean/mean"
STEP_TIME = "timing_s/step"
HELD_OUT_RATE = re.compile(r"val-core/.+/(acc|reward)/mean@\d+")
MAX_RESPONSE_LENGTH = 160
PROMPTS_PER_STEP = 8  # prompts (groups of rollouts) per training step
SMOOTHING = 5
STALL_SECONDS = 900  # a run that logs no step for this long is stopped (see run_verl)
DEMO_VALIDATION = Validation(splits=("test",), every=10, samples=4)

Curve = tuple[list[float], list[float]]  # (steps, values)


def base_overrides(assets, steps: int, out: Path, seed: int) -> list[str]:
    """The CPU run's data, model, batch and trainer settings: shared by the demo and every algorithm of the
    CPU benchmark (presets and the reward function come on top)."""
    return [
        f"data.train_files={assets.train_parquet}",
        f"data.val_files={assets.val_parquet}",
        f"data.train_batch_size={PROMPTS_PER_STEP}",
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


def merge_presets(overrides: list[str]) -> list[str]:
    """Hydra takes one ``+preset=``: gather every ``+preset=NAME`` into ``+preset=[NAME,...]``."""
    presets = [override.split("=", 1)[1] for override in overrides if override.startswith("+preset=")]
    names = [name for preset in presets for name in preset.strip("[]").split(",") if name]
    rest = [override for override in overrides if not override.startswith("+preset=")]
    return [f"+preset=[{','.join(dict.fromkeys(names))}]", *rest]


def demo_overrides(
    assets, algorithm: str, steps: int, out: Path, seed: int, validation: Validation, reward: DemoReward | None = None
) -> list[str]:
    """One demo run: CPU preset and base settings, held-out validation, the reward (default: the React/TSX compile
    reward) as ``algorithm`` consumes it, and the algorithm's own keys (from the recipes' one table)."""
    reward = reward or REACT_REWARD
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {sorted(ALGORITHMS)}")
    return merge_presets(
        [
            "+preset=cpu",
            *base_overrides(assets, steps, out, seed),
            *validation_overrides(assets, validation, out),
            *reward_function_overrides(reward.path, reward.options, ALGORITHMS[algorithm].reward, reward.name),
            *algorithm_keys(algorithm, MAX_RESPONSE_LENGTH),
            f"trainer.experiment_name={algorithm}-seed{seed}",
        ]
    )


def verl_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]


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
    ``out/verl.log``. Prints a progress line per step and per validation (prefixed by ``label``; ``success``
    as in :func:`progress_lines`); returns the metrics, or raises naming the log when verl fails, logs
    fewer than ``steps`` training steps, or logs none for ``stall_seconds`` (then verl and every process it
    started are stopped: e.g. DAPO's dynamic sampling on verl V1 regenerates without bound once every group
    scores alike)."""
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
    try:
        with open(out / "verl.log", "w") as log:
            returncode = wait_logging(command, log, env, metrics_path, stall_seconds)
    finally:
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


def wait_logging(command: list[str], log, env: dict, progress: Path, stall_seconds: float) -> int | None:
    """Run ``command`` in a session of its own; its exit status, or None when ``progress`` (a file it appends
    to) has not changed for ``stall_seconds``, in which case the whole session is killed."""
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    last = time.monotonic()
    seen = None
    while True:
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


@dataclass(frozen=True)
class DemoRun:
    """One algorithm's finished demo run.

    Attributes:
        algorithm: its name in the recipes' table.
        train_steps, train_rate: ``(S,)`` training steps and the success metric of their rollouts
            (:attr:`DemoReward.success`: the compile rate for the React reward).
        held_out: the held-out validations (see :class:`HeldOutCurve`), samples counted when the reward calls them
            a success (:func:`demo.held_out.solved`).
        as_asked: the same validations, samples counted when they compile as asked (:func:`compiles_as_asked`); None
            for a reward without that measure.
    """

    algorithm: str
    train_steps: list[float]
    train_rate: list[float]
    held_out: HeldOutCurve
    as_asked: HeldOutCurve | None


def read_run(
    algorithm: str, out: Path, problems: dict[str, tuple[str, int]], split: str, reward: DemoReward | None = None
) -> DemoRun:
    """The finished run in ``out``: its training success rates and the ``split`` validations it dumped."""
    reward = reward or REACT_REWARD
    key = reward.success[0]
    rows = training_rows(read_metrics(out / "metrics.jsonl"))
    steps = [float(row["step"]) for row in rows if key in row]
    rates = [float(row[key]) for row in rows if key in row]
    held_out = HeldOutCurve.read(out / "validation", problems, split)
    as_asked = HeldOutCurve.read(out / "validation", problems, split, reward.as_asked) if reward.as_asked else None
    return DemoRun(algorithm, steps, rates, held_out, as_asked)


def jsx_elements(code: str) -> frozenset[str]:
    """The intrinsic JSX elements ``code`` opens (``<ul>``, ``<li key={i}>``, ``<br/>``; not ``useState<number>``)."""
    return frozenset(re.findall(r"(?<![\w$.])<([a-z][a-z0-9]*)[\s>/]", code))


def compiles_as_asked(sample: dict) -> bool:
    """A React validation sample that compiles and opens the JSX elements of the reference solution: the
    requested kind of component, not a template that compiles whatever the prompt asked for."""
    return solved(sample) and jsx_elements(sample["output"]) == jsx_elements(sample["gts"])


@dataclass(frozen=True)
class DemoReward:
    """The reward a demo run trains on, and how the demo shows its success.

    Attributes:
        path (`Path`): the reward file (verl's ``reward.custom_reward_function.path``).
        name (`str`, defaults to `"compute_score"`): its function.
        options (`tuple[tuple[str, str], ...]`, defaults to `()`): its ``reward_kwargs``, hydra values.
        success (`tuple[str, str]`, defaults to :data:`SCORE_SUCCESS`): the training rollouts' success metric (verl's
            key) and its name on screen and in the plot.
        held_out (`str`, defaults to `"success rate (acc, else score, above 0.5)"`): what the held-out rate counts
            (:func:`demo.held_out.solved`), on screen.
        as_asked (`Callable[[dict], bool] | None`, defaults to `None`): a stricter held-out success, shown beside the
            reward's own (:func:`compiles_as_asked` for the React reward).
    """

    path: Path
    name: str = "compute_score"
    options: tuple[tuple[str, str], ...] = ()
    success: tuple[str, str] = SCORE_SUCCESS
    held_out: str = "success rate (acc, else score, above 0.5)"
    as_asked: Callable[[dict], bool] | None = None


REACT_REWARD = DemoReward(
    REACT_TSX, "compute_score", REACT_COMPILE_ONLY, REACT_SUCCESS, REACT_SUCCESS[1], compiles_as_asked
)
ARITHMETIC_REWARD = DemoReward(ARITHMETIC_STEPS, success=("reward_extra/acc/mean", "solve rate"), held_out="solve rate")
TASK_REWARDS = {REACT.name: REACT_REWARD, ARITHMETIC.name: ARITHMETIC_REWARD, ARITHMETIC_HARD.name: ARITHMETIC_REWARD}


def user_reward(spec: str, options: list[str]) -> DemoReward:
    """The reward of ``--reward PATH[:FUNCTION]`` with ``--reward-option KEY=VALUE`` options.

    Raises:
        ValueError: the file is missing, or an option is not ``KEY=VALUE``.
    """
    path, _, name = spec.partition(":")
    if not Path(path).is_file():
        raise ValueError(f"--reward {spec}: no reward file {path}")
    pairs = [option.partition("=") for option in options]
    bad = [option for option, (key, equals, _) in zip(options, pairs, strict=True) if not key or not equals]
    if bad:
        raise ValueError(f"--reward-option must be KEY=VALUE, got {bad}")
    return DemoReward(Path(path).resolve(), name or "compute_score", tuple((key, value) for key, _, value in pairs))


def change_line(name: str, curve: HeldOutCurve) -> str:
    """``  NAME: step A rate ± h -> step B rate ± h; change d ± h`` of one held-out curve."""
    start, end = (mean_interval(curve.rates[index]) for index in (0, -1))
    change = curve.change()
    return (
        f"  {name}: step {curve.steps[0]} {start[0]:.3f} ± {start[1]:.3f} -> step {curve.steps[-1]} "
        f"{end[0]:.3f} ± {end[1]:.3f}; change {change[0]:+.3f} ± {change[1]:.3f}"
    )


def summary_lines(runs: list[DemoRun], split: str, label: str = REACT_SUCCESS[1]) -> list[str]:
    """The demo's last words: per run the held-out rate (``label``) at the first and last validation and the
    change, with two or more runs each one's difference from the first at the last validation (paired by prompt),
    then (where measured) per run the same change counting only samples that compile as asked; every ``±`` is a
    95% interval over prompts."""
    first = runs[0].held_out
    lines = [
        f"held-out {label}, {first.rates.shape[1]} {split} prompts x {first.samples} samples at temperature 1 "
        "(± 95% interval over prompts):",
        *(change_line(run.algorithm, run.held_out) for run in runs),
    ]
    for run in runs[1:]:
        difference = mean_interval(run.held_out.rates[-1] - first.rates[-1])
        lines.append(
            f"  {run.algorithm} - {runs[0].algorithm} at step {run.held_out.steps[-1]}: "
            f"{difference[0]:+.3f} ± {difference[1]:.3f}"
        )
    if runs[0].as_asked is None:
        return lines
    lines.append("compiles as asked (the requested component's JSX elements; a template ignoring the prompt fails):")
    return lines + [change_line(run.algorithm, run.as_asked) for run in runs]


def curve_summary(curve: HeldOutCurve) -> dict:
    """A held-out curve's means and 95% half-widths per validation, and its change (paired by prompt)."""
    intervals = [mean_interval(rates) for rates in curve.rates]
    return {
        "steps": curve.steps.tolist(),
        "rate": [mean for mean, _ in intervals],
        "half_width_95": [half for _, half in intervals],
        "change": dict(zip(("mean", "half_width_95"), curve.change(), strict=True)),
    }


def summary(runs: list[DemoRun], split: str, success: tuple[str, str] = REACT_SUCCESS) -> dict:
    """``summary.json``: per algorithm the held-out success and (where measured) compiles-as-asked curves with
    their changes, and the training curve of the ``success`` metric (named by its label, e.g. ``compile_rate``)."""
    result = {"split": split, "prompts": int(runs[0].held_out.rates.shape[1]), "samples": runs[0].held_out.samples}
    for run in runs:
        result[run.algorithm] = {
            "held_out": curve_summary(run.held_out),
            **({"as_asked": curve_summary(run.as_asked)} if run.as_asked is not None else {}),
            "train": {"steps": run.train_steps, success[1].replace(" ", "_"): run.train_rate},
        }
    return result


def moving_average(curve: Curve, window: int) -> Curve:
    """The curve averaged over ``window`` consecutive points, each value placed at its window's last step."""
    steps, values = curve
    if window <= 1 or len(values) < window:
        return curve
    averaged = np.convolve(values, np.ones(window) / window, mode="valid")
    return list(steps[window - 1 :]), [float(value) for value in averaged]


def plot(runs: list[DemoRun], split: str, path: Path, label: str = REACT_SUCCESS[1], title: str = "") -> None:
    """Held-out success (``label``, e.g. compile rate) per validation with its 95% interval (band), the held-out
    share that compiles as asked (dotted, where measured), and the training rollouts' success metric, raw (dots) and
    as a ``SMOOTHING``-step moving average (dashed), one colour per run; ``title`` names what is learned."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.8))
    for number, run in enumerate(runs):
        colour = f"C{number}"
        intervals = [mean_interval(rates) for rates in run.held_out.rates]
        means = [mean for mean, _ in intervals]
        low = [mean - half for mean, half in intervals]
        high = [mean + half for mean, half in intervals]
        steps = run.held_out.steps
        axis.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
        axis.plot(steps, means, marker="o", color=colour, label=f"{run.algorithm}: held-out ({split} prompts)")
        if run.as_asked is not None:
            as_asked = [mean_interval(rates)[0] for rates in run.as_asked.rates]
            axis.plot(
                steps, as_asked, ":", marker="s", color=colour, label=f"{run.algorithm}: held-out, compiles as asked"
            )
        axis.plot(run.train_steps, run.train_rate, ".", color=colour, alpha=0.25)
        smooth_steps, smooth = moving_average((run.train_steps, run.train_rate), SMOOTHING)
        axis.plot(
            smooth_steps, smooth, "--", color=colour, label=f"{run.algorithm}: training rollouts, {SMOOTHING}-step mean"
        )
    if label.endswith("rate"):
        axis.set_ylim(0, 1)
    axis.set_xlabel("training step")
    axis.set_ylabel(label)
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right", fontsize=8)
    held_out = runs[0].held_out
    axis.set_title(
        f"Tiny Qwen2 learning {title or 'React/TSX'} on CPU: held-out {label}\n"
        f"({held_out.rates.shape[1]} {split} prompts x "
        f"{held_out.samples} samples, band: 95% interval over prompts)",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_heatmap(out: Path, steps: int, tokenizer_dir: Path) -> None:
    """Heat-map of the last step's first 4 prompt groups, coloured by token reward and advantage as trained."""
    heatmap.main(
        [
            str(out / "rollouts" / f"{steps}.jsonl"),
            f"--tokenizer={tokenizer_dir}",
            "--limit=4",
            f"--out={out / 'heatmap.html'}",
            f"--png={out / 'heatmap.png'}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="training steps")
    parser.add_argument("--algorithms", default="bot_grpo", help="comma-separated, run one after the other")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="metrics, plots and logs go here")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"), help="demo assets cache")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (the assets are always seed 0's)")
    parser.add_argument("--split", choices=("val", "test"), default=DEMO_VALIDATION.splits[0], help="held-out split")
    parser.add_argument("--val-every", type=int, default=DEMO_VALIDATION.every, help="validate every N steps")
    parser.add_argument("--val-n", type=int, default=DEMO_VALIDATION.samples, help="samples per held-out prompt")
    parser.add_argument("--task", choices=sorted(TASKS), default=REACT.name, help="the demo data (and its reward)")
    parser.add_argument(
        "--reward", metavar="PATH[:FUNCTION]", help="train on your reward file instead (function compute_score)"
    )
    parser.add_argument(
        "--reward-option", action="append", default=[], metavar="KEY=VALUE", help="a reward_kwargs entry (repeat)"
    )
    parser.add_argument("overrides", nargs="*", help="extra hydra overrides for verl")
    args = parser.parse_args(argv)

    algorithms = [name for name in args.algorithms.split(",") if name]
    unknown = sorted(set(algorithms) - set(ALGORITHMS))
    if not algorithms or unknown:
        parser.error(f"unknown or no algorithm(s) {unknown}; choose from {sorted(ALGORITHMS)}")
    if args.reward_option and not args.reward:
        parser.error("--reward-option needs --reward")
    try:
        reward = user_reward(args.reward, args.reward_option) if args.reward else TASK_REWARDS[args.task]
    except ValueError as error:
        parser.error(str(error))
    label = reward.success[1]
    validation = Validation((args.split,), args.val_every, args.val_n)
    out = args.out.resolve()
    assets = build_assets(args.cache_dir, task=TASKS[args.task])
    warm = {key: value for key, value in assets.metrics.items() if key in ("compile_rate", "accuracy")}
    print(f"assets: {assets.root} (SFT warm start {warm})", flush=True)
    print(f"reward: {reward.path}:{reward.name} {dict(reward.options)}; tokenizer: {assets.tokenizer_dir}", flush=True)
    problems = problem_index(assets, validation.splits)
    runs = []
    started = time.monotonic()
    for algorithm in algorithms:
        folder = out / algorithm
        overrides = demo_overrides(assets, algorithm, args.steps, folder, args.seed, validation, reward)
        print(
            f"{algorithm}: {args.steps} steps, validating every {args.val_every}; log {folder}/verl.log; rollouts "
            f"(the heat-map's input) {folder}/rollouts",
            flush=True,
        )
        run_verl([*overrides, *args.overrides], folder, args.steps, label=f"{algorithm}  ", success=reward.success)
        write_heatmap(folder, args.steps, assets.tokenizer_dir)
        runs.append(read_run(algorithm, folder, problems, args.split, reward))
    title = f"{Path(args.reward).name} on {args.task}" if args.reward else args.task
    plot(runs, args.split, out / "demo.png", label, title)
    (out / "summary.json").write_text(json.dumps(summary(runs, args.split, reward.success), indent=1) + "\n")
    print(f"done in {time.monotonic() - started:.0f} s; plot {out / 'demo.png'}, summary {out / 'summary.json'}")
    print("\n".join(summary_lines(runs, args.split, reward.held_out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
