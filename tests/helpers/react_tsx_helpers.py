"""The React/TSX reward file loaded as verl loads it (``rt``), and helpers for corpora whose penalised characters
are marked with ``⟦`` and ``⟧``."""

import re
from pathlib import Path

from bot_grpo_verl.rewards.react_options import CHECKERS

ROOT = Path(__file__).resolve().parents[2]


def _load_module():
    """Load the reward file the way verl does: by path, without registering it in sys.modules."""
    from verl.utils.import_utils import load_module

    return load_module(str(ROOT / "bot_grpo_verl" / "rewards" / "react_tsx.py"))


rt = _load_module()
OPEN, CLOSE = "⟦", "⟧"


def unmark(template: str) -> tuple[str, list[tuple[int, int]]]:
    """Remove the ``⟦...⟧`` markers; return the text and the marked ``[start, end)`` ranges in it."""
    text, ranges, start = "", [], None
    for character in template:
        if character == OPEN:
            start = len(text)
        elif character == CLOSE:
            ranges.append((start, len(text)))
        else:
            text += character
    return text, ranges


def error_ranges(result: dict) -> list[tuple[int, int]]:
    return [(start, end) for start, end, value in result["spans"] if value < 0]


def fenced(code: str, language: str = "tsx") -> str:
    return f"Here is the component:\n```{language}\n{code}\n```\nIt renders a list."


def both_checkers(codes: list[str], timeout: float = 600.0) -> dict[str, list]:
    """Each type checker's answer (``ok``, ``total``, ``diagnostics``: all of them) to every code at the types level,
    or ``"error"`` where it cannot check that code (it answers with an error)."""
    import concurrent.futures

    client = rt.shared_checker()
    found = {}
    for checker in CHECKERS:
        _, futures = client.send(client.requests(codes, "types", False, 100_000, timeout, checker=checker))
        concurrent.futures.wait(futures, timeout)
        found[checker] = [
            "error"
            if future.exception() is not None
            else {key: future.result()[key] for key in ("ok", "total", "diagnostics")}
            for future in futures
        ]
    return found


# The one wording TypeScript 7 changed on the test corpora: the type of a JSX element's attributes lists
# `children` after the attributes (source order), TypeScript 6 first ("Type '{ children: string; class: string; }'
# is not assignable ..." against "Type '{ class: string; children: string; }' ...").
_CHILDREN_MEMBER = re.compile(r"\bchildren: [^;']*; ")


def same_diagnostic(six: dict, seven: dict) -> bool:
    """Whether the two checkers' diagnostics agree: every field, and the message up to the known wording."""
    if {**six, "message": ""} != {**seven, "message": ""}:
        return False
    return six["message"] == seven["message"] or (
        _CHILDREN_MEMBER.sub("", six["message"]) == _CHILDREN_MEMBER.sub("", seven["message"])
    )


def checker_differences(codes: list[str]) -> list[tuple[str, object, object]]:
    """(code, TypeScript 6's answer, TypeScript 7's answer) for every code whose answers differ beyond the known
    wording (:func:`same_diagnostic`)."""
    found = both_checkers(codes)
    differences = []
    for code, six, seven in zip(codes, found["tsc6"], found["tsc7"], strict=True):
        if six == seven:
            continue
        comparable = "error" not in (six, seven) and six["total"] == seven["total"]
        if not comparable or not all(map(same_diagnostic, six["diagnostics"], seven["diagnostics"])):
            differences.append((code, six, seven))
    return differences


def checked_codes(responses: list[str]) -> list[str]:
    """The code blocks the reward checks in ``responses`` (as it sends them: lone surrogates replaced)."""
    return [rt.code_for_worker(text[start:end]) for text in responses for start, end in rt.extract_blocks(text)]
