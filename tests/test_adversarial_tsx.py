"""Adversarial inputs for bot_grpo_verl/rewards/react_tsx.py (issue #11): every bad or unusual input gets a
defined result in bounded time, or a clear error, and no sample changes another sample's result.

Tables: bad options (``ValueError`` naming the option, before any check), bad ``solution_str`` types
(``TypeError``), and degenerate responses (the exact result, error ranges marked with ``⟦...⟧``). Then
the worker's isolation of samples that crash or hang TypeScript, its restart, time bounds checked as
ratios (degenerate vs normal input of the same size), and a fuzz test of the position mapping.
"""

import concurrent.futures
import logging
import math
import re
import shutil
import time

import numpy as np
import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from react_tsx_helpers import checked_codes, checker_differences, error_ranges, fenced, rt, unmark

from bot_grpo_verl.reward.token_rewards import parse_reward_result
from bot_grpo_verl.rewards.react_options import CHECKERS
from bot_grpo_verl.rewards.tsx_checker import TsxChecker

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js >= 18) is not on PATH")

INF, NAN = math.inf, math.nan

# --- bad options: ValueError at configuration, naming the option and its value -------------------------

BAD_OPTIONS = [
    {"timeout": INF},
    {"timeout": NAN},
    {"timeout": -1.0},
    {"timeout": 0.0},
    {"timeout": 1e6},
    {"timeout": True},
    {"timeout": "30"},
    {"timeout": None},
    {"level": True},
    {"level": "SYNTAX"},
    {"level": None},
    {"level": ["syntax"]},
    {"checker": "tsc5"},
    {"checker": None},
    {"region": "block"},
    {"region": 0},
    {"blocks": "first"},
    {"blocks": None},
    {"clean_value": True},
    {"clean_value": "0.5"},
    {"clean_value": INF},
    {"clean_value": NAN},
    {"clean_value": -0.1},
    {"clean_value": 1.5},
    {"error_value": 0.0},
    {"error_value": -1.5},
    {"error_value": False},
    {"error_value": NAN},
    {"error_value": -INF},
    {"max_code_chars": 0},
    {"max_code_chars": -5},
    {"max_code_chars": 1.5},
    {"max_code_chars": 1e5},
    {"max_code_chars": True},
    {"max_code_chars": "100"},
    {"max_code_chars": INF},
    {"max_line_chars": 0},
    {"max_line_chars": 2.0},
    {"max_diagnostics": 0},
    {"max_diagnostics": True},
    {"max_diagnostics": None},
]

UNKNOWN_OPTIONS = [{"regoin": "line"}, {"Level": "types"}, {"max_chars": 5}]


@pytest.mark.parametrize("options", BAD_OPTIONS, ids=lambda options: repr(options)[1:-1])
def test_bad_option_value_raises_naming_it(options):
    ((name, value),) = options.items()
    message = re.escape(f"{name}={value!r}")
    with pytest.raises(ValueError, match=message):
        rt.parse_options(options)
    with pytest.raises(ValueError, match=message):
        rt.compute_score("react", "export {};", None, **options)


@pytest.mark.parametrize("options", UNKNOWN_OPTIONS, ids=lambda options: next(iter(options)))
def test_unknown_option_raises_listing_the_allowed_ones(options):
    with pytest.raises(ValueError, match=rf"unknown react_tsx option.*{next(iter(options))}.*max_line_chars"):
        rt.parse_options(options)


def test_numbers_of_other_types_are_accepted_as_plain_python_numbers():
    options = rt.parse_options({"timeout": 5, "clean_value": np.float32(0.25), "max_diagnostics": np.int64(3)})
    assert (options.timeout, options.clean_value, options.max_diagnostics) == (5.0, 0.25, 3)
    assert [type(value) for value in (options.timeout, options.clean_value, options.max_diagnostics)] == [
        float,
        float,
        int,
    ]
    code = "\n".join(f"const v{i}: number = 'x';" for i in range(5)) + "\nexport {};"
    result = rt.compute_score("react", code, None, level="types", max_diagnostics=np.int64(3))
    assert (result["num_diagnostics"], len(error_ranges(result))) == (5, 3)


