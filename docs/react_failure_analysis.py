"""What the React/TSX demo policy gets wrong: the analysis behind docs/react-learnability.md.

``samples``: temperature-1 samples of a demo build's policy on its held-out prompts, scored by the demo's
compile reward: compile rate per component kind, how many failures are a closing JSX tag that does not match
its opening tag (a copy over tens of tokens), the lines the compiler points at, and how sure the policy is
of the reference solutions' tokens (teacher forcing).

``kinds``: per component kind, the held-out compile rate of every validation dump of a demo run.

From the repository root:

    python -m docs.react_failure_analysis samples .cache/demo/<key> --per-prompt 4
    python -m docs.react_failure_analysis kinds runs/demo/bot_grpo .cache/demo/<key> --split test
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoTokenizer, Qwen2ForCausalLM

from demo.sft import encode_examples, sample_responses
from demo.tasks import DATA_SOURCE, REACT_TSX, load_reward_file

TAG = r"ul|ol|article|section|main|div|h1|h2|h3|p|strong|span|button|li"


def held_out(root: Path, split: str) -> pd.DataFrame:
    """The split's prompts, component kinds and reference responses."""
    frame = pd.read_parquet(root / f"{split}.parquet")
    return pd.DataFrame(
        {
            "prompt": [messages[0]["content"] for messages in frame.prompt],
            "kind": [info["kind"] for info in frame.extra_info],
            "reference": [f"```tsx\n{model['ground_truth']}```" for model in frame.reward_model],
        }
    )


def unmatched_tags(text: str) -> bool:
    """Whether the opening and closing tags of ``text`` differ as multisets (a mismatched closing tag)."""
    opened = collections.Counter(re.findall(rf"<({TAG})[ >]", text))
    closed = collections.Counter(re.findall(rf"</({TAG})>", text))
    return opened != closed


def error_lines(text: str, spans: list) -> list[str]:
    """The lines holding the error regions (value < 0) of one failing response."""
    lines = []
    for start, end, value in spans:
        if value < 0:
            first = text.rfind("\n", 0, start) + 1
            last = text.find("\n", end)
            lines.append(text[first : last if last >= 0 else None].strip()[:70])
    return lines


@torch.no_grad()
def reference_confidence(model, tokenizer, frame: pd.DataFrame) -> torch.Tensor:
    """Probability the policy gives each reference response token (teacher forcing), all prompts concatenated."""
    examples = [
        type("Example", (), {"prompt": prompt, "response": reference})()
        for prompt, reference in zip(frame.prompt, frame.reference, strict=True)
    ]
    probabilities = []
    for ids, labels in encode_examples(tokenizer, examples):
        log_probs = model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
        targets = torch.tensor(labels[1:])
        mask = targets != -100
        probabilities.append(log_probs[mask].gather(1, targets[mask, None])[:, 0].exp())
    return torch.cat(probabilities)


def samples(root: Path, per_prompt: int, split: str, seed: int) -> None:
    tokenizer = AutoTokenizer.from_pretrained(root / "model")
    model = Qwen2ForCausalLM.from_pretrained(root / "model").eval()
    frame = held_out(root, split)
    chosen = frame.loc[frame.index.repeat(per_prompt)].reset_index(drop=True)
    ids = sample_responses(model, tokenizer, list(chosen.prompt), 160, seed, batch_size=64)
    texts = [tokenizer.decode(row, skip_special_tokens=True) for row in ids]
    reward = load_reward_file(REACT_TSX)
    results = [reward.compute_score(DATA_SOURCE, text) for text in texts]
    chosen["compiled"] = [result["compiled"] for result in results]
    scored = zip(texts, results, chosen.kind, strict=True)
    failing = [(text, result, kind) for text, result, kind in scored if not result["compiled"]]
    mismatched = collections.Counter(kind for text, _, kind in failing if unmatched_tags(text))
    lines = collections.Counter(line for text, result, _ in failing for line in error_lines(text, result["spans"]))
    confidence = reference_confidence(model, tokenizer, frame)
    report = {
        "samples": len(texts),
        "compile_rate": float(chosen.compiled.mean()),
        "compile_rate_per_kind": chosen.groupby("kind").compiled.mean().round(3).to_dict(),
        "failures": len(failing),
        "failures_with_mismatched_tags": sum(mismatched.values()),
        "mismatched_tags_per_kind": dict(mismatched),
        "most_common_error_lines": lines.most_common(10),
        "reference_token_probability": {
            "mean": float(confidence.mean()),
            "share_below_0.5": float((confidence < 0.5).float().mean()),
        },
    }
    print(json.dumps(report, indent=1, ensure_ascii=False))


def kinds(run: Path, root: Path, split: str) -> None:
    frame = held_out(root, split)
    kind_of = dict(zip(frame.prompt, frame.kind, strict=True))
    print("step " + " ".join(f"{kind[:11]:>11}" for kind in sorted(set(frame.kind))))
    for dump in sorted((run / "validation").glob("*.jsonl"), key=lambda path: int(path.stem)):
        compiled = collections.defaultdict(list)
        for line in dump.read_text().splitlines():
            sample = json.loads(line)
            kind = next(kind for prompt, kind in kind_of.items() if prompt in sample["input"])
            compiled[kind].append(float(sample["acc"]) > 0.5)
        print(f"{dump.stem:>4} " + " ".join(f"{sum(v) / len(v):11.2f}" for _, v in sorted(compiled.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    sampled = commands.add_parser("samples", help="sample the build's policy and analyse its failures")
    sampled.add_argument("build", type=Path, help="a demo build directory (.cache/demo/<key>)")
    sampled.add_argument("--per-prompt", type=int, default=4)
    sampled.add_argument("--split", choices=("val", "test"), default="val")
    sampled.add_argument("--seed", type=int, default=123)
    per_kind = commands.add_parser("kinds", help="per-kind held-out compile rate of a run's validation dumps")
    per_kind.add_argument("run", type=Path, help="a demo run folder holding validation/<step>.jsonl")
    per_kind.add_argument("build", type=Path, help="the demo build directory the run used")
    per_kind.add_argument("--split", choices=("val", "test"), default="val")
    args = parser.parse_args()
    if args.command == "samples":
        samples(args.build, args.per_prompt, args.split, args.seed)
    else:
        kinds(args.run, args.build, args.split)


if __name__ == "__main__":
    main()
