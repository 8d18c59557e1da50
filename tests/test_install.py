"""The documented install commands cannot conflict on torch, vLLM or transformers.

In README's Install section, recipes/README.md's GPU section and docs/install.md, each run of ``pip install`` lines
of a fenced block up to the one that installs this package is one environment (what is installed first, then the
package): its requirements (explicit ones, this project's from setup.py, and through the ``[gpu]`` extra verl's own
``verl[vllm]`` pins, read from the installed verl's metadata) must agree on those packages, and an environment that
installs ``[gpu]`` must leave torch and vLLM to verl (no torch of its own, pinned or not: pip would refuse it or
silently replace it). The slow test resolves README's GPU command against PyPI with ``pip install --dry-run
--report`` and checks what pip chose against verl's pins.
"""

import importlib.metadata
import json
import runpy
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "bot-grpo-verl"
WATCHED = ("torch", "vllm", "transformers")  # the packages verl's vLLM extra pins and ours constrain
LEFT_TO_VERL = ("torch", "vllm")  # what a [gpu] block must not install itself
# pip options that take a value: the value is not a requirement.
VALUED_OPTIONS = {"--index-url", "-i", "--extra-index-url", "--config-settings", "-c", "--constraint", "-f"}
DOCUMENTS = {"README.md": "## Install", "recipes/README.md": "## Running on a GPU cluster", "docs/install.md": ""}


def install_blocks(markdown: str, section: str = "") -> list[list[list[str]]]:
    """The environments the fenced blocks under ``section`` (up to the next heading of its level; the whole text when
    empty) install: each a list of ``pip install`` argument lists, the run of commands of one block up to the one
    that installs this package (a block's commands after the last such one form one more)."""
    if section:
        level = section.split(" ")[0] + " "
        start = markdown.index(section + "\n")
        end = markdown.find("\n" + level, start + len(section))
        markdown = markdown[start : end if end >= 0 else None]
    environments = []
    for number, chunk in enumerate(markdown.split("```")):
        if number % 2 == 0:  # outside a fence
            continue
        commands: list[list[str]] = []
        for line in chunk.replace("\\\n", " ").splitlines():
            if line.strip().startswith("pip install "):
                commands.append(shlex.split(line, comments=True)[2:])
                if any(installs_project(argument) for argument in requirement_arguments(commands[-1])):
                    environments.append(commands)
                    commands = []
        if commands:
            environments.append(commands)
    return environments


def requirement_arguments(arguments: list[str]) -> list[str]:
    """The requirement arguments of one ``pip install`` (``-e X`` keeps ``X``; options and their values go)."""
    requirements, skip = [], False
    for word in arguments:
        if skip:
            skip = False
        elif word in VALUED_OPTIONS:
            skip = True
        elif word == "-e" or not word.startswith("-"):
            requirements += [] if word == "-e" else [word]
    return requirements


def installs_project(argument: str) -> bool:
    """Whether a requirement argument is this package (``.``, ``.[extras]``, its name with or without extras)."""
    return canonicalize_name(as_requirement(argument).name) == PROJECT


def as_requirement(argument: str) -> Requirement:
    """A requirement argument as a :class:`Requirement`; this project (``.``, ``.[extras]``, its name) by name."""
    if argument.startswith("."):
        return Requirement(PROJECT + argument[1:])
    return Requirement(argument)


def project_setup() -> dict:
    """setup.py's keyword arguments (its ``install_requires`` and ``extras_require``), read by running it."""
    captured = {}
    with mock.patch("setuptools.setup", lambda **keywords: captured.update(keywords)):
        runpy.run_path(str(ROOT / "setup.py"))
    return captured


def dependencies(requirement: Requirement, setup: dict) -> list[Requirement]:
    """What ``requirement`` brings, transitively through this project's and verl's extras: this project's
    requirements from setup.py, verl's from the installed verl's metadata (its version must fit ours)."""
    name = canonicalize_name(requirement.name)
    if name == PROJECT:
        texts = setup["install_requires"] + [
            text for extra in requirement.extras for text in setup["extras_require"][extra]
        ]
        return [Requirement(text) for text in texts]
    if name == "verl":
        verl = importlib.metadata.distribution("verl")
        assert requirement.specifier.contains(verl.version), f"installed verl {verl.version} is not {requirement}"
        found = []
        for text in verl.requires or ():
            brought = Requirement(text)
            markers = [{"extra": ""}] + [{"extra": extra} for extra in requirement.extras]
            if brought.marker is None or any(brought.marker.evaluate(marker) for marker in markers):
                brought.marker = None
                found.append(brought)
        return found
    return []


def block_requirements(block: list[list[str]], setup: dict) -> list[tuple[str, Requirement]]:
    """``(who asks, requirement)`` of every requirement one block's commands bring, extras followed."""
    pending = [
        ("the command", as_requirement(argument)) for command in block for argument in requirement_arguments(command)
    ]
    seen, found = set(), []
    while pending:
        source, requirement = pending.pop()
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras), str(requirement.specifier))
        if key in seen:
            continue
        seen.add(key)
        found.append((source, requirement))
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        pending += [(f"{requirement.name}{extras}", brought) for brought in dependencies(requirement, setup)]
    return found


