"""Tests of bot_grpo_verl/rewards/react_tsx.py, the React / TSX compile reward, against its real Node worker.

Corpus responses mark the characters the reward must penalise with ``⟦`` and ``⟧`` (removed before
scoring), so every expected range is written by hand next to the code it belongs to.
"""

import asyncio
import concurrent.futures
import inspect
import os
import shutil
import time
from pathlib import Path

import pytest
from react_tsx_helpers import checked_codes, checker_differences, error_ranges, fenced, rt, unmark

from bot_grpo_verl.reward.token_rewards import parse_reward_result
from bot_grpo_verl.rewards import tsx_source
from bot_grpo_verl.rewards.tsx_checker import TsxChecker

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js >= 18) is not on PATH")

ROOT = Path(__file__).resolve().parents[1]


# (name, marked response, options, expected score). Failing cases mark every penalised range.
CORPUS = [
    (
        "valid component",
        fenced(
            "import { useState } from 'react';\n\nexport default function Counter() {\n"
            "  const [n, setN] = useState(0);\n"
            "  return <button onClick={() => setN(n + 1)}>{n}</button>;\n}"
        ),
        {},
        1.0,
    ),
    (
        "valid, unfenced whole response",
        "export const App = () => <main><h1>Hi</h1></main>;\n",
        {},
        1.0,
    ),
    (
        # esbuild reports "Unexpected end of file": the unfinished component is penalised whole.
        "missing closing brace",
        "Here is the component:\n```tsx\n⟦export default function App() {\n  return <div>hi</div>;\n\n⟧```\n"
        "It renders a list.",
        {},
        0.0,
    ),
    (
        "unclosed JSX tag",
        "Here is the component:\n```tsx\n⟦export const App = () => (\n  <div>\n    <span>hello\n  </div>\n);\n⟧```\n"
        "It renders a list.",
        {},
        0.0,
    ),
    (
        "bad attribute: value missing",
        fenced("export const Field = () => <input value= ⟦/⟧>;"),
        {},
        0.0,
    ),
    (
        "bad attribute: HTML `class` passes the syntax level",
        fenced('export const Box = () => <div class="box">hi</div>;'),
        {},
        1.0,
    ),
    (
        "bad attribute: HTML `class` fails the types level",
        fenced('export const Box = () => <div ⟦class⟧="box">hi</div>;'),
        {"level": "types"},
        0.0,
    ),
    (
        "type error: wrong prop type",
        fenced(
            "function Greeting({ name }: { name: string }) {\n  return <h1>Hello {name}</h1>;\n}\n"
            "export const App = () => <Greeting ⟦name⟧={42} />;"
        ),
        {"level": "types"},
        0.0,
    ),
    (
        "type error: missing import",
        fenced("export function App() {\n  const [n] = ⟦useState⟧(0);\n  return <b>{n}</b>;\n}"),
        {"level": "types"},
        0.0,
    ),
    (
        "types level: other imports are typed any",
        fenced(
            "import { Star } from 'lucide-react';\nimport { Card } from './Card';\nimport './App.css';\n"
            'export default function App() {\n  return <Card title="x"><Star size={16} /></Card>;\n}'
        ),
        {"level": "types"},
        1.0,
    ),
    (
        "unicode: CJK and emoji in strings, valid",
        fenced('export const Hello = () => <p title="日本語 😀🎉">{"你好, мир ✨"}</p>;'),
        {"level": "types"},
        1.0,
    ),
    (
        # esbuild's column counts UTF-8 bytes: 日本語 (9 bytes) and 😀🎉 (8 bytes) precede the error.
        "unicode: syntax error after CJK and emoji (UTF-8 byte columns)",
        fenced('export const Hello = () => <p title="日本語 😀🎉">{"✨" +⟦}⟧</p>;'),
        {},
        0.0,
    ),
    (
        # TypeScript's offsets count UTF-16 units: each emoji is two of them.
        "unicode: type error after CJK and emoji (UTF-16 offsets)",
        fenced('const label = "日本語 😀🎉"; const ⟦count⟧: number = label;\nexport const A = () => <p>{count}</p>;'),
        {"level": "types"},
        0.0,
    ),
    (
        # U+2028 is a line break for esbuild's line numbers, not for str.splitlines-style counting of \n.
        "unicode: U+2028 inside a string before the error",
        fenced('const a = "x\u2028y"; const b = <div>{⟦)⟧}</div>;'),
        {},
        0.0,
    ),
    (
        "CRLF line endings",
        "```tsx\r\nconst a = 1;\r\nconst b = <div>{⟦)⟧}</div>;\r\n```\r\n",
        {},
        0.0,
    ),
    (
        "truncated generation: fence never closed",
        "Sure!\n```tsx\n⟦export function App() {\n  return (\n    <ul>\n      <li>one</li>\n⟧",
        {},
        0.0,
    ),
    (
        "several blocks: all checked, the broken second one fails the response",
        "First the button:\n```tsx\nexport const Button = () => <button>ok</button>;\n```\n"
        "Then the page:\n```jsx\n⟦export const Page = () => <main><Button></main>;\n⟧```\n"
        "Install with:\n```bash\nnpm i react (\n```",
        {},
        0.0,
    ),
    (
        "several blocks: blocks='last' checks only the final answer",
        "Draft:\n```tsx\nexport const Button = () => <button>ok</button\n```\n"
        "Final:\n```typescript\nexport const Button = () => <button>ok</button>;\n```",
        {"blocks": "last"},
        1.0,
    ),
    (
        "several blocks: a ~~~ fence and an unlabeled fence are code too",
        "~~~TSX title=App.tsx\nexport const A = () => <p>a</p>;\n~~~\n```\nexport const B = () => <p>b</p>;\n```",
        {},
        1.0,
    ),
]


