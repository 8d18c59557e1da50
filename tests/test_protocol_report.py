"""The protocol's report: learning rates chosen on the validation split only, paired two-level bootstrap
intervals, verdicts, probability of improvement and steps to a level on the test split, and its CLI."""

import json
import math

import numpy as np
import pytest

from benchmarks import protocol_report
from benchmarks.metrics import generated_per_trained
from benchmarks.reporting.comparison import final_report
from benchmarks.reporting.outputs import NOT_REACHED, to_json
from benchmarks.reporting.runs import AS_ASKED, SOLVED, SUCCESSES, held_out_counts, read_runs, run_file_name
from benchmarks.reporting.statistics import (
    estimate,
    pass_at_k_scores,
    per_seed_curves,
    resample_weights,
    seed_mean,
    steps_to_level,
)
from benchmarks.reporting.sweep import at_grid_edge, beyond_edges, choose_lrs, single_lrs, sweep_table
from benchmarks.reporting.tables import report_markdown, sweep_markdown

VALIDATIONS = (0, 4, 8)
SAMPLES = 8


def summary(cell, lr, seed, correct, task="arith", steps=8):
    """A run summary as benchmarks/matrix.py writes it; ``correct``: ``{split: (V, P) correct samples}``."""
    held_out = {
        str(step): {split: [[SAMPLES, int(c)] for c in counts[row]] for split, counts in correct.items()}
        for row, step in enumerate(VALIDATIONS)
    }
    return {
        "task": task,
        "cell": cell,
        "lr": lr,
        "seed": seed,
        "steps": steps,
        "wall_seconds": 10.0,
        "train": {"reward_extra/acc/mean": [0.5] * steps},
        "held_out": held_out,
    }


def write(results, *summaries):
    for run in summaries:
        folder = results / run["task"] / "runs"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / run_file_name(run["cell"], run["lr"], run["seed"])).write_text(json.dumps(run))


def level(values, problems=4):
    """(V, P) correct counts whose every problem has ``values[v]`` correct samples at validation v."""
    return np.repeat(np.array(values)[:, None], problems, axis=1)


def runs_of(*summaries):
    """``{cell: {lr: {seed: summary}}}`` of in-memory summaries."""
    runs = {}
    for run in summaries:
        runs.setdefault(run["cell"], {}).setdefault(run["lr"], {})[run["seed"]] = run
    return runs


def only(cells, lr=1e-4):
    return {cell: {"lr": lr, "chosen_by": cell} for cell in cells}


def test_read_runs_groups_by_task_cell_lr_seed(tmp_path):
    correct = {"val": level([2, 3, 4])}
    write(
        tmp_path,
        *(summary(cell, lr, seed, correct) for cell in ("grpo", "bot_grpo") for lr in (1e-5, 1e-4) for seed in (0, 1)),
        summary("grpo", 1e-4, 0, correct, task="arith_hard"),
    )
    runs = read_runs(tmp_path)
    assert sorted(runs) == ["arith", "arith_hard"]
    assert {cell: {lr: sorted(seeds) for lr, seeds in by_lr.items()} for cell, by_lr in runs["arith"].items()} == {
        "grpo": {1e-5: [0, 1], 1e-4: [0, 1]},
        "bot_grpo": {1e-5: [0, 1], 1e-4: [0, 1]},
    }
    assert runs["arith_hard"]["grpo"][1e-4][0]["task"] == "arith_hard"


@pytest.mark.parametrize(
    "odd",
    [
        summary("bot_grpo", 1e-4, 0, {"val": level([2, 3, 4])}, steps=16),
        summary("bot_grpo", 1e-4, 0, {"val": level([2, 3, 4], problems=5)}),
        summary("bot_grpo", 1e-4, 0, {"val": level([2, 3, 4]), "test": level([2, 3, 4])}),
        summary("bot_grpo", 1e-4, 0, {"val": level([2, 3, 4])}) | {"warm_start_sha256": "ab" * 32},
    ],
    ids=["training steps", "problems", "splits", "warm start"],
)
def test_read_runs_refuses_mixed_settings(tmp_path, odd):
    write(tmp_path, summary("grpo", 1e-4, 0, {"val": level([2, 3, 4])}), odd)
    with pytest.raises(ValueError, match="mixed settings"):
        read_runs(tmp_path)


