"""The reports' markdown: the sweep's table, the protocol's summary, and a matrix's quick summary."""

from __future__ import annotations

from benchmarks.reporting.runs import SPLIT_NAMES, SUCCESSES, lr_name
from benchmarks.reporting.sweep import at_grid_edge


def sweep_markdown(task: str, rows: list[dict], chosen: dict[str, dict], criterion: str, success: str) -> str:
    """The sweep's table (validation Pass@1, mean over seeds) and the learning rate each cell runs at."""
    lines = [
        f"# Learning-rate sweep: {task} (validation split, Pass@1, mean over seeds)",
        "",
        f"A sample counts as a success by {SUCCESSES[success]}.",
        f"Chosen: the largest `{criterion}` per cell (ties: the smaller learning rate).",
        "",
        "| cell | lr | seeds | last validation | mean of last two | chosen |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        mark = "yes" if chosen.get(row["cell"], {}).get("lr") == row["lr"] else ""
        lines.append(
            f"| {row['cell']} | {lr_name(row['lr'])} | {len(row['seeds'])} | {row['final']:.3f} | "
            f"{row['last_two']:.3f} | {mark} |"
        )
    lines += ["", "| cell | runs at lr | chosen by |", "| --- | --- | --- |"]
    lines += [f"| {cell} | {lr_name(info['lr'])} | {info['chosen_by']} |" for cell, info in sorted(chosen.items())]
    edges = at_grid_edge(rows, chosen)
    if edges:
        named = ", ".join(f"{cell} ({lr_name(chosen[cell]['lr'])}, its {edge})" for cell, edge in sorted(edges.items()))
        lines += ["", f"**At the edge of the grid, so not yet tuned** (PROTOCOL.md extends these grids): {named}."]
    return "\n".join(lines) + "\n"


def number_text(value, digits: int = 3) -> str:
    """A JSON-ready number as text (``n/a``: undefined; ``not reached`` as is)."""
    return f"{value:.{digits}f}" if isinstance(value, float) else value or "n/a"


def interval_text(entry: dict, digits: int = 3) -> str:
    """``estimate [low, high]`` of a JSON-ready :func:`~benchmarks.reporting.statistics.estimate`."""
    low, high = (number_text(entry[bound], digits) for bound in ("low", "high"))
    return f"{number_text(entry['estimate'], digits)} [{low}, {high}]"


def report_markdown(report: dict) -> str:
    """summary.md: the cells' held-out Pass@k and steps, and every comparison with its verdict (JSON-ready report)."""
    ks, baseline, threshold, split = report["ks"], report["baseline"], report["threshold"], report["split"]
    best = report["best_same_information"]
    lines = [
        f"# Protocol report: {report['task']} ({SPLIT_NAMES[split]} split)",
        "",
        f"A sample counts as a success by {SUCCESSES[report['success']]}.",
        f"{report['boot']} bootstrap draws (seed {report['seed']}), 95% percentile intervals resampling seeds "
        "(each cell's own) and problems (the same for every cell, so differences are paired).",
        f"Level: {baseline}'s final {split} Pass@1, {interval_text(report['level'])}. Best same-information "
        f"baseline (best final {split} Pass@1 of {', '.join(report['same_information']) or 'none run'}): {best}.",
        "",
        "## Cells at their learning rates (last validation)",
        "",
        "| cell | lr (chosen by) | seeds | "
        + " | ".join(f"Pass@{k}" for k in ks)
        + " | Pass@1 change from the first validation"
        + f" | steps to {baseline}'s level"
        + (f" | steps to Pass@1 {threshold}" if threshold is not None else "")
        + " | rollouts generated per trained |",
        "| --- " * (6 + len(ks) + (threshold is not None)) + "|",
    ]
    for name, cell in report["cells"].items():
        columns = [name, f"{lr_name(cell['lr'])} ({cell['chosen_by'] or 'only lr'})", str(len(cell["seeds"]))]
        columns += [interval_text(cell["final"][f"pass@{k}"]) for k in ks]
        columns += [f"{interval_text(cell['change']['pass@1'])} ({cell['change']['pass@1']['verdict']})"]
        columns += [interval_text(cell["steps_to_level"], 1)]
        columns += [interval_text(cell["steps_to_threshold"], 1)] if threshold is not None else []
        columns += [number_text(cell["rollouts_generated_per_trained"], 2)]
        lines.append("| " + " | ".join(columns) + " |")
    extra = {
        name: cell["rollouts_generated_per_trained"]
        for name, cell in report["cells"].items()
        if (cell["rollouts_generated_per_trained"] or 1) > 1
    }
    if extra:
        lines += [
            "",
            "**Not the same sampling budget per step**: "
            + ", ".join(f"{name} generated {ratio:.2f}x" for name, ratio in extra.items())
            + " the rollouts it trained on (dynamic sampling regenerates groups whose rollouts all scored alike); "
            "the others train on all they generate. Counted in rollouts rather than steps, these cells took that "
            "many times more.",
        ]
    if report["cells"][baseline]["change"]["pass@1"]["verdict"] != "better":
        lines += [
            "",
            f"**{baseline} did not rise measurably** (its change from the first validation has an interval that "
            "reaches 0): its final level is within noise of where it started, so steps to that level count noise, "
            "not learning.",
        ]
    lines += [
        "",
        "## Comparisons (X - Y at the last validation; steps ratio: X's steps over Y's)",
        "",
        f"P(X > Y): the probability that a run of X beats a run of Y on final {split} Pass@1 (ties 1/2). A steps ratio "
        "is n/a where Y never reaches the level (or starts at it), `not reached` where X never does.",
        "",
        "| X | Y | "
        + " | ".join(f"Pass@{k} difference | verdict" for k in ks)
        + " | P(X > Y) | steps ratio to level"
        + (" | steps ratio to threshold" if threshold is not None else "")
        + " |",
        "| --- " * (4 + 2 * len(ks) + (threshold is not None)) + "|",
    ]
    for entry in report["comparisons"]:
        columns = [entry["cell"], entry["versus"]]
        columns += [text for k in ks for text in (interval_text(entry[f"pass@{k}"]), entry[f"pass@{k}"]["verdict"])]
        columns += [interval_text(entry[key], 2) for key in ("probability_of_improvement", "steps_ratio_to_level")]
        columns += [interval_text(entry["steps_ratio_to_threshold"], 2)] if threshold is not None else []
        lines.append("| " + " | ".join(columns) + " |")
    if report["not_run"]:
        lines += ["", f"Not run yet at their chosen learning rate: {', '.join(report['not_run'])}."]
    return "\n".join(lines) + "\n"


def spread_text(stats: dict, digits: int = 2) -> str:
    """``mean ± std`` of a :func:`~benchmarks.reporting.statistics.spread` (``n/a``: no values)."""
    if stats["mean"] is None:
        return "n/a"
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def matrix_table(summary: dict, metric: str, threshold: float, baseline: str) -> str:
    """A matrix's quick summary (:func:`~benchmarks.reporting.matrix_summary.summarize`): per algorithm steps to
    ``threshold``, area under the curve and final success, each against ``baseline``."""
    lines = [
        f"Success metric `{metric}`, threshold {threshold} (reached when its 3-step moving average is); "
        f"mean ± std over seeds; ratios against `{baseline}`.",
        "",
        "| algorithm | seeds | steps to threshold (reached) | speed-up vs baseline | AUC | AUC ratio | final "
        "| final - baseline |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for algorithm, entry in summary.items():
        versus = entry.get("vs_baseline", {})
        reach = entry["steps_to_threshold"]
        speedup, auc_ratio = versus.get("speedup_to_threshold"), versus.get("auc_ratio")
        final_difference, seeds = versus.get("final_difference"), len(entry["seeds"])
        lines.append(
            f"| {algorithm} | {seeds} | {spread_text(reach, 1)} ({reach['reached']}/{seeds}) "
            f"| {'n/a' if speedup is None else f'{speedup:.2f}x'} | {spread_text(entry['auc'])} "
            f"| {'n/a' if auc_ratio is None else f'{auc_ratio:.2f}'} | {spread_text(entry['final'])} "
            f"| {'n/a' if final_difference is None else f'{final_difference:+.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def pass_at_k_table(summary: dict, baseline: str) -> str:
    """Held-out Pass@k after the last step per algorithm
    (:func:`~benchmarks.reporting.matrix_summary.summarize_pass_at_k`), the largest k against ``baseline``."""
    ks = sorted({int(k) for entry in summary.values() for k in entry.get("after", {})})
    lines = [
        f"Unbiased Pass@k on the held-out prompts after the last step (mean ± std over seeds); the last "
        f"column against `{baseline}`; `before training` pools every run's measurement of the starting model.",
        "",
        "| algorithm | " + " | ".join(f"Pass@{k}" for k in ks) + f" | Pass@{ks[-1]} - baseline |",
        "| --- |" + " --- |" * (len(ks) + 1),
    ]
    for algorithm, entry in summary.items():
        after = entry.get("after", {})
        difference = entry["after_minus_baseline"].get(str(ks[-1]))
        cells = [spread_text(after[str(k)], 3) if str(k) in after else "n/a" for k in ks]
        lines.append(
            f"| {algorithm} | " + " | ".join(cells) + f" | {'n/a' if difference is None else f'{difference:+.3f}'} |"
        )
    return "\n".join(lines) + "\n"


def hypotheses_markdown(report: dict) -> str:
    """hypotheses.md: the token-credit study's cells and each registered hypothesis with its claims, measures and
    verdict (a JSON-ready :func:`~benchmarks.reporting.hypotheses.hypotheses_report`)."""
    threshold = report["threshold"]
    by = f"steps to T = {threshold} (first crossing of the seed-mean test exact rate)" if threshold else None
    lines = [
        f"# {report['task']}: the registered hypotheses (test split)",
        "",
        f"{report['boot']} bootstrap draws (seed {report['seed']}), 95% percentile intervals resampling seeds and "
        "test problems (paired over problems). "
        + (f"Speed: {by}." if by else "No threshold (no tuned arm rose on validation): final exact rates only."),
        "",
        "| cell | lr | seeds | final exact rate | "
        + ("steps to T (share of draws reaching it) | " if threshold else "")
        + "letters right, last 20 training steps | within-group length sd (tokens) | CPU s per run | wall s per run |",
        "| --- " * (8 + bool(threshold)) + "|",
    ]
    for name, cell in report["cells"].items():
        columns = [name, lr_name(cell["lr"]), str(len(cell["seeds"])), interval_text(cell["final"])]
        if threshold:
            steps = cell["steps_to_threshold"]
            columns.append(f"{interval_text(steps, 1)} ({steps['reached']:.2f})")
        for key, digits in (("items_correct_tail", 3), ("within_group_length_std", 2), ("cpu_seconds", 0)):
            columns.append(spread_text(cell.get(key, {"mean": None}), digits))
        columns.append(spread_text(cell.get("wall_seconds", {"mean": None}), 0))
        lines.append("| " + " | ".join(columns) + " |")
    lines += [
        "",
        "A claim says FASTER beats SLOWER: the steps ratio SLOWER / FASTER lies above 1 and the final difference "
        "FASTER - SLOWER above 0 (`apart`), or neither does (`level`); `reversed`: the interval lies on the other "
        "side; `undefined`: FASTER never reaches T. Only the deciding measures (bold) decide.",
    ]
    for hypothesis in report["hypotheses"]:
        lines += ["", f"## {hypothesis['name']}: {hypothesis['words']}: **{hypothesis['verdict']}**", ""]
        if hypothesis["verdict"] == "not run":
            lines.append(f"Not run yet: {', '.join(hypothesis['missing'])}.")
            continue
        lines += ["| slower | faster | expected | measure | estimate [95%] | side |", "| --- " * 6 + "|"]
        for claim in hypothesis["claims"]:
            expected = claim["expect"] + (f", ratio >= {claim['min_ratio']}" if claim["min_ratio"] > 1 else "")
            for measure, values in claim["measures"].items():
                name = f"**{measure}**" if measure in claim["deciding"] else measure
                digits = 2 if measure == "steps to T" else 3
                lines.append(
                    f"| {claim['slower']} | {claim['faster']} | {expected} | {name} | "
                    f"{interval_text(values, digits)} | {claim['sides'][measure]} |"
                )
    return "\n".join(lines) + "\n"
