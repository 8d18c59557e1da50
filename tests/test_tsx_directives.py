"""Comment directives cannot switch the type check off, and code that only looks like one is left alone (issue 39).

``tsx/directives.mjs`` blanks the directives (``@ts-ignore``, ``@ts-expect-error``, ``@ts-nocheck``, JSX pragmas,
``/// <reference>``) of the comments TypeScript's own parse sees, for both checkers. Generated programs put real
comments with directives in every place a comment can stand (statements, template substitutions, JSX expressions,
attributes and tags, types, nested and adjacent comments, after a regular expression) next to literals that hold
comment openers and directives as text (strings, templates with substitutions, regular expressions, JSX text and
attributes). Checked two ways:

- the blanking itself (``withoutDirectives`` run by Node): every real directive blanked, every literal as written,
  nothing else changed, the length kept;
- the type check (TypeScript 6 and 7, ``level="types"``): a program whose line after the directive holds a type
  error keeps that error, and the same program with correct code there passes. Each string literal's type spells
  its value with ``\\u`` escapes, so an edit inside the string is a type error.
"""

import json
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from react_tsx_helpers import both_checkers, fenced, rt

from bot_grpo_verl.rewards.react_options import CHECKERS
from bot_grpo_verl.rewards.tsx_setup import worker_script

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js >= 18) is not on PATH")

# Reads a JSON list of codes on stdin, writes the list of the codes with their directives blanked.
BLANK_SCRIPT = """
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
const directory = process.argv[1];
const ts = createRequire(path.join(directory, "package.json"))("typescript");
const { withoutDirectives } = await import(pathToFileURL(path.join(directory, "directives.mjs")).href);
let input = "";
for await (const chunk of process.stdin) input += chunk;
process.stdout.write(JSON.stringify(JSON.parse(input).map((code) => withoutDirectives(ts, code))));
"""


