"""The benchmarks' current verdicts: one row per comparison, each read from the committed file that holds it.

README's results table and docs/benchmarks.md's are generated from :data:`VERDICTS` by ``python -m docs.tables``
(kind ``verdicts``), and ``tests/test_docs.py`` fails when a table no longer matches its files. A row names its
file, the comparison in it, and the metric; nothing in a row is a number typed by hand.

Two kinds of file:

- a protocol report's ``summary.json`` (``benchmarks/protocol_report.py``): ``comparisons`` holds ``cell - versus``
  per metric (``pass@1``: test Pass@1, the task's success), with a 95% percentile bootstrap interval resampling
  seeds and problems, paired by problem;
- a pooled React evaluation (``benchmarks/react_eval.py --pool``): ``A - B`` per rate over seeds, a 95% interval
  of a bootstrap resampling seeds and, within them, prompts, paired by prompt.

A row with ``negate`` reports ``versus - cell`` from a file that holds ``cell - versus`` (the interval mirrored,
"better" and "worse" swapped), so that BoT-GRPO is always the first term.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = "benchmarks/results"
PROTOCOL_INTERVAL = "bootstrap over seeds and problems, paired"
POOLED_INTERVAL = "bootstrap over seeds and prompts, paired"
TUNED = "tuned on validation"
MIRRORED_VERDICTS = {"better": "worse", "worse": "better"}


@dataclass(frozen=True)
class Verdict:
    """One comparison of the results table.

    Attributes:
        task: the task (``arith``, ``arith_hard``, ``react``, ``agent``).
        comparison: what is compared, first term minus second, and on what.
        source: the committed JSON file, relative to the repository root.
        metric: the metric's key (``pass@1`` in a protocol report; a rate of a pooled React evaluation).
        cell: in a protocol report, the comparison's ``cell``; None for a pooled evaluation.
        versus: in a protocol report, the comparison's ``versus``.
        negate: report ``versus - cell`` (see the module docstring).
        learning_rates: how the learning rates were set.
        report: the page to read it in, relative to the repository root.
    """

    task: str
    comparison: str
    source: str
    metric: str
    cell: str | None = None
    versus: str | None = None
    negate: bool = False
    learning_rates: str = TUNED
    report: str = ""

    def difference(self) -> dict:
        """``estimate``, ``low``, ``high`` and ``verdict`` of this comparison, read from :attr:`source`."""
        data = json.loads((REPO / self.source).read_text())
        if self.cell is None:
            found = data[self.metric]
        else:
            matches = [c for c in data["comparisons"] if (c["cell"], c["versus"]) == (self.cell, self.versus)]
            if len(matches) != 1:
                raise ValueError(f"{self.source}: no single comparison {self.cell} - {self.versus}")
            found = matches[0][self.metric]
        if not self.negate:
            return {key: found[key] for key in ("estimate", "low", "high", "verdict")}
        verdict = MIRRORED_VERDICTS.get(found["verdict"], found["verdict"])
        return {"estimate": -found["estimate"], "low": -found["high"], "high": -found["low"], "verdict": verdict}

    def interval_method(self) -> str:
        return POOLED_INTERVAL if self.cell is None else PROTOCOL_INTERVAL


def protocol(task: str, comparison: str, folder: str, cell: str, versus: str, **kwargs) -> Verdict:
    """A row read from ``benchmarks/results/<folder>/summary.json`` (its report: ``summary.md`` beside it)."""
    return Verdict(
        task=task,
        comparison=comparison,
        source=f"{RESULTS}/{folder}/summary.json",
        metric="pass@1",
        cell=cell,
        versus=versus,
        report=f"{RESULTS}/{folder}/summary.md",
        **kwargs,
    )


def pooled(comparison: str, folder: str, metric: str) -> Verdict:
    """A row of a pooled React evaluation of BoT-GRPO on two rewards (``<folder>/eval/bot_grpo_pooled_step60.json``)."""
    return Verdict(
        task="react",
        comparison=comparison,
        source=f"{RESULTS}/{folder}/eval/bot_grpo_pooled_step60.json",
        metric=metric,
        learning_rates="compile-only's tuned rate (1e-4)",
        report="docs/benchmarks.md",
    )


NOT_RETUNED = "the withdrawn estimators' rates (not re-tuned)"
UNWHITENED = "PURE without batch whitening"

VERDICTS = (
    protocol("arith", "BoT-GRPO - GRPO, test Pass@1", "protocol/arith", "bot_grpo", "grpo"),
    protocol(
        "arith",
        "BoT-GRPO - BoT-GRPO shuffled (localisation control)",
        "protocol/arith/vs-bot_grpo",
        "bot_grpo_shuffled",
        "bot_grpo",
        negate=True,
    ),
    protocol("arith_hard", "BoT-GRPO - GRPO, test Pass@1", "protocol/arith_hard", "bot_grpo", "grpo"),
    protocol(
        "arith_hard", "BoT-GRPO - GRPO, a second warm start", "protocol-replication/arith_hard", "bot_grpo", "grpo"
    ),
    protocol("react", "BoT-GRPO - GRPO, compiles as asked", "protocol/react", "bot_grpo", "grpo"),
    protocol(
        "react",
        "BoT-GRPO - BoT-GRPO shuffled (localisation control)",
        "protocol/react/vs-bot_grpo",
        "bot_grpo_shuffled",
        "bot_grpo",
        negate=True,
    ),
    protocol("react", "BoT-GRPO - GRPO, the rerun's warm start", "protocol-rerun/react", "bot_grpo", "grpo"),
    protocol("react", "BoT-GRPO - PS-GRPO", "protocol-rerun/react", "bot_grpo", "ps_grpo", learning_rates=NOT_RETUNED),
    protocol(
        "react",
        f"BoT-GRPO - PURE ({UNWHITENED})",
        "protocol-rerun/react/vs-bot_grpo",
        "pure",
        "bot_grpo",
        negate=True,
        learning_rates=NOT_RETUNED,
    ),
    protocol(
        "react", f"PURE ({UNWHITENED}) - GRPO", "protocol-rerun/react", "pure", "grpo", learning_rates=NOT_RETUNED
    ),
    protocol("arith", "BoT-GRPO - GRPO, the rerun's warm start", "protocol-rerun/arith", "bot_grpo", "grpo"),
    protocol(
        "arith",
        "BoT-GRPO - PS-GRPO",
        "protocol-rerun/arith/vs-bot_grpo",
        "ps_grpo",
        "bot_grpo",
        negate=True,
        learning_rates=NOT_RETUNED,
    ),
    protocol(
        "arith",
        f"BoT-GRPO - PURE ({UNWHITENED})",
        "protocol-rerun/arith/vs-bot_grpo",
        "pure",
        "bot_grpo",
        negate=True,
        learning_rates=NOT_RETUNED,
    ),
    protocol("arith_hard", "BoT-GRPO - GRPO, the rerun's warm start", "protocol-rerun/arith_hard", "bot_grpo", "grpo"),
    protocol(
        "arith_hard",
        "BoT-GRPO - PS-GRPO",
        "protocol-rerun/arith_hard/vs-bot_grpo",
        "ps_grpo",
        "bot_grpo",
        negate=True,
        learning_rates=NOT_RETUNED,
    ),
    protocol(
        "arith_hard",
        f"BoT-GRPO - PURE ({UNWHITENED})",
        "protocol-rerun/arith_hard/vs-bot_grpo",
        "pure",
        "bot_grpo",
        negate=True,
        learning_rates=NOT_RETUNED,
    ),
    protocol("agent", "BoT-GRPO - GRPO, per-turn rewards", "agent/agent", "bot_grpo", "grpo"),
    protocol(
        "agent", "BoT-GRPO - PS-GRPO, turns as steps", "agent/agent/vs-bot_grpo", "ps_grpo", "bot_grpo", negate=True
    ),
    pooled("composed reward - compile-only, spec rate", "react-composed", "spec_rate"),
    pooled("composed reward - compile-only, compile rate", "react-composed", "compile_rate"),
    pooled("graded composed reward - compile-only, spec rate", "react-graded-fix", "spec_rate"),
    pooled("graded composed reward - compile-only, compile rate", "react-graded-fix", "compile_rate"),
    pooled("name-gated graded reward - compile-only, spec rate", "react-named", "spec_rate"),
    pooled("name-gated graded reward - compile-only, compile rate", "react-named", "compile_rate"),
)
"""README's results, in the order of its table."""


def signed(value: float) -> str:
    return f"{value:+.3f}"


def verdicts_table(verdicts: tuple[Verdict, ...] = VERDICTS, link_prefix: str = "") -> str:
    """The markdown table of ``verdicts``; links are relative to a page ``link_prefix`` away from the root."""
    rows = [
        "| task | comparison | difference [95% interval] | interval | learning rates | verdict | report |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for verdict in verdicts:
        found = verdict.difference()
        difference = f"{signed(found['estimate'])} [{signed(found['low'])}, {signed(found['high'])}]"
        rows.append(
            f"| {verdict.task} | {verdict.comparison} | {difference} | {verdict.interval_method()} | "
            f"{verdict.learning_rates} | {found['verdict']} | [{Path(verdict.report).name}]"
            f"({link_prefix}{verdict.report}) |"
        )
    return "\n".join(rows) + "\n"
