"""The documentation agrees with what it documents.

- Every generated table (``docs/tables.py``) equals what its source gives today.
- Every options dataclass that the plugin or a reward function reads (the first argument of each
  ``options_from_config`` / ``options_from_kwargs`` call) has exactly one options table, whose rows are
  its fields, in order, with their defaults.
- Every relative link of the pages points to an existing file, and to an existing heading when it
  names one; every docs page can be reached from the README.
"""

import ast
import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest

from bot_grpo_verl.reward.token_rewards import parse_reward_result
from docs import tables

REPO = Path(__file__).resolve().parents[1]
LINKED_PAGES = sorted([REPO / "README.md", REPO / "recipes" / "README.md", *(REPO / "docs").glob("*.md")])
OPTION_READERS = ("options_from_config", "options_from_kwargs")
OPTION_SOURCES = ("bot_grpo_verl/**/*.py", "bot_grpo_verl/rewards/**/*.py")
FENCED_CODE = re.compile(r"^ *(```|~~~).*?^ *\1", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.MULTILINE)
TABLE_ROW = re.compile(r"^\| `(\w+)` \| (.*?) \| ", re.MULTILINE)


def blocks(kind: str | None = None) -> list[tuple[Path, re.Match]]:
    """Every generated block of the pages (of one ``kind``), with its page."""
    return [
        (page, block)
        for page in tables.pages()
        for block in tables.BLOCK.finditer(page.read_text(encoding="utf-8"))
        if kind is None or block["kind"] == kind
    ]


def read_options_classes() -> set[str]:
    """``module:Class`` of every dataclass passed to an options reader in the plugin and the reward models."""
    found = set()
    for path in sorted({path.resolve() for pattern in OPTION_SOURCES for path in REPO.glob(pattern)}):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found |= {f"{module}:{name}" for name in options_classes_in(ast.parse(path.read_text(encoding="utf-8")))}
    return found


def options_classes_in(tree: ast.AST, enclosing: str | None = None) -> set[str]:
    """Names of the classes an options reader is called with in ``tree`` (``cls`` is the enclosing class)."""
    found = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            found |= options_classes_in(node, node.name)
            continue
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if function in OPTION_READERS:
                found.add(enclosing if node.args[0].id == "cls" else node.args[0].id)
        found |= options_classes_in(node, enclosing)
    return found


def split_type_and_default(cell: str) -> tuple[str, str]:
    """``"`type`, default"`` at its first comma outside backticks."""
    in_code = False
    for position, character in enumerate(cell):
        in_code ^= character == "`"
        if not in_code and cell.startswith(", ", position):
            return cell[:position], cell[position + 2 :]
    raise AssertionError(f"the cell {cell!r} has no 'type, default' form")


def slug(heading: str, seen: Counter) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    seen[text] += 1
    return text if seen[text] == 1 else f"{text}-{seen[text] - 1}"


def prose(page: Path) -> str:
    """The page without its code blocks and inline code (where brackets are not links)."""
    return FENCED_CODE.sub("", page.read_text(encoding="utf-8"))


def anchors(page: Path) -> set[str]:
    seen: Counter = Counter()
    return {slug(heading, seen) for heading in HEADING.findall(prose(page))}


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(INLINE_CODE.sub("", prose(page))) if not re.match(r"\w+:", target)]


def linked_pages(page: Path) -> set[Path]:
    """The Markdown files ``page`` links to."""
    targets = {(page.parent / link.partition("#")[0]).resolve() for link in relative_links(page)}
    return {target for target in targets if target.suffix == ".md" and target.is_file()}


def test_options_table_from_a_docstring():
    @dataclasses.dataclass(frozen=True)
    class Example:
        """Options.

        Parameters:
            mode (`str`, *optional*, defaults to `"a"`):
                How it works.
                - `"a"`: uses ``x | y``, see :func:`f`.
                - `"b"`: does not.
            limit (`int` or `None`, *optional*): at most this many;
                None for no limit.

        Returns nothing.
        """

        mode: str = "a"
        limit: int | None = None

    assert tables.options_table(Example).splitlines()[2:] == [
        '| `mode` | `str`, `"a"` | How it works.<br>- `"a"`: uses `x \\| y`, see `f`.<br>- `"b"`: does not. |',
        "| `limit` | `int` or `None`, none | at most this many; None for no limit. |",
    ]
    assert tables.options_table(type("Plain", (), {"__doc__": "No parameters here."})) is None


@pytest.mark.parametrize("page", sorted({page for page, _ in blocks()}), ids=lambda page: page.name)
def test_generated_tables_are_up_to_date(page):
    text = page.read_text(encoding="utf-8")
    assert tables.update(text) == text, f"{page.name}: run `.venv/bin/python -m docs.tables` to regenerate its tables"


def test_every_options_dataclass_has_one_table():
    read = read_options_classes()
    documented = Counter(block["source"] for _, block in blocks("options"))
    assert {"bot_grpo_verl.estimators.bot_grpo:BoTGRPOConfig", "bot_grpo_verl.reward.manager:TokenRewardConfig"} <= read
    assert sorted(read - set(documented)) == [], "options dataclasses without a table in docs/"
    assert sorted(set(documented) - read) == [], "tables of classes that no options reader uses"
    assert [source for source, count in documented.items() if count > 1] == [], "options documented twice"


@pytest.mark.parametrize(
    "page, block", blocks("options"), ids=[block["source"].partition(":")[2] for _, block in blocks("options")]
)
def test_options_table_rows_are_the_fields_with_their_defaults(page, block):
    cls = tables.load(block["source"])
    rows = TABLE_ROW.findall(block["body"])
    assert [name for name, _ in rows] == [field.name for field in dataclasses.fields(cls)], page.name
    for (name, cell), field in zip(rows, dataclasses.fields(cls), strict=True):
        documented = tables.documented_default(split_type_and_default(cell)[1])
        default = tables.field_default(field)
        if documented is tables.NO_DEFAULT:  # none, or computed at run time: the field holds None
            assert default is None, f"{block['source']}.{name}: documented without a default, but it is {default!r}"
        else:
            assert (type(documented), documented) == (type(default), default), f"{block['source']}.{name}"


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = []
    for link in relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no such heading in {target.name}")
    assert broken == [], f"{page.relative_to(REPO)}"


def test_every_docs_page_is_reachable_from_the_readme():
    reached, frontier = set(), {(REPO / "README.md").resolve()}
    while frontier:
        reached |= frontier
        frontier = {target for page in frontier for target in linked_pages(page)} - reached
    unreached = [page.name for page in sorted((REPO / "docs").glob("*.md")) if page.resolve() not in reached]
    assert unreached == []


def test_readme_is_one_screen_with_the_switch_and_the_quick_start():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150, (
        "the README: the switch, a reward, quick start, results and bad-input tables; details in docs/"
    )
    assert "make test" in readme and "make demo" in readme and "+preset=bot_grpo" in readme


def test_the_readme_reward_function_keeps_the_contract():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(code.strip().splitlines()) <= 12, "the README's reward function stays about ten lines"
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    text = "2 + 2 = 4\nTODO check\n4"
    result = parse_reward_result(namespace["compute_score"]("demo", text, "4"), len(text))
    assert result.score == 1.0
    assert [span[2] for span in result.spans] == [0.0, -1.0, 0.0]
    assert result.spans[1][:2] == (len("2 + 2 = 4\n"), len("2 + 2 = 4\nTODO check\n"))
