"""Tiny assets for the CPU-mode tests, built locally (no downloads): a ~1M-parameter Qwen2 with random
weights, a BPE tokenizer with the demo's chat format (:mod:`demo.tiny_model`), a verl RL parquet and a reward
function file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
from tokenizer_fixtures import byte_level_bpe_model
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from demo.tiny_model import CHAT_TEMPLATE, EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS, build_model

WORDS = "add the numbers and write a short answer with steps one two three four five six seven eight nine ten"
REWARD_SOURCE = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Outcome: the share of the response's characters that are the letter in ground_truth; token level:
    the first half of the response carries +1 if the letter occurs at all, else -1 (the other tokens get
    the outcome). Half a response always spans whole tokens, whatever a random policy samples."""
    half = len(solution_str) // 2
    spans = [(0, half, 1.0 if ground_truth in solution_str else -1.0)] if half else []
    return {"score": solution_str.count(ground_truth) / max(len(solution_str), 1), "spans": spans}
'''


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE (vocab ~300) with Qwen-style chat tokens and template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=byte_level_bpe_model([WORDS] * 50, 300, SPECIAL_TOKENS),
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
    )


def tiny_qwen2(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 (~0.9M parameters) over ``tokenizer``'s vocabulary."""
    model = build_model(
        tokenizer,
        seed,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return model.eval()


def save_tiny_model(directory: Path, seed: int = 0) -> Path:
    """Write the tiny tokenizer and model (safetensors, fp32) to ``directory``; return it."""
    tokenizer = tiny_tokenizer()
    model = tiny_qwen2(tokenizer, seed)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def write_dataset(path: Path, rows: int, seed: int = 0) -> Path:
    """A parquet in verl's RL format: chat prompt, data_source, reward_model.ground_truth, extra_info."""
    generator = torch.Generator().manual_seed(seed)
    letters = "aeiou"
    records = []
    for index in range(rows):
        a, b = (int(x) for x in torch.randint(1, 9, (2,), generator=generator))
        records.append(
            {
                "data_source": "cpu_smoke",
                "prompt": [{"role": "user", "content": f"add {a} and {b}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": letters[index % len(letters)]},
                "extra_info": {"split": "train", "index": index},
            }
        )
    pd.DataFrame(records).to_parquet(path)
    return path


def write_reward_function(path: Path) -> Path:
    path.write_text(REWARD_SOURCE)
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
