"""The results table's rows (benchmarks/verdicts.py) read their committed files as they are."""

import json

import pytest

from benchmarks import verdicts
from benchmarks.verdicts import VERDICTS, Verdict


def test_every_row_reads_one_comparison_of_its_committed_file():
    for verdict in VERDICTS:
        found = verdict.difference()
        assert found["low"] <= found["estimate"] <= found["high"], verdict
        assert (verdicts.REPO / verdict.report).exists(), verdict.report


def test_a_negated_row_mirrors_the_interval_and_the_verdict(tmp_path, monkeypatch):
    comparison = {"estimate": -0.04, "low": -0.07, "high": -0.01, "verdict": "worse"}
    (tmp_path / "summary.json").write_text(
        json.dumps({"comparisons": [{"cell": "pure", "versus": "bot_grpo", "pass@1": comparison}]})
    )
    monkeypatch.setattr(verdicts, "REPO", tmp_path)
    row = Verdict("react", "BoT-GRPO - PURE", "summary.json", "pass@1", "pure", "bot_grpo", negate=True)
    assert row.difference() == {"estimate": 0.04, "low": 0.01, "high": 0.07, "verdict": "better"}
    assert Verdict("react", "x", "summary.json", "pass@1", "pure", "bot_grpo").difference() == comparison
    with pytest.raises(ValueError, match="no single comparison grpo - bot_grpo"):
        Verdict("react", "x", "summary.json", "pass@1", "grpo", "bot_grpo").difference()
