# ruff: noqa: E501  (the components under test are data)
"""What the rendered page decides (``render=True`` of bot_grpo_verl/rewards/react_tsx.py, ``tsx/render.mjs``), issue 39:

- the harness's result cannot be changed by model code that replaces a built-in the harness uses (one test per
  built-in, each in four ways: a working page, and a crash thrown later in an effect, a timer and a promise);
- requirements are read from the page: elements in the DOM (not in dead code; also made through an alias or
  ``createElement``), text a person can see, a page that shows nothing is ``blank``, an export under the requested
  name that is no component fails the name gate;
- every ordinary way of writing a correct component scores 1 (export aliases, default const, memo, forwardRef,
  arrow functions, classes);
- the corpus ``tests/data/react_spec_corpus.json``: for every demo spec kind, non-answers built to win score below
  every correct answer, and correct answers in several styles score 1, under the benchmarks' composed variants.

These tests need Chromium (``make setup``); they fail, never skip, without it.
"""

import concurrent.futures
import json
import os
import shutil
from pathlib import Path

import pytest

from bot_grpo_verl.rewards import react_render
from bot_grpo_verl.rewards import react_tsx as rt
from bot_grpo_verl.rewards.react_requirements import SPEC_KEY, ReactSpec, check_requirements, export_key

CHROMIUM = os.environ.get("BOT_GRPO_CHROMIUM", "/usr/bin/chromium")
TIMEOUT = 20.0
CORPUS = json.loads((Path(__file__).parent / "data" / "react_spec_corpus.json").read_text())
# The benchmarks' composed rewards (benchmarks/matrix.py REACT_VARIANTS, render=True in each).
VARIANTS = {
    "composed": {},
    "composed_graded": {"requirements_score": "fraction"},
    "composed_named": {"requirements_score": "fraction_named"},
}


@pytest.fixture(scope="module", autouse=True)
def chromium():
    if shutil.which("node") is None or not Path(CHROMIUM).exists():
        pytest.fail(f"the render check needs node and Chromium at {CHROMIUM}: run `make setup` (Debian's chromium)")


def render_all(codes: list[str], export: str | None = None) -> list[dict]:
    """The render's answers, eight pages a request (each request answered within TIMEOUT)."""
    renderer = react_render.shared_renderer()
    return [
        answer
        for start in range(0, len(codes), 8)
        for answer in renderer.render(codes[start : start + 8], TIMEOUT, export=export)
    ]


def score(code: str, spec: dict, **options) -> dict:
    return rt.compute_score(
        "react", f"```tsx\n{code}\n```", None, {SPEC_KEY: spec}, render=True, timeout=TIMEOUT, **options
    )


# --- the harness keeps its built-ins -------------------------------------------------------------------------------