@pytest.mark.parametrize("response", [None, b"export {};", 42, ["export {};"]], ids=type)
def test_non_string_response_raises_a_type_error(response):
    with pytest.raises(TypeError, match="solution_str must be a str"):
        rt.compute_score("react", response, None)


# --- degenerate responses: a defined result, spans mapped exactly -----------------------------------------


def nested_jsx(depth: int, inner: str) -> str:
    return "export const A = () => (\n" + "<div>\n" * depth + inner + "\n" + "</div>\n" * depth + ");\n"


LONG = {"max_code_chars": 10**6, "max_line_chars": 10**6}
NO_CODE = {"no_code": 1, "num_blocks": 0}
OVERSIZED = {"oversized": 1}
CHECKER_ERROR = {"checker_error": 1}

# (id, marked response, options, expected score, expected flags besides the score)
DEGENERATE = [
    ("empty", "", {}, 0.0, NO_CODE),
    ("whitespace incl. U+2028, NBSP", " \u2028\u00a0\n\t\r\n", {}, 0.0, NO_CODE),
    ("NUL only", "⟦\x00⟧\x00", {}, 0.0, {}),
    ("NUL in a string", "export const a = '\x00';", {}, 1.0, {}),
    ("NUL between statements", "export const a = 1;⟦\x00⟧", {}, 0.0, {}),
    ("lone surrogate in a string", "export const a = '\ud800';", {}, 1.0, {}),
    ("lone surrogate in code", "export const a = 1 ⟦\udc80⟧;", {}, 0.0, {}),
    (
        "lone surrogate before a type error",
        "const s = '\udfff'; export const ⟦n⟧: number = s;",
        {"level": "types"},
        0.0,
        {},
    ),
    ("CRLF, valid", "export const a = 1;\r\nexport const B = () => <p>x</p>;\r\n", {}, 1.0, {}),
    (
        "CRLF, line region",
        "export const a = 1;\r\n⟦const b = <div>{)}</div>;\r\n⟧export const c = 2;\r\n",
        {"region": "line"},
        0.0,
        {},
    ),
    (
        "lone CR line breaks, line region",
        "const a = 1;\r⟦const b = <p>{)}</p>;\r⟧const c = 2;",
        {"region": "line"},
        0.0,
        {},
    ),
    ("U+2028 in a string", "export const a = 'x\u2028y';", {}, 1.0, {}),
    (
        "U+2028 as line break, line region",
        "export const a = 1;\u2028⟦const b = <p>{)}</p>;\u2028⟧export const c = 2;",
        {"region": "line"},
        0.0,
        {},
    ),
    ("RTL text and RLO in a string", "export const a = 'שלום \u202e abc مرحبا';", {}, 1.0, {}),
    ("RTL identifier", "export const שלום = 1;", {}, 1.0, {}),
    ("RLO control in code", "export const a = 1;⟦\u202e⟧", {}, 0.0, {}),
    ("combining mark inside an identifier", "export const e\u0301\u0301 = 1;", {}, 1.0, {}),
    ("combining mark starting an identifier", "export const ⟦\u0301⟧e = 1;", {}, 0.0, {}),
    ("ZWJ emoji in JSX text", "export const A = () => <p>👨\u200d👩\u200d👧 family</p>;", {"level": "types"}, 1.0, {}),
    ("ZWJ emoji before a syntax error", 'export const A = () => <p title="👨\u200d👩\u200d👧">{⟦)⟧}</p>;', {}, 0.0, {}),
    ("BOM, vertical tab, form feed", "\ufeffexport const a = 1;\x0b\x0c", {}, 1.0, {}),
    ("unterminated string", "⟦export const a = 'abc⟧", {}, 0.0, {}),
    ("unterminated template literal", "⟦export const a = `abc⟧", {}, 0.0, {}),
    ("unterminated template substitution", "⟦export const a = `abc ${x⟧", {}, 0.0, {}),
    ("unterminated block comment", "⟦export const a = 1; /* abc⟧", {}, 0.0, {}),
    ("unterminated regex", "⟦export const a = /abc⟧", {}, 0.0, {}),
    ("unterminated JSX", "⟦export const A = () => <div>⟧", {}, 0.0, {}),
    ("line of max_line_chars (2,000)", "export const s = '" + "x" * 1980 + "';", {}, 1.0, {}),
    ("line past max_line_chars", "export const s = '" + "x" * 1981 + "';", {}, 0.0, {**OVERSIZED, "num_blocks": 1}),
    ("100 kB single line, limit raised", "export const s = '" + "x" * 100_000 + "';", LONG, 1.0, {}),
    ("code past max_code_chars", "export const s = 1;\n" * 5001, {}, 0.0, {**OVERSIZED, "num_blocks": 1}),
    (
        # One error on each of 500 lines; the first max_diagnostics (20) get regions.
        "500 errors, 500 lines",
        "".join(f"export const x{i} = --{'⟦1⟧' if i < 20 else '1'};\n" for i in range(500)),
        {},
        0.0,
        {"num_diagnostics": 500},
    ),
    ("10k nested JSX, element region", nested_jsx(10_000, "x"), {**LONG, "region": "element"}, 1.0, {}),
    ("200 nested JSX, element region", nested_jsx(200, "ok"), {"region": "element", "level": "types"}, 1.0, {}),
    (
        "error inside 200 nested JSX: the innermost element",
        "export const A = () => (\n" + "<div>\n" * 199 + "⟦<div>\n{)}\n</div>⟧\n" + "</div>\n" * 199 + ");\n",
        {"region": "element"},
        0.0,
        {},
    ),
    (
        # TypeScript cannot parse this nesting for element ranges: the region falls back to the line.
        "error inside 10k nested JSX: the line",
        "export const A = () => (\n" + "<div>\n" * 10_000 + "⟦{)}\n⟧" + "</div>\n" * 10_000 + ");\n",
        {**LONG, "region": "element"},
        0.0,
        {},
    ),
    (
        "3k nested arrays at the types level",
        "export const x = " + "[\n" * 3000 + "]\n" * 3000 + ";",
        {"level": "types"},
        0.0,
        CHECKER_ERROR,
    ),
    ("3k nested JSX at the types level", nested_jsx(3000, "x"), {"level": "types", **LONG}, 0.0, CHECKER_ERROR),
    ("20k nested blocks", "export function f() {\n" + "{\n" * 20_000 + "}\n" * 20_000 + "}", LONG, 1.0, {}),
    (
        "2k nested arrow functions",
        "export const f = () => {\n" + "".join(f"const g{i} = () => {{\n" for i in range(2000)) + "};\n" * 2001,
        LONG,
        1.0,
        {},
    ),
    ("a fence of 10k backticks, unclosed", "`" * 10_000 + "\nexport {};", {}, 1.0, {"num_blocks": 1}),
    ("a fence of 10k backticks, nothing after it", "`" * 10_000, {}, 0.0, NO_CODE),
    ("1,000 empty fences", "```tsx\n```\n" * 1000, {}, 0.0, NO_CODE),
    ("unclosed fence at the end", "Sure:\n```tsx", {}, 0.0, NO_CODE),
]