def blanked(codes: list[str]) -> list[str]:
    """``withoutDirectives`` of the worker's directory applied to each code."""
    directory = str(worker_script().parent)
    done = subprocess.run(
        ["node", "--input-type=module", "-e", BLANK_SCRIPT, directory],
        input=json.dumps(codes),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


# --- generated programs ------------------------------------------------------------------------------------


@dataclass
class Program:
    """A program built piece by piece, with what it holds: ``literals`` ([start, end) of text inside strings,
    templates, regular expressions and JSX that must stay as written), ``directives`` (offsets of the character
    that must be blanked: a directive's ``@``, a triple-slash reference's first ``/``) and ``target`` (the
    [start, end) of the line whose type error a directive would hide)."""

    code: str = ""
    literals: list[tuple[int, int]] = field(default_factory=list)
    directives: list[int] = field(default_factory=list)
    target: tuple[int, int] = (0, 0)
    names: int = 0

    def add(self, text: str) -> None:
        self.code += text

    def literal(self, text: str) -> None:
        self.literals.append((len(self.code), len(self.code) + len(text)))
        self.code += text

    def comment(self, form: str, directive: str) -> None:
        """A real comment: ``form`` with ``{d}`` replaced by ``directive``."""
        before, after = form.split("{d}")
        start = len(self.code) + len(before)
        self.directives.append(len(self.code) if directive.startswith("<reference") else start)
        self.code += before + directive + after

    def name(self) -> int:
        self.names += 1
        return self.names


# Directives TypeScript reads on the line before an error, and those it reads at the start of a file.
LINE_DIRECTIVES = ["@ts-ignore", "@ts-expect-error", "@ts-ignore: fine", "@ts-expect-error because"]
FILE_DIRECTIVES = ["@ts-nocheck", "@TS-NOCHECK", "@jsxImportSource anything", "@jsx h", *LINE_DIRECTIVES]
# Comments, alone, nested and adjacent; {d} is the directive.
FORMS = [
    "// {d}",
    "//{d}",
    "/// {d}",
    "/* {d} */",
    "/** {d} */",
    "/*/ {d} */",
    "/*/* {d} */",
    "/* x */ /* {d} */",
    "/* x\n * {d} */",
    "/* {d} */ /**/",
    "/**/// {d}",
]
REFERENCE = ("/// {d}", '<reference path="missing.ts" />')
# What the literals hold: comment openers and closers, directives, quotes, line breaks.
PIECES = ["/*", "*/", "//", "/", "*", " ", "x", "\n", "'", '"', "`", *FILE_DIRECTIVES, '///<reference path="x" />']
# Where a comment can stand just before the line of the target: (text before it, text after its line break).
CARRIERS = [
    ("", ""),
    ("export const c{n} = `a${{1 ", "}}b`; "),
    ("export const c{n} = `${{`x${{1 ", "}}`}}`; "),
    ("export const c{n} = <div>{{", "}}</div>; "),
    ("export const c{n} = <p>text{{", "}}</p>; "),
    ("export const c{n} = <div title={{'x' ", "}} />; "),
    ("export const c{n} = <div ", "/>; "),
    ("export const c{n} = [1, ", "2]; "),
    ("export type C{n} = {{ a: ", "number }}; "),
    ("export const c{n} = (x: number) => x * ", "2; "),
    ("export const c{n} = /a[/*]/g ", "; "),
]
# (wrong, right) code of the target line: the wrong one is a type error in that line.
TARGETS = [
    ("export const n{n}: number = 'one';", "export const n{n}: number = 1;"),
    ("export const x{n} = <div unknownProp={{1}} />;", 'export const x{n} = <div title="1" />;'),
]


def typed(value: str) -> str:
    """A string literal type of ``value`` spelled with escapes only (nothing in it looks like a comment)."""
    return "'" + "".join(f"\\u{ord(character):04x}" for character in value) + "'"


def clean(text: str, kind: str) -> str:
    """``text`` made legal inside a literal of ``kind``."""
    if kind in ("single", "double"):
        return text.replace("\n", " ").replace("'" if kind == "single" else '"', "")
    if kind == "template":
        return text.replace("`", "")
    if kind == "regex":  # inside a character class
        return text.replace("\n", " ").replace("-", "\\-")
    return "".join(character for character in text if character not in "{}<>")  # JSX text and attributes


def add_literal(program: Program, kind: str, texts: list[str], comment: tuple[str, str] | None) -> None:
    """One statement whose literals hold ``texts`` (``comment``: a real comment inside a template's substitution)."""
    n = program.name()
    if kind in ("single", "double"):
        value = clean(texts[0], kind)
        quote = "'" if kind == "single" else '"'
        program.add(f"export const s{n}: {typed(value)} = {quote}")
        program.literal(value)
        program.add(f"{quote};")
    elif kind == "template":
        head, inner, tail = clean(texts[0], "template"), clean(texts[1], "single"), clean(texts[2], "template")
        program.add(f"export const t{n}: {typed(head + inner + tail)} = `")
        program.literal(head)
        program.add("${")
        if comment is not None:
            program.comment(*comment)
            program.add("\n")
        program.add("'")
        program.literal(inner)
        program.add("'}")
        program.literal(tail)
        program.add("` as const;")
    elif kind == "regex":
        program.add(f"export const r{n} = /[")
        program.literal(clean(texts[0], "regex"))
        program.add("]/;")
    elif kind == "jsx text":
        program.add(f"export const j{n} = <p>")
        program.literal(clean(texts[0], "jsx"))
        program.add("{'")
        program.literal(clean(texts[1], "single"))
        program.add("'}")
        program.literal(clean(texts[2], "jsx"))
        program.add("</p>;")
    else:  # a JSX attribute
        quote = '"' if kind == "attribute" else "'"
        program.add(f"export const a{n} = <p title={quote}")
        program.literal(clean(texts[0], "jsx").replace(quote, ""))
        program.add(f"{quote} />;")


texts = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
comments = st.tuples(st.sampled_from(FORMS), st.sampled_from(LINE_DIRECTIVES + FILE_DIRECTIVES))
literals = st.tuples(
    st.sampled_from(["single", "double", "template", "regex", "jsx text", "attribute", "attribute '"]),
    st.lists(texts, min_size=3, max_size=3),
    st.none() | comments,
    st.sampled_from([" ", "\n"]),
)


@st.composite
def programs(draw, wrong: bool) -> Program:
    """A program: file directives, literals, a carrier whose comment holds a line directive, the target line (a
    type error when ``wrong``), more literals."""
    program = Program()
    for form, directive in draw(st.lists(comments | st.just(REFERENCE), max_size=2)):
        program.comment(form, directive)
        program.add("\n")
    for kind, parts, comment, separator in draw(st.lists(literals, max_size=3)):
        add_literal(program, kind, parts, comment)
        program.add(separator)
    before, after = draw(st.sampled_from(CARRIERS))
    target = draw(st.sampled_from(TARGETS))[0 if wrong else 1]
    n = program.name()
    program.add(before.format(n=n))
    program.comment(draw(st.sampled_from(FORMS)), draw(st.sampled_from(LINE_DIRECTIVES)))
    program.add("\n" + after.format(n=n))
    start = len(program.code)
    program.add(target.format(n=n))
    program.target = (start, len(program.code))
    program.add("\n")
    for kind, parts, comment, separator in draw(st.lists(literals, max_size=2)):
        add_literal(program, kind, parts, comment)
        program.add(separator)
    return program


# Eight (wrong, program) pairs: one call of each checker per example.
labelled = st.booleans().flatmap(lambda wrong: programs(wrong).map(lambda program: (wrong, program)))
batches = st.lists(labelled, min_size=8, max_size=8)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches)
def test_every_real_directive_is_blanked_and_nothing_else_changes(batch):
    codes = [program.code for _, program in batch]
    for (_, program), code, out in zip(batch, codes, blanked(codes), strict=True):
        assert len(out) == len(code)
        changed = {position for position, (a, b) in enumerate(zip(code, out, strict=True)) if a != b}
        assert changed == set(program.directives), (code, out)
        assert all(code[position] in "@/" and out[position] == " " for position in changed)
        assert all(out[start:end] == code[start:end] for start, end in program.literals)


