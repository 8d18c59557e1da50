"""Reading a frozen options dataclass from a section of verl's (hydra) config, strictly."""

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