# Every built-in the harness (and the prelude that renders the component) reads after model code may have run:
# (owner expression, key). A getter is replaced by one that throws, a method or a value by a function that throws.
HARNESS_BUILTINS = [
    ("window", "String"),
    ("window", "parseFloat"),
    ("window", "Proxy"),
    ("window", "JSON"),
    ("window", "setTimeout"),
    ("window", "postMessage"),
    ("window", "getComputedStyle"),
    ("window", "addEventListener"),
    ("Reflect", "apply"),
    ("Reflect", "defineProperty"),
    ("Object", "keys"),
    ("Object", "entries"),
    ("Object", "freeze"),
    ("Object", "defineProperty"),
    ("Object", "getOwnPropertyDescriptor"),
    ("Array.prototype", "push"),
    ("Array.prototype", "map"),
    ("Array.prototype", "find"),
    ("Array.prototype", 0),
    ("Object.prototype", "get"),
    ("Object.prototype", "value"),
    ("Object.prototype", "message"),
    ("Object.prototype", "toJSON"),
    ("RegExp.prototype", "exec"),
    ("String.prototype", "toLowerCase"),
    ("MessagePort.prototype", "postMessage"),
    ("Document.prototype", "getElementById"),
    ("Document.prototype", "documentElement"),
    ("Document.prototype", "createRange"),
    ("Element.prototype", "querySelectorAll"),
    ("Element.prototype", "getBoundingClientRect"),
    ("Element.prototype", "localName"),
    ("Element.prototype", "tagName"),
    ("Element.prototype", "getAttribute"),
    ("Element.prototype", "clientWidth"),
    ("Element.prototype", "scrollHeight"),
    ("HTMLElement.prototype", "innerText"),
    ("HTMLElement.prototype", "click"),
    ("Node.prototype", "firstChild"),
    ("Node.prototype", "nextSibling"),
    ("Node.prototype", "parentElement"),
    ("Node.prototype", "nodeType"),
    ("Node.prototype", "textContent"),
    ("Node.prototype", "childNodes"),
    ("CharacterData.prototype", "data"),
    ("NodeList.prototype", "length"),
    ("NodeList.prototype", "item"),
    ("DOMRectReadOnly.prototype", "left"),
    ("DOMRectReadOnly.prototype", "bottom"),
    ("Range.prototype", "selectNodeContents"),
    ("Range.prototype", "getBoundingClientRect"),
    ("CSSStyleDeclaration.prototype", "getPropertyValue"),
    ("ErrorEvent.prototype", "message"),
    ("ErrorEvent.prototype", "error"),
    ("PromiseRejectionEvent.prototype", "reason"),
    ("Error.prototype", "message"),
    ("CanvasRenderingContext2D.prototype", "fillStyle"),
    ("CanvasRenderingContext2D.prototype", "getImageData"),
    ("ImageData.prototype", "data"),
]
SABOTAGE = """function sabotage(owner: any, key: PropertyKey) {
  const fail = () => { throw new Error("sabotaged"); };
  const found = Object.getOwnPropertyDescriptor(owner, key);
  Object.defineProperty(owner, key, found && found.get ? { get: fail, set: fail, configurable: true } : { value: fail, writable: true, configurable: true });
}
"""
WORKING = """import { useState, useEffect } from "react";
SABOTAGE
export default function App() {
  const [n, setN] = useState(0);
  useEffect(() => { LATER }, [n]);
  useEffect(() => { REPLACE; NOW }, []);
  return <ul style={{ color: "teal" }}><li>one</li><li>two {n}</li></ul>;
}"""
# How the page fails after the built-in is replaced: "" (it does not), a throw in an effect after an update (React's
# error callback), from a timer (an error event), an unhandled rejection.
FAILURES = {
    "working page": ("", ""),
    "throw in a later effect": ("setN(1);", 'if (n === 1) throw new Error("late");'),
    "throw from a timer": ('setTimeout(() => { throw new Error("late"); }, 0);', ""),
    "unhandled rejection": ('Promise.reject(new Error("late"));', ""),
}


def sabotaged(owner: str, key, failure: str) -> str:
    now, later = FAILURES[failure]
    replace = f"sabotage({owner}, {json.dumps(key)})"
    return WORKING.replace("SABOTAGE", SABOTAGE).replace("REPLACE", replace).replace("NOW", now).replace("LATER", later)


@pytest.fixture(scope="module")
def sabotage_results():
    cases = [(owner, key, failure) for owner, key in HARNESS_BUILTINS for failure in FAILURES]
    clean = render_all([sabotaged("{}", "unused", "working page")])[0]
    answers = render_all([sabotaged(owner, key, failure) for owner, key, failure in cases])
    return clean, dict(zip(cases, answers, strict=True))


PAGE_KEYS = ("status", "elements", "visible", "text", "tags", "shown_tags", "export_kind")


@pytest.mark.parametrize(("owner", "key"), HARNESS_BUILTINS, ids=[f"{owner}.{key}" for owner, key in HARNESS_BUILTINS])
def test_replacing_a_builtin_the_harness_uses_changes_no_result(sabotage_results, owner, key):
    clean, answers = sabotage_results
    assert clean["status"] == "renders" and clean["text"] == "one\ntwo 0"
    working = answers[(owner, key, "working page")]
    assert {name: working[name] for name in PAGE_KEYS} == {name: clean[name] for name in PAGE_KEYS}
    for failure in FAILURES:
        if failure != "working page":
            answer = answers[(owner, key, failure)]
            assert answer["status"] == "runtime_error", (failure, answer)


