"""The token-credit study's threshold and hypotheses (benchmarks/reporting/hypotheses.py): T from the sweep by the
registered rule, and each hypothesis decided by its registered comparisons on runs whose curves are known."""

from __future__ import annotations

import json

import pytest

from benchmarks import token_credit
from benchmarks.reporting.hypotheses import final_steps, hypotheses_report, threshold_from_sweep
from benchmarks.reporting.runs import read_runs, run_file_name

PROBLEMS, SAMPLES, STEPS = 40, 4, (0, 50, 100, 150, 200)
CURVES = {  # test exact rate per validation; problem i is solved (all samples) while i < 40 x rate: nested sets
    "bot_grpo": (0.1, 0.5, 0.6, 0.6, 0.6),  # reaches 0.3 at step 25
    "grpo": (0.1, 0.15, 0.2, 0.35, 0.4),  # at 133.3
    "grpo_token_mean": (0.1, 0.15, 0.2, 0.35, 0.4),
    "bot_grpo_shuffled": (0.1, 0.15, 0.2, 0.35, 0.4),
    "bot_grpo@flip10": (0.1, 0.3, 0.45, 0.5, 0.5),  # at 50
    "bot_grpo@flip30": (0.1, 0.2, 0.3, 0.4, 0.4),  # at 100
    "bot_grpo_uniform": (0.1, 0.6, 0.7, 0.7, 0.7),  # at 20: faster than bot_grpo
    "dapo": (0.1, 0.5, 0.6, 0.6, 0.6),
}
LR = 1e-4


def summary(cell: str, seed: int, curve: tuple[float, ...]) -> dict:
    counts = {
        str(step): {"test": [[SAMPLES, SAMPLES if i < round(PROBLEMS * rate) else 0] for i in range(PROBLEMS)]}
        for step, rate in zip(STEPS, curve, strict=True)
    }
    train = {
        "reward_extra/items_correct/mean": [None] + [0.5] * 30 + [0.7] * 20,
        "response_length/within_group_std": [None, 1.0, 3.0],
        "training/groups_with_signal": [None, 0.25, 0.5],
    }
    settings = {"task": "token_credit", "cell": cell, "lr": LR, "seed": seed, "warm_start_sha256": "0" * 64}
    return settings | {
        "steps": 201,
        "cpu_seconds": 600.0 + seed,
        "wall_seconds": 700.0,
        "train": train,
        "held_out": counts,
    }


def write_runs(results, cells=CURVES, seeds=(100, 101, 102), task="token_credit"):
    folder = results / task / "runs"
    folder.mkdir(parents=True)
    for cell, curve in cells.items():
        for seed in seeds:
            (folder / run_file_name(cell, LR, seed)).write_text(json.dumps(summary(cell, seed, curve) | {"task": task}))
    return read_runs(results)[task]


def chosen(cells=CURVES):
    return {cell: {"lr": LR, "chosen_by": cell.split("@")[0]} for cell in cells}


def sweep(last: dict[str, float], start: float = 0.12) -> dict:
    rows = [
        {"cell": cell, "lr": LR, "steps": list(STEPS), "curve": [start, level, level, level, level]}
        for cell, level in last.items()
    ]
    rows.append(
        {"cell": "grpo", "lr": 1e-3, "steps": list(STEPS), "curve": [start + 0.04, 0, 0, 0, 0]}
    )  # its step 0 counts
    picked = {cell: {"lr": LR, "chosen_by": cell} for cell in last}
    flips = {f"bot_grpo@flip{rate}": {"lr": LR, "chosen_by": "bot_grpo"} for rate in (10, 30)}
    return {"rows": rows, "chosen": picked | flips}


def test_the_threshold_is_halfway_from_the_sweeps_start_to_tuned_grpos_last_validation_rounded_down():
    # start = mean step-0 over every sweep run = (0.12 + 0.12 + 0.16) / 3; GRPO ends at 0.40
    level = threshold_from_sweep(sweep({"grpo": 0.40, "bot_grpo": 0.6}))
    assert level["start"] == pytest.approx(0.4 / 3)
    assert (level["reference"], level["reference_level"]) == ("grpo", 0.40)
    assert level["threshold"] == 0.26  # 0.1333 + 0.5 x 0.2667 = 0.2667, down to 0.26
    assert threshold_from_sweep(sweep({"grpo": 0.46}))["threshold"] == 0.3  # start 0.14, + 0.16: 0.30 stays