def test_read_runs_refuses_a_file_whose_name_disagrees_with_its_content(tmp_path):
    write(tmp_path, summary("grpo", 1e-4, 0, {"val": level([2, 3, 4])}))
    folder = tmp_path / "arith" / "runs"
    (folder / "grpo__lr0.0001__seed0.json").rename(folder / "grpo__lr3e-05__seed0.json")
    with pytest.raises(ValueError, match="its name says"):
        read_runs(tmp_path)


def test_pass_at_k_scores_match_the_binomial_formula():
    counts = np.array([[[8, c] for c in range(9)], [[8, 8 - c] for c in range(9)]])
    for k in (1, 3, 8):
        expected = [[1 - math.comb(n - c, k) / math.comb(n, k) for n, c in row] for row in counts]
        np.testing.assert_allclose(pass_at_k_scores(counts, k), expected)


def poisoned(run, split):
    """The run with every count of the split NaN: any computation that reads them fails or turns NaN."""
    for counts in run["held_out"].values():
        counts[split] = [[SAMPLES, float("nan")] for _ in counts[split]]
    return run


def test_sweep_chooses_the_argmax_on_validation_and_never_reads_test():
    val = {1e-5: [2, 2, 3], 3e-5: [2, 4, 5], 1e-4: [2, 5, 3], 3e-4: [2, 1, 0]}  # last two: 2.5, 4.5, 4.0, 0.5
    runs = runs_of(
        *(
            poisoned(summary("grpo", lr, seed, {"val": level(v), "test": level([0, 0, 0])}), "test")
            for lr, v in val.items()
            for seed in (0, 1)
        )
    )
    rows = sweep_table(runs)
    assert [row["lr"] for row in rows] == [1e-5, 3e-5, 1e-4, 3e-4]
    assert [row["last_two"] for row in rows] == pytest.approx([2.5 / 8, 4.5 / 8, 4 / 8, 0.5 / 8])
    assert choose_lrs(rows, {})["grpo"] == {"lr": 3e-5, "chosen_by": "grpo"}
    assert choose_lrs(rows, {}, criterion="final")["grpo"]["lr"] == 3e-5
    assert at_grid_edge(rows, choose_lrs(rows, {})) == {}
    with pytest.raises(ValueError):  # the poison works: the test split's scores cannot be computed
        final_report(runs, only(["grpo"], 3e-5), boot=10)


def test_a_validation_split_report_reads_only_validation_and_says_so():
    """The demonstration's report (``--split val``) leaves the test split unread; a result's never reads val."""

    def run(cell, split, values):
        other = {"val": "test", "test": "val"}[split]
        return poisoned(summary(cell, 1e-4, 0, {split: level(values), other: level([0, 0, 0])}), other)

    on_val = runs_of(run("grpo", "val", [2, 3, 4]), run("bot_grpo", "val", [2, 4, 5]))
    result = to_json(final_report(on_val, only(["grpo", "bot_grpo"]), boot=10, split="val"))
    assert result["split"] == "val"
    assert result["cells"]["bot_grpo"]["final"]["pass@1"]["estimate"] == pytest.approx(5 / 8)
    assert report_markdown({**result, "task": "token_credit"}).startswith("# Protocol report: token_credit (validation")
    on_test = runs_of(run("grpo", "test", [2, 3, 4]))
    assert to_json(final_report(on_test, only(["grpo"]), boot=10))["split"] == "test"
    with pytest.raises(ValueError, match="run them with --validate val"):
        final_report(
            runs_of(summary("grpo", 1e-4, 0, {"test": level([2, 3, 4])})), only(["grpo"]), boot=10, split="val"
        )