def test_a_crash_hidden_by_replacing_string_scores_a_runtime_error():
    code = sabotaged("window", "String", "throw from a timer")
    result = rt.compute_score("react", f"```tsx\n{code}\n```", None, render=True, timeout=TIMEOUT)
    assert (result["score"], result["render_error"], result["rendered"]) == (0.0, 1, 0)


def test_the_prelude_is_the_entrys_alone():
    # The component importing the prelude's name gets a stub, not the function that starts the render.
    code = 'import { start } from "bot-grpo-render-prelude";\nexport default function App() { return <p>{String(start).includes("harness") ? "got it" : "stub"}</p>; }'
    assert render_all([code])[0]["text"] == "stub"


def test_a_component_cannot_claim_the_harness_handle():
    code = 'const handle = (window as any).__harness;\nif (handle) handle.describe("function", "function");\nexport const List = 42;\nexport default function App() { return <p>{handle ? "taken" : "none"}</p>; }'
    answer = render_all([code], export="List")[0]
    assert (answer["status"], answer["export_kind"]) == ("runtime_error", "number")


# --- requirements from the page -----------------------------------------------------------------------------------

LIST = """interface SongItemsProps {
  items: string[];
}

export function SongItems({ items }: SongItemsProps) {
  return (
    <ul>
      {items.map((item) => (
        <li key={item}>{item}</li>
      ))}
    </ul>
  );
}
"""
SPEC = {"component": "SongItems", "elements": ["li", "ul"], "only_elements": True, "props": ["items"]}
LIST_BODY = "<ul>{items.map((item) => <li key={item}>{item}</li>)}</ul>"

CORRECT = {
    "function": LIST,
    "arrow": f"export const SongItems = ({{ items }}: {{ items: string[] }}) => {LIST_BODY};",
    "export alias": f"function Impl({{ items }}: {{ items: string[] }}) {{ return {LIST_BODY}; }}\nexport {{ Impl as SongItems }};",
    "default const": f"const SongItems = ({{ items }}: {{ items: string[] }}) => {LIST_BODY};\nexport default SongItems;",
    "memo": f'import {{ memo }} from "react";\nexport const SongItems = memo(({{ items }}: {{ items: string[] }}) => {LIST_BODY});',
    "React.memo of a function": f'import React from "react";\nfunction Inner({{ items }}: {{ items: string[] }}) {{ return {LIST_BODY}; }}\nexport const SongItems = React.memo(Inner);',
    "forwardRef": 'import { forwardRef } from "react";\nexport const SongItems = forwardRef<HTMLUListElement, { items: string[] }>(({ items }, ref) => <ul ref={ref}>{items.map((item) => <li key={item}>{item}</li>)}</ul>);',
    "memo of forwardRef": 'import { memo, forwardRef } from "react";\nexport const SongItems = memo(forwardRef<HTMLUListElement, { items: string[] }>(({ items }, ref) => <ul ref={ref}>{items.map((item) => <li key={item}>{item}</li>)}</ul>));',
    "class": 'import { Component } from "react";\nexport class SongItems extends Component<{ items: string[] }> {\n  render() {\n    const { items } = this.props;\n    return <ul>{items.map((item) => <li key={item}>{item}</li>)}</ul>;\n  }\n}',
    "class reading this.props": 'import React from "react";\nexport class SongItems extends React.Component<{ items: string[] }> {\n  render() {\n    return <ul>{this.props.items.map((item) => <li key={item}>{item}</li>)}</ul>;\n  }\n}',
    "props object": "export function SongItems(props: { items: string[] }) { return <ul>{props.items.map((item) => <li key={item}>{item}</li>)}</ul>; }",
}


@pytest.mark.parametrize("style", sorted(CORRECT))
def test_every_ordinary_way_of_writing_the_component_scores_one(style):
    for options in VARIANTS.values():
        result = score(CORRECT[style], SPEC, **options)
        assert (result["score"], result["requirements_unmet"]) == (1.0, 0), (options, result)


