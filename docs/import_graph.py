"""The import graph of the ``bot_grpo_verl`` package, drawn as layers; exit 1 when the layers are broken.

An edge ``A -> B`` means that module A imports module B anywhere in its source (at module level or
inside a function: a lazy import is a dependency too). The package is cut into layers, bottom to top::

    contract & alignment           reward/: the token-reward contract, the alignment of spans to tokens, turns and
                                   the step layout; the selection hooks and option parsing
    estimators & reward manager    estimators/ (the algorithm, its baselines), reward/manager.py, the reward functions
    verl coupling & CPU mode       verl_compat/ and cpu/, beside the estimators: neither side imports the other
    entry points                   the verl plugin and the command line, which import everything

A module may import modules of its own layer and of the layers its layer lists in :data:`LAYERS`. The
script fails on an import cycle, on an edge its layers do not allow, on a module in no layer, and on an
import of the demo, the benchmarks or the recipes (they sit on top of the package, outside it).

Above the package, :data:`NOT_IMPORTED_BY` keeps the benchmarks off the test suite and the demo's command line
(what they share lives in modules both import: ``demo/training.py``, ``benchmarks/local_tokenizers.py``), and the
demo off the benchmarks and the tests. Only imports are seen: a file loaded by its path is not.

Usage (stdlib only)::

    python docs/import_graph.py [REPOSITORY]    # default: this repository
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

PACKAGE = "bot_grpo_verl"

LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # layer: (its modules: a name, or "name.*" for a subpackage and all its modules), (layers it may import)
    "contract & alignment": (
        (
            "bot_grpo_verl",
            "bot_grpo_verl.reward",
            "bot_grpo_verl.reward.token_rewards",
            "bot_grpo_verl.reward.turns",
            "bot_grpo_verl.reward.alignment",
            "bot_grpo_verl.reward.step_layout",
            "bot_grpo_verl.learning_signal",
            "bot_grpo_verl.selection",
        ),
        (),
    ),
    "estimators & reward manager": (
        (
            "bot_grpo_verl.options",
            "bot_grpo_verl.estimators",
            "bot_grpo_verl.estimators.groups",
            "bot_grpo_verl.estimators.bot_grpo",
            "bot_grpo_verl.estimators.pure",
            "bot_grpo_verl.estimators.baselines",
            "bot_grpo_verl.reward.manager",
            "bot_grpo_verl.rewards.*",
        ),
        ("contract & alignment",),
    ),
    "verl coupling & CPU mode": (
        ("bot_grpo_verl.verl_compat.*", "bot_grpo_verl.cpu.*"),
        ("contract & alignment",),
    ),
    "entry points": (
        (
            "bot_grpo_verl.plugin",
            "bot_grpo_verl.run_checks",
            "bot_grpo_verl.__main__",
            "bot_grpo_verl.heatmap",
            "bot_grpo_verl.driver",
            "bot_grpo_verl.launch_checks",
            "bot_grpo_verl.shipped_rewards",
            "bot_grpo_verl.check_reward",
            "bot_grpo_verl.config.*",
        ),
        ("contract & alignment", "estimators & reward manager", "verl coupling & CPU mode"),
    ),
}

ABOVE_THE_PACKAGE = ("demo", "benchmarks", "recipes", "examples")
"""Top-level packages of the repository that use the plugin: nothing in the package may import them."""

TESTS = "tests"
NOT_IMPORTED_BY: dict[str, tuple[str, ...]] = {
    # a top-level package: what none of its modules may import (a module and its submodules; "tests": the test
    # suite's modules, which pytest puts on the path and which are imported bare, e.g. ``tokenizer_fixtures``)
    "benchmarks": (TESTS, "demo.run"),
    "demo": (TESTS, "benchmarks"),
}


def module_files(repository: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for folder, folders, files in os.walk(repository / package, followlinks=True):
        folders[:] = [name for name in folders if (Path(folder) / name / "__init__.py").exists()]
        parts = Path(folder).relative_to(repository).parts
        for file in files:
            if file.endswith(".py"):
                name = parts if file == "__init__.py" else (*parts, file[: -len(".py")])
                found[".".join(name)] = Path(folder) / file
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """The absolute dotted names that ``module`` imports, with ``from X import y`` giving ``X.y``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            names.update(f"{source}.{alias.name}" for alias in node.names)
    return names


