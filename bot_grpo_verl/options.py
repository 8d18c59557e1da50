"""Reading a frozen options dataclass strictly: from a section of verl's (hydra) config, or from the
keyword arguments verl passes to a reward function."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import TypeVar

T = TypeVar("T")


def options_from_config(cls: type[T], parent: Mapping | None, key: str, path: str) -> T:
    """Build ``cls`` from ``parent[key]`` (a ``DictConfig``, dict, or absent for the defaults).

    Args:
        cls: a dataclass whose fields are the options and whose ``__post_init__`` checks their values.
        parent: the config section holding ``key`` (e.g. verl's ``algorithm``), or None.
        key: the options' key in ``parent`` (e.g. ``"bot_grpo"``).
        path: the options' full config path for error messages (e.g. ``"algorithm.bot_grpo"``).

    Raises:
        ValueError: for a non-mapping section or unknown option names, listing the allowed ones.
    """
    options = parent.get(key) if parent is not None else None
    if options is None:
        return cls()
    if not isinstance(options, Mapping):
        raise ValueError(f"{path} must be a mapping of options, got {options!r}")
    options = dict(options.items())
    allowed = [field.name for field in fields(cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {path} option(s) {unknown}; allowed options are {allowed}")
    return cls(**options)


# Keyword arguments verl's reward loop passes to every custom reward function on its own.
VERL_REWARD_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def options_from_kwargs(cls: type[T], kwargs: Mapping, name: str) -> T:
    """Build ``cls`` from a reward function's keyword arguments (verl's ``reward_kwargs``).

    Args:
        cls: a dataclass whose fields are the options and whose ``__post_init__`` checks their values.
        kwargs: the function's keyword arguments; those verl passes on its own
            (:data:`VERL_REWARD_CALL_KWARGS`) are ignored.
        name: the reward function's name for error messages (e.g. ``"math_prm"``).

    Raises:
        ValueError: for unknown option names, listing the allowed ones.
    """
    allowed = [field.name for field in fields(cls)]
    unknown = sorted(set(kwargs) - set(allowed) - set(VERL_REWARD_CALL_KWARGS))
    if unknown:
        raise ValueError(f"unknown {name} option(s) {unknown}; allowed options are {allowed}")
    return cls(**{key: value for key, value in kwargs.items() if key in allowed})
