"""Every coupling to verl internals, guarded by a check of the installed verl version.

verl 0.9.1 offers public extension points for what the plugin registers so far
(``verl.trainer.ppo.core_algos.register_adv_est``); the version guard keeps an untested verl from
running with the plugin silently half-working.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet

SUPPORTED_VERL = SpecifierSet(">=0.9.1,<0.10")


class VerlVersionError(RuntimeError):
    """The installed verl is not a version this plugin was tested against."""


def installed_verl_version() -> str | None:
    try:
        return version("verl")
    except PackageNotFoundError:
        return None


def check_verl_version() -> str:
    """Return the installed verl version, or raise :class:`VerlVersionError` naming what is supported."""
    found = installed_verl_version()
    if found is None:
        raise VerlVersionError(f"verl is not installed; bot-grpo-verl needs verl{SUPPORTED_VERL}")
    if found not in SUPPORTED_VERL:
        raise VerlVersionError(
            f"bot-grpo-verl supports verl{SUPPORTED_VERL} but verl {found} is installed; "
            f"install a supported verl or a bot-grpo-verl release made for verl {found}"
        )
    return found