def conflicts(block: list[list[str]], setup: dict) -> list[str]:
    """Each way one block's requirements disagree on :data:`WATCHED` packages, or a ``[gpu]`` block installs
    torch or vLLM itself; empty when they fit."""
    found = block_requirements(block, setup)
    problems = []
    gpu = any(canonicalize_name(r.name) == PROJECT and "gpu" in r.extras for _, r in found)
    for source, requirement in found:
        if gpu and source == "the command" and canonicalize_name(requirement.name) in LEFT_TO_VERL:
            problems.append(f"{requirement} installed beside [gpu]: leave {requirement.name} to verl[vllm]'s pins")
    for name in WATCHED:
        asks = [(source, r.specifier) for source, r in found if canonicalize_name(r.name) == name]
        pins = {spec.version for _, specifier in asks for spec in specifier if spec.operator == "=="}
        for pin in sorted(pins):
            refusing = [f"{source} ({specifier})" for source, specifier in asks if not specifier.contains(pin)]
            if refusing:
                problems.append(f"{name}=={pin} is refused by {', '.join(refusing)}")
    return problems


@pytest.fixture(scope="module")
def setup():
    return project_setup()


def documented_blocks() -> list[tuple[str, list[list[str]]]]:
    return [
        (document, block)
        for document, section in DOCUMENTS.items()
        for block in install_blocks((ROOT / document).read_text(), section)
    ]


def test_every_documented_install_block_agrees_on_torch_vllm_and_transformers(setup):
    blocks = documented_blocks()
    readme = [block for document, block in blocks if document == "README.md"]
    assert [len(block) for block in readme] == [1, 1], readme  # CPU (torch named with the package), fresh GPU
    gpu = [
        block for _, block in blocks if any(".[gpu" in argument or "[gpu]" in argument for c in block for argument in c)
    ]
    assert len(gpu) >= 3  # README, recipes/README.md, docs/install.md
    for document, block in blocks:
        assert conflicts(block, setup) == [], (document, block)


def test_the_gpu_extra_brings_verls_pins_and_they_fit_our_ranges(setup):
    found = block_requirements([[".[gpu]"]], setup)
    verl_pins = {
        r.name: r.specifier
        for source, r in found
        if source == "verl[vllm]" and r.name in WATCHED and "==" in str(r.specifier)
    }
    assert set(verl_pins) == set(WATCHED), verl_pins  # verl 0.9.1 pins all three in its vllm extra
    ours = {r.name: r.specifier for r in map(Requirement, setup["install_requires"]) if r.name in WATCHED}
    for name, specifier in ours.items():
        pin = next(iter(verl_pins[name])).version
        assert specifier.contains(pin), f"setup.py's {name}{specifier} refuses verl[vllm]'s {name}=={pin}"


def test_a_torch_installed_before_the_gpu_extra_is_caught():
    """The install README documented before: a CPU torch pin first, then [gpu]."""
    setup = project_setup()
    old = install_blocks('```bash\npip install torch==2.13.0   # first\npip install -e ".[gpu]" --no-deps\n```')
    problems = conflicts(old[0], setup)
    assert any(problem.startswith("torch==2.13.0 installed beside [gpu]") for problem in problems), problems
    assert any(problem.startswith("torch==2.13.0 is refused by verl[vllm] (==2.11.0)") for problem in problems)
    unpinned = install_blocks('```bash\npip install torch\npip install "bot-grpo-verl[gpu]"\n```')[0]
    assert conflicts(unpinned, setup) == ["torch installed beside [gpu]: leave torch to verl[vllm]'s pins"]
    assert conflicts([["torch==2.5.1"], ["."]], setup) == ["torch==2.5.1 is refused by bot-grpo-verl (>=2.6)"]


def test_pip_options_and_their_values_are_not_requirements():
    words = shlex.split('-e ".[test]" --config-settings editable_mode=compat --index-url https://x torch==2.13.0 -U')
    assert requirement_arguments(words) == [".[test]", "torch==2.13.0"]


def test_each_environment_ends_with_the_command_that_installs_the_package():
    commands = [
        'pip install torch==2.13.0 -e ".[test]"  # CPU',
        "pip install numpy",
        'pip install ".[gpu]"',
        "pip install x",
    ]
    text = "```bash\n" + "\n".join(commands) + "\n```"
    assert install_blocks(text) == [[["torch==2.13.0", "-e", ".[test]"]], [["numpy"], [".[gpu]"]], [["x"]]]


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.slow  # resolves vLLM's dependency tree against PyPI: about a minute
def test_readmes_gpu_command_resolves_to_verls_torch_and_vllm(tmp_path, setup):
    if not pypi_reachable():
        pytest.skip("pypi.org:443 is unreachable: the resolver check needs PyPI")
    readme = install_blocks((ROOT / "README.md").read_text(), DOCUMENTS["README.md"])
    (gpu,) = [block for block in readme if any(".[gpu" in argument for argument in block[0])]
    (command,) = gpu
    assert not any(argument.startswith("torch") for argument in command)
    requirements = [str(ROOT) + argument[1:] if argument.startswith(".") else argument for argument in command]
    report = tmp_path / "report.json"
    # --isolated: PyPI alone, as CI sees it (no machine-wide pip configuration, constraints or local wheels).
    pip = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed", "--quiet"]
    options = ["--report", str(report), "--cache-dir", str(tmp_path / "cache")]
    process = subprocess.run([*pip, *options, *requirements], capture_output=True, text=True, timeout=900)
    assert process.returncode == 0, process.stderr[-3000:]
    chosen = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]
        for item in json.loads(report.read_text())["install"]
    }
    verl = chosen["verl"]
    asked = [Requirement(text) for text in verl.get("requires_dist", [])]
    pins = {r.name: r.specifier for r in asked if r.marker is not None and r.marker.evaluate({"extra": "vllm"})}
    for name in LEFT_TO_VERL:
        assert name in chosen and pins[name].contains(chosen[name]["version"]), (name, chosen.get(name), pins.get(name))
    ours = {r.name: r.specifier for r in map(Requirement, setup["install_requires"])}
    assert ours["torch"].contains(chosen["torch"]["version"])
    assert SpecifierSet(">=0.9.1,<0.10").contains(verl["version"])
