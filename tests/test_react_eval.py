# ruff: noqa: E501  (the components under test are data)
"""The React evaluation command (benchmarks/react_eval.py) on two small dumps whose every level is known."""

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import react_eval

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js >= 18) is not on PATH")

LIST = "interface P {{ items: string[] }}\nexport function {name}({{ items }}: P) {{\n  return <ul>{{items.map((i) => <li key={{i}}>{{i}}</li>)}}</ul>;\n}}\n"
REFERENCE = LIST.format(name="ShopList")
ANSWERS = {
    "as asked": REFERENCE,
    "renders": LIST.format(name="OtherList"),  # renders, but not the requested component
    "compiles": "export function ShopList() { return <p>{missing}</p>; }\n",  # compiles, throws on render
    "fails": "export function ShopList() { return <p>; }\n",
}


def fenced(code: str) -> str:
    return f"```tsx\n{code}```"


def write_dump(path: Path, levels: list[list[str]]) -> Path:
    rows = [
        {"input": f"prompt {p}", "output": fenced(ANSWERS[level]), "gts": REFERENCE}
        for p, prompt_levels in enumerate(levels)
        for level in prompt_levels
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    return path


def test_rates_and_the_win_rate_follow_the_levels(tmp_path):
    a = write_dump(tmp_path / "a.jsonl", [["as asked", "renders"], ["compiles", "fails"]])
    b = write_dump(tmp_path / "b.jsonl", [["renders", "renders"], ["fails", "fails"]])
    result = react_eval.evaluate(a, b)
    assert result["a"]["compile_rate"][0] == 0.75 and result["a"]["render_rate"][0] == 0.5
    assert result["a"]["as_asked_rate"][0] == 0.25 and result["b"]["as_asked_rate"][0] == 0.0
    # prompt 0: A's as-asked beats B's render, renders tie; prompt 1: compiles beats fails, fails tie
    assert result["win_rate_a_over_b"][0] == pytest.approx(0.75)
    low, high = result["win_rate_a_over_b"][1:]
    assert low <= 0.75 <= high


def test_dumps_of_other_prompts_are_refused(tmp_path):
    a = write_dump(tmp_path / "a.jsonl", [["fails"]])
    b = write_dump(tmp_path / "b.jsonl", [["fails"], ["fails"]])
    with pytest.raises(ValueError, match="must hold the same prompts"):
        react_eval.evaluate(a, b)