def test_sweep_criteria_ties_and_borrowed_learning_rates():
    val = {1e-5: [2, 5, 3], 3e-5: [2, 3, 5], 1e-4: [2, 4, 4], 3e-4: [2, 2, 2]}  # last two tie at 0.5
    runs = runs_of(
        *(
            summary(cell, lr, 0, {"val": level(v if cell == "pure" else v[::-1])})
            for lr, v in val.items()
            for cell in ("pure", "grpo")
        )
    )
    rows = sweep_table(runs)
    assert choose_lrs(rows, {})["pure"]["lr"] == 1e-5  # three-way tie: the smallest
    assert choose_lrs(rows, {}, criterion="final")["pure"]["lr"] == 3e-5
    chosen = choose_lrs(rows, {"pure_sum": "pure", "grpo": "pure"}, criterion="final")
    assert chosen["pure_sum"] == chosen["grpo"] == {"lr": 3e-5, "chosen_by": "pure"}
    with pytest.raises(ValueError, match="did not run"):
        choose_lrs(rows, {"pure_sum": "dapo"})
    chosen = choose_lrs(rows, {"pure_sum": "pure"})  # both at 1e-5, the smallest
    assert at_grid_edge(rows, chosen) == {"pure": "smallest", "grpo": "smallest"}  # not pure_sum: borrowed
    two = [{"cell": "dapo", "lr": 1e-5}, {"cell": "dapo", "lr": 1e-4}, {"cell": "gspo", "lr": 1e-4}]
    largest = {"dapo": {"lr": 1e-4, "chosen_by": "dapo"}, "gspo": {"lr": 1e-4, "chosen_by": "gspo"}}
    assert at_grid_edge(two, largest) == {"dapo": "largest"}  # gspo ran one lr: no grid, no edge
    assert beyond_edges(chosen, at_grid_edge(rows, chosen)) == pytest.approx({"grpo": 1e-5 / 3, "pure": 1e-5 / 3})
    assert beyond_edges(largest, {"dapo": "largest"}) == {"dapo": pytest.approx(3e-4)}
    assert "At the edge of the grid" in sweep_markdown("arith", rows, chosen, "last_two", SOLVED)


def matrix(rng, cells, seeds=3, problems=16):
    """Runs whose test counts ``cells[name](rng, problems) -> (V, P)`` are drawn per seed."""
    return runs_of(
        *(
            summary(name, 1e-4, seed, {"test": draw(rng, problems)})
            for name, draw in cells.items()
            for seed in range(seeds)
        )
    )


def comparison(result, cell, versus):
    return next(entry for entry in result["comparisons"] if (entry["cell"], entry["versus"]) == (cell, versus))


def test_a_cell_better_on_every_problem_and_seed_is_better_with_certain_improvement():
    runs = matrix(
        np.random.default_rng(0),
        {
            "grpo": lambda rng, p: rng.integers(0, 5, size=(3, p)),
            "bot_grpo": lambda rng, p: rng.integers(5, 9, size=(3, p)),
        },
    )
    result = final_report(runs, only(runs), boot=200)
    entry = comparison(result, "bot_grpo", "grpo")
    assert entry["pass@1"]["verdict"] == "better"
    assert entry["pass@1"]["low"] > 0
    improvement = entry["probability_of_improvement"]
    assert [improvement[key] for key in ("estimate", "low", "high")] == pytest.approx([1.0, 1.0, 1.0])
    reversed_roles = final_report(runs, only(runs), baseline="bot_grpo", boot=200)
    assert comparison(reversed_roles, "grpo", "bot_grpo")["pass@1"]["verdict"] == "worse"


