"""Requirement checks (``extra_info["react_spec"]``) of the react_tsx reward: only the component the request
asked for scores 1. Specs come from the demo corpus's own reference solutions (:func:`spec_from_reference`)."""

import shutil

import pytest

from bot_grpo_verl.rewards import react_tsx as rt
from bot_grpo_verl.rewards.react_requirements import SPEC_KEY, ReactSpec, spec_from_reference
from demo.react_corpus import generate_corpus

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js >= 18) is not on PATH")

LIST = """interface ShopListProps {
  items: string[];
}

export function ShopList({ items }: ShopListProps) {
  return (
    <ul>
      {items.map((item) => (
        <li key={item}>{item}</li>
      ))}
    </ul>
  );
}
"""
NOT_READ = LIST.replace("{ items }: ShopListProps", "props: { list: string[] }").replace("items.map", "props.list.map")
SPEC = {"component": "ShopList", "elements": ["ul", "li"], "only_elements": True, "props": ["items"]}


def fenced(code: str) -> str:
    return f"Here it is:\n```tsx\n{code}```\n"


def score(code: str, spec: dict, **options) -> dict:
    return rt.compute_score("react", fenced(code), None, {SPEC_KEY: spec}, **options)


def outline(code: str) -> dict:
    return rt.shared_checker().check([code], "syntax", False, 20, 30.0, outline=True)[0]["outline"]


def test_the_requested_component_meets_its_spec():
    result = score(LIST, SPEC)
    assert (result["score"], result["requirements_met"], result["requirements_unmet"]) == (1.0, 1, 0)


@pytest.mark.parametrize(
    ("code", "unmet"),
    [
        (LIST.replace("ShopList", "Other"), 2),  # no ShopList (so no props found either)
        (LIST.replace("<ul>", "<ol>").replace("</ul>", "</ol>"), 2),  # no <ul>, and <ol> not requested
        (NOT_READ, 1),
        ("export function ShopList() { return <div>Hello</div>; }\n", 4),  # a fixed template
    ],
    ids=["wrong name", "wrong tag", "prop not read", "template"],
)
def test_a_component_that_is_not_the_one_asked_for_scores_zero(code, unmet):
    result = score(code, SPEC)
    assert result["score"] == 0.0 and result["compiled"] == 1
    assert (result["requirements_met"], result["requirements_unmet"]) == (0, unmet)


@pytest.mark.parametrize(
    ("code", "share"),
    [
        (LIST, 1.0),
        (NOT_READ, 0.8),
        (LIST.replace("<ul>", "<ol>").replace("</ul>", "</ol>"), 0.6),  # no <ul>; strays: one requirement
        ("export function ShopList() { return <div><p>a</p><p>b</p><span>c</span></div>; }\n", 0.2),
        ("export const Other = () => <b>x</b>;\n", 0.0),  # only its name is wrong, and that costs the prop too
    ],
    ids=["as asked", "prop not read", "wrong tag", "template with strays", "nothing asked for"],
)
def test_a_graded_requirement_score_is_the_share_of_the_specs_requirements_that_hold(code, share):
    # SPEC checks 5 requirements: the component ShopList, <ul>, <li>, only those elements, the prop items.
    graded = score(code, SPEC, requirements_score="fraction")
    assert graded["requirements_share"] == pytest.approx(share) and graded["score"] == pytest.approx(share)
    strict = score(code, SPEC)
    assert strict["score"] == (1.0 if share == 1.0 else 0.0)
    named = score(code, SPEC, requirements_score="fraction_named")["score"]
    assert named == pytest.approx(share if "ShopList" in code else 0.0)  # the share only when ShopList is there
    assert strict["requirements_share"] == graded["requirements_share"]
    errors = [[(start, end) for start, end, value in result["spans"] if value < 0] for result in (strict, graded)]
    assert errors[0] == errors[1]  # the violations' places are the same error spans


def test_an_unknown_requirement_score_is_refused():
    with pytest.raises(ValueError, match="requirements_score='most' is not one of"):
        score(LIST, SPEC, requirements_score="most")


