"""Where the TSX checker's Node worker runs from, and ``bot-grpo-verl setup tsx``, which installs it.

The package ships the worker (``tsx/worker.mjs``) with the ``package.json`` and ``package-lock.json`` that pin
its npm packages (esbuild, TypeScript, React's types). The worker resolves them next to itself, so a checker
directory holds a copy of those three files and the ``node_modules`` that ``npm ci`` installs from the lock
file. The worker runs from the first of:

1. ``$BOT_GRPO_VERL_TSX_DIR``, when set: a directory made by ``bot-grpo-verl setup tsx --dir DIR`` (a cluster
   image, a shared file system);
2. the shipped ``tsx/`` folder, when it has ``node_modules`` (a clone after ``make setup``);
3. the per-user cache ``$XDG_CACHE_HOME/bot-grpo-verl/tsx-<fingerprint>`` that ``bot-grpo-verl setup tsx``
   fills by default; the fingerprint hashes the three shipped files, so an upgrade never runs a stale worker.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "tsx"
SHIPPED = ("worker.mjs", "tsc7.mjs", "directives.mjs", "render.mjs", "package.json", "package-lock.json")
DIR_VARIABLE = "BOT_GRPO_VERL_TSX_DIR"
# Written last by `install`: the fingerprint of the files the directory was installed from.
MARKER = ".bot-grpo-verl-installed"


class TsxNotInstalled(RuntimeError):
    """No checker directory is installed for this version of the package; the message names the fix."""


def fingerprint() -> str:
    """12 hex digits of SHA-256 over the shipped worker, manifest and lock file."""
    digest = hashlib.sha256()
    for name in SHIPPED:
        digest.update((SOURCES / name).read_bytes())
    return digest.hexdigest()[:12]


def default_dir() -> Path:
    """The per-user cache directory of this package version's checker."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "bot-grpo-verl" / f"tsx-{fingerprint()}"


def setup_command(directory: Path | None = None) -> str:
    """The shell command that installs the checker into ``directory`` (the default cache when None)."""
    return "bot-grpo-verl setup tsx" + (f" --dir {directory}" if directory is not None else "")


def is_installed(directory: Path) -> bool:
    """Whether ``install`` completed in ``directory`` from the files this package ships."""
    marker = directory / MARKER
    return marker.is_file() and marker.read_text().strip() == fingerprint()


def worker_script() -> Path:
    """The ``worker.mjs`` to run (see the module docstring for the order); raises :class:`TsxNotInstalled`."""
    named = os.environ.get(DIR_VARIABLE)
    if named:
        directory = Path(named)
        if not is_installed(directory):
            raise TsxNotInstalled(
                f"{DIR_VARIABLE}={named} holds no TSX checker of this bot-grpo-verl version: "
                f"run `{setup_command(directory)}`"
            )
        return directory / "worker.mjs"
    if (SOURCES / "node_modules").is_dir():
        return SOURCES / "worker.mjs"
    directory = default_dir()
    if not is_installed(directory):
        raise TsxNotInstalled(
            f"the TSX checker's npm packages are not installed: run `{setup_command()}` "
            f"(or `{setup_command(Path('DIR'))}` and set {DIR_VARIABLE}=DIR)"
        )
    return directory / "worker.mjs"


def install(directory: Path | None = None) -> Path:
    """Copy the shipped files into ``directory`` (default: :func:`default_dir`) and ``npm ci`` there.

    Returns the directory. Does nothing when it is already installed from these files. Raises
    :class:`TsxNotInstalled` when ``npm`` is missing, ``subprocess.CalledProcessError`` when ``npm ci`` fails.
    """
    directory = Path(directory) if directory is not None else default_dir()
    if is_installed(directory):
        return directory
    npm = shutil.which("npm")
    if npm is None:
        raise TsxNotInstalled(f"npm is not on PATH: install Node.js >= 18 (it ships npm), then run `{setup_command()}`")
    directory.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        shutil.copyfile(SOURCES / name, directory / name)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(directory)], check=True)
    (directory / MARKER).write_text(fingerprint() + "\n")
    return directory
