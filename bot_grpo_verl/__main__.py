"""The ``bot-grpo-verl`` command (also ``python -m bot_grpo_verl``).

- ``check``: show whether verl sees the plugin, and why not if it does not.
- ``setup tsx [--dir DIR]``: install the TSX checker's pinned npm packages (``npm ci`` from the shipped lock
  file) into the per-user cache or DIR (then set ``BOT_GRPO_VERL_TSX_DIR=DIR``).
- ``reward-path NAME``: the file of a reward function, for ``reward.custom_reward_function.path``, or of the
  calculator tool, for ``actor_rollout_ref.rollout.multi_turn.function_tool_path``.
- ``check-reward FILE [--data F] [--rows N] [--reward-kwargs K=V ...] [--tokenizer DIR] [--name F]``: try a reward
  function on real rows in seconds, without training (:mod:`bot_grpo_verl.check_reward`).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import shutil
import subprocess
import sys
import traceback
from importlib.metadata import entry_points
from pathlib import Path

from bot_grpo_verl import ESTIMATOR_NAME, __version__


def check() -> int:
    """Print versions, the entry point, what verl has registered and any import error; 0 when all is well."""
    from bot_grpo_verl.verl_compat import SUPPORTED_VERL, installed_verl_version

    problems = []
    print(f"bot-grpo-verl {__version__}  (python {platform.python_version()})")
    verl_version = installed_verl_version()
    print(f"verl          {verl_version or 'NOT INSTALLED'}  (supported: {SUPPORTED_VERL})")
    try:
        import torch

        print(f"torch         {torch.__version__}")
    except ImportError as error:
        problems.append(f"torch cannot be imported: {error}")

    ours = [ep for ep in entry_points(group="verl.plugins") if ep.value.startswith("bot_grpo_verl")]
    print(f"entry point   {', '.join(f'{ep.name} = {ep.value}' for ep in ours) or 'MISSING'}")
    if not ours:
        problems.append("no 'verl.plugins' entry point of bot-grpo-verl: reinstall the package (pip install -e .)")

    try:
        import verl  # noqa: F401  (loads the verl.plugins entry points)
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    except Exception:
        problems.append("verl cannot be imported:\n" + traceback.format_exc())
    else:
        registered = ESTIMATOR_NAME in ADV_ESTIMATOR_REGISTRY
        print(f"estimator     {ESTIMATOR_NAME}: {'registered' if registered else 'NOT REGISTERED'}")
        if not registered:
            try:
                importlib.import_module("bot_grpo_verl.plugin")
            except Exception:
                problems.append("the plugin failed to load:\n" + traceback.format_exc())
            else:
                problems.append("the plugin loads but verl did not load it (is VERL_USE_EXTERNAL_PLUGINS set?)")

    if not _preset_discoverable():
        problems.append(
            "hydra does not see the presets (+preset=bot_grpo): the package is installed through an editable "
            "finder that hides namespace packages; reinstall with "
            "'pip install -e . --config-settings editable_mode=compat' (or a regular install)"
        )
    else:
        print("hydra preset  +preset=bot_grpo: available")
    print(f"tsx checker   {tsx_checker_status()}")

    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 0 if not problems else 1


def tsx_checker_status() -> str:
    """Where the React/TSX reward's worker runs from, or what sets it up (optional: no problem if absent)."""
    from bot_grpo_verl.rewards.tsx_setup import TsxNotInstalled, worker_script

    try:
        directory = worker_script().parent
    except TsxNotInstalled as error:
        return f"not set up, needed by the React/TSX reward only: {error}"
    node = shutil.which("node")
    return f"{directory} (node: {node or 'NOT ON PATH, install Node.js >= 18'})"


def _preset_discoverable() -> bool:
    from hydra.core.plugins import Plugins
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    return any(
        plugin.__module__.startswith("hydra_plugins.bot_grpo_verl")
        for plugin in Plugins.instance().discover(SearchPathPlugin)
    )


REWARDS = ("react_tsx", "math_prm", "arithmetic_steps", "calculator", "token_credit")


def reward_path(name: str) -> Path:
    """The installed file of reward function (or tool) ``name`` (one of :data:`REWARDS`)."""
    import bot_grpo_verl.rewards

    return (Path(bot_grpo_verl.rewards.__file__).parent / f"{name}.py").resolve()


def setup_tsx(directory: Path | None) -> int:
    """``npm ci`` the TSX checker into ``directory`` (default: the per-user cache); 0 when done."""
    from bot_grpo_verl.rewards.tsx_setup import DIR_VARIABLE, TsxNotInstalled, install

    try:
        installed = install(directory)
    except TsxNotInstalled as error:
        print(f"PROBLEM: {error}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as error:
        print(f"PROBLEM: `{' '.join(error.cmd)}` failed with exit status {error.returncode}", file=sys.stderr)
        return 1
    except OSError as error:  # --dir is a file, or not writable
        where = directory if directory is not None else "the per-user cache"
        print(
            f"PROBLEM: cannot install into {where}: {error.strerror or error}; give a writable folder with --dir",
            file=sys.stderr,
        )
        return 1
    print(f"TSX checker installed in {installed}")
    if directory is not None:
        print(f"set {DIR_VARIABLE}={installed} where the reward runs")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bot-grpo-verl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="show versions, the plugin's registration and any import error")
    setup = commands.add_parser("setup", help="install what a reward function needs outside Python")
    setup.add_argument("component", choices=["tsx"], help="tsx: the React/TSX checker's npm packages")
    setup.add_argument("--dir", type=Path, default=None, help="install here instead of the per-user cache")
    path = commands.add_parser("reward-path", help="print a reward function's file (custom_reward_function.path)")
    path.add_argument("name", choices=REWARDS)
    from bot_grpo_verl import check_reward

    try_reward = commands.add_parser("check-reward", help="try a reward function on real rows, without training")
    check_reward.add_arguments(try_reward)
    args = parser.parse_args(argv)
    if args.command == "check-reward":
        return check_reward.main(args)
    if args.command == "setup":
        return setup_tsx(args.dir)
    if args.command == "reward-path":
        print(reward_path(args.name))
        return 0
    return check()


if __name__ == "__main__":
    sys.exit(main())