@pytest.mark.parametrize(("name", "template", "options", "score"), CORPUS, ids=[case[0] for case in CORPUS])
def test_corpus(name, template, options, score):
    text, expected = unmark(template)
    result = rt.compute_score("react", text, None, **options)
    assert result["score"] == score
    assert result["compiled"] == int(score == 1.0)
    assert result["no_code"] == 0 and result["checker_error"] == 0
    assert error_ranges(result) == expected, [text[start:end] for start, end in error_ranges(result)]
    assert (result["num_diagnostics"] > 0) == (score == 0.0)
    if score == 1.0:
        assert result["spans"] == []
    parse_reward_result(result, len(text))  # the project's token-reward contract


@pytest.mark.parametrize("checker", ["tsc6", "tsc7"])
def test_corpus_with_each_type_checker(checker):
    """Same scores and error ranges from TypeScript 7 (the default) and TypeScript 6 on every corpus case."""
    for name, template, options, score in CORPUS:
        text, expected = unmark(template)
        result = rt.compute_score("react", text, None, **options, checker=checker)
        assert (result["score"], result["checker_error"], error_ranges(result)) == (score, 0, expected), name


def test_both_type_checkers_give_the_same_diagnostics_on_the_corpus():
    """Code, message, line, column, UTF-16 offset and length of every diagnostic, all of them (issue 26): identical
    but for the one known wording (react_tsx_helpers.same_diagnostic)."""
    codes = checked_codes([unmark(template)[0] for _, template, _, _ in CORPUS])
    assert checker_differences(codes) == []


def test_verl_loads_it_by_path_and_forwards_reward_kwargs():
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    def config(name):
        path = str(ROOT / "bot_grpo_verl" / "rewards" / "react_tsx.py")
        function = {"path": path, "name": name, "reward_kwargs": {"region": "line", "error_value": -0.5}}
        return OmegaConf.create({"reward": {"custom_reward_function": function}})

    text, expected = unmark(fenced("export const Field = () => (\n⟦  <input value= />\n⟧);"))
    arguments = {"data_source": "react", "solution_str": text, "ground_truth": None, "extra_info": {}}
    penalised = [
        (start, end)
        for start, end, value in get_custom_reward_fn(config("compute_score"))(**arguments)["spans"]
        if value == -0.5
    ]
    assert penalised == expected
    async_function = get_custom_reward_fn(config("compute_score_async"))
    assert inspect.iscoroutinefunction(async_function)
    assert error_ranges(asyncio.run(async_function(**arguments))) == expected


