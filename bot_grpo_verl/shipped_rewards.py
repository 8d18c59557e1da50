"""What each reward function shipped in ``bot_grpo_verl.rewards`` needs of a run: its options
(verl's ``reward.custom_reward_function.reward_kwargs``) and the columns of its data rows.

The driver checks both before Ray starts (:mod:`bot_grpo_verl.launch_checks`), and ``bot-grpo-verl check-reward``
before it calls the function (:mod:`bot_grpo_verl.check_reward`): a reward's options are read by the reward's own
reader, so what passes here is what the reward accepts. A data row is a row of verl's RL format (``data_source``,
``prompt``, ``reward_model.ground_truth``, ``extra_info``); a row check says what a row lacks that the reward needs
to score any response to it (None when nothing).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ShippedReward:
    """One shipped reward file.

    Attributes:
        functions: the reward functions it defines (``reward.custom_reward_function.name``).
        options: ``reward_kwargs`` -> the reward's options; raises ``ValueError`` naming a bad one.
        row_problem: (the options, a data row) -> what the row lacks, None when it has what the reward needs.
    """

    functions: tuple[str, ...]
    options: Callable[[Mapping], Any]
    row_problem: Callable[[Any, Mapping], str | None]


def ground_truth(row: Mapping) -> Any:
    """A row's ``reward_model.ground_truth`` (None when the row has none)."""
    reward_model = row.get("reward_model")
    return reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None


def extra_info(row: Mapping) -> Mapping:
    """A row's ``extra_info`` (empty when the row has none)."""
    info = row.get("extra_info")
    return info if isinstance(info, Mapping) else {}


def react_tsx() -> ShippedReward:
    from bot_grpo_verl.rewards import react_tsx
    from bot_grpo_verl.rewards.react_requirements import ReactSpec

    def row_problem(options, row: Mapping) -> str | None:
        info = extra_info(row)
        request = info.get(options.judge_request_key)
        if options.judge_endpoint and (not isinstance(request, str) or not request.strip()):
            return (
                f"the judge (judge_endpoint={options.judge_endpoint}) needs the request in "
                f"extra_info[{options.judge_request_key!r}], got {request!r}: add that column to the data, or set "
                "reward_kwargs.judge_request_key to the one that holds it"
            )
        if options.requirements:
            try:
                ReactSpec.from_extra_info(info)
            except ValueError as error:
                return f"{error} (or set reward_kwargs.requirements=false to ignore the specs)"
        return None

    return ShippedReward(("compute_score", "compute_score_async"), react_tsx.parse_options, row_problem)


def math_prm() -> ShippedReward:
    from bot_grpo_verl.rewards.answer_check import ground_truth_text
    from bot_grpo_verl.rewards.math_prm import MathPRMConfig

    def row_problem(options, row: Mapping) -> str | None:
        if options.missing_ground_truth == "error" and ground_truth_text(ground_truth(row)) is None:
            return (
                f"reward_model.ground_truth is missing ({ground_truth(row)!r}); set "
                "reward_kwargs.missing_ground_truth=process_only to score such rows by the PRM alone"
            )
        return None

    return ShippedReward(("compute_score",), MathPRMConfig.from_kwargs, row_problem)


def arithmetic_steps() -> ShippedReward:
    from bot_grpo_verl.rewards.answer_check import ground_truth_text
    from bot_grpo_verl.rewards.arithmetic_steps import ArithmeticStepsConfig

    def row_problem(options, row: Mapping) -> str | None:
        if ground_truth_text(ground_truth(row), numbers.Integral) is None:
            return f"reward_model.ground_truth must be the integer answer, got {ground_truth(row)!r}"
        return None

    return ShippedReward(("compute_score",), ArithmeticStepsConfig.from_kwargs, row_problem)


def tool_arithmetic() -> ShippedReward:
    from bot_grpo_verl.rewards.tool_arithmetic import ToolArithmeticConfig

    def row_problem(options, row: Mapping) -> str | None:
        values = extra_info(row).get("values")
        items = list(values) if values is not None and not isinstance(values, str | Mapping) else None
        if not items or not all(isinstance(value, numbers.Integral | str) for value in items):
            return f"extra_info['values'] must list the problem's value after each operation, got {values!r}"
        return None

    return ShippedReward(("compute_score",), ToolArithmeticConfig.from_kwargs, row_problem)


SHIPPED: dict[str, Callable[[], ShippedReward]] = {
    "react_tsx": react_tsx,
    "math_prm": math_prm,
    "arithmetic_steps": arithmetic_steps,
    "tool_arithmetic": tool_arithmetic,
}
"""The shipped reward files by name (``bot-grpo-verl reward-path NAME``); each imports its reward when asked."""


def rewards_dir() -> Path:
    """The folder of the shipped reward files (``bot_grpo_verl/rewards/``)."""
    import bot_grpo_verl.rewards

    return Path(bot_grpo_verl.rewards.__file__).resolve().parent


def shipped_name(path: str | Path) -> str | None:
    """The name of the shipped reward at ``path`` (a file, ``file://`` allowed), None for any other file."""
    path = Path(str(path).removeprefix("file://")).expanduser()
    try:
        path = path.resolve()
    except OSError:
        return None
    return path.stem if path.parent == rewards_dir() and path.stem in SHIPPED else None