def test_identical_cells_show_no_difference_at_this_scale():
    rng = np.random.default_rng(1)
    grpo = matrix(rng, {"grpo": lambda rng, p: rng.integers(0, 9, size=(3, p))}, seeds=4)["grpo"]
    runs = {"grpo": grpo, "twin": grpo}
    result = final_report(runs, only(runs), boot=300)
    entry = comparison(result, "twin", "grpo")
    for k in (1, 8):
        assert entry[f"pass@{k}"]["estimate"] == 0.0
        assert entry[f"pass@{k}"]["low"] < 0 < entry[f"pass@{k}"]["high"]
        assert entry[f"pass@{k}"]["verdict"] == "no difference at this scale"
    assert entry["probability_of_improvement"]["estimate"] == 0.5


def test_problems_paired_across_cells_give_a_narrower_interval_than_unpaired_draws():
    rng = np.random.default_rng(2)
    difficulty = rng.uniform(0, 1, size=64)  # problems from always solved to never: scores correlated across cells

    def solved(shift):
        return lambda rng, p: rng.binomial(SAMPLES, np.clip(difficulty + shift, 0, 1), size=(3, p))

    runs = matrix(rng, {"grpo": solved(0.0), "bot_grpo": solved(0.05)}, seeds=4, problems=64)
    result = final_report(runs, only(runs), boot=400)
    paired = comparison(result, "bot_grpo", "grpo")["pass@1"]
    scores = {name: pass_at_k_scores(held_out_counts(runs[name][1e-4], "test")[1], 1) for name in runs}
    finals = {}
    for number, (name, score) in enumerate(scores.items()):  # each cell its own problem draws: unpaired
        problem_weights = resample_weights(np.random.default_rng(10 + number), 64, 400)
        seed_weights = resample_weights(np.random.default_rng(20 + number), 4, 400)
        finals[name] = seed_mean(per_seed_curves(score, problem_weights), seed_weights)[:, -1]
    unpaired = estimate(finals["bot_grpo"] - finals["grpo"])
    assert paired["estimate"] == pytest.approx(unpaired["estimate"])
    assert paired["high"] - paired["low"] < 0.6 * (unpaired["high"] - unpaired["low"])


def test_steps_to_level_interpolates_between_validations():
    steps = np.array([0.0, 4.0, 8.0])
    curves = np.array([[0.2, 0.4, 0.8]] * 5 + [[0.5, 0.3, 0.9]])
    levels = np.array([0.6, 0.1, 0.9, 0.4, 0.8, 0.4])
    np.testing.assert_allclose(steps_to_level(steps, curves, levels), [6.0, 0.0, np.inf, 4.0, 8.0, 0.0])


def test_steps_to_the_baselines_final_level_and_to_a_threshold_with_ratios():
    counts = {"grpo": [2, 3, 4], "bot_grpo": [2, 4, 5], "ps_grpo": [2, 2, 3]}  # every seed and problem alike
    runs = runs_of(
        *(
            poisoned(summary(cell, 1e-4, seed, {"test": level(c), "val": level(c)}), "val")  # never read
            for cell, c in counts.items()
            for seed in (0, 1)
        )
    )
    result = to_json(final_report(runs, only(runs), threshold=0.45, boot=50))
    assert result["level"]["estimate"] == pytest.approx(0.5)
    cells = result["cells"]
    assert [cells[name]["steps_to_level"]["estimate"] for name in ("grpo", "bot_grpo", "ps_grpo")] == [
        8.0,
        4.0,
        NOT_REACHED,
    ]
    assert cells["grpo"]["steps_to_threshold"]["estimate"] == pytest.approx(6.4)  # 4 + (0.45-0.375)/0.125 * 4
    assert cells["bot_grpo"]["steps_to_threshold"]["estimate"] == pytest.approx(3.2)  # 4 * (0.45-0.25)/0.25
    entry = comparison(result, "bot_grpo", "grpo")
    assert entry["steps_ratio_to_level"] == {"estimate": 0.5, "low": 0.5, "high": 0.5, "reached": 1.0}
    assert entry["steps_ratio_to_threshold"]["estimate"] == pytest.approx(0.5)
    assert comparison(result, "ps_grpo", "grpo")["steps_ratio_to_level"]["estimate"] == NOT_REACHED
    assert result["best_same_information"] == "ps_grpo"
    assert comparison(result, "grpo", "ps_grpo")["steps_ratio_to_level"]["estimate"] is None  # ps_grpo: never


