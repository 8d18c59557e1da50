"""The moment a run selects the plugin in a process, and what then adapts verl there.

Importing verl with the plugin installed registers names only (:mod:`bot_grpo_verl.plugin`): verl's functions
and the environment stay as verl made them. A process adapts verl (:mod:`bot_grpo_verl.verl_compat`) the first
time a run uses the plugin in it: the run's environment says so (``BOT_GRPO_SELECTED=1``, which the plugin's
presets pass to every Ray worker through ``ray_kwargs.ray_init.runtime_env``, or the CPU mode's ``BOT_GRPO_CPU=1``),
one of the plugin's estimators is called (the trainer), or the ``bot_token`` reward manager is built or one of its
scores arrives (reward and agent-loop workers). Only the environment reaches the trainer before it is set up; an
estimator's first call comes after, so a run that selects the plugin by its estimator alone is told what it went
without (:func:`selecting`'s ``late``).

:func:`select` runs the hooks that :mod:`bot_grpo_verl.plugin` installed, once per process; a hook that fails
raises in the caller (the estimator or reward manager that the run called), and again at its next call: verl
would swallow nothing here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping

ENV_VAR = "BOT_GRPO_SELECTED"

_hooks: list[Callable[[], None]] = []
_selected = False
_selecting: dict[Callable, Callable] = {}


def requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the run's environment selects the plugin in this process (``BOT_GRPO_SELECTED`` is ``1``).

    Raises:
        ValueError: any other value but unset, empty or ``0``.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(ENV_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{ENV_VAR}={value!r}: set it to 1 (select the plugin) or 0, or leave it unset")
    return value == "1"


def on_selection(hook: Callable[[], None]) -> None:
    """Run ``hook`` when a run first selects the plugin in this process (now, if one already has)."""
    _hooks.append(hook)
    if _selected:
        hook()


def select() -> None:
    """A run uses the plugin in this process: run the hooks, until they have all succeeded once (each is
    idempotent; one that fails raises here, and again at the next selection)."""
    global _selected
    if not _selected:
        for hook in _hooks:
            hook()
        _selected = True


def is_selected() -> bool:
    """Whether a run has selected the plugin in this process."""
    return _selected


def selecting(function: Callable, late: Callable[[], None]) -> Callable:
    """``function`` that first calls :func:`select`, and ``late()`` after it when that call is the one that
    selects the plugin in the process (the same wrapper each time for the same function, so that registering it
    again with verl is registering the same function)."""
    if function not in _selecting:

        @functools.wraps(function)
        def selected(*args, **kwargs):
            if not _selected:
                select()
                late()
            return function(*args, **kwargs)

        _selecting[function] = selected
    return _selecting[function]
