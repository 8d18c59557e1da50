"""The generated tables of the documentation, kept in step with the code and results they come from.

A generated table sits in a Markdown page between two comments that name its kind and its source::

    <!-- generated: options bot_grpo_verl.estimators.bot_grpo:BoTGRPOConfig -->
    | option | type, default | meaning |
    ...
    <!-- end generated -->

Kinds:

- ``options MODULE:CLASS``: the options of a config dataclass, from the ``Parameters:`` section of its
  docstring (TRL's style: ``name (`type`, *optional*, defaults to `value`):`` and the meaning below it).
  A class whose docstring has no such section keeps a hand-written table between the comments, which
  ``tests/test_docs.py`` checks against the class's fields and defaults.
- ``algorithms MODULE:NAME``: the recipes' algorithm table (``recipes.algorithms:ALGORITHMS``).
- ``estimator-speed PATH``: the estimator benchmark's figures (``benchmarks/estimator_speed.py``'s JSON),
  with the machine they were measured on.
- ``react-stages PATH``: the React reward's stages per core (``benchmarks/react_render_speed.py``'s JSON), with
  the machine they were measured on.
- ``verdicts ROOT``: the benchmarks' current verdicts (``benchmarks.verdicts:VERDICTS``), each read from its
  committed file; ``ROOT`` is the repository root as seen from the page (``.`` or ``..``), for the links.

Usage (from the repository root, whose ``recipes`` the algorithm table comes from)::

    python -m docs.tables           # rewrite every generated table of README.md and docs/*.md
    python -m docs.tables --check   # exit 1 and name the pages whose tables are out of date
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/*.md")

BLOCK = re.compile(
    r"(?P<head><!-- generated: (?P<kind>[\w-]+) (?P<source>\S+) -->\n)(?P<body>.*?)(?P<tail><!-- end generated -->)",
    re.DOTALL,
)
PARAMETER = re.compile(r"(?P<name>\w+) \((?P<spec>.*)\):(?P<rest>.*)")
SINGLE_CODE = re.compile(r"`([^`]+)`")
RST_ROLE = re.compile(r":\w+:`~?([^`]+)`")
RST_LITERAL = re.compile(r"``(.+?)``")
NO_DEFAULT = object()


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One entry of a TRL-style ``Parameters:`` docstring section.

    Attributes:
        name: the option's name.
        type: the documented type, as written (e.g. ``"`str`"``).
        default: the text after ``defaults to``, or None when the entry gives no default.
        meaning: the description, as Markdown on one line.
    """

    name: str
    type: str
    default: str | None
    meaning: str


def pages() -> list[Path]:
    """The Markdown pages that may hold generated tables."""
    return sorted(path for pattern in PAGES for path in REPO.glob(pattern))


def load(source: str) -> Any:
    """The object named ``module:attribute`` (an installed module or one of the repository root's)."""
    module, _, attribute = source.partition(":")
    return getattr(importlib.import_module(module), attribute)


def markdown(text: str) -> str:
    """Docstring markup (reST literals and roles) as Markdown fit for one table cell."""
    text = RST_ROLE.sub(r"`\1`", RST_LITERAL.sub(r"`\1`", text))
    return text.replace("|", "\\|")


def parameters(cls: type) -> list[Parameter] | None:
    """The entries of ``cls``'s ``Parameters:`` docstring section, None when it has none."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    starts = [number for number, line in enumerate(lines) if line.strip() == "Parameters:"]
    if not starts:
        return None
    indent = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    entries: list[tuple[re.Match, list[str]]] = []
    entry_indent = None
    for line in lines[starts[0] + 1 :]:
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= indent:
            break
        header = PARAMETER.fullmatch(line.strip())
        if header and (entry_indent is None or depth <= entry_indent):
            entry_indent = depth
            entries.append((header, [header["rest"].strip()]))
        elif entries:
            entries[-1][1].append(line.strip())
    return [parameter(header, description) for header, description in entries]


def parameter(header: re.Match, description: list[str]) -> Parameter:
    """A :class:`Parameter` from its header line and its description lines (bullets start with ``- ``)."""
    spec = header["spec"]
    kind, _, default = spec.partition("defaults to ")
    kind = kind.replace("*optional*", "").strip(" ,")
    paragraphs: list[str] = []
    for line in filter(None, description):
        if line.startswith("- ") or not paragraphs:
            paragraphs.append(line)
        else:
            paragraphs[-1] += " " + line
    meaning = "<br>".join(markdown(paragraph) for paragraph in paragraphs)
    return Parameter(header["name"], kind, default.strip() or None, meaning)


def documented_default(text: str | None) -> Any:
    """The value a ``defaults to`` text names: a Python literal in backticks, else :data:`NO_DEFAULT`
    (no default given, or one computed at run time such as "the format's tag")."""
    literal = SINGLE_CODE.fullmatch(text or "")
    if literal is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(literal.group(1))
    except (ValueError, SyntaxError):
        return NO_DEFAULT


def field_default(field: dataclasses.Field) -> Any:
    """The value a dataclass field takes when it is not given."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def options_table(cls: type) -> str | None:
    """The options table of config dataclass ``cls`` from its docstring; None when it documents its options
    elsewhere (the page then keeps a hand-written table)."""
    documented = parameters(cls)
    if documented is None:
        return None
    rows = ["| option | type, default | meaning |", "| --- | --- | --- |"]
    for entry in documented:
        default = markdown(entry.default) if entry.default else "none"
        rows.append(f"| `{entry.name}` | {markdown(entry.type)}, {default} | {entry.meaning} |")
    return "\n".join(rows) + "\n"


