"""The main job: verl's real trainer learns React/TSX components on a CPU, judged on held-out prompts.

Builds (or reuses) the demo assets, then for each algorithm (default BoT-GRPO; ``--algorithms grpo,bot_grpo``
runs GRPO beside it on the same seed) runs ``python -m verl.trainer.main_ppo`` with ``+preset=cpu``, the
React/TSX compile reward as the algorithm consumes it (:mod:`recipes.algorithms`) and verl's held-out
validation: before training and every ``--val-every`` steps, ``--val-n`` temperature-1 samples of each
test prompt. It prints one line per step and per validation, and writes per algorithm verl's metrics
(JSONL), validation dumps and a heat-map of the last step's rollouts (:mod:`bot_grpo_verl.heatmap`), and
for the whole demo a plot (top: held-out compile rate with its 95% interval; below: the training compile rate)
and ``summary.json``. The last lines give each algorithm's held-out change with its interval.

    python -m demo.run --steps 60 --out runs/demo [--algorithms grpo,bot_grpo] [hydra overrides ...]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot_grpo_verl import heatmap
from demo.assets import build_assets
from demo.held_out import (
    HeldOutCurve,
    Validation,
    compiles_as_asked,
    mean_interval,
    problem_index,
    validation_overrides,
)
from demo.tasks import (
    ARITHMETIC,
    ARITHMETIC_HARD,
    ARITHMETIC_STEPS,
    REACT,
    REACT_COMPILE_ONLY,
    REACT_TSX,
    TASKS,
    TOOL_ARITHMETIC,
    TOOL_ARITHMETIC_TASK,
)
from demo.training import (
    MAX_RESPONSE_LENGTH,
    REACT_SUCCESS,
    base_overrides,
    merge_presets,
    moving_average,
    read_metrics,
    run_verl,
    training_rows,
)
from recipes.algorithms import ALGORITHMS, algorithm_keys, reward_function_overrides

# Any reward: verl's mean over rollouts of their token rewards summed (the score, for an outcome reward).
SCORE_SUCCESS = ("critic/score/mean", "summed token reward per rollout")
SMOOTHING = 5
DEMO_VALIDATION = Validation(splits=("test",), every=10, samples=4)


def demo_overrides(
    assets,
    algorithm: str,
    steps: int,
    out: Path,
    seed: int,
    validation: Validation,
    reward: DemoReward | None = None,
    rollout: tuple[str, ...] = (),
) -> list[str]:
    """One demo run: CPU preset and base settings, the task's ``rollout`` settings (:attr:`demo.tasks.Task.rollout`),
    held-out validation, the reward (default: the React/TSX compile reward) as ``algorithm`` consumes it, and the
    algorithm's own keys (from the recipes' one table)."""
    reward = reward or REACT_REWARD
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {sorted(ALGORITHMS)}")
    return merge_presets(
        [
            "+preset=cpu",
            *base_overrides(assets, steps, out, seed),
            *rollout,
            *validation_overrides(assets, validation, out),
            *reward_function_overrides(reward.path, reward.options, ALGORITHMS[algorithm].reward, reward.name),
            *algorithm_keys(algorithm, MAX_RESPONSE_LENGTH),
            f"trainer.experiment_name={algorithm}-seed{seed}",
        ]
    )


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
TOOL_ARITHMETIC_REWARD = DemoReward(
    TOOL_ARITHMETIC, success=("reward_extra/acc/mean", "solve rate"), held_out="solve rate"
)
TASK_REWARDS = {
    REACT.name: REACT_REWARD,
    ARITHMETIC.name: ARITHMETIC_REWARD,
    ARITHMETIC_HARD.name: ARITHMETIC_REWARD,
    TOOL_ARITHMETIC_TASK.name: TOOL_ARITHMETIC_REWARD,
}


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


def check_reward_command(reward: DemoReward, tokenizer_dir: Path) -> str:
    """The ``bot-grpo-verl check-reward`` command that tries ``reward`` with the demo's tokenizer in seconds: the
    first step when a run of a reward of one's own fails."""
    options = "".join(f" {shlex.quote(f'{key}={value}')}" for key, value in reward.options)
    kwargs = f" --reward-kwargs{options}" if options else ""
    file = shlex.quote(str(reward.path))
    return (
        f"bot-grpo-verl check-reward {file} --name {reward.name}{kwargs} --tokenizer {shlex.quote(str(tokenizer_dir))}"
    )


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


