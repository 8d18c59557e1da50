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


WHITENED = "with its authors' batch whitening"


def shuffled_control(task: str) -> Verdict:
    """BoT-GRPO minus its localisation control (token rewards shuffled within each response), from the report with
    BoT-GRPO as the baseline."""
    return protocol(
        task,
        "BoT-GRPO - BoT-GRPO shuffled (localisation control)",
        f"protocol/{task}/vs-bot_grpo",
        "bot_grpo_shuffled",
        "bot_grpo",
        negate=True,
    )


def rerun(task: str) -> tuple[Verdict, ...]:
    """``task`` from the rerun's warm start: BoT-GRPO minus GRPO (issue 25's rerun), minus PS-GRPO and minus PURE
    (issue 40: both re-tuned on validation, PURE with its authors' batch whitening; from the report with BoT-GRPO as
    the baseline)."""
    folder = f"protocol-issue40/{task}/vs-bot_grpo"
    return (
        protocol(task, "BoT-GRPO - GRPO, the rerun's warm start", f"protocol-rerun/{task}", "bot_grpo", "grpo"),
        protocol(task, "BoT-GRPO - PS-GRPO", folder, "ps_grpo", "bot_grpo", negate=True),
        protocol(task, f"BoT-GRPO - PURE ({WHITENED})", folder, "pure", "bot_grpo", negate=True),
    )


def composed(name: str, folder: str) -> tuple[Verdict, ...]:
    """A composed React reward against compile-only, both under BoT-GRPO: the spec rate and the compile rate."""
    return tuple(pooled(f"{name} - compile-only, {rate}", folder, key) for key, rate in COMPOSED_RATES)


COMPOSED_RATES = (("spec_rate", "spec rate"), ("compile_rate", "compile rate"))

VERDICTS = (
    protocol("arith", "BoT-GRPO - GRPO, test Pass@1", "protocol/arith", "bot_grpo", "grpo"),
    shuffled_control("arith"),
    protocol("arith_hard", "BoT-GRPO - GRPO, test Pass@1", "protocol/arith_hard", "bot_grpo", "grpo"),
    protocol(
        "arith_hard", "BoT-GRPO - GRPO, a second warm start", "protocol-replication/arith_hard", "bot_grpo", "grpo"
    ),
    protocol("react", "BoT-GRPO - GRPO, compiles as asked", "protocol/react", "bot_grpo", "grpo"),
    shuffled_control("react"),
    *rerun("react"),
    protocol("react", f"PURE ({WHITENED}) - GRPO", "protocol-issue40/react", "pure", "grpo"),
    *rerun("arith"),
    *rerun("arith_hard"),
    protocol("agent", "BoT-GRPO - GRPO, per-turn rewards", "agent/agent", "bot_grpo", "grpo"),
    protocol(
        "agent", "BoT-GRPO - PS-GRPO, turns as steps", "agent/agent/vs-bot_grpo", "ps_grpo", "bot_grpo", negate=True
    ),
    *composed("composed reward", "react-composed"),
    *composed("graded composed reward", "react-graded-fix"),
    *composed("name-gated graded reward", "react-named"),
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
