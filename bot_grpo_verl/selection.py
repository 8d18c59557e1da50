"""The moment a run selects the plugin in a process, and what then adapts verl there.

Importing verl with the plugin installed registers names only (:mod:`bot_grpo_verl.plugin`): verl's functions
and the environment stay as verl made them. A process adapts verl (:mod:`bot_grpo_verl.verl_compat`) the first
time a run uses the plugin in it: one of the plugin's estimators is called (the trainer), the ``bot_token``
reward manager is built or one of its scores arrives (reward and agent-loop workers), or the run switches on
the CPU mode (``BOT_GRPO_CPU``, which the ``cpu`` preset passes to every Ray worker). :func:`select` runs the
hooks that :mod:`bot_grpo_verl.plugin` installed, once per process; a hook that fails raises in the caller (the
estimator or reward manager that the run called), and again at its next call: verl would swallow nothing here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

_hooks: list[Callable[[], None]] = []
_selected = False
_selecting: dict[Callable, Callable] = {}


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


def selecting(function: Callable) -> Callable:
    """``function`` that first calls :func:`select` (the same wrapper each time for the same function, so that
    registering it again with verl is registering the same function)."""
    if function not in _selecting:

        @functools.wraps(function)
        def selected(*args, **kwargs):
            select()
            return function(*args, **kwargs)

        _selecting[function] = selected
    return _selecting[function]
