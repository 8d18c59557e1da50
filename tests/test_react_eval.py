# ruff: noqa: E501  (the components under test are data)
"""The React evaluation command (benchmarks/react_eval.py) on two small dumps whose every level is known."""

import json
import shutil
from pathlib import Path

import numpy as np
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


def test_rates_and_the_paired_level_comparison_follow_the_levels(tmp_path):
    a = write_dump(tmp_path / "a.jsonl", [["as asked", "renders"], ["compiles", "fails"]])
    b = write_dump(tmp_path / "b.jsonl", [["renders", "renders"], ["fails", "fails"]])
    result = react_eval.evaluate(a, b)
    assert result["a"]["compile_rate"][0] == 0.75 and result["a"]["render_rate"][0] == 0.5
    assert result["a"]["spec_rate"][0] == 0.25 and result["b"]["spec_rate"][0] == 0.0
    # prompt 0: A's spec beats B's render, renders tie; prompt 1: compiles beats fails, fails tie
    assert "win_rate_a_over_b" not in result, "without a judge no two components are compared"
    assert result["paired_level_comparison_a_over_b"][0] == pytest.approx(0.75)
    low, high = result["paired_level_comparison_a_over_b"][1:]
    assert low <= 0.75 <= high
    assert result["levels"] == {"prompts": ["prompt 0", "prompt 1"], "a": [[3, 2], [1, 0]], "b": [[2, 2], [0, 0]]}
    shares = {"top1": 0.5, "top3": 1.0}  # A's list under two names, B's repeats
    assert result["template_shares"] == {"a": shares, "b": shares}


def test_the_template_shares_count_responses_with_names_literals_and_text_set_aside():
    def dump(*codes):
        return {f"prompt {p}": [{"output": fenced(code)} for code in codes[2 * p : 2 * p + 2]] for p in range(2)}

    distinct = dump(ANSWERS["fails"], ANSWERS["compiles"], REFERENCE, "export const answer = 1;\n")
    assert react_eval.template_shares(distinct) == {"top1": 0.25, "top3": 0.75}
    renamed = dump(REFERENCE, ANSWERS["fails"], LIST.format(name="CartList").replace("  ", "    "), REFERENCE)
    assert react_eval.template_shares(renamed)["top1"] == 0.75  # other names and indentation: the same response
    template = "export function {0}() {{ const {1} = {2}; return <p className='{3}'>{4}, {{{1}}}</p>; }}\n"
    reworded = dump(
        template.format("LastUpdate", "name", 3, "a", "Last update"),
        template.format("Hello", "title", "'x'", "big bold", "Hello there, world"),
        template.format("Other", "n", "`y`", "", "Another text"),
        template.format("Other", "n", "`y`", "", "Another text").replace("<p", "<h1").replace("</p", "</h1"),
    )
    # other names, literals and text: one template; another tag: another response
    assert react_eval.template_shares(reworded) == {"top1": 0.75, "top3": 1.0}


def evaluation(a_levels, b_levels, prompts=None):
    """An evaluation's per-prompt levels, as :func:`react_eval.evaluate` writes them."""
    prompts = prompts or [f"prompt {p}" for p in range(len(a_levels))]
    return {"levels": {"prompts": prompts, "a": a_levels, "b": b_levels}}


def test_pooled_differences_pair_prompts_across_seeds():
    rng = np.random.default_rng(0)
    seeds = []
    for _ in range(3):
        b = rng.integers(0, 4, (40, 4))
        a = b.copy()
        a[:10] = 3  # A reaches "as asked" on a quarter of the prompts, where B varies; elsewhere the same samples
        seeds.append(evaluation(a.tolist(), b.tolist()))
    pooled = react_eval.pooled_differences(seeds, boot=500)
    levels = [(np.array(s["levels"]["a"]), np.array(s["levels"]["b"])) for s in seeds]
    for rate, least in react_eval.RATES.items():
        expected = sum(((a >= least).mean() - (b >= least).mean()) for a, b in levels) / 3
        assert pooled[rate]["estimate"] == pytest.approx(expected)
        assert pooled[rate]["low"] <= expected <= pooled[rate]["high"]
    assert pooled["spec_rate"]["verdict"] == "better"  # A never below B, above on many prompts
    same = [evaluation(s["levels"]["b"], s["levels"]["b"]) for s in seeds]
    flat = react_eval.pooled_differences(same, boot=200)
    assert flat["render_rate"] == {"estimate": 0.0, "low": 0.0, "high": 0.0, "verdict": "no difference at this scale"}


def test_pooling_refuses_other_prompts_or_evaluations_without_levels():
    with pytest.raises(ValueError, match="same prompts"):
        react_eval.pooled_differences([evaluation([[1]], [[1]]), evaluation([[1]], [[1]], ["other"])])
    with pytest.raises(ValueError, match="per-prompt levels"):
        react_eval.pooled_differences([{"a": {}, "b": {}}])


def test_dumps_of_other_prompts_are_refused(tmp_path):
    a = write_dump(tmp_path / "a.jsonl", [["fails"]])
    b = write_dump(tmp_path / "b.jsonl", [["fails"], ["fails"]])
    with pytest.raises(ValueError, match="must hold the same prompts"):
        react_eval.evaluate(a, b)