NOT_ANSWERS = {  # name: (code, the requirement it fails, in words)
    "required tags in dead code": (
        "export function SongItems({ items }: { items: string[] }) { return <>{false && <ul><li>{items.length}</li></ul>}<b>songs</b></>; }",
        "no <ul> element",
    ),
    "required tags under display:none": (
        "export function SongItems({ items }: { items: string[] }) { return <><b>songs</b><ul style={{ display: 'none' }}>{items.map((item) => <li key={item}>{item}</li>)}</ul></>; }",
        "no <ul> element",
    ),
    "a stray tag through an alias": (
        'const Box: any = "marquee";\nexport function SongItems({ items }: { items: string[] }) { return <ul><Box>now</Box>{items.map((item) => <li key={item}>{item}</li>)}</ul>; }',
        "<marquee> is not one of the requested elements",
    ),
    "a stray tag through createElement": (
        'import { createElement } from "react";\nexport function SongItems({ items }: { items: string[] }) { return <ul>{createElement("blink", null, "now")}{items.map((item) => <li key={item}>{item}</li>)}</ul>; }',
        "<blink> is not one of the requested elements",
    ),
    "a number under the requested name": (
        f"export const SongItems = 42;\nexport default function Page({{ items }}: {{ items: string[] }}) {{ return {LIST_BODY}; }}",
        "no exported component SongItems",
    ),
    "a string under the requested name": (
        f'export const SongItems = "<SongItems />";\nexport default function Page({{ items }}: {{ items: string[] }}) {{ return {LIST_BODY}; }}',
        "no exported component SongItems",
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_ANSWERS))
def test_requirements_are_read_from_the_page(name):
    code, unmet = NOT_ANSWERS[name]
    for options in VARIANTS.values():
        result = score(code, SPEC, **options)
        assert result["score"] < 1.0 and result["requirements_unmet"] >= 1, (options, result)
    assert unmet in unmet_of(code, SPEC)


def unmet_of(code: str, spec: dict) -> list[str]:
    """The unmet requirements of ``code`` (its outline and its page, as compute_score gets them), in words."""
    outline = rt.shared_checker().check([code], "syntax", False, 20, TIMEOUT, outline=True)[0]["outline"]
    parsed = ReactSpec.from_extra_info({SPEC_KEY: spec})
    page = render_all([code], export=export_key(parsed, outline))[0]
    return check_requirements(parsed, outline, code, page).unmet


HIDDEN = {  # how a text is hidden: the style of its element (the page also shows "Shown" in a visible element)
    "opacity 0": "opacity: 0",
    "opacity 0 on an ancestor": None,
    "font-size 0": "fontSize: 0",
    "off-screen": "position: 'absolute', left: -10000",
    "transparent": "color: 'transparent'",
    "the background's colour": "color: 'white', background: 'white'",
    "an ancestor's background colour": None,
    "clipped by clip-path": "clipPath: 'inset(50% 50%)'",
    "clipped by clip": "position: 'absolute', clip: 'rect(0 0 0 0)'",
    "zero height, overflow hidden": "display: 'block', height: 0, overflow: 'hidden'",
    "visibility hidden": "visibility: 'hidden'",
    "display none": "display: 'none'",
    "scaled to nothing": "display: 'inline-block', transform: 'scale(0)'",
    "a transparent text fill": "WebkitTextFillColor: 'transparent'",
}
ANCESTORS = {
    "opacity 0 on an ancestor": "<div style={{ opacity: 0 }}><p><b>Secret</b></p></div>",
    "an ancestor's background colour": "<div style={{ background: 'black' }}><p style={{ color: 'black' }}><b>Secret</b></p></div>",
}


def hidden_text_page(how: str) -> str:
    secret = ANCESTORS.get(how) or f"<span style={{{{ {HIDDEN[how]} }}}}>Secret</span>"
    return f"export default function App() {{ return <div><p>Shown</p>{secret}</div>; }}"


@pytest.mark.parametrize("how", sorted(HIDDEN))
def test_a_required_text_counts_only_where_a_person_can_see_it(how):
    code = hidden_text_page(how)
    result = score(code, {"texts": ["Secret"]})
    assert (result["rendered"], result["score"], result["requirements_unmet"]) == (1, 0.0, 1), result
    assert score(code, {"texts": ["Shown"]})["score"] == 1.0


