"""See what training saw: a step's rollouts coloured by per-token reward and advantage.

Reads the token dump that a run selecting the plugin writes beside verl's rollout dump
(``trainer.rollout_data_dir/<step>.tokens.jsonl``, :mod:`bot_grpo_verl.verl_compat.token_dump`): the sampled
token ids, EOS included, with the token rewards and the advantages exactly as the update used them. Nothing is
re-encoded or recomputed. verl's own ``<step>.jsonl`` beside it gives each rollout's prompt and score. The
rollouts of one prompt (one ``uid``) form a group; ``--limit`` counts whole groups. In a multi-turn response
the tokens the policy did not generate (tool output, chat-template tokens: out of the loss) are drawn grey and
each assistant turn after the first is labelled.

    python -m bot_grpo_verl.heatmap rollouts/12.jsonl --tokenizer MODEL_DIR --out heatmap.html --png heatmap.png
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bot_grpo_verl.reward.alignment import token_char_ranges
from bot_grpo_verl.verl_compat.token_dump import TOKEN_DUMP_SUFFIX


@dataclass
class TokenView:
    """One rollout as tokens: ``pieces[k]`` is the text token k shows, ``rewards``/``advantages`` are (L,),
    ``assistant`` bool (L,): the tokens the policy generated (the others are tool output or template)."""

    group: str
    prompt: str
    score: float
    pieces: list[str]
    rewards: np.ndarray
    advantages: np.ndarray
    assistant: np.ndarray

    def turn_starts(self) -> list[int]:
        """The first token of every assistant turn after the first."""
        starts = np.flatnonzero(self.assistant[1:] & ~self.assistant[:-1]) + 1
        return starts[starts > np.argmax(self.assistant)].tolist() if self.assistant.any() else []


def token_dump_path(path: Path) -> Path:
    """The token dump of a rollout dump ``<step>.jsonl`` (or the token dump itself)."""
    return path if path.name.endswith(TOKEN_DUMP_SUFFIX) else path.with_name(path.stem + TOKEN_DUMP_SUFFIX)


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error})") from None
    return rows


def load_views(path: Path, tokenizer, groups: int | None = None) -> list[TokenView]:
    """The rollouts of the first ``groups`` groups (all when None) of the dump at ``path``.

    Raises:
        ValueError: when the token dump is missing (a run that did not select the plugin, or an older one)
            or a row lacks a field.
    """
    tokens_path = token_dump_path(path)
    if not tokens_path.is_file():
        raise ValueError(
            f"no token dump {tokens_path}: it is written beside verl's rollout dump by runs that use the plugin "
            "with trainer.rollout_data_dir set"
        )
    text_path = tokens_path.with_name(tokens_path.name.removesuffix(TOKEN_DUMP_SUFFIX) + ".jsonl")
    by_key = {row.get("uid"): row for row in read_jsonl(text_path)} if text_path.is_file() else {}
    views, seen = [], []
    for row in read_jsonl(tokens_path):
        missing = {"key", "response_ids", "token_rewards", "advantages"} - set(row)
        if missing:
            raise ValueError(f"{tokens_path}: a row lacks {sorted(missing)}")
        group = row["key"].rsplit("_", 2)[0]
        if group not in seen:
            if groups is not None and len(seen) == groups:
                break
            seen.append(group)
        text, ranges = token_char_ranges(tokenizer, row["response_ids"])
        # A character split across tokens is shown once, on the token that completes it.
        shown_later = np.append(np.all(ranges[:-1] == ranges[1:], axis=1), False) if len(ranges) else []
        pieces = [
            "" if later else visible(text[start:end]) for (start, end), later in zip(ranges, shown_later, strict=True)
        ]
        text_row = by_key.get(row["key"], {})
        views.append(
            TokenView(
                group,
                str(text_row.get("input", "")),
                float(text_row.get("score", float(np.sum(row["token_rewards"])))),
                pieces,
                np.asarray(row["token_rewards"], dtype=np.float64),
                np.asarray(row["advantages"], dtype=np.float64),
                np.asarray(row.get("assistant", [True] * len(row["response_ids"])), dtype=bool),  # older dumps
            )
        )
    return views


def visible(text: str) -> str:
    """``text`` with control and format characters (bidi overrides, zero-width marks, ...) written as
    ``<U+202E>`` escapes, so model text cannot reorder or hide what follows it; newlines and tabs stay."""
    return "".join(
        f"<U+{ord(character):04X}>"
        if character not in "\n\t" and unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp")
        else character
        for character in text
    )


def _colour(value: float, scale: float) -> str:
    """Red for negative, blue for positive, white at zero (a diverging map, symmetric in ``scale``)."""
    strength = min(abs(value) / scale, 1.0) if scale > 0 else 0.0
    fade = int(255 * (1 - 0.75 * strength))
    return f"rgb(255,{fade},{fade})" if value < 0 else f"rgb({fade},{fade},255)"


def largest(values: list[np.ndarray]) -> float:
    return max((float(np.abs(value).max(initial=0)) for value in values), default=0.0)


def render_html(views: list[TokenView], path: Path) -> None:
    reward_scale = largest([view.rewards for view in views])
    advantage_scale = largest([view.advantages for view in views])
    parts = [
        "<!doctype html><meta charset='utf-8'><title>BoT-GRPO token heat-map</title>",
        "<style>body{font-family:sans-serif} .row{font-family:monospace;white-space:pre-wrap;margin:2px 0 10px}"
        " .t{border-right:1px solid #eee} .m{background:#ddd;color:#777} .turn{font-weight:bold;color:#555}"
        " h3{margin:14px 0 2px;font-size:14px} h2{border-top:2px solid #888}</style>",
        "<p>Each rollout twice: coloured by token reward, then by advantage, as training used them (blue "
        f"positive, red negative; full colour at |reward| = {reward_scale:.3g}, |advantage| = "
        f"{advantage_scale:.3g}); grey: tool output and template tokens, out of the loss. Hover a token for its "
        "values.</p>",
    ]
    if not views:
        parts.append("<p>No rollouts in this dump.</p>")
    group = None
    for number, view in enumerate(views):
        if view.group != group:
            group = view.group
            parts.append(f"<h2>group {html.escape(group[:60])}: {html.escape(visible(view.prompt)[:200])}</h2>")
        parts.append(f"<h3>#{number} score {view.score:.3g}, {len(view.pieces)} tokens</h3>")
        for label, values, scale in (
            ("reward", view.rewards, reward_scale),
            ("advantage", view.advantages, advantage_scale),
        ):
            turns = {start: number for number, start in enumerate(view.turn_starts(), 2)}
            cells = [
                (f"<span class='turn'>[turn {turns[k]}]</span>" if k in turns else "")
                + (
                    f"<span class='t' style='background:{_colour(value, scale)}' "
                    if view.assistant[k]
                    else "<span class='t m' "
                )
                + f"title='token {k}: reward {view.rewards[k]:.4g}, advantage {view.advantages[k]:.4g}"
                + ("" if view.assistant[k] else " (not generated: out of the loss)")
                + f"'>{html.escape(piece) or '&#8709;'}</span>"
                for k, (piece, value) in enumerate(zip(view.pieces, values, strict=True))
            ]
            body = "".join(cells) or "<i>(empty response)</i>"
            parts.append(f"<div class='row' data-kind='{label}'>{body}</div>")
    path.write_text("\n".join(parts), encoding="utf-8")


def cell_label(piece: str) -> str:
    """A token's text as a PNG cell shows it: at most 2 characters (a longer one cut to 1 and ``…``), spaces as
    ``·``, newlines as ``↵``, tabs as ``→``."""
    shown = piece.replace(" ", "·").replace("\n", "↵").replace("\t", "→")
    return shown if len(shown) <= 2 else shown[:1] + "…"


def render_png(views: list[TokenView], path: Path, max_tokens: int = 120) -> None:
    """Reward and advantage of the first ``max_tokens`` tokens of each rollout, as two heat-map rows each, each
    kind on its own colour scale, tokens not generated by the policy grey, groups separated by a line, each
    reward cell labelled with its token's text (:func:`cell_label`; a cell is 0.12 inch wide up to 183 columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(1, min(max((len(view.rewards) for view in views), default=1), max_tokens))
    rewards = np.full((2 * len(views), width), np.nan)
    advantages = np.full((2 * len(views), width), np.nan)
    not_generated = np.full((2 * len(views), width), np.nan)
    for row, view in enumerate(views):
        shown = min(width, len(view.rewards))
        rewards[2 * row, :shown] = np.where(view.assistant[:width], view.rewards[:width], np.nan)
        advantages[2 * row + 1, :shown] = np.where(view.assistant[:width], view.advantages[:width], np.nan)
        not_generated[2 * row : 2 * row + 2, :shown] = np.where(view.assistant[:width], np.nan, 1.0)
    figure, axis = plt.subplots(figsize=(min(24, 2 + width * 0.12), 1.5 + 0.45 * max(1, len(rewards))))
    if not views:
        axis.text(0.5, 0.5, "no rollouts in this dump", ha="center", va="center", transform=axis.transAxes)
    for grid, colours, label in ((rewards, "PuOr", "token reward"), (advantages, "RdBu", "advantage")):
        scale = float(np.nanmax(np.abs(grid), initial=0.0)) or 1.0
        image = axis.imshow(grid, cmap=colours, vmin=-scale, vmax=scale, aspect="auto", interpolation="nearest")
        figure.colorbar(image, ax=axis, fraction=0.02, label=label)
    axis.imshow(not_generated, cmap="Greys", vmin=0, vmax=4, aspect="auto", interpolation="nearest")
    for row in range(1, len(views)):
        if views[row].group != views[row - 1].group:
            axis.axhline(2 * row - 0.5, color="black", linewidth=1.5)
    for row, view in enumerate(views):
        for column, piece in enumerate(view.pieces[:width]):
            axis.text(column, 2 * row, cell_label(piece), ha="center", va="center", fontsize=5, clip_on=True)
    axis.set_yticks(
        range(len(rewards)), [f"#{r // 2} {'reward' if r % 2 == 0 else 'advantage'}" for r in range(len(rewards))]
    )
    axis.set_xlabel("response token")
    axis.set_title("Per-token reward and advantage, as training used them")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def positive(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rollouts", type=Path, help="verl's rollout dump <step>.jsonl, or its <step>.tokens.jsonl")
    parser.add_argument("--tokenizer", required=True, help="tokenizer (model) directory of the policy")
    parser.add_argument("--limit", type=positive, default=8, help="prompt groups to show (the first N, whole)")
    parser.add_argument("--out", type=Path, default=Path("heatmap.html"))
    parser.add_argument("--png", type=Path, default=None, help="also write a PNG heat-map")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    try:
        views = load_views(args.rollouts, tokenizer, args.limit)
    except ValueError as error:
        print(f"PROBLEM: {error}", file=sys.stderr)
        return 1
    render_html(views, args.out)
    print(f"wrote {args.out} ({len(views)} rollouts)")
    if args.png:
        render_png(views, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