def resolve(name: str, modules: set[str]) -> str | None:
    """The package module that importing ``name`` loads: ``name`` itself or its nearest enclosing module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(repository: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges inside the package, imports of :data:`ABOVE_THE_PACKAGE`), both by importing module."""
    files = module_files(repository)
    modules = set(files)
    edges, above = {}, {}
    for module, path in files.items():
        names = imported_names(module, path)
        edges[module] = {resolve(name, modules) for name in names if name.split(".")[0] == PACKAGE} - {module}
        above[module] = {name for name in names if name.split(".")[0] in ABOVE_THE_PACKAGE}
    return edges, above


def layer_of(module: str) -> str | None:
    """The layer whose patterns name ``module``, None when none does."""
    for layer, (patterns, _) in LAYERS.items():
        for pattern in patterns:
            stem = pattern.removesuffix(".*")
            if module == stem or (pattern.endswith(".*") and module.startswith(stem + ".")):
                return layer
    return None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` through each strongly connected component of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(edges[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return [cycle_through(min(component), edges, component) for component in components]


def cycle_through(start: str, edges: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path ``start -> ... -> start`` inside ``component`` (breadth first)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(edges[module] & component):
                if target == start:
                    return [*paths[module], start]
                if target not in paths:
                    paths[target] = [*paths[module], target]
                    following.append(target)
        frontier = following
    raise ValueError(f"{start} is on no cycle of {sorted(component)}")


def problems(edges: dict[str, set[str]], above: dict[str, set[str]]) -> list[str]:
    """Every broken rule, one line each."""
    found = [f"CYCLE: {' -> '.join(cycle)}" for cycle in cycles(edges)]
    for module in sorted(edges):
        layer = layer_of(module)
        if layer is None:
            found.append(f"NO LAYER: {module} (add it to LAYERS in docs/import_graph.py)")
            continue
        allowed = {layer, *LAYERS[layer][1]}
        for target in sorted(edges[module]):
            if layer_of(target) is not None and layer_of(target) not in allowed:
                found.append(f"NOT ALLOWED: {module} ({layer}) -> {target} ({layer_of(target)})")
        found.extend(f"ABOVE THE PACKAGE: {module} -> {name}" for name in sorted(above[module]))
    return found


def test_modules(repository: Path) -> set[str]:
    """The names the test suite's modules are imported by (``tests/`` is on pytest's path, not a package)."""
    return {TESTS, *(path.stem for path in (repository / TESTS).rglob("*.py"))}


def names_within(name: str, forbidden: str, tests: set[str]) -> bool:
    """Whether importing ``name`` loads ``forbidden`` or one of its submodules (:data:`TESTS`: any test module)."""
    if forbidden == TESTS:
        return name.split(".")[0] in tests
    return name == forbidden or name.startswith(forbidden + ".")


def forbidden_imports(repository: Path) -> list[str]:
    """Every module that imports what :data:`NOT_IMPORTED_BY` forbids it, one line per module and target."""
    tests = test_modules(repository)
    found = []
    for package, forbidden in NOT_IMPORTED_BY.items():
        for module, path in sorted(module_files(repository, package).items()):
            names = imported_names(module, path)
            found.extend(
                f"FORBIDDEN: {module} -> {target} ({package} may not import it)"
                for target in forbidden
                if any(names_within(name, target, tests) for name in names)
            )
    return found


def short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".") if module != PACKAGE else PACKAGE


def render(edges: dict[str, set[str]]) -> str:
    """The graph as text: each layer, bottom first, with its modules and what each imports."""
    lines = [f"{PACKAGE}: {len(edges)} modules, {sum(map(len, edges.values()))} imports inside the package"]
    for layer in [*LAYERS, None]:
        members = sorted(module for module in edges if layer_of(module) == layer)
        if layer is None and not members:
            continue
        may_import = ", ".join(LAYERS[layer][1]) if layer else "-"
        lines.append(f"\n[{layer or 'in no layer'}]  may import: {may_import or 'nothing below'}")
        for module in members:
            targets = ", ".join(short(target) for target in sorted(edges[module]))
            lines.append(f"  {short(module)}" + (f" -> {targets}" if targets else ""))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    repository = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    edges, above = import_graph(repository)
    print(render(edges))
    found = problems(edges, above) + forbidden_imports(repository)
    print("\n" + ("\n".join(found) if found else "OK: no cycle, every import allowed by the layers"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