@pytest.mark.parametrize(
    ("name", "template", "options", "score", "flags"), DEGENERATE, ids=[case[0] for case in DEGENERATE]
)
def test_degenerate_response_gets_a_defined_result(name, template, options, score, flags):
    text, expected = unmark(template)
    result = rt.compute_score("react", text, None, **options)
    expected_flags = {"checker_error": 0, "oversized": 0, "no_code": 0, **flags}
    assert result["score"] == score
    assert {key: result[key] for key in expected_flags} == expected_flags
    assert error_ranges(result) == expected, [text[start:end] for start, end in error_ranges(result)]
    parse_reward_result(result, len(text))


# --- isolation: a sample that crashes or hangs TypeScript fails alone -------------------------------------

VALID = [fenced(f"export const Item{i} = ({{ n }}: {{ n: number }}) => <li>{{n + {i}}}</li>;") for i in range(6)]
TYPE_ERROR = fenced("export const n: number = 'one';")
CRASHES = fenced("export const x = " + "[" * 950 + "]" * 950 + ";")  # ~2 kB that overflow TypeScript's stack
# ~15 s of TypeScript's checker on a 2-core machine (300 tail-recursive type instantiations of up to 1,000 steps
# each): far past a 3 s budget on any machine, and no stack overflow (deep literals are fast *or* overflow).
HANGS = fenced(
    "type Count<N extends number, A extends 0[] = []> = A['length'] extends N ? A : Count<N, [...A, 0]>;\n"
    + "".join(f"export const n{n}: Count<{n}>['length'] = {n};\n" for n in range(700, 1000))
)


