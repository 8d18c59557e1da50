"""The learning-rate sweep: each cell's seed-mean validation Pass@1 per learning rate, and the one it runs at.

The sweep reads the VALIDATION split only (the test split is never read): per cell and learning rate, the
seed-mean validation Pass@1 at the last validation and averaged over the last two; each cell runs at the
learning rate that maximises the chosen criterion (ties: the smaller), or at the one chosen for another cell.
"""

from __future__ import annotations

from benchmarks.reporting.runs import SOLVED, VAL, Runs, held_out_counts, lr_order, split_key
from benchmarks.reporting.statistics import pass_at_k_scores

CRITERIA = ("last_two", "final")
TIE = 1e-12  # sweep scores closer than this are a tie


def sweep_table(runs: Runs, success: str = SOLVED) -> list[dict]:
    """One row per cell and learning rate (cells sorted, learning rates ascending), from the VALIDATION split
    only, samples counted by ``success``: seeds, validation steps, the seed-mean Pass@1 curve, its last value
    (``final``) and the mean of its last two values (``last_two``)."""
    rows = []
    for cell in sorted(runs):
        for lr in sorted(runs[cell], key=lr_order):
            steps, counts = held_out_counts(runs[cell][lr], split_key(VAL, success))
            curve = pass_at_k_scores(counts, 1).mean(axis=(0, 2))
            rows.append(
                {
                    "cell": cell,
                    "lr": lr,
                    "seeds": sorted(runs[cell][lr]),
                    "steps": steps.tolist(),
                    "curve": curve.tolist(),
                    "final": float(curve[-1]),
                    "last_two": float(curve[-2:].mean()),
                }
            )
    return rows


def choose_lrs(rows: list[dict], borrowed: dict[str, str], criterion: str = "last_two") -> dict[str, dict]:
    """``{cell: {"lr": lr, "chosen_by": cell whose sweep chose it}}``.

    Args:
        rows: :func:`sweep_table`'s rows (learning rates ascending within a cell).
        borrowed: ``{cell: source cell}``: the cell runs at the learning rate chosen for the source (a family's
            best reused); it overrides the cell's own sweep.
        criterion: the row score maximised, ``"last_two"`` or ``"final"``; ties (within ``TIE``) go to the
            smaller learning rate.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    best: dict[str, dict] = {}
    for row in rows:
        if row["cell"] not in best or row[criterion] > best[row["cell"]][criterion] + TIE:
            best[row["cell"]] = row
    unswept = sorted(source for source in borrowed.values() if source not in best)
    if unswept:
        raise ValueError(f"--lr-from names cell(s) {unswept} that the sweep did not run; swept: {sorted(best)}")
    chosen = {cell: {"lr": row["lr"], "chosen_by": cell} for cell, row in best.items()}
    chosen.update({cell: {"lr": best[source]["lr"], "chosen_by": source} for cell, source in borrowed.items()})
    return chosen


def at_grid_edge(rows: list[dict], chosen: dict[str, dict]) -> dict[str, str]:
    """``{cell: "smallest" | "largest"}`` for every cell whose own sweep chose the smallest or the largest of
    its (at least two) learning rates: not yet a tuned choice; PROTOCOL.md extends such a cell's grid."""
    swept: dict[str, list[float]] = {}
    for row in rows:
        swept.setdefault(row["cell"], []).append(row["lr"])
    edges = {}
    for cell, lrs in swept.items():
        lr = chosen[cell]["lr"]
        if len(lrs) > 1 and chosen[cell]["chosen_by"] == cell and lr in (min(lrs), max(lrs)):
            edges[cell] = "smallest" if lr == min(lrs) else "largest"
    return edges


def single_lrs(runs: Runs) -> dict[str, dict]:
    """Without a sweep, each cell's only learning rate (``chosen_by`` None); several are refused."""
    several = sorted(cell for cell, by_lr in runs.items() if len(by_lr) > 1)
    if several:
        raise ValueError(f"cell(s) {several} ran at several learning rates: give the sweep (--sweep-dir)")
    return {cell: {"lr": next(iter(by_lr)), "chosen_by": None} for cell, by_lr in runs.items()}


EDGE_FACTOR = 3.0  # the registered edge rule's step beyond a grid's edge


def beyond_edges(chosen: dict[str, dict], edges: dict[str, str]) -> dict[str, float]:
    """``{cell: learning rate}`` the edge rule runs next: a third of the chosen rate where it is its grid's
    smallest, three times it where it is the largest (``edges``: :func:`at_grid_edge`)."""
    factors = {"smallest": 1 / EDGE_FACTOR, "largest": EDGE_FACTOR}
    return {cell: chosen[cell]["lr"] * factors[edge] for cell, edge in sorted(edges.items())}