def test_spans_tile_the_code_and_leave_prose_to_the_score():
    text, (error,) = unmark(fenced("export const A = () => <input value= ⟦/⟧>;"))
    code_start = text.index("```tsx\n") + len("```tsx\n")
    code_end = text.index("\n```", code_start) + 1
    result = rt.compute_score("react", text, None, clean_value=0.25, error_value=-0.75)
    assert result["spans"] == [
        (code_start, error[0], 0.25),
        (error[0], error[1], -0.75),
        (error[1], code_end, 0.25),
    ]


@pytest.mark.parametrize(
    ("region", "marked"),
    [
        ("token", "const App = () => (\n  <section>\n    <input value= ⟦/⟧>\n  </section>\n);"),
        ("line", "const App = () => (\n  <section>\n⟦    <input value= />\n⟧  </section>\n);"),
        ("element", "const App = () => (\n  <section>\n    ⟦<input value= />⟧\n  </section>\n);"),
    ],
)
def test_regions(region, marked):
    text, expected = unmark(fenced(marked))
    assert error_ranges(rt.compute_score("react", text, None, region=region)) == expected


def test_element_region_is_the_innermost_element_after_emoji():
    text, expected = unmark(
        fenced('const s = "😀😀";\nexport const A = () => <ul>\n  <li>{s}</li>\n  ⟦<li class="x">{s}</li>⟧\n</ul>;')
    )
    assert error_ranges(rt.compute_score("react", text, None, level="types", region="element")) == expected


def test_element_region_falls_back_to_the_line_outside_jsx():
    text, expected = unmark(fenced('⟦const n: number = "1";\n⟧export const A = () => <p>{n}</p>;'))
    assert error_ranges(rt.compute_score("react", text, None, level="types", region="element")) == expected


@pytest.mark.parametrize(
    "text",
    ["", "   \n\t\n", "No code here, sorry.\n```bash\nnpm run build\n```", "```tsx\n   \n```"],
    ids=["empty", "whitespace", "other-language fence only", "blank tsx block"],
)
def test_no_code(text):
    result = rt.compute_score("react", text, None)
    assert (result["score"], result["spans"], result["no_code"], result["num_blocks"]) == (0.0, [], 1, 0)


def test_oversized_code_is_not_checked():
    code = "export const A = () => <p>{'" + "x" * 200 + "'}</p>;"
    result = rt.compute_score("react", fenced(code), None, max_code_chars=100)
    assert (result["score"], result["spans"], result["oversized"], result["num_blocks"]) == (0.0, [], 1, 1)
    assert rt.compute_score("react", fenced(code), None, max_code_chars=len(code) + 1)["score"] == 1.0


def test_result_keys_are_the_same_for_every_outcome():
    texts = ["", fenced("export const A = () => <p />;"), fenced("const = ;")]
    assert len({tuple(rt.compute_score("react", text, None)) for text in texts}) == 1


def test_diagnostics_are_capped_but_counted():
    code = "\n".join(f"const v{i}: number = 'x';" for i in range(8)) + "\nexport {};"
    result = rt.compute_score("react", fenced(code), None, level="types", max_diagnostics=3)
    assert result["num_diagnostics"] == 8
    assert len(error_ranges(result)) == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"regoin": "line"}, "unknown react_tsx option"),
        ({"region": "block"}, "region='block' is not one of"),
        ({"level": "strict"}, "level='strict' is not one of"),
        ({"blocks": "first"}, "blocks='first' is not one of"),
        ({"error_value": 0.0}, r"error_value=0.0 must lie in \[-1.0, 0.0\)"),
        ({"clean_value": 1.5}, r"clean_value=1.5 must lie in \[0.0, 1.0\]"),
        ({"clean_value": float("nan")}, "clean_value=nan must be a finite"),
        ({"timeout": 0}, "timeout=0 must lie in"),
        ({"max_code_chars": 0}, "max_code_chars=0 must be a positive integer"),
    ],
)
def test_bad_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        rt.compute_score("react", "export {};", None, **options)