def score_together(cases: list[tuple[str, dict]]) -> list[dict]:
    """compute_score of every (response, options) at once, one thread each: their type checks arrive
    together and share the worker's batches."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        return list(pool.map(lambda case: rt.compute_score("react", case[0], None, **case[1]), cases))


@pytest.mark.parametrize(
    ("culprit", "options"),
    # timeout 9: its type check's 3 s budget and 6 s for the checks queued before it in the worker's thread (the
    # answer's wait includes them); at timeout 3 a loaded 2-core machine once took longer and killed the worker.
    [(CRASHES, {"level": "types"}), (HANGS, {"level": "types", "timeout": 9})],
    ids=["crashes TypeScript", "hangs TypeScript past timeout/3"],
)
def test_a_sample_that_breaks_typescript_fails_alone(culprit, options):
    assert rt.compute_score("react", VALID[0], None, level="types")["score"] == 1.0  # a started worker
    worker = rt.shared_checker().worker.process
    types = {"level": "types", "timeout": 60}
    results = score_together(
        [(text, types) for text in VALID[:3]]
        + [(culprit, options), (TYPE_ERROR, types)]
        + [(text, types) for text in VALID[3:]]
    )
    assert [result["score"] for result in results] == [1.0] * 3 + [0.0, 0.0] + [1.0] * 3
    assert [result["checker_error"] for result in results] == [0] * 3 + [1, 0] + [0] * 3
    assert results[4]["num_diagnostics"] == 1
    assert rt.shared_checker().worker.process is worker  # the worker process survived
    assert rt.compute_score("react", VALID[1], None, level="types")["score"] == 1.0  # and checks on


# --- TypeScript 7 (checker="tsc7", the default): its Go process is bounded in time and memory ------------

# Nested 300 deep (under the worker's MAX_NESTING of 500): ~100 s of TypeScript 7's checker, 2 s of TypeScript 6's.
SLOW_FOR_TSC7 = fenced("export const x = " + "[" * 300 + "]" * 300 + ";")
HANGS_CODE = checked_codes([HANGS])[0]


def go_processes(worker) -> list[psutil.Process]:
    """The live TypeScript 7 processes under a worker process (not zombies: a killed one must be reaped)."""
    children = psutil.Process(worker.pid).children(recursive=True)  # esbuild's service is one too
    return [child for child in children if child.name() == "tsc" and child.status() != psutil.STATUS_ZOMBIE]


def test_tsc7_is_killed_on_its_time_limit_and_the_next_check_is_unaffected():
    assert rt.compute_score("react", VALID[0], None, level="types")["score"] == 1.0
    worker = rt.shared_checker().worker.process
    (before,) = go_processes(worker)
    began = time.monotonic()
    # timeout 9: 3 s for the type check, the rest for a loaded machine (the Python side kills the worker at 9 s).
    result = rt.compute_score("react", SLOW_FOR_TSC7, None, level="types", timeout=9)
    assert result["checker_error"] == 1 and time.monotonic() - began < 9
    _, alive = psutil.wait_procs([before], timeout=5)  # killed, and reaped by the worker (later on a loaded machine)
    assert alive == [] and go_processes(worker) == []  # none started yet
    assert rt.compute_score("react", VALID[1], None, level="types")["score"] == 1.0
    assert rt.shared_checker().worker.process is worker  # the worker process lived on
    (after,) = go_processes(worker)
    assert after.pid != before.pid


def test_tsc7_past_its_memory_bound_fails_that_sample_alone(monkeypatch, caplog):
    """HANGS_CODE grows TypeScript 7 past 400 MB within seconds; with a 200 MB bound it fails long before its
    time limit, and the worker checks on with a new Go process."""
    monkeypatch.setenv("BOT_GRPO_VERL_TSC7_MEMORY_MB", "200")
    checker = TsxChecker()
    try:
        assert checker.check(["export const a = 1;"], "types", False, 20, 60)[0]["ok"]
        worker = checker.worker.process
        began = time.monotonic()
        with caplog.at_level(logging.WARNING), pytest.raises(rt.CheckerError, match="memory bound"):
            checker.check([HANGS_CODE], "types", False, 20, 90)
        assert time.monotonic() - began < 20
        assert checker.check(["export const b: number = 'b';"], "types", False, 20, 60)[0]["total"] == 1
        assert checker.worker.process is worker
    finally:
        checker.close()


# Specifiers a sample might use to read outside the closed world, each typed `any` (so the check passes): files
# on disk, the typings' own dependency, the checker's packages, the virtual project's files, other samples.
OUTSIDE = [
    "/etc/passwd",
    "/etc/hostname",
    "csstype",
    "typescript",
    "typescript-native",
    "esbuild",
    "./tsconfig.json",
    "../package.json",
    "./__ambient__",
    "./0",
    "./__checked_0__",
    "../tsx/worker.mjs",
]


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_sample_resolves_react_and_nothing_else(checker):
    for specifier in OUTSIDE:
        code = f"import * as m from '{specifier}';\nexport const n: number = m.anything;"
        result = rt.compute_score("react", fenced(code), None, level="types", checker=checker)
        assert result["score"] == 1.0, (specifier, result)
    react = "import { useState } from 'react';\nexport const n: number = useState;"
    assert rt.compute_score("react", fenced(react), None, level="types", checker=checker)["score"] == 0.0
    # Another sample of the same batch: its module cannot be named.
    exporter = "export const secret: string = 'x';"
    importers = [f"import {{ secret }} from '{specifier}';\nexport const n: number = secret;" for specifier in OUTSIDE]
    answers = rt.shared_checker().check([exporter, *importers], "types", False, 20, 60, checker=checker)
    assert all(answer["ok"] for answer in answers)


@pytest.mark.slow  # both type checkers over every adversarial input: ~10 s
def test_both_type_checkers_give_the_same_diagnostics_on_bad_input():
    """Every degenerate response, directive exploit, augmentation and isolation sample above: the same answers
    from TypeScript 7 and 6 (diagnostics up to react_tsx_helpers.same_diagnostic's wording, or an error from both:
    the nestings that overflow TypeScript 6's stack are refused by TypeScript 7 unchecked)."""
    responses = [unmark(template)[0] for _, template, _, _, _ in DEGENERATE] + VALID + [TYPE_ERROR, CRASHES]
    codes = checked_codes(responses)
    codes += DIRECTIVE_EXPLOITS + GLOBAL_AUGMENTATIONS + NEIGHBOURS
    assert checker_differences(codes) == []


def test_a_worker_that_dies_is_restarted_and_logged(caplog):
    text = fenced("export const A = () => <p>ok</p>;")
    assert rt.compute_score("react", text, None)["score"] == 1.0
    worker = rt.shared_checker().worker
    with caplog.at_level(logging.WARNING):
        worker.process.kill()
        worker.process.wait()
        deadline = time.monotonic() + 10
        while "the TSX worker exited" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
    assert re.search(r"the TSX worker exited \(code -9\).*the next check starts a new worker", caplog.text)
    assert rt.compute_score("react", text, None)["score"] == 1.0
    assert rt.shared_checker().worker is not worker


def test_protocol_errors_fail_the_request_with_a_clear_message():
    checker = rt.shared_checker()
    with pytest.raises(rt.CheckerError, match='unknown level "strict"'):
        checker.check(["export {};"], "strict", False, 20, 30)
    with pytest.raises(rt.CheckerError, match="max_diagnostics must be a positive integer, got 0"):
        checker.check(["export {};"], "syntax", False, 0, 30)
    assert checker.check(["export {};"], "syntax", False, 20, 30)[0]["ok"]


# --- time bounds: degenerate vs normal input of the same size, as ratios ------------------------------------


def fastest(function, repeats: int = 5) -> float:
    """Seconds of the fastest of ``repeats`` calls (the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return min(times)


def test_error_regions_are_linear_in_the_code():
    """Thousands of diagnostics on one long non-ASCII line inside thousands of nested elements cost
    about what three diagnostics cost on the same code in short lines (before: one pass over the line
    or the elements per diagnostic, hundreds of times slower). Unloaded the ratio is 1.2-1.7 (2-core EPYC);
    the bound leaves room for a loaded CI machine (9x seen once under a parallel benchmark)."""
    size, count = 120_000, 1000
    long_line = ("é" * 59 + "x") * (size // 60)
    short_lines = ("é" * 59 + "\n") * (size // 60)
    esbuild = [{"line": 1, "column": 2 * k * (size // count), "length": 1} for k in range(count)]
    typescript = [{"offset_utf16": k * (size // count) + 1, "length": 1} for k in range(count)]
    nested = [[k, size - k] for k in range(count)]
    degenerate = {"diagnostics": esbuild + typescript, "elements": nested}
    normal = {"diagnostics": esbuild[:2] + typescript[:1], "elements": nested[:3]}
    for region in ("token", "element"):
        slow = fastest(lambda region=region: rt.error_regions(long_line, degenerate, region))
        quick = fastest(lambda region=region: rt.error_regions(short_lines, normal, region))
        assert slow < 30 * quick, (region, slow, quick)


@pytest.mark.parametrize(
    ("degenerate", "normal"),
    [
        (
            "export function f() {\n" + "{\n" * 5000 + "}\n" * 5000 + "}",
            "export function f() {\n" + "{\n}\n" * 5000 + "}",
        ),
        (
            "export const f = () => {\n" + "".join(f"const g{i} = () => {{\n" for i in range(1000)) + "};\n" * 1001,
            "export const f = () => {\n" + "".join(f"const g{i} = () => {{\n}};\n" for i in range(1000)) + "};\n",
        ),
    ],
    ids=["5k nested blocks vs 5k blocks in a row", "1k nested functions vs 1k functions in a row"],
)
def test_checking_nested_code_costs_about_what_flat_code_costs(degenerate, normal):
    """Before: esbuild printed nested code indented (output quadratic in the depth) and renamed its
    symbols with a superlinear renamer, 85-120x the flat code's time at this size."""
    assert len(degenerate) == len(normal)
    assert (
        rt.compute_score("react", degenerate, None)["score"] == rt.compute_score("react", normal, None)["score"] == 1.0
    )
    slow = fastest(lambda: rt.compute_score("react", degenerate, None))
    quick = fastest(lambda: rt.compute_score("react", normal, None))
    assert slow < 30 * quick, (slow, quick)


@pytest.mark.parametrize(
    "degenerate",
    ["````tsx\n" + "```\n" * 5000, " " * 20_000 + "x", "\t " * 10_000 + "`", "~" * 20_000, "``` " * 5000],
    ids=["5k shorter closing fences", "20k spaces", "20k blanks, a backtick", "20k tildes", "5k fences on one line"],
)
def test_code_extraction_is_linear(degenerate):
    """Backtracking regexes would make some of these quadratic; prose of the same size is the baseline."""
    normal = ("Some prose about the component.\n" * 1000)[: len(degenerate)]
    slow = fastest(lambda: rt.extract_blocks(degenerate))
    quick = fastest(lambda: rt.extract_blocks(normal))
    assert slow < 20 * quick, (slow, quick)


# --- fuzz: unicode before an error never shifts its span ----------------------------------------------------

SPECIAL = "\u0301\u0336\u200d\u200e\u200f\u202e\u2028\u2029\ufeff\x00\ud800\udfff👨\u200d👩\u200d👧שלוםمرحبا日本語😀"
SAFE_TEXT = st.text(
    st.one_of(st.characters(exclude_characters='"\\\n\r'), st.sampled_from(SPECIAL)),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=SAFE_TEXT, crlf=st.booleans(), level=st.sampled_from(["syntax", "types"]))
@example(prefix="\ud83d\ude00 \udfff\ud800", crlf=False, level="syntax")  # a pair JavaScript would join
def test_random_unicode_before_an_error_keeps_its_span_exact(prefix, crlf, level):
    newline = "\r\n" if crlf else "\n"
    # The error on the random text's line: esbuild's columns count UTF-8 bytes from the line's start.
    if level == "syntax":
        template = f'export const s = "{prefix}"; export const b = <p>{{⟦)⟧}}</p>;{newline}export {{}};'
    else:
        template = f'export const s = "{prefix}"; export const ⟦n⟧: number = s;{newline}export {{}};'
    text, expected = unmark(fenced(template))
    result = rt.compute_score("react", text, None, level=level)
    assert (result["score"], result["checker_error"]) == (0.0, 0)
    assert error_ranges(result) == expected
    parse_reward_result(result, len(text))


# --- the type check cannot be switched off, widened or reached by a response (issue 29) -----------------------

TYPE_ERRORS = "export const n: number = 'one';\nexport const App = () => <div>{n}</div>;"
# Every comment directive TypeScript reads that would hide, skip or retype that error, in its spellings.
DIRECTIVE_EXPLOITS = [
    "// @ts-nocheck\n" + TYPE_ERRORS,
    "//@ts-nocheck\n" + TYPE_ERRORS,
    "// @TS-NOCHECK\n" + TYPE_ERRORS,
    "/// @ts-nocheck\n" + TYPE_ERRORS,
    "export const n: number = 'one'; // @ts-ignore\nexport const App = () => <div>{n}</div>;",
    "// @ts-ignore\nexport const n: number = 'one';\nexport const App = () => <div>{n}</div>;",
    "/* @ts-ignore */\nexport const n: number = 'one';\nexport const App = () => <div>{n}</div>;",
    "/** @ts-ignore */\nexport const n: number = 'one';\nexport const App = () => <div>{n}</div>;",
    "// @ts-expect-error\nexport const n: number = 'one';\nexport const App = () => <div>{n}</div>;",
    "//   @ts-expect-error: fine\nexport const n: number = 'one';\nexport const App = () => <div>{n}</div>;",
    "/** @jsxImportSource anything */\nexport const App = () => <div unknownProp={1} />;",
    '/// <reference path="/etc/hostname" />\n' + TYPE_ERRORS,
]


@pytest.mark.parametrize("code", DIRECTIVE_EXPLOITS)
def test_no_comment_directive_turns_a_type_error_into_a_pass(code):
    result = rt.compute_score("react", fenced(code), None, level="types")
    assert result["score"] == 0.0 and result["num_diagnostics"] >= 1, result


def test_a_directive_keeps_every_offset_so_spans_stay_exact():
    code = "// @ts-ignore\nexport const ⟦n⟧: number = 'one';"
    text, marked = unmark(fenced(code))
    result = rt.compute_score("react", text, None, level="types")
    assert error_ranges(result) == marked


IMPORTS_FROM_DISK = [
    (
        "absolute .ts",
        "import {{ value }} from '{path}';\nexport const n: number = value;",
        "export const value = 'text';\n",
    ),
    ("absolute .json", "import data from '{path}';\nexport const n: number = data.value;", '{{"value": "text"}}\n'),
    (
        "d.ts declarations",
        "import {{ value }} from '{path}';\nexport const n: number = value;",
        "export declare const value: string;\n",
    ),
]


@pytest.mark.parametrize(
    ("name", "importer", "content"), IMPORTS_FROM_DISK, ids=[case[0] for case in IMPORTS_FROM_DISK]
)
def test_imports_see_no_file_on_disk(tmp_path, name, importer, content):
    suffix = {"absolute .ts": ".ts", "absolute .json": ".json", "d.ts declarations": ".d.ts"}[name]
    target = tmp_path / f"probe{suffix}"
    specifier = str(target.with_suffix("")) if suffix != ".json" else str(target)
    code = importer.format(path=specifier)
    absent = rt.compute_score("react", fenced(code), None, level="types")
    target.write_text(content.format())
    present = rt.compute_score("react", fenced(code), None, level="types")
    assert present == absent and absent["score"] == 1.0  # typed `any` either way, as documented


def test_the_checkers_own_packages_and_internal_files_are_not_importable():
    for specifier in ("typescript", "esbuild", "./__checked_1__", "./__ambient__", "./package.json"):
        code = f"import * as m from '{specifier}';\nexport const n: number = m.anything;"
        assert rt.compute_score("react", fenced(code), None, level="types")["score"] == 1.0, specifier
    uses_typescript = "import ts from 'typescript';\nexport const k: string = ts.SyntaxKind.Identifier;"
    assert rt.compute_score("react", fenced(uses_typescript), None, level="types")["score"] == 1.0  # any, not a number


GLOBAL_AUGMENTATIONS = [
    "declare global {\n  interface Array<T> { flag: number }\n}\nexport const x = [1].flag;",
    "declare /* hidden */ global {\n  interface Array<T> { flag: number }\n}\nexport const x = [1].flag;",
    "declare\nglobal {\n  interface Array<T> { flag: number }\n}\nexport const x = [1].flag;",
    "declare // comment\n  global { var leaked: number }\nexport const y = leaked;",
    "declare module 'react' {\n  interface HTMLAttributes<T> { flag?: number }\n}\nexport {};",
    "declare /**/ module 'react' {\n  interface HTMLAttributes<T> { flag?: number }\n}\nexport {};",
]
# Samples whose result an augmentation above would change if they shared its program.
NEIGHBOURS = [
    "export const y = [1].flag;",
    "export const z: number = leaked;",
    "export const App = () => <div flag={1} />;",
]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(GLOBAL_AUGMENTATIONS + NEIGHBOURS + [TYPE_ERRORS, "export const ok = 1;"]),
        min_size=2,
        max_size=8,
    )
)
def test_random_batches_give_every_sample_its_solo_result(codes):
    solo = [rt.compute_score("react", fenced(code), None, level="types") for code in codes]
    together = score_together([(fenced(code), {"level": "types", "timeout": 60}) for code in codes])
    assert together == solo


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_setup_tsx_into_a_file_prints_one_problem_line(tmp_path, capsys, kind):
    from bot_grpo_verl.__main__ import main

    (tmp_path / "file").write_text("")
    target = tmp_path / "file" if kind == "a file" else tmp_path / "file" / "sub"
    assert main(["setup", "tsx", "--dir", str(target)]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(f"PROBLEM: cannot install into {target}: ")
    assert error[0].endswith("give a writable folder with --dir")
