"""The React/TSX reward file loaded as verl loads it (``rt``), and helpers for corpora whose penalised characters
are marked with ``⟦`` and ``⟧``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load_module():
    """Load the reward file the way verl does: by path, without registering it in sys.modules."""
    from verl.utils.import_utils import load_module

    return load_module(str(ROOT / "reward_models" / "react_tsx.py"))


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
