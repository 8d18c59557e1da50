"""docs/verl-seams.md lists every verl internal the plugin relies on, and the patches that retire seams apply to verl.

- Every function of ``bot_grpo_verl/verl_compat/`` (the guard excepted) that imports from verl, calls the guard
  (``require``) or the wrapper (``wrap_once``), or names a ``verl.`` module has one row in the seams table, and every
  row names such a function; every ``from verl ... import`` elsewhere in the package has one row in the imports
  table, with the file it is in; every row was checked against a supported verl release.
- Each patch of ``patches/verl-<version>/`` is a unified diff against verl's repository layout that names the seam
  it retires (a row that links it back) and verl's tests that cover it; it applies to the installed verl package
  (``patch -p1 --dry-run``), alone and after the others.
- Slow: with verl's sdist (its ``tests/``; downloaded from PyPI once, cached under ``.cache/verl-<version>/``), the
  series applied to a copy of the installed verl package passes verl's own CPU tests of the patched module, the
  patches' tests included, and those tests fail on the unpatched copy.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot_grpo_verl.verl_compat.guard import SUPPORTED_VERL, installed_verl_version

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "bot_grpo_verl"
COMPAT = PACKAGE / "verl_compat"
PAGE = REPO / "docs" / "verl-seams.md"
PATCHED_VERL = "0.9.1"
PATCHES = sorted((REPO / "patches" / f"verl-{PATCHED_VERL}").glob("*.patch"))
INSTALLED_VERL = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
VERL_TESTS_UNSET = ("PYTHONPATH", "BOT_GRPO_CPU", "BOT_GRPO_SELECTED", "VERL_PLATFORM", "VERL_ENGINE_DEVICE")
PYTEST_ASYNCIO = "pytest-asyncio==1.5.0"  # verl's test extra, unpinned there; its async tests need it
ASYNCIO_LOOP_SCOPE = "asyncio_default_fixture_loop_scope=function"  # silences pytest-asyncio's deprecation warning
SEAM_ROW = re.compile(r"^\| `(\w+\.\w+)` \|(.*)\|$", re.MULTILINE)
IMPORT_ROW = re.compile(r"^\| `(verl[\w.]*)` \| `([\w/.]+)` \|(.*)\|$", re.MULTILINE)
HEADER = re.compile(r"^(Subject|Retires|Verl-tests): (.+)$", re.MULTILINE)
CHANGED_FILE = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)


def touches_verl(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """Whether a function or class imports from verl, calls the guard or the wrapper, or names a ``verl.`` module
    outside its docstring."""
    docstring = node.body[0].value if ast.get_docstring(node, clean=False) is not None else None
    for child in ast.walk(node):
        if isinstance(child, ast.ImportFrom) and (child.module or "").split(".")[0] == "verl":
            return True
        if isinstance(child, ast.Call) and getattr(child.func, "id", None) in ("require", "wrap_once"):
            return True
        if isinstance(child, ast.Constant) and str(child.value).startswith("verl.") and child is not docstring:
            return True
    return False


def seams_in_code() -> set[str]:
    """``module.function`` of every seam of ``verl_compat/``."""
    found = set()
    for path in sorted(COMPAT.glob("*.py")):
        if path.name in ("guard.py", "__init__.py"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and touches_verl(node):
                found.add(f"{path.stem}.{node.name}")
    return found


def package_files() -> list[tuple[str, Path]]:
    """(path relative to the package, file) of every Python file of the package, once each."""
    seen, found = set(), []
    for folder, _, names in os.walk(PACKAGE, followlinks=True):
        for name in sorted(names):
            path = Path(folder) / name
            if path.suffix == ".py" and path.resolve() not in seen and "__pycache__" not in path.parts:
                seen.add(path.resolve())
                found.append((path.relative_to(PACKAGE).as_posix(), path))
    return found


def verl_imports_outside_compat() -> set[tuple[str, str]]:
    """(``verl.module.name`` or ``verl``, file relative to the package) of each verl import outside ``verl_compat/``."""
    found = set()
    for relative, path in package_files():
        if relative.startswith("verl_compat/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "verl":
                found |= {(f"{node.module}.{alias.name}", relative) for alias in node.names}
            elif isinstance(node, ast.Import):
                found |= {(alias.name, relative) for alias in node.names if alias.name.split(".")[0] == "verl"}
    return found


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The text of the page's ``## heading`` section."""
    return page().split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def seam_rows() -> dict[str, list[str]]:
    """The seams table: seam -> its cells after the first (internal, why, checked, change, size, patch)."""
    rows = [(match[1], cells(match[2])) for match in SEAM_ROW.finditer(section("Seams"))]
    assert len({seam for seam, _ in rows}) == len(rows), "a seam with two rows"
    return dict(rows)


