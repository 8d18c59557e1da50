"""The guard in front of every use of verl internals: the supported versions, one exception, one check.

Each seam of :mod:`bot_grpo_verl.verl_compat` calls :func:`require` on what it relies on (a signature,
a registry, a line of verl's source) before it touches it, so that a verl that changed fails when the
plugin loads, naming the verl function, instead of misbehaving later.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from packaging.specifiers import SpecifierSet

from bot_grpo_verl import __version__

SUPPORTED_VERL = SpecifierSet(">=0.9.1,<0.10")
"""The verl releases the plugin is tested against (also ``install_requires`` in setup.py)."""


class UnsupportedVerl(RuntimeError):
    """The installed verl is outside :data:`SUPPORTED_VERL`, or lacks an internal the plugin relies on."""


def installed_verl_version() -> str | None:
    """The installed verl's version, None when verl is not installed."""
    try:
        return version("verl")
    except PackageNotFoundError:
        return None


def refusal(problem: str) -> UnsupportedVerl:
    """The error for ``problem`` with the installed verl, naming the supported range and the installed version."""
    return UnsupportedVerl(
        f"bot-grpo-verl {__version__} supports verl{SUPPORTED_VERL}, the installed verl is "
        f"{installed_verl_version() or 'none'}: {problem}. Use a verl release in that range, or a bot-grpo-verl "
        "release made for the installed verl."
    )


def check_verl_version() -> str:
    """Return the installed verl version; raise :class:`UnsupportedVerl` unless it is in :data:`SUPPORTED_VERL`."""
    found = installed_verl_version()
    if found is None or found not in SUPPORTED_VERL:
        raise refusal("not a supported release")
    return found


def require(condition: bool, verl_part: str, expected: str) -> None:
    """Raise :class:`UnsupportedVerl` unless ``condition``: ``verl_part`` changed, ``expected`` no longer holds."""
    if not condition:
        raise refusal(f"{verl_part} changed ({expected} no longer holds)")


def source_of(obj: Any) -> str:
    """The source text of a verl function, class or module (empty when it is not available)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def wrap_once(owner: type, name: str, make_wrapper: Callable[[Callable], Callable]) -> None:
    """Replace ``owner.<name>`` by ``make_wrapper(original)``, unless a previous call already did."""
    original = getattr(owner, name)
    if getattr(original, "__bot_grpo_adapter__", False):
        return
    wrapper = functools.wraps(original)(make_wrapper(original))
    wrapper.__bot_grpo_adapter__ = True
    setattr(owner, name, wrapper)