def test_violations_with_a_place_are_error_spans():
    code = LIST.replace("<ul>", "<ol>").replace("</ul>", "</ol>")
    text = fenced(code)
    result = rt.compute_score("react", text, None, {SPEC_KEY: SPEC})
    errors = [text[start:end] for start, end, value in result["spans"] if value < 0]
    assert errors == ["ol", "ol"]  # the opening and the closing tag's name
    code = LIST.replace("{ items }: ShopListProps", "{ things }: { things: string[] }").replace(
        "items.map", "things.map"
    )
    text = fenced(code)
    result = rt.compute_score("react", text, None, {SPEC_KEY: SPEC})
    assert [text[start:end] for start, end, value in result["spans"] if value < 0] == [
        "{ things }: { things: string[] }"
    ]


def test_texts_are_read_from_the_render_when_there_is_one():
    code = 'export default function Hello() { const who = "world"; return <p>Hello, {who}</p>; }\n'
    spec = {"default_export": True, "texts": ["Hello, world"]}
    assert score(code, spec)["score"] == 0.0  # not in the code as written
    assert score(code, spec, render=True, timeout=8.0)["score"] == 1.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"component": "A", "colour": "red"}, r"unknown keys \['colour'\]"),
        ({"component": 3}, "react_spec.component must be a non-empty string"),
        ({"default_export": "yes"}, "react_spec.default_export must be a bool"),
        ({"elements": "ul"}, "react_spec.elements must be a list of non-empty strings"),
        ({"props": ["items", 2]}, "react_spec.props must be a list of non-empty strings"),
        ("ul, li", "must be a dict"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_key(spec, message):
    with pytest.raises(ValueError, match=message):
        ReactSpec.from_extra_info({SPEC_KEY: spec})


def test_each_demo_reference_meets_its_own_spec_and_other_kinds_do_not():
    corpus = generate_corpus(24, seed=3)
    specs = [spec_from_reference(outline(example.code)) for example in corpus]
    for example, spec in zip(corpus, specs, strict=True):
        assert spec["component"] == example.name
        assert score(example.code, spec)["score"] == 1.0, (example.kind, spec)
    for example, spec in zip(corpus, specs[1:] + specs[:1], strict=True):
        if spec["component"] != example.name:
            assert score(example.code, spec)["score"] == 0.0  # another request's answer


# The template DAPO collapsed onto under the graded reward (issue 26's arm 1g, 49 of its 512 test samples verbatim);
# `name` is the browser's `window.name`, so it renders.
COLLAPSED = """interface MovieTitleProps {
  online: boolean;
}

export function MovieTitleProps({ label }: MovieTitleProps) {
 return <p>Last update, {name}</p>;
}
"""


@pytest.mark.parametrize(("requirements_score", "most"), [("all", 0.0), ("fraction", 0.5), ("fraction_named", 0.0)])
def test_the_template_a_policy_collapsed_onto_scores_below_every_answer(requirements_score, most):
    for example in generate_corpus(24, seed=3):
        spec = spec_from_reference(outline(example.code))
        answer = score(example.code, spec, requirements_score=requirements_score)
        template = score(COLLAPSED, spec, requirements_score=requirements_score)
        assert answer["score"] == 1.0 and template["compiled"] == 1, (example.kind, spec)
        assert template["score"] <= most, (example.kind, spec, template["score"])
    renamed = COLLAPSED.replace("export function MovieTitleProps", f"export function {example.name}")
    named = score(renamed, spec, requirements_score="fraction_named")["score"]
    assert 0.0 < named < 1.0  # under the requested name it gets the share it meets, not the answer's score


def test_requirements_false_scores_compilation_alone_on_a_row_with_a_spec():
    template = "export function ShopList() { return <div>Hello</div>; }\n"
    assert score(template, SPEC)["score"] == 0.0
    ignored = score(template, SPEC, requirements=False)
    assert ignored["score"] == 1.0 and "requirements_met" not in ignored
    with pytest.raises(ValueError, match="requirements='no' must be a bool"):
        score(LIST, SPEC, requirements="no")


def test_a_spec_read_back_from_parquet_or_with_numpy_values_is_the_same_spec(tmp_path):
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    path = tmp_path / "rows.parquet"
    pd.DataFrame({"extra_info": [{SPEC_KEY: SPEC}]}).to_parquet(path)
    read = pd.read_parquet(path).extra_info[0]  # its lists come back as numpy arrays
    assert ReactSpec.from_extra_info(read) == ReactSpec.from_extra_info({SPEC_KEY: SPEC})
    numpy_spec = {**SPEC, "only_elements": np.bool_(True), "elements": np.array(SPEC["elements"])}
    assert ReactSpec.from_extra_info({SPEC_KEY: numpy_spec}) == ReactSpec.from_extra_info({SPEC_KEY: SPEC})