def patch_headers(patch: Path) -> dict[str, str]:
    text = patch.read_text(encoding="utf-8")
    return {match[1]: match[2] for match in HEADER.finditer(text.split("\ndiff --git ", 1)[0])}


def test_every_seam_of_verl_compat_has_one_row_and_every_row_is_a_seam():
    code, rows = seams_in_code(), set(seam_rows())
    assert sorted(code - rows) == [], "seams without a row in docs/verl-seams.md"
    assert sorted(rows - code) == [], "rows of docs/verl-seams.md that name no seam of verl_compat/"


def test_seam_rows_were_checked_against_a_supported_verl_and_say_what_retires_them():
    for seam, (internal, why, checked, change, size, patch) in seam_rows().items():
        assert checked in SUPPORTED_VERL, f"{seam}: checked against verl {checked}, outside {SUPPORTED_VERL}"
        assert internal and why and change, f"{seam}: an empty cell"
        assert size in ("small", "medium", "large"), f"{seam}: size {size!r}"
        assert patch.startswith(("[", "—")), f"{seam}: the patch cell is a link or —"


def test_every_verl_import_outside_verl_compat_has_one_row():
    imports = section("Public extension points")
    rows = [(match[1], match[2]) for match in IMPORT_ROW.finditer(imports)]
    assert len(set(rows)) == len(rows), "an import with two rows"
    code = verl_imports_outside_compat()
    assert sorted(code - set(rows)) == [], "verl imports without a row in docs/verl-seams.md"
    assert sorted(set(rows) - code) == [], "rows of docs/verl-seams.md that name no import"
    for match in IMPORT_ROW.finditer(imports):
        assert cells(match[3])[-1] in SUPPORTED_VERL, f"{match[1]}: checked against an unsupported verl"


def test_the_seam_inventory_finds_each_kind_of_coupling():
    """The rules above see a guard call, a verl import and a ``verl.`` name, and nothing else."""
    seams = seams_in_code()
    assert {"cpu_patches.set_default", "cpu_platform.cpu_platform_class"} <= seams  # a guard; an import
    assert {"cpu_patches.import_engines_quietly", "sessions.refuse_unadapted_multi_output_step"} <= seams  # names
    assert "sessions.final_outputs" not in seams and "metrics.reward_extra_metrics" not in seams
    assert not touches_verl(ast.parse('def f():\n    """verl.x in a docstring."""\n    return "verl\'s"').body[0])


def test_each_patch_names_its_seam_and_that_seams_row_links_it():
    assert PATCHES, f"no patch in patches/verl-{PATCHED_VERL}"
    rows = seam_rows()
    for patch in PATCHES:
        headers = patch_headers(patch)
        assert {"Subject", "Retires", "Verl-tests"} <= set(headers), f"{patch.name}: header lines missing"
        seam = headers["Retires"].removeprefix("bot_grpo_verl.verl_compat.")
        assert seam in rows, f"{patch.name} retires {seam}, which has no row"
        assert f"patches/verl-{PATCHED_VERL}/{patch.name}" in rows[seam][-1], f"{seam}'s row does not link {patch.name}"
        assert patch.name in section("Patches"), f"{patch.name} missing from the patches table"
    linked = {seam for seam, row in seam_rows().items() if row[-1].startswith("[")}
    assert linked == {patch_headers(patch)["Retires"].removeprefix("bot_grpo_verl.verl_compat.") for patch in PATCHES}


def changed_files(patch: Path) -> list[str]:
    return CHANGED_FILE.findall(patch.read_text(encoding="utf-8"))