def target_diagnostics(answer: dict, program: Program) -> list[dict]:
    start, end = program.target
    return [d for d in answer["diagnostics"] if start <= d["offset_utf16"] < end]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches)
def test_no_directive_rescues_a_type_error_and_no_correct_program_fails(batch):
    codes = [program.code for _, program in batch]
    for checker, answers in both_checkers(codes).items():
        for (wrong, program), answer in zip(batch, answers, strict=True):
            assert answer != "error", (checker, program.code)
            if wrong:
                assert target_diagnostics(answer, program), (checker, program.code, answer)
            else:
                assert answer["ok"], (checker, program.code, answer["diagnostics"])


# --- concrete cases --------------------------------------------------------------------------------------------

ERROR_LINE = "export const n: number = 'one';"
# A real comment that a pattern without strings, templates, regular expressions or JSX would miss: its
# directive hides the error on the next line.
HIDDEN_DIRECTIVES = [
    "const s = '/*';\n/*/ @ts-ignore */\n" + ERROR_LINE,
    "const s = '/*'; /*/ @ts-ignore */\n" + ERROR_LINE,
    "const t = `/*`; /*/ @ts-expect-error */\n" + ERROR_LINE,
    "const r = /[/*]/; /*/ @ts-ignore */\n" + ERROR_LINE,
    "const j = <p>/*</p>; /*/ @ts-ignore */\n" + ERROR_LINE,
]
# Code whose strings hold directives: a string edited by the blanking no longer matches its type.
STRINGS_WITH_DIRECTIVES = [
    f"export const s: {typed('// @ts-ignore')} = '// @ts-ignore';",
    f'export const s: {typed("/* @ts-nocheck */")} = "/* @ts-nocheck */";',
    f"export const t: {typed('/* @jsx h */x')} = `/* @jsx h */${{'x'}}` as const;",
]


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("code", HIDDEN_DIRECTIVES)
def test_a_directive_hidden_behind_a_literal_still_fails_the_type_check(code, checker):
    result = rt.compute_score("react", fenced(code), None, level="types", checker=checker)
    assert result["score"] == 0.0 and result["num_diagnostics"] >= 1, result


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("code", STRINGS_WITH_DIRECTIVES)
def test_strings_that_hold_directives_are_checked_as_written(code, checker):
    result = rt.compute_score("react", fenced(code), None, level="types", checker=checker)
    assert result["score"] == 1.0, result
