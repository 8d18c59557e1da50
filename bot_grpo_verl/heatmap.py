"""See what the algorithm sees: saved rollouts coloured by per-token reward and BoT-GRPO advantage.

Works on the rollouts verl dumps (``trainer.rollout_data_dir`` / ``trainer.validation_data_dir``: JSONL
with ``input``, ``output`` and ``gts``), or any JSONL with those keys. The reward function is called
again on each output, its spans are aligned to the tokens exactly as the ``bot_token`` reward manager
does in training, and the rollouts of one prompt (same ``input``) form one BoT-GRPO group.

    python -m bot_grpo_verl.heatmap rollouts/12.jsonl --tokenizer MODEL_DIR \\
        --reward-fn reward_models/react_tsx.py:compute_score --out heatmap.html --png heatmap.png
"""

from __future__ import annotations

import argparse
import asyncio
import html
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bot_grpo_verl.alignment import token_char_ranges
from bot_grpo_verl.estimator import compute_bot_grpo_advantage
from bot_grpo_verl.reward_manager import TokenRewardConfig, dense_token_rewards


@dataclass
class TokenView:
    """One rollout as tokens: ``pieces[k]`` is the text token k shows, ``rewards``/``advantages`` are (L,)."""

    group: str
    score: float
    pieces: list[str]
    rewards: np.ndarray
    advantages: np.ndarray | None = None


