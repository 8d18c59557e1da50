"""Benchmark metrics and the report, against brute force and hand-computed curves."""

import itertools
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.metrics import area_under_curve, pass_at_k, steps_to_threshold
from benchmarks.report import main as report_main
from benchmarks.reporting.outputs import write_report
from benchmarks.reporting.runs import pass_at_k_of_dump


@given(st.integers(1, 12), st.data())
def test_pass_at_k_equals_the_fraction_of_k_subsets_with_a_correct_sample(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(10_000, 1, 1) == pytest.approx(1e-4)
    assert pass_at_k(10_000, 5_000, 100) == pytest.approx(1.0)
    assert pass_at_k(2_000, 3, 50) == pytest.approx(1 - math.comb(1997, 50) / math.comb(2000, 50), rel=1e-9)
    with pytest.raises(ValueError, match="1 <= k <= samples"):
        pass_at_k(4, 1, 5)


def test_curve_metrics():
    assert steps_to_threshold([1, 2, 3], [0.1, 0.8, 0.9], 0.8) == 2.0
    assert steps_to_threshold([1, 2], [0.1, 0.2], 0.8) is None
    assert area_under_curve([0, 1, 2], [0.0, 1.0, 1.0]) == pytest.approx(0.75)


def write_run(root, algorithm, seed, values):
    path = root / algorithm / f"seed{seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    lines = [
        json.dumps({"step": step + 1, "data": {"ok/mean": value, "other": 1}}) for step, value in enumerate(values)
    ]
    path.write_text("\n".join(lines) + "\n" + json.dumps({"step": 99, "data": {"other": 2}}))
    (path.parent / "DONE").write_text("1 s\n")


def test_report_summarises_seeds_and_ratios_against_the_baseline(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "grpo", 0, [0.0, 0.2, 0.4, 0.8, 0.8, 0.8, 0.8])
    write_run(runs, "grpo", 1, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0])
    write_run(runs, "bot_grpo", 0, [0.0, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9])
    write_run(runs, "bot_grpo", 1, [0.4, 0.8, 0.8, 0.9, 1.0, 0.2, 1.0])
    write_run(runs, "gspo", 0, [0.0, 0.9, 0.9])
    (runs / "gspo" / "seed0" / "DONE").unlink()  # interrupted: left out
    summary = write_report(runs, "ok/mean", 0.8, "grpo", tmp_path / "out")["algorithms"]
    assert "gspo" not in summary
    # 3-step moving averages: grpo 0.2 .2 .47 .67 .8 ... -> step 6; .2 .4 .6 .8 -> step 6 (values at window ends)
    assert summary["grpo"]["steps_to_threshold"]["values"] == [6.0, 6.0]
    assert summary["bot_grpo"]["steps_to_threshold"]["values"] == [4.0, 4.0]
    assert summary["bot_grpo"]["vs_baseline"]["speedup_to_threshold"] == pytest.approx(6.0 / 4.0)
    assert summary["bot_grpo"]["final"]["mean"] == pytest.approx((0.9 + 0.9 + 0.9 + 1.0 + 0.2 + 1.0) / 6)
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "| bot_grpo | 2 | 4.0 ± 0.0 (2/2) | 1.50x |" in table
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["baseline"] == "grpo"
    assert (tmp_path / "out" / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_pass_at_k_of_a_verl_generation_dump(tmp_path):
    rows = [{"input": "p1", "acc": a} for a in (1, 0, 0, 0)] + [{"input": "p2", "acc": a} for a in (0, 0, 0, 0)]
    (tmp_path / "5.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    assert pass_at_k_of_dump(tmp_path / "5.jsonl", 2) == pytest.approx((1 - math.comb(3, 2) / math.comb(4, 2)) / 2)


def write_validation(runs, algorithm, seed, step, correct_per_problem, samples=4):
    rows = [
        {"input": f"problem {problem}", "acc": float(sample < correct), "step": step}
        for problem, correct in enumerate(correct_per_problem)
        for sample in range(samples)
    ]
    folder = runs / algorithm / f"seed{seed}" / "validation"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{step}.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")


def test_report_gives_pass_at_k_before_and_after_training_against_the_baseline(tmp_path):
    runs = tmp_path / "runs"
    for algorithm, after in (("grpo", [1, 0]), ("bot_grpo", [4, 2])):
        for seed in (0, 1):
            write_run(runs, algorithm, seed, [0.1, 0.2, 0.3])
            write_validation(runs, algorithm, seed, 0, [1, 0])
            write_validation(runs, algorithm, seed, 2, [0, 0])  # an earlier test_freq dump: not the last
            write_validation(runs, algorithm, seed, 3, after)
    write_validation(runs, "gspo", 0, 3, [4, 4])  # no DONE: left out
    report = write_report(runs, "ok/mean", 0.8, "grpo", tmp_path / "out", pass_at_k=(1, 4))
    passes = report["pass_at_k"]
    assert "gspo" not in passes
    # bot_grpo after: problem 0 all 4 correct, problem 1 2 of 4 -> Pass@1 = (1 + 0.5) / 2, Pass@4 = 1
    assert passes["bot_grpo"]["after"]["1"]["mean"] == pytest.approx(0.75)
    assert passes["bot_grpo"]["after"]["4"]["mean"] == pytest.approx(1.0)
    assert passes["grpo"]["after"]["4"]["mean"] == pytest.approx(0.5)
    assert passes["bot_grpo"]["after_minus_baseline"]["1"] == pytest.approx(0.75 - 0.125)
    assert passes["before training"]["after"]["1"]["values"] == [0.125] * 4  # every run's step-0 dump
    table = (tmp_path / "out" / "summary.md").read_text()
    assert "| bot_grpo | 0.750 ± 0.000 | 1.000 ± 0.000 | +0.500 |" in table
    assert (tmp_path / "out" / "pass_at_k.png").read_bytes()[:4] == b"\x89PNG"


def test_report_without_validation_dumps_has_no_pass_at_k(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "grpo", 0, [0.1, 0.2])
    report = write_report(runs, "ok/mean", 0.8, "grpo", tmp_path / "out", pass_at_k=(1,))
    assert "pass_at_k" not in report and not (tmp_path / "out" / "pass_at_k.png").exists()


def test_report_command_line_with_pass_at_k(tmp_path, capsys):
    runs = tmp_path / "runs"
    write_run(runs, "grpo", 0, [0.1, 0.2])
    write_validation(runs, "grpo", 0, 2, [2, 0])
    arguments = [str(runs), "--metric", "ok/mean", "--threshold", "0.5", "--out", str(tmp_path / "out")]
    assert report_main([*arguments, "--pass-at-k", "1,2"]) == 0
    assert "| grpo | 0.250 ± 0.000 | 0.417 ± 0.000 | +0.000 |" in capsys.readouterr().out


def test_the_paper_scale_step_adds_types_the_renders_own_cost_and_the_judge():
    from benchmarks.react_render_speed import paper_scale

    step = paper_scale({"syntax": 512.0, "types": 16.0, "syntax+render": 4.0, "judge": 1024.0}, 1024, 16)
    assert step["cpu_seconds"] == {"syntax": 2.0, "types": 64.0, "syntax+render": 256.0, "judge": 1.0}
    assert step["composed_cpu_seconds"] == 64.0 + (256.0 - 2.0) + 1.0
    assert step["composed_wall_seconds_on_node"] == step["composed_cpu_seconds"] / 16
    assert step["types_wall_seconds_on_node"] == 4.0