def algorithms_table(algorithms: dict) -> str:
    """The algorithm table of the recipes: name, reward kind, the overrides that define it, source."""
    rows = ["| name | reward | overrides | source |", "| --- | --- | --- | --- |"]
    for name, algorithm in algorithms.items():
        overrides = "<br>".join(f"`{markdown(override)}`" for override in algorithm.overrides)
        rows.append(f"| `{name}` | {algorithm.reward} | {overrides} | {markdown(algorithm.source)} |")
    return "\n".join(rows) + "\n"


def ratio(summary: dict) -> str:
    """A ratio's median and its range over processes."""
    return f"{summary['median']:.2f} ({summary['min']:.2f}-{summary['max']:.2f})"


def milliseconds(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def estimator_speed_table(path: Path) -> str:
    """The estimator benchmark's figures: the machine, then per shape the median times and the ratios."""
    result = json.loads(path.read_text())
    machine = result["machine"]
    load_before, load_after = result["load_average_before"][0], result["load_average_after"][0]
    lines = [
        f"Measured on: {machine['cpu_model']}, {machine['cpu_cores_usable']} usable cores, "
        f"{machine['torch_threads']} torch thread{'' if machine['torch_threads'] == 1 else 's'}, "
        f"torch {machine['torch']}, Python {machine['python']}; "
        f"1-minute load average {load_before:g} before and {load_after:g} after (a shared machine); "
        f"medians of {result['rounds']} rounds in each of {len(result['processes'])} fresh processes, "
        f"groups of {result['group_size']}.",
        "",
        "| batch x response length | bot_grpo, outcome rewards (ms) | bot_grpo, dense rewards (ms) "
        "| verl grpo (ms) | verl grpo_vectorized (ms) | bot_grpo / verl grpo, outcome: median (range) "
        "| dense: median (range) | bot_grpo / verl grpo_vectorized, outcome: median (range) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for shape in result["summary"]:
        times = shape["median_ms"]
        lines.append(
            f"| {shape['batch']} x {shape['response_length']} "
            f"| {milliseconds(times['bot_grpo (outcome rewards)'])} "
            f"| {milliseconds(times['bot_grpo (dense rewards)'])} | {milliseconds(times['verl grpo'])} "
            f"| {milliseconds(times['verl grpo_vectorized'])} "
            f"| {ratio(shape['ratio_ours_outcome_to_grpo'])} | {ratio(shape['ratio_ours_dense_to_grpo'])} "
            f"| {ratio(shape['ratio_ours_outcome_to_grpo_vectorized'])} |"
        )
    return "\n".join(lines) + "\n"


def react_stages_table(path: Path) -> str:
    """The React reward benchmark's figures: the machine, then per stage its median rates and its CPU seconds for
    one paper-scale step, then the render stage's CPU per response by kind of process."""
    result = json.loads(path.read_text())
    machine, paper = result["machine"], result["paper_scale"]
    load_before, load_after = machine["load_average_before_after"]
    lines = [
        f"Measured on: {machine['processor']}, {machine['cpus']} cores, Node {machine['node']}, TypeScript "
        f"{machine['typescript']} (`checker={machine['checker']}`), Chromium {machine['browser']}; 1-minute load "
        f"average {load_before:.0f} before and "
        f"{load_after:.0f} after (a shared machine), {result['date']}; medians of {len(result['rounds']['types'])} "
        f"rounds, {result['threads']} threads.",
        "",
        f"| stage | responses/s (wall) | responses/s per core | CPU s for {paper['responses']:,} responses |",
        "| --- | --- | --- | --- |",
    ]
    for stage, per_core in result["median_responses_per_core_second"].items():
        wall = result["median_responses_per_second"][stage]
        lines.append(f"| {stage} | {wall:.3g} | {per_core:.3g} | {paper['cpu_seconds'][stage]:.3g} |")
    render_rounds = [r["cpu_ms_per_response"] for r in result["rounds"]["syntax+render"]]
    kinds = sorted({kind for spent in render_rounds for kind in spent})
    by_kind = {kind: statistics.median(spent.get(kind, 0.0) for spent in render_rounds) for kind in kinds}
    lines += [
        "",
        "Where the `syntax+render` stage's CPU goes, milliseconds per response (medians of the rounds):",
        "",
        "| " + " | ".join(kinds) + " |",
        "|" + " --- |" * len(kinds),
        "| " + " | ".join(f"{by_kind[kind]:.0f}" for kind in kinds) + " |",
    ]
    return "\n".join(lines) + "\n"


def render(kind: str, source: str) -> str | None:
    """The generated body of a block; None for an options class documented by hand."""
    if kind == "options":
        return options_table(load(source))
    if kind == "algorithms":
        return algorithms_table(load(source))
    if kind == "estimator-speed":
        return estimator_speed_table(REPO / source)
    if kind == "react-stages":
        return react_stages_table(REPO / source)
    if kind == "verdicts":
        from benchmarks.verdicts import verdicts_table

        return verdicts_table(link_prefix="" if source == "." else f"{source}/")
    raise ValueError(
        f"unknown generated table kind {kind!r} (options, algorithms, estimator-speed, react-stages, verdicts)"
    )


def update(text: str) -> str:
    """``text`` with every generated block's body rendered afresh (hand-written option tables kept)."""

    def replace(block: re.Match) -> str:
        body = render(block["kind"], block["source"])
        return block["head"] + (block["body"] if body is None else body) + block["tail"]

    return BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages whose tables are out of date")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        fresh = update(text)
        if fresh != text:
            stale.append(str(page.relative_to(REPO)))
            if not args.check:
                page.write_text(fresh, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    print(f"{verb}: {', '.join(stale)}" if stale else "every generated table is up to date")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