def test_verl_kwargs_are_ignored():
    result = rt.compute_score("react", "export {};", None, reward_router_address=None, reward_model_tokenizer=None)
    assert result["score"] == 1.0


def test_non_string_response_raises():
    with pytest.raises(TypeError, match="solution_str must be a str"):
        rt.compute_score("react", None, None)


# --- position conversions, against independent references ---------------------------------------------

SAMPLES = ["plain ascii", "日本語 text", "emoji 😀🎉 and ✨", "mixed 你好😀\nnext 𝒳 line"]


@pytest.mark.parametrize(("units", "encoding"), [("utf16_units", "utf-16-le"), ("utf8_units", "utf-8")])
@pytest.mark.parametrize("text", SAMPLES)
def test_code_units_match_the_encoding(text, units, encoding):
    width = 2 if encoding == "utf-16-le" else 1
    code_units = getattr(tsx_source, units)(text)
    for index in range(len(text) + 1):
        offset = len(text[:index].encode(encoding)) // width
        assert (code_units.index(offset), code_units.offset(index)) == (index, offset)
    assert code_units.index(10**6) == len(text)


def test_utf16_offset_inside_a_surrogate_pair_maps_to_its_character():
    assert tsx_source.utf16_units("a😀b").index(2) == 1


@pytest.mark.parametrize("text", SAMPLES)
def test_utf8_column_to_index_matches_utf8_encoding(text):
    positions = tsx_source.CodeMap(text)
    for index in range(len(text)):
        row = max(row for row, start in enumerate(positions.starts) if start <= index)
        column = len(text[positions.starts[row] : index].encode("utf-8"))
        assert tsx_source.utf8_column_to_index(positions, row + 1, column) == index


def test_line_starts_use_esbuild_line_breaks():
    assert tsx_source.line_starts("a\r\nb\rc\nd\u2028e\u2029f\x0cg") == [0, 3, 5, 7, 9, 11]


@pytest.mark.parametrize(
    ("template", "blocks"),
    [
        ("no fence at all", "all"),
        ("p\n```tsx\n⟦a\n⟧```\nq\n```ts\n⟦b\n⟧```", "all"),
        ("p\n```tsx\na\n```\nq\n```ts\n⟦b\n⟧```", "last"),
        ("````tsx\n⟦x\n```\ny\n⟧````", "all"),
        ("```tsx\r\n⟦a\r\n⟧```\r\n", "all"),
        ("```python\nx\n```\n```js\n⟦y⟧", "all"),
    ],
    ids=["unfenced", "two blocks", "last block", "longer fence", "crlf", "unclosed after other language"],
)
def test_extract_blocks(template, blocks):
    text, expected = unmark(template)
    assert rt.extract_blocks(text, blocks) == (expected or [(0, len(text))])


# --- concurrency and the worker's life cycle ------------------------------------------------------------


def test_threads_get_the_same_results_as_sequential_calls():
    cases = [(unmark(template)[0], options) for _, template, options, _ in CORPUS] * 2
    expected = [rt.compute_score("react", text, None, **options) for text, options in cases]
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda case: rt.compute_score("react", case[0], None, **case[1]), cases))
    assert results == expected


def test_async_variant_matches_and_runs_concurrently():
    cases = [(unmark(template)[0], options) for _, template, options, _ in CORPUS]

    async def score_all():
        return await asyncio.gather(*(rt.compute_score_async("react", text, None, **opts) for text, opts in cases))

    assert asyncio.run(score_all()) == [rt.compute_score("react", text, None, **opts) for text, opts in cases]


def test_type_check_batches_keep_global_augmentations_to_their_own_sample():
    augments = "declare global {\n  interface Window { myFlag: boolean }\n}\nexport {};"
    reads = "export const flag = () => window.myFlag;"
    # In one module the augmentation is visible: a shared batch would let it leak into `reads`.
    alone, together = rt.shared_checker().check([reads, augments + "\n" + reads], "types", False, 20, 30)
    assert (alone["ok"], together["ok"]) == (False, True)
    answers = rt.shared_checker().check([reads, augments, reads, reads], "types", False, 20, 30)
    assert [answer["ok"] for answer in answers] == [False, True, False, False]
    assert all("myFlag" in answers[n]["diagnostics"][0]["message"] for n in (0, 2, 3))