def is_rate(label: str) -> bool:
    """Whether a curve named ``label`` is a share of samples (drawn on 0-1): its name ends in ``rate``."""
    return label.endswith("rate")


def figure(runs: list[DemoRun], split: str, reward: DemoReward | None = None, title: str = ""):
    """The demo's figure, two panels over the training steps, one colour per run; ``title`` names what is learned.

    Top, "held-out <reward.held_out>" (0-1): the held-out success rate per validation with its 95% interval (band),
    and the held-out share that compiles as asked (dotted, where measured). Bottom, the training rollouts' own
    metric under its own name (``reward.success``: a rate on 0-1, or verl's summed token reward per rollout on its
    own scale), raw (dots) and as a ``SMOOTHING``-step moving average (dashed).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reward = reward or REACT_REWARD
    train_label = reward.success[1]
    shown, (held_out_axis, train_axis) = plt.subplots(2, 1, figsize=(8, 7.2), sharex=True)
    for number, run in enumerate(runs):
        colour = f"C{number}"
        intervals = [mean_interval(rates) for rates in run.held_out.rates]
        means = [mean for mean, _ in intervals]
        low = [mean - half for mean, half in intervals]
        high = [mean + half for mean, half in intervals]
        steps = run.held_out.steps
        held_out_axis.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
        held_out_axis.plot(steps, means, marker="o", color=colour, label=f"{run.algorithm}: {reward.held_out}")
        if run.as_asked is not None:
            as_asked = [mean_interval(rates)[0] for rates in run.as_asked.rates]
            held_out_axis.plot(
                steps, as_asked, ":", marker="s", color=colour, label=f"{run.algorithm}: compiles as asked"
            )
        train_axis.plot(run.train_steps, run.train_rate, ".", color=colour, alpha=0.25)
        smooth_steps, smooth = moving_average((run.train_steps, run.train_rate), SMOOTHING)
        train_axis.plot(
            smooth_steps, smooth, "--", color=colour, label=f"{run.algorithm}: {train_label}, {SMOOTHING}-step mean"
        )
    held_out = runs[0].held_out
    held_out_axis.set_ylim(0, 1)
    held_out_axis.set_ylabel(f"held-out {reward.held_out}")
    held_out_axis.set_title(
        f"Tiny Qwen2 learning {title or 'React/TSX'} on CPU\nheld-out: {held_out.rates.shape[1]} {split} prompts x "
        f"{held_out.samples} samples at each validation (band: 95% interval over prompts)",
        fontsize=10,
    )
    train_axis.set_title("training rollouts", fontsize=10)
    if is_rate(train_label):
        train_axis.set_ylim(0, 1)
    train_axis.set_ylabel(train_label)
    train_axis.set_xlabel("training step")
    for axis in (held_out_axis, train_axis):
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right", fontsize=8)
    shown.tight_layout()
    return shown


def plot(runs: list[DemoRun], split: str, path: Path, reward: DemoReward | None = None, title: str = "") -> None:
    """Write :func:`figure` to ``path`` (PNG)."""
    import matplotlib.pyplot as plt

    drawn = figure(runs, split, reward, title)
    drawn.savefig(path, dpi=120)
    plt.close(drawn)


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
        task = TASKS[args.task]
        overrides = demo_overrides(assets, algorithm, args.steps, folder, args.seed, validation, reward, task.rollout)
        print(
            f"{algorithm}: {args.steps} steps, validating every {args.val_every}; log {folder}/verl.log; rollouts "
            f"(the heat-map's input) {folder}/rollouts",
            flush=True,
        )
        try:
            run_verl([*overrides, *args.overrides], folder, args.steps, label=f"{algorithm}  ", success=reward.success)
        except RuntimeError as error:
            if not args.reward:
                raise
            first = check_reward_command(reward, assets.tokenizer_dir)
            raise RuntimeError(f"{error}\nTry the reward first, in seconds, without training: {first}") from error
        write_heatmap(folder, args.steps, assets.tokenizer_dir)
        runs.append(read_run(algorithm, folder, problems, args.split, reward))
    title = f"{Path(args.reward).name} on {args.task}" if args.reward else args.task
    plot(runs, args.split, out / "demo.png", reward, title)
    (out / "summary.json").write_text(json.dumps(summary(runs, args.split, reward.success), indent=1) + "\n")
    print(f"done in {time.monotonic() - started:.0f} s; plot {out / 'demo.png'}, summary {out / 'summary.json'}")
    print("\n".join(summary_lines(runs, args.split, reward.held_out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