def run_patch(root: Path, patch: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["patch", "-p1", "--batch", "--forward", *options],
        cwd=root,
        stdin=patch.open("rb"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def copy_installed_verl(root: Path, files: list[str] | None = None) -> None:
    """The installed verl package under ``root/verl`` (only ``files``, paths like ``verl/...``, when given)."""
    if files is None:
        shutil.copytree(INSTALLED_VERL, root / "verl", ignore=shutil.ignore_patterns("__pycache__"))
        return
    for name in files:
        if name.startswith("verl/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(INSTALLED_VERL.parent / name, root / name)


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_the_patches_apply_to_the_installed_verl_alone_and_as_a_series(tmp_path):
    assert installed_verl_version() == PATCHED_VERL, (
        f"the patches are against verl {PATCHED_VERL}, the installed verl is {installed_verl_version()}: port them to "
        "patches/verl-<installed> and re-check docs/verl-seams.md"
    )
    touched = sorted({name for patch in PATCHES for name in changed_files(patch)})
    assert all(name.startswith(("verl/", "tests/")) for name in touched), touched
    for patch in PATCHES:
        alone = tmp_path / patch.stem
        copy_installed_verl(alone, touched)
        dry_run = run_patch(alone, patch, "--dry-run")
        assert dry_run.returncode == 0, f"{patch.name} alone:\n{dry_run.stdout}{dry_run.stderr}"
    series = tmp_path / "series"
    copy_installed_verl(series, touched)
    for patch in PATCHES:
        assert run_patch(series, patch, "--dry-run").returncode == 0, f"{patch.name} after the earlier patches"
        applied = run_patch(series, patch)
        assert applied.returncode == 0, f"{patch.name}:\n{applied.stdout}{applied.stderr}"
    for name in touched:
        assert (series / name).is_file()


# --- slow: verl's own tests on the patched copy -------------------------------------------------------------------


def pip(*arguments: str) -> None:
    env = {**os.environ, "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(REPO / ".cache" / "pip"))}
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *arguments], check=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def verl_test_tools() -> tuple[Path, Path]:
    """(verl's sdist unpacked, a folder with pytest-asyncio), downloaded once into ``.cache/verl-<version>/``."""
    cache = REPO / ".cache" / f"verl-{PATCHED_VERL}"
    sdist = cache / f"verl-{PATCHED_VERL}"
    if not (sdist / "tests").is_dir():
        archive = cache / f"verl-{PATCHED_VERL}.tar.gz"
        if not archive.is_file():
            pip("download", "--no-deps", "--no-binary", ":all:", f"verl=={PATCHED_VERL}", "-d", str(cache))
        shutil.unpack_archive(archive, cache)
    plugins = cache / "pytest-asyncio"
    if not (plugins / "pytest_asyncio").is_dir():
        pip("install", "--no-deps", "--target", str(plugins), PYTEST_ASYNCIO)
    return sdist, plugins


def verl_tests(root: Path, plugins: Path, tests: list[str], *options: str) -> subprocess.CompletedProcess:
    """Run verl's ``tests`` in ``root`` (``verl/`` and ``tests/``) with pytest-asyncio, the verl of ``root`` first,
    as verl's CI runs them: no ``verl.plugins`` loaded (this one would wrap the patched functions), no CPU mode."""
    env = {name: value for name, value in os.environ.items() if name not in VERL_TESTS_UNSET}
    env |= {"PYTHONPATH": os.pathsep.join([str(root), str(plugins)]), "VERL_USE_EXTERNAL_PLUGINS": "none"}
    options = ("-q", "-p", "no:cacheprovider", "-p", "pytest_asyncio", "-o", ASYNCIO_LOOP_SCOPE, *options)
    command = [sys.executable, "-m", "pytest", *options, *tests]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def passed(run: subprocess.CompletedProcess) -> int:
    found = re.search(r"(\d+) passed", run.stdout)
    return int(found[1]) if found else 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_verls_cpu_tests_pass_on_the_patched_verl_and_the_patches_tests_fail_without_it(verl_test_tools, tmp_path):
    sdist, plugins = verl_test_tools
    touched = sorted({name for patch in PATCHES for name in changed_files(patch)})
    for name in touched:  # the patches were made against the installed package: it is verl's released tree
        if name.startswith("verl/") and (sdist / name).is_file():
            assert (sdist / name).read_bytes() == (INSTALLED_VERL.parent / name).read_bytes(), name
    root = tmp_path / "verl-patched"
    copy_installed_verl(root)
    shutil.copytree(sdist / "tests", root / "tests")
    unpatched = tmp_path / "verl-unpatched"
    shutil.copytree(root, unpatched)
    for patch in PATCHES:
        assert run_patch(root, patch, "--dry-run").returncode == 0, patch.name
        assert run_patch(root, patch).returncode == 0, patch.name
    tests = sorted({test for patch in PATCHES for test in patch_headers(patch)["Verl-tests"].split()})
    selected = sorted({str(path.relative_to(root)) for test in tests for path in root.glob(test)})
    new_tests = [name for name in touched if name.startswith("tests/") and name not in {"tests/__init__.py"}]
    assert set(new_tests) <= set(selected), "each patch's own test is among the verl tests run"

    which = subprocess.run(
        [sys.executable, "-c", "import verl; print(verl.__file__)"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(which.stdout.strip()).is_relative_to(root), "verl's tests would not import the patched copy"

    run = verl_tests(root, plugins, selected)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    # verl 0.9.1's 28 tests of the agent loop and 38 of the metric utils on CPU, and the patches' 33
    assert passed(run) >= 99, run.stdout[-2000:]

    # each patch's tests fail where verl lacks the patches (one run for all): they test the change
    shutil.copytree(root / "tests", unpatched / "tests", dirs_exist_ok=True)
    without = verl_tests(unpatched, plugins, new_tests, "-rf", "--continue-on-collection-errors")
    failed = set(re.findall(r"^FAILED (\S+?)::", without.stdout, re.MULTILINE))
    for patch in PATCHES:
        own = {name for name in changed_files(patch) if name.startswith("tests/")}
        assert own & failed, f"{patch.name}'s tests pass without it:\n{without.stdout[-3000:]}"
