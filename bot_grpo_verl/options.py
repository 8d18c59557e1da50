"""Reading options strictly: a frozen options dataclass from a section of verl's (hydra) config or from the
keyword arguments verl passes to a reward function, and single keys of verl's own config.

Every value is checked against its field's type before the dataclass's ``__post_init__`` checks its range,
and a wrong one raises ``ValueError`` naming the full key:

- ``bool`` fields take ``true``/``false`` only: no strings (``"false"`` would be truthy), no numbers.
- ``int`` and ``float`` fields take finite numbers only: no bools, no ``inf``/``nan``, no numeric strings;
  an ``int`` field takes no float, a ``float`` field takes an int.
- ``str`` fields take strings only.
- ``X | None`` takes ``None`` as well; other annotations (tuples, lists) are left to ``__post_init__``.

Every such error is an :class:`OptionError` (a ``ValueError``): a mistake of the run's configuration, the same for
every sample, which the reward manager and the trainer report once as such (never as one sample's failure). An
unknown option's message names the closest valid one (:func:`unknown_options_message`).
"""

from __future__ import annotations

import difflib
import math
import numbers
import types
import typing
from collections.abc import Collection, Mapping
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")

SIMPLE_TYPES = (bool, int, float, str)


class OptionError(ValueError):
    """An option (a key of verl's config, or of a reward function's ``reward_kwargs``) that is unknown, of the
    wrong type or out of range: a configuration error, not a sample's."""


def closest_name(name: str, allowed: Collection[str], cutoff: float = 0.6) -> str | None:
    """The name of ``allowed`` closest to the unknown ``name`` (difflib's ratio, at least ``cutoff``), None if
    none is that close."""
    matches = difflib.get_close_matches(name, list(allowed), n=1, cutoff=cutoff)
    return matches[0] if matches else None


def unknown_options_message(unknown: Collection[str], allowed: Collection[str], path: str) -> str:
    """``unknown <path> option(s) [...]``, the closest allowed name of each that has one, and the allowed names."""
    unknown = sorted(unknown)
    closest = {name: match for name in unknown if (match := closest_name(name, allowed)) is not None}
    if len(unknown) == 1 and closest:
        hint = f"; did you mean {closest[unknown[0]]!r}?"
    else:
        pairs = ", ".join(f"{match!r} for {name!r}" for name, match in closest.items())
        hint = f"; did you mean {pairs}?" if pairs else "."
    return f"unknown {path} option(s) {unknown}{hint} Allowed options are {list(allowed)}"


def check_option(path: str, value: Any, annotation: Any) -> None:
    """Raise ``ValueError`` unless ``value`` fits ``annotation`` (see the module docstring).

    Args:
        path: the option's full key for the message (e.g. ``"algorithm.bot_grpo.epsilon"``).
        value: the value read from the config.
        annotation: the field's type: ``bool``, ``int``, ``float``, ``str``, one of them ``| None``, or
            anything else (not checked).
    """
    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    allowed = typing.get_args(annotation) if is_union else (annotation,)
    kinds = [kind for kind in allowed if kind is not type(None)]
    if len(kinds) != 1 or kinds[0] not in SIMPLE_TYPES or (value is None and type(None) in allowed):
        return
    kind = kinds[0]
    if kind in (int, float):
        number = numbers.Integral if kind is int else numbers.Real
        valid = isinstance(value, number) and not isinstance(value, bool) and is_finite(value)
    else:
        valid = isinstance(value, kind)
    if not valid:
        finite = " finite" if kind in (int, float) else ""
        raise OptionError(f"{path}={value!r} must be a{finite} {kind.__name__}, got {type(value).__name__}")


def is_finite(number: numbers.Real) -> bool:
    """Whether ``number`` is neither infinite nor NaN nor too large for a float."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def check_options(cls: type, options: Mapping, path: str) -> None:
    """:func:`check_option` for each of ``options`` against the field of dataclass ``cls`` of that name."""
    hints = typing.get_type_hints(cls)
    for name, value in options.items():
        check_option(f"{path}.{name}", value, hints[name])


def check_option_values(
    options: object,
    path: str,
    choices: Mapping[str, Collection] | None = None,
    ranges: Mapping[str, bool] | None = None,
    requirement: str | None = None,
) -> None:
    """Raise :class:`OptionError` naming the first option of ``options`` (a dataclass) outside its allowed values.

    Args:
        options: the options, read by attribute.
        path: the options' config path for messages (e.g. ``"algorithm.bot_grpo"``; ``""`` for bare names).
        choices: an option's name -> the values it may take.
        ranges: an option's name -> whether its value is in range (computed by the caller).
        requirement: what ``ranges`` ask, for the message (e.g. ``"must be a positive number"``); by default
            ``"is out of range (see <the options' class>)"``, whose docstring gives each range.
    """
    prefix = f"{path}." if path else ""
    for name, allowed in (choices or {}).items():
        if getattr(options, name) not in allowed:
            raise OptionError(f"{prefix}{name}={getattr(options, name)!r} is not one of {list(allowed)}")
    requirement = requirement or f"is out of range (see {type(options).__name__})"
    for name, valid in (ranges or {}).items():
        if not valid:
            raise OptionError(f"{prefix}{name}={getattr(options, name)!r} {requirement}")


def options_from_config(cls: type[T], parent: Mapping | None, key: str, path: str) -> T:
    """Build ``cls`` from ``parent[key]`` (a ``DictConfig``, dict, or absent for the defaults).

    An option set to ``None`` (``null``) takes its default: the presets list every option as ``null`` unless they
    change it, so that hydra takes ``key=value`` and ``+key=value`` alike (``+`` adds over a ``null`` only).
    None of these options has a default other than None that None could mean.

    Args:
        cls: a dataclass whose fields are the options and whose ``__post_init__`` checks their values.
        parent: the config section holding ``key`` (e.g. verl's ``algorithm``), or None.
        key: the options' key in ``parent`` (e.g. ``"bot_grpo"``).
        path: the options' full config path for error messages (e.g. ``"algorithm.bot_grpo"``).

    Raises:
        OptionError: for a non-mapping section, unknown option names (naming the closest, listing the allowed
            ones), or a value of the wrong type (see the module docstring).
    """
    options = parent.get(key) if parent is not None else None
    if options is None:
        return cls()
    if not isinstance(options, Mapping):
        raise OptionError(f"{path} must be a mapping of options, got {options!r}")
    options = {name: value for name, value in options.items() if value is not None}
    allowed = [field.name for field in fields(cls)]
    unknown = set(options) - set(allowed)
    if unknown:
        raise OptionError(unknown_options_message(unknown, allowed, path))
    check_options(cls, options, path)
    return cls(**options)


def option_from_config(parent: Mapping | None, key: str, kind: type, default: Any, path: str) -> Any:
    """One option ``parent[key]`` that is not part of an options dataclass (verl's own
    ``algorithm.norm_adv_by_std_in_grpo``), checked as a field of type ``kind``; ``default`` when absent.

    Raises:
        OptionError: for a value of the wrong type, naming ``path``.
    """
    value = parent.get(key, default) if parent is not None else default
    check_option(path, value, kind)
    return value


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
        OptionError: for unknown option names (naming the closest, listing the allowed ones) or a value of the
            wrong type.
    """
    allowed = [field.name for field in fields(cls)]
    unknown = set(kwargs) - set(allowed) - set(VERL_REWARD_CALL_KWARGS)
    if unknown:
        raise OptionError(unknown_options_message(unknown, allowed, name))
    options = {key: value for key, value in kwargs.items() if key in allowed}
    check_options(cls, options, name)
    return cls(**options)