def test_without_grpo_learning_the_threshold_goes_halfway_to_the_best_tuned_arm_or_is_none():
    level = threshold_from_sweep(sweep({"grpo": 0.13, "bot_grpo": 0.33, "dapo": 0.2}))
    assert (level["reference"], level["threshold"]) == ("bot_grpo", 0.23)  # start 0.13, + 0.5 x 0.2
    assert threshold_from_sweep(sweep({"grpo": 0.1, "bot_grpo": 0.14}))["threshold"] is None
    with pytest.raises(ValueError, match="no learning rate for 'grpo'"):
        threshold_from_sweep(sweep({"bot_grpo": 0.4}))


def test_the_final_matrix_doubles_its_steps_only_while_tuned_grpo_still_rises_on_validation():
    def swept(curve):
        rows = [{"cell": "grpo", "lr": LR, "steps": list(STEPS), "curve": curve}]
        rows.append({"cell": "grpo", "lr": 1e-3, "steps": list(STEPS), "curve": [0.1, 0.9, 0.9, 0.9, 0.9]})
        return {"rows": rows, "chosen": {"grpo": {"lr": LR, "chosen_by": "grpo"}}}

    assert final_steps(swept([0.1, 0.2, 0.3, 0.32, 0.33])) == {"rise": pytest.approx(0.075), "final_steps": 400}
    assert final_steps(swept([0.1, 0.3, 0.31, 0.3, 0.33]))["final_steps"] == 200  # rise 0.01: a plateau
    assert final_steps(swept([0.2, 0.2, 0.2, 0.1, 0.1]))["final_steps"] == 200  # falling: no more steps


def verdicts(report):
    return {entry["name"]: entry["verdict"] for entry in report["hypotheses"]}


def test_each_hypothesis_is_decided_by_its_registered_comparisons(tmp_path):
    report = hypotheses_report(write_runs(tmp_path), chosen(), 0.3, boot=400, seed=0)
    cells = report["cells"]
    assert cells["bot_grpo"]["steps_to_threshold"]["estimate"] == pytest.approx(25.0)  # 0 + 0.2 / 0.4 x 50
    assert cells["grpo"]["steps_to_threshold"]["estimate"] == pytest.approx(100 + 0.1 / 0.15 * 50)
    assert verdicts(report) == {
        "H1": "supported",  # 133.3 / 25 = 5.3x against both
        "H2": "supported",  # shuffled as slow as the token mean, slower than BoT-GRPO
        "H3": "supported",  # 50 / 25 and 100 / 50, finals 0.6 > 0.5 > 0.4
        "H4": "contradicted",  # uniform weighting reaches T first and ends higher
        "H5 dapo": "not supported",  # the same curve: level
        "H5 ps_grpo": "not run",
        "H5 pure": "not run",
    }
    h1 = report["hypotheses"][0]["claims"][1]
    assert h1["measures"]["steps to T"]["estimate"] == pytest.approx((100 + 0.1 / 0.15 * 50) / 25)
    assert h1["measures"]["final exact rate"]["estimate"] == pytest.approx(0.2)
    assert h1["sides"] == {"steps to T": "apart", "final exact rate": "apart"}
    assert report["hypotheses"][5]["missing"] == ["ps_grpo"]
    costs = cells["grpo"]
    assert costs["cpu_seconds"]["mean"] == pytest.approx(701.0)  # 600 + seed, seeds 100-102
    assert costs["items_correct_tail"]["mean"] == pytest.approx(0.7)  # the last 20 steps only
    assert costs["within_group_length_std"]["mean"] == pytest.approx(2.0)
    assert costs["groups_with_signal"]["mean"] == pytest.approx(0.375)


def test_h1_needs_a_ratio_of_at_least_1_5_not_only_an_interval_above_1(tmp_path):
    slower = {**CURVES, "grpo": (0.1, 0.4, 0.5, 0.6, 0.6), "grpo_token_mean": (0.1, 0.4, 0.5, 0.6, 0.6)}
    report = hypotheses_report(write_runs(tmp_path, slower), chosen(slower), 0.3, boot=400, seed=0)
    claim = report["hypotheses"][0]["claims"][0]
    assert claim["measures"]["steps to T"]["estimate"] == pytest.approx((0.2 / 0.3 * 50) / 25)  # 1.33x
    assert claim["sides"]["steps to T"] == "apart" and not claim["holds"]
    assert verdicts(report)["H1"] == "not supported"


def test_without_a_threshold_the_final_exact_rates_decide(tmp_path):
    report = hypotheses_report(write_runs(tmp_path), chosen(), None, boot=400, seed=0)
    assert "steps_to_threshold" not in report["cells"]["bot_grpo"]
    assert verdicts(report)["H1"] == "supported"  # 0.6 - 0.4 above 0
    assert verdicts(report)["H4"] == "contradicted"
    claim = report["hypotheses"][0]["claims"][0]
    assert claim["deciding"] == ["final exact rate"] and "steps to T" not in claim["measures"]