def test_a_visible_text_in_any_colour_that_stands_out_counts():
    code = "export default function App() { return <div style={{ background: '#222' }}><p style={{ color: 'orange' }}>Lit</p><p style={{ color: 'white', opacity: 0.5 }}>Dim</p></div>; }"
    assert score(code, {"texts": ["Lit", "Dim"]})["score"] == 1.0


@pytest.mark.parametrize(
    "code",
    [
        "export default function App() { return <div><ul><li></li><li></li></ul><span /></div>; }",
        "export default function App() { return <div style={{ opacity: 0 }}><h1>Title</h1><button>Go</button></div>; }",
        "export default function App() { return <main style={{ position: 'fixed', top: -500, height: 100 }}><p>away</p></main>; }",
        "export default function App() { return <p style={{ color: 'white' }}>white on white</p>; }",
    ],
    ids=["empty elements", "everything at opacity 0", "everything off-screen", "white on white"],
)
def test_a_page_with_nothing_visible_is_blank(code):
    result = score(code, {})
    assert (result["render_blank"], result["score"]) == (1, 0.0), result


@pytest.mark.parametrize(
    "code",
    [
        "export default function App() { return <button />; }",
        "export default function App() { return <input placeholder='type' />; }",
        "export default function App() { return <div style={{ width: 40, height: 40, background: 'red' }} />; }",
        "export default function App() { return <hr />; }",
    ],
    ids=["a button", "an input", "a coloured box", "a rule"],
)
def test_a_page_that_shows_a_control_or_a_painted_box_renders(code):
    assert score(code, {})["rendered"] == 1


def test_elements_shown_only_after_a_click_or_with_data_count():
    toggle = 'import { useState } from "react";\nexport function Tip() { const [open, setOpen] = useState(false); return <div><button onClick={() => setOpen(!open)}>More</button>{open && <p>Details</p>}</div>; }'
    spec = {"component": "Tip", "elements": ["button", "div", "p"], "only_elements": True, "texts": ["Details"]}
    assert score(toggle, spec)["score"] == 1.0
    rows = "export function Rows({ rows }: { rows: { id: number; title: string }[] }) { if (rows.length === 0) return <p>Empty</p>; return <ol>{rows.map((row) => <li key={row.id}>{row.title.toUpperCase()}</li>)}</ol>; }"
    spec = {
        "component": "Rows",
        "elements": ["li", "ol", "p"],
        "only_elements": True,
        "props": ["rows"],
        "texts": ["Empty"],
    }
    assert score(rows, spec)["score"] == 1.0


# --- the corpus: every demo spec kind ------------------------------------------------------------------------------


def corpus_spec(entry: dict) -> dict:
    """The row's spec as the demo builds it (its reference's), with the fixed text the prompt asks to show."""
    spec = rt.reference_spec(entry["reference"])
    return {**spec, "texts": [entry["text"]]} if entry["text"] else spec


@pytest.mark.slow  # ~20 responses x 3 variants rendered per kind: ~20-40 s each
@pytest.mark.parametrize("entry", CORPUS, ids=[entry["kind"] for entry in CORPUS])
def test_no_non_answer_reaches_a_correct_answers_score(entry):
    assert len(entry["answers"]) >= 5 and len(entry["non_answers"]) >= 5
    spec = corpus_spec(entry)
    codes = {("answer", name): code for name, code in entry["answers"].items()}
    codes |= {("non-answer", name): code for name, code in entry["non_answers"].items()}
    jobs = [(key, variant) for key in codes for variant in VARIANTS]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        scores = dict(
            zip(jobs, pool.map(lambda job: score(codes[job[0]], spec, **VARIANTS[job[1]])["score"], jobs), strict=True)
        )
    for variant in VARIANTS:
        answers = {key[1]: scores[(key, variant)] for key in codes if key[0] == "answer"}
        others = {key[1]: scores[(key, variant)] for key in codes if key[0] == "non-answer"}
        assert set(answers.values()) == {1.0}, (variant, answers)
        assert max(others.values()) < min(answers.values()), (variant, others)