def load_rollouts(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for number, row in enumerate(rows):
        missing = {"input", "output"} - set(row)
        if missing:
            raise ValueError(f"{path}:{number + 1}: a rollout needs 'input' and 'output', missing {sorted(missing)}")
    return rows


def score_rollouts(rows, tokenizer, reward_fn, data_source="unknown", options=None) -> list[TokenView]:
    """Token rewards of each rollout, computed as the ``bot_token`` reward manager computes them in training."""
    views = []
    for row in rows:
        ids = tokenizer.encode(row["output"], add_special_tokens=False)
        text, ranges = token_char_ranges(tokenizer, ids)
        result = reward_fn(
            data_source=row.get("data_source", data_source),
            solution_str=text,
            ground_truth=row.get("gts"),
            extra_info=row.get("extra_info") or {},
        )
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        rewards, info = dense_token_rewards(result, tokenizer, ids, options or TokenRewardConfig())
        # A character split across tokens is shown once, on the token that completes it.
        shown_later = np.append(np.all(ranges[:-1] == ranges[1:], axis=1), False)
        pieces = ["" if later else text[start:end] for (start, end), later in zip(ranges, shown_later, strict=True)]
        views.append(TokenView(row["input"], info["score"], pieces, rewards))
    return views


async def _awaited(result):
    return await result


def add_advantages(views: list[TokenView], algorithm_config=None) -> None:
    """BoT-GRPO advantages of every token, the rollouts of one prompt (same ``input``) forming a group.

    (verl's V1 dumps name each rollout by its own ``{uid}_{session}_{index}`` key, so ``uid`` does not group.)"""
    width = max((len(view.rewards) for view in views), default=0)
    rewards = torch.zeros(len(views), width, dtype=torch.float64)
    mask = torch.zeros(len(views), width)
    for row, view in enumerate(views):
        rewards[row, : len(view.rewards)] = torch.from_numpy(view.rewards)
        mask[row, : len(view.rewards)] = 1
    index = np.array([view.group for view in views], dtype=object)
    advantages, _ = compute_bot_grpo_advantage(rewards, mask, index, algorithm_config)
    for row, view in enumerate(views):
        view.advantages = advantages[row, : len(view.rewards)].numpy()


def _colour(value: float, scale: float) -> str:
    """Red for negative, blue for positive, white at zero (a diverging map, symmetric in ``scale``)."""
    strength = min(abs(value) / scale, 1.0) if scale > 0 else 0.0
    fade = int(255 * (1 - 0.75 * strength))
    return f"rgb(255,{fade},{fade})" if value < 0 else f"rgb({fade},{fade},255)"


def render_html(views: list[TokenView], path: Path) -> None:
    reward_scale = max((float(np.abs(v.rewards).max(initial=0)) for v in views), default=0.0)
    advantage_scale = max((float(np.abs(v.advantages).max(initial=0)) for v in views), default=0.0)
    parts = [
        "<!doctype html><meta charset='utf-8'><title>BoT-GRPO token heat-map</title>",
        "<style>body{font-family:sans-serif} .row{font-family:monospace;white-space:pre-wrap;margin:2px 0 10px}"
        " .t{border-right:1px solid #eee} h3{margin:14px 0 2px;font-size:14px}</style>",
        "<p>Each rollout twice: coloured by token reward, then by BoT-GRPO advantage (blue positive, red "
        f"negative; full colour at |reward| = {reward_scale:.3g}, |advantage| = {advantage_scale:.3g}). "
        "Hover a token for its values.</p>",
    ]
    for number, view in enumerate(views):
        parts.append(f"<h3>#{number} group {html.escape(view.group[:60])} score {view.score:.3g}</h3>")
        for label, values, scale in (
            ("reward", view.rewards, reward_scale),
            ("advantage", view.advantages, advantage_scale),
        ):
            cells = [
                f"<span class='t' style='background:{_colour(value, scale)}' "
                f"title='token {k}: reward {view.rewards[k]:.4g}, advantage {view.advantages[k]:.4g}'>"
                f"{html.escape(piece) or '&#8709;'}</span>"
                for k, (piece, value) in enumerate(zip(view.pieces, values, strict=True))
            ]
            parts.append(f"<div class='row' data-kind='{label}'>{''.join(cells)}</div>")
    path.write_text("\n".join(parts), encoding="utf-8")


def render_png(views: list[TokenView], path: Path, max_tokens: int = 120) -> None:
    """Reward and advantage of the first ``max_tokens`` tokens of each rollout, as two heat-map rows each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = min(max(len(view.rewards) for view in views), max_tokens)
    grid = np.full((2 * len(views), width), np.nan)
    for row, view in enumerate(views):
        grid[2 * row, : min(width, len(view.rewards))] = view.rewards[:width]
        grid[2 * row + 1, : min(width, len(view.rewards))] = view.advantages[:width]
    figure, axis = plt.subplots(figsize=(min(24, 2 + width * 0.12), 1 + 0.45 * len(grid)))
    scale = float(np.nanmax(np.abs(grid))) or 1.0
    image = axis.imshow(grid, cmap="RdBu", vmin=-scale, vmax=scale, aspect="auto", interpolation="nearest")
    axis.set_yticks(
        range(len(grid)), [f"#{r // 2} {'reward' if r % 2 == 0 else 'advantage'}" for r in range(len(grid))]
    )
    axis.set_xlabel("response token")
    axis.set_title("Per-token reward and BoT-GRPO advantage")
    figure.colorbar(image, ax=axis, fraction=0.02)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _load_function(spec: str):
    from verl.utils.import_utils import load_extern_object

    path, _, name = spec.rpartition(":")
    if not path:
        raise ValueError(f"--reward-fn must be FILE.py:FUNCTION, got {spec!r}")
    return load_extern_object(module_path=path, object_name=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rollouts", type=Path, help="JSONL of rollouts (verl's rollout dump)")
    parser.add_argument("--tokenizer", required=True, help="tokenizer (model) directory of the policy")
    parser.add_argument("--reward-fn", required=True, help="FILE.py:FUNCTION, the run's reward function")
    parser.add_argument("--data-source", default="unknown", help="data_source for rows that do not carry one")
    parser.add_argument("--limit", type=int, default=32, help="rollouts to show (first N)")
    parser.add_argument("--out", type=Path, default=Path("heatmap.html"))
    parser.add_argument("--png", type=Path, default=None, help="also write a PNG heat-map")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    rows = load_rollouts(args.rollouts)[: args.limit]
    views = score_rollouts(rows, tokenizer, _load_function(args.reward_fn), args.data_source)
    add_advantages(views)
    render_html(views, args.out)
    print(f"wrote {args.out} ({len(views)} rollouts)")
    if args.png:
        render_png(views, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