def test_each_cells_change_from_its_first_validation_and_a_warning_when_the_baseline_does_not_rise():
    def flat(rng, problems):  # each problem solved as often at every validation
        return np.repeat(rng.integers(0, 9, size=(1, problems)), len(VALIDATIONS), axis=0)

    def rising(rng, problems):
        return level([2, 5, 8], problems)

    runs = matrix(np.random.default_rng(3), {"grpo": flat, "bot_grpo": rising})
    result = to_json(final_report(runs, only(runs), boot=200))
    grpo, bot = (result["cells"][name]["change"]["pass@1"] for name in ("grpo", "bot_grpo"))
    assert grpo["estimate"] == 0.0 and grpo["verdict"] == "no difference at this scale"
    assert bot["estimate"] == pytest.approx(0.75) and bot["verdict"] == "better"  # 2/8 -> 8/8 on every problem
    text = report_markdown({**result, "task": "arith"})
    assert "grpo did not rise measurably" in text
    assert "0.750 [0.750, 0.750] (better)" in text
    rising_baseline = to_json(final_report(runs, only(runs), baseline="bot_grpo", boot=200))
    assert "did not rise" not in report_markdown({**rising_baseline, "task": "arith"})


def test_rollouts_generated_per_trained_count_dynamic_samplings_extra_groups():
    evicted, surplus = "training/filter_groups/evicted_samples", "training/filter_groups/discarded_surplus_samples"
    # 4 steps of 8 groups (a validation-only row first); 3 + 1 + 4 extra groups generated: 1 + 8 / 32
    train = {
        "timing_s/step": [None, 1.0, 1.0, 1.0, 1.0],
        evicted: [None, 3.0, None, 1.0, None],
        surplus: [None] * 4 + [4.0],
    }
    assert generated_per_trained(train, prompts_per_step=8) == 1.25
    assert generated_per_trained({"timing_s/step": [1.0] * 3}, prompts_per_step=8) == 1.0
    with pytest.raises(ValueError, match="no training step"):
        generated_per_trained({"reward_extra/acc/mean": [0.5]}, prompts_per_step=8)

    runs = matrix(
        np.random.default_rng(4), {name: lambda rng, p: rng.integers(0, 9, size=(3, p)) for name in ("grpo", "dapo")}
    )
    for name, ratio in (("grpo", 0), ("dapo", 8)):
        for run in runs[name][1e-4].values():
            run.update(prompts_per_step=8, train={"timing_s/step": [1.0] * 8, evicted: [ratio] * 8})
    result = to_json(final_report(runs, only(runs), boot=50))
    assert [result["cells"][name]["rollouts_generated_per_trained"] for name in ("grpo", "dapo")] == [1.0, 2.0]
    text = report_markdown({**result, "task": "arith"})
    assert "Not the same sampling budget per step**: dapo generated 2.00x the rollouts" in text
    del runs["dapo"][1e-4][0]["prompts_per_step"]  # a summary from before the record: not a guess of 1
    result = to_json(final_report(runs, only(runs), boot=50))
    assert result["cells"]["dapo"]["rollouts_generated_per_trained"] is None
    assert "sampling budget" not in report_markdown({**result, "task": "arith"})