def test_dead_worker_is_restarted():
    text = fenced("export const A = () => <p>ok</p>;")
    assert rt.compute_score("react", text, None)["score"] == 1.0
    first = rt.shared_checker().worker.process
    first.kill()
    first.wait()
    assert rt.compute_score("react", text, None)["score"] == 1.0
    assert rt.shared_checker().worker.process.pid != first.pid


FAKE_WORKERS = {
    "crashes": "process.stdout.write('{\"ready\": true}\\n'); process.stdin.once('data', () => process.exit(3));",
    "hangs": "process.stdout.write('{\"ready\": true}\\n'); process.stdin.resume();",
    "never ready": "process.exit(1);",
}


def fake_checker(tmp_path, behaviour: str):
    script = tmp_path / "worker.mjs"
    script.write_text(FAKE_WORKERS[behaviour])
    return TsxChecker(script=script)


def test_crash_during_a_request_is_a_checker_error(tmp_path):
    checker = fake_checker(tmp_path, "crashes")
    with pytest.raises(rt.CheckerError, match=r"exited \(code 3\)"):
        checker.check(["x"], "syntax", False, 20, timeout=10)
    checker.close()


def test_hung_worker_times_out_and_is_killed(tmp_path):
    checker = fake_checker(tmp_path, "hangs")
    began = time.monotonic()
    with pytest.raises(rt.CheckerError, match="did not answer within 0.3 s"):
        checker.check(["x", "y"], "syntax", False, 20, timeout=0.3)
    assert time.monotonic() - began < 5
    assert checker.worker is None
    checker.close()


def test_worker_that_cannot_start_raises_a_setup_error(tmp_path):
    with pytest.raises(rt.CheckerSetupError, match="did not start"):
        fake_checker(tmp_path, "never ready").check(["x"], "syntax", False, 20, timeout=10)
    checker = TsxChecker()
    checker.node = None
    with pytest.raises(rt.CheckerSetupError, match="node is not on PATH"):
        checker.check(["x"], "syntax", False, 20, timeout=10)


@pytest.mark.parametrize("scorer", ["sync", "async"])
def test_timeout_scores_zero_with_a_flag(tmp_path, monkeypatch, scorer):
    hanging = fake_checker(tmp_path, "hangs")
    monkeypatch.setattr(rt, "shared_checker", lambda: hanging)
    text = fenced("export const A = () => <p />;")
    if scorer == "sync":
        result = rt.compute_score("react", text, None, timeout=0.3)
    else:
        result = asyncio.run(rt.compute_score_async("react", text, None, timeout=0.3))
    assert (result["score"], result["spans"], result["checker_error"], result["num_blocks"]) == (0.0, [], 1, 1)
    hanging.close()


def test_the_blocking_entry_point_works_inside_a_running_event_loop():
    text = fenced("export const A = () => <p>ok</p>;\nconst b: number = 'x';")

    async def inside_a_loop():
        return rt.compute_score("react", text, None, level="types")

    result = asyncio.run(inside_a_loop())
    assert result == rt.compute_score("react", text, None, level="types")
    assert (result["score"], result["num_diagnostics"]) == (0.0, 1)


def test_forked_child_starts_its_own_worker():
    text = fenced("export const A = () => <p>ok</p>;")
    assert rt.compute_score("react", text, None)["score"] == 1.0
    parent_pid = rt.shared_checker().worker.process.pid
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        ok = rt.compute_score("react", text, None)["score"] == 1.0
        ok = ok and rt.shared_checker().worker.process.pid != parent_pid
        os.write(write, b"1" if ok else b"0")
        rt.shared_checker().close()
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(child, 0)
    assert rt.compute_score("react", text, None)["score"] == 1.0