def test_edge_rates_name_the_rate_beyond_each_edge_choice_for_the_queue(tmp_path, capsys):
    sweep_file = tmp_path / "sweep.json"
    chosen = {"grpo": {"lr": 3e-5, "chosen_by": "grpo"}, "dapo": {"lr": 1e-3, "chosen_by": "dapo"}}
    sweep_file.write_text(json.dumps({"chosen": chosen, "at_edge": {"grpo": "smallest", "dapo": "largest"}}))
    assert token_credit.main(["edge-rates", "--sweep", str(sweep_file)]) == 0
    assert capsys.readouterr().out.splitlines() == ["dapo 0.003", "grpo 1e-05"]
    assert token_credit.main(["edge-rates", "--sweep", str(sweep_file), "--cells", "grpo,pure"]) == 0
    assert capsys.readouterr().out.splitlines() == ["grpo 1e-05"]


def test_the_edge_rule_stops_two_rates_below_the_grid_and_one_above(tmp_path, capsys):
    sweep_file = tmp_path / "sweep.json"
    chosen = {
        "grpo": {"lr": 1e-5, "chosen_by": "grpo"},  # next 3.3e-6: the last step down
        "pure": {"lr": 10 / 3 * 1e-6, "chosen_by": "pure"},  # next 1.1e-6: beyond the bound
        "dapo": {"lr": 3e-3, "chosen_by": "dapo"},  # next 9e-3: beyond the bound
    }
    edges = {"grpo": "smallest", "pure": "smallest", "dapo": "largest"}
    sweep_file.write_text(json.dumps({"chosen": chosen, "at_edge": edges}))
    assert token_credit.main(["edge-rates", "--sweep", str(sweep_file)]) == 0
    printed = capsys.readouterr()
    assert printed.out.splitlines() == ["grpo 3.33333e-06"]
    assert "pure: at the edge, not tuned" in printed.err and "dapo: at the edge, not tuned" in printed.err


def test_threshold_and_hypotheses_commands_write_their_files_and_refuse_what_is_missing(tmp_path, capsys):
    sweep_file, level_file = tmp_path / "token_credit" / "sweep.json", tmp_path / "token_credit" / "threshold.json"
    assert token_credit.main(["hypotheses", "--results", str(tmp_path), "--sweep", str(sweep_file)]) == 1
    assert "sweep.json" in capsys.readouterr().err
    write_runs(tmp_path)
    swept = {cell: 0.5 for cell in CURVES if "@" not in cell}
    sweep_file.write_text(json.dumps(sweep(swept, start=0.1)))
    assert token_credit.main(["threshold", "--sweep", str(sweep_file), "--out", str(level_file)]) == 0
    assert json.loads(level_file.read_text())["threshold"] == 0.3  # start (6 x 0.1 + 0.14) / 7, halfway to 0.5
    assert json.loads(level_file.read_text())["final_steps"] == 200  # grpo's sweep curve ends flat at 0.5
    arguments = ["--results", str(tmp_path), "--sweep", str(sweep_file), "--threshold-file", str(level_file)]
    assert token_credit.main(["hypotheses", *arguments, "--boot", "200"]) == 0
    assert "H4: contradicted" in capsys.readouterr().out
    written = sweep_file.parent
    assert "## H1: BoT-GRPO reaches the threshold" in (written / "hypotheses.md").read_text()
    assert json.loads((written / "hypotheses.json").read_text())["threshold"] == 0.3
    assert (written / "steps_to_threshold.png").stat().st_size > 0


def test_the_free_length_familys_commands_read_its_own_sweep_and_runs_by_default(tmp_path, capsys, monkeypatch):
    task, cells = "token_credit_prefix", {cell: CURVES[cell] for cell in ("grpo", "bot_grpo", "bot_grpo_uniform")}
    write_runs(tmp_path, cells, task=task)
    write_runs(tmp_path, {"bot_grpo": CURVES["grpo"]})  # the main task's: never read here
    swept = sweep({cell: 0.5 for cell in cells}, start=0.1)
    swept["chosen"] = {cell: info for cell, info in swept["chosen"].items() if "@" not in cell}
    (tmp_path / task / "sweep.json").write_text(json.dumps(swept))
    monkeypatch.setattr(token_credit, "STUDY_RESULTS", tmp_path)
    assert token_credit.main(["--task", task, "threshold"]) == 0
    assert json.loads((tmp_path / task / "threshold.json").read_text())["threshold"] == 0.3
    assert token_credit.main(["--task", task, "hypotheses", "--boot", "200"]) == 0
    decided = capsys.readouterr().out
    assert "H4: contradicted" in decided and "H1: not run" in decided  # uniform is faster in CURVES
    assert json.loads((tmp_path / task / "hypotheses.json").read_text())["cells"].keys() == cells.keys()