def test_as_asked_success_chooses_and_reports_on_its_own_counts(tmp_path):
    # dapo at 1e-3 tops the reward's verdict by ignoring the prompt (0 as asked); at 1e-4 it does the task
    def run(lr, seed, solved, as_asked, split):
        return summary("dapo", lr, seed, {split: level(solved), f"{split}:as_asked": level(as_asked)})

    sweep = runs_of(
        *(run(lr, 0, s, a, "val") for lr, s, a in ((1e-4, [3, 4, 5], [3, 4, 5]), (1e-3, [3, 7, 8], [3, 0, 0])))
    )
    assert choose_lrs(sweep_table(sweep), {})["dapo"]["lr"] == 1e-3
    assert choose_lrs(sweep_table(sweep, AS_ASKED), {})["dapo"]["lr"] == 1e-4
    final = runs_of(*(run(1e-4, seed, [3, 4, 6], [3, 4, 5], "test") for seed in (0, 1)))
    chosen = only(final)
    by_reward, as_asked = (final_report(final, chosen, "dapo", boot=20, success=s) for s in SUCCESSES)
    assert by_reward["level"]["estimate"] == pytest.approx(6 / 8) and as_asked["level"]["estimate"] == pytest.approx(
        5 / 8
    )
    assert "as-asked check" in report_markdown({**to_json(as_asked), "task": "react"})

    results = tmp_path / "protocol"
    write(
        results / "sweep",
        *(run(lr, 0, s, a, "val") for lr, s, a in ((1e-4, [3, 4, 5], [3, 4, 5]), (1e-3, [3, 7, 8], [3, 0, 0]))),
    )
    write(results, *(run(1e-4, seed, [3, 4, 6], [3, 4, 5], "test") for seed in (0, 1)))
    base = ["--results", str(results), "--task", "arith", "--baseline", "dapo", "--boot", "20"]
    assert protocol_report.main([*base, "--success", "as_asked", "--out", str(tmp_path / "asked")]) == 0
    sweep_file = tmp_path / "asked" / "sweep.json"
    assert json.loads(sweep_file.read_text())["chosen"]["dapo"]["lr"] == 1e-4
    out = tmp_path / "by-reward"
    assert protocol_report.main([*base, "--lrs-from-sweep", str(sweep_file), "--out", str(out)]) == 0
    assert not (out / "sweep.json").exists()  # the choice is the given sweep's, not remade by the reward's verdict
    assert json.loads((out / "summary.json").read_text())["cells"]["dapo"]["lr"] == 1e-4
    write(results, *(run(1e-3, seed, [3, 4, 6], [3, 4, 5], "test") for seed in (0, 1)))  # dapo re-tuned to 1e-3
    retuned = tmp_path / "retuned.json"
    retuned.write_text(json.dumps({"chosen": {"dapo": {"lr": 1e-3, "chosen_by": "dapo"}}}))
    first, then = ["--lrs-from-sweep", str(sweep_file)], ["--lrs-from-sweep", str(retuned)]
    assert protocol_report.main([*base, *first, *then, "--out", str(tmp_path / "retuned")]) == 0
    assert json.loads((tmp_path / "retuned" / "summary.json").read_text())["cells"]["dapo"]["lr"] == 1e-3
    assert protocol_report.main([*base, *then, *first, "--out", str(tmp_path / "first")]) == 0
    assert json.loads((tmp_path / "first" / "summary.json").read_text())["cells"]["dapo"]["lr"] == 1e-4


def test_final_report_lists_cells_not_run_and_refuses_cells_without_a_learning_rate():
    runs = runs_of(summary("grpo", 1e-4, 0, {"test": level([2, 3, 4])}))
    chosen = {"grpo": {"lr": 1e-4, "chosen_by": "grpo"}, "dapo": {"lr": 3e-5, "chosen_by": "dapo"}}
    assert final_report(runs, chosen, boot=10)["not_run"] == ["dapo"]
    with pytest.raises(ValueError, match="no chosen learning rate"):
        final_report(runs, {}, boot=10)
    with pytest.raises(ValueError, match="baseline 'dapo'"):
        final_report(runs, chosen, baseline="dapo", boot=10)
    with pytest.raises(ValueError, match="--validate test"):
        final_report(runs_of(summary("grpo", 1e-4, 0, {"val": level([2, 3, 4])})), chosen, boot=10)
    with pytest.raises(ValueError, match="several learning rates"):
        single_lrs(runs_of(*(summary("grpo", lr, 0, {"test": level([2, 3, 4])}) for lr in (1e-5, 1e-4))))


def cli_results(tmp_path):
    rng = np.random.default_rng(3)
    results = tmp_path / "protocol"
    for cell, shift in {"grpo": 0, "bot_grpo": 2, "grpo_token_mean": 1}.items():
        write(
            results / "sweep",
            *(
                summary(cell, lr, seed, {"val": rng.integers(*bounds, size=(3, 6))})
                for lr, bounds in {3e-5: (4, 9), 1e-4: (0, 4)}.items()
                for seed in (0, 1)
            ),
        )
        write(
            results,
            *(
                summary(cell, 3e-5, seed, {"test": np.clip(rng.integers(0, 7, size=(3, 6)) + shift, 0, 8)})
                for seed in range(3)
            ),
        )
    write(results, *(summary("ps_grpo", 1e-4, seed, {"test": rng.integers(0, 9, size=(3, 6))}) for seed in range(3)))
    return results


def test_cli_writes_every_output_deterministically(tmp_path, capsys):
    results = cli_results(tmp_path)
    command = ["--results", str(results), "--task", "arith", "--threshold", "0.6", "--boot", "50"]
    out = tmp_path / "report"
    assert protocol_report.main([*command, "--out", str(out), "--lr-from", "ps_grpo=grpo_token_mean"]) == 0
    files = ["sweep.json", "sweep.md", "summary.json", "summary.md", "curves.png", "forest.png"]
    assert all((out / name).stat().st_size > 0 for name in files)
    sweep = json.loads((out / "sweep.json").read_text())
    summary_json = json.loads((out / "summary.json").read_text())
    assert sweep["chosen"]["ps_grpo"]["chosen_by"] == "grpo_token_mean"
    assert set(summary_json["cells"]) | set(summary_json["not_run"]) == {
        "grpo",
        "bot_grpo",
        "grpo_token_mean",
        "ps_grpo",
    }
    assert summary_json["best_same_information"] in summary_json["same_information"]
    assert "| bot_grpo | grpo |" in (out / "summary.md").read_text()
    assert (
        protocol_report.main([*command, "--out", str(tmp_path / "again"), "--lr-from", "ps_grpo=grpo_token_mean"]) == 0
    )
    assert (tmp_path / "again" / "summary.json").read_text() == (out / "summary.json").read_text()
    assert "Protocol report: arith" in capsys.readouterr().out


def test_cli_says_what_is_missing(tmp_path, capsys):
    assert protocol_report.main(["--results", str(tmp_path), "--task", "arith"]) == 1
    assert "no run summaries of task 'arith'" in capsys.readouterr().err
    results = cli_results(tmp_path)
    assert protocol_report.main(["--results", str(results), "--task", "arith", "--boot", "20"]) == 1  # ps_grpo: no lr
    assert "ps_grpo" in capsys.readouterr().err


def test_cli_ks_sets_the_pass_at_k_and_refuses_a_k_above_the_samples(tmp_path, capsys):
    results = cli_results(tmp_path)
    command = ["--results", str(results), "--task", "arith", "--boot", "20", "--lr-from", "ps_grpo=grpo_token_mean"]
    assert protocol_report.main([*command, "--out", str(tmp_path / "k4"), "--ks", "1,4"]) == 0
    summary_json = json.loads((tmp_path / "k4" / "summary.json").read_text())
    assert summary_json["ks"] == [1, 4]
    assert set(summary_json["cells"]["grpo"]["final"]) == {"pass@1", "pass@4"}
    assert "Pass@4 difference" in (tmp_path / "k4" / "summary.md").read_text()
    assert protocol_report.main([*command, "--out", str(tmp_path / "k16"), "--ks", "1,16"]) == 1
    assert f"need 1 <= k <= samples ({SAMPLES}), got k=16" in capsys.readouterr().err
