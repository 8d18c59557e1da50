"""The heat-map tool on a verl-style rollout dump: token rewards as in training, advantages per group."""

import html
import json
import re

import numpy as np
import pytest
import torch
from reference import reference_bot_grpo, reference_token_values
from tokenizer_fixtures import byte_level_bpe

from bot_grpo_verl import heatmap

REWARD = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    cut = solution_str.find("<")
    cut = len(solution_str) if cut < 0 else cut
    return {"score": float(ground_truth in solution_str), "spans": [(0, cut, 0.5), (cut, len(solution_str), -1.0)]}
"""
OUTPUTS = ["const a = 1; <div>ok</div>", "return 🚀 <p>", "x = 42", "42 < 43 naïve"]


def spans_of(text):
    cut = text.find("<")
    cut = len(text) if cut < 0 else cut
    return [(0, cut, 0.5), (cut, len(text), -1.0)]


@pytest.fixture
def dump(tmp_path):
    tokenizer = byte_level_bpe()
    tokenizer.save_pretrained(tmp_path / "tok")
    (tmp_path / "reward.py").write_text(REWARD)
    rows = [
        {"input": f"prompt {i // 2}", "output": out, "gts": "42", "score": 0.0, "step": 3, "uid": f"u{i // 2}"}
        for i, out in enumerate(OUTPUTS)
    ]
    (tmp_path / "3.jsonl").write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows))
    return tmp_path


def test_html_and_png_show_the_training_time_rewards_and_advantages(dump):
    out, png = dump / "map.html", dump / "map.png"
    argv = [
        str(dump / "3.jsonl"),
        "--tokenizer",
        str(dump / "tok"),
        "--reward-fn",
        f"{dump / 'reward.py'}:compute_score",
    ]
    assert heatmap.main([*argv, "--out", str(out), "--png", str(png)]) == 0

    tokenizer = byte_level_bpe()
    expected_rewards = []
    for text in OUTPUTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        expected_rewards.append(reference_token_values(tokenizer, ids, spans_of(text), float("42" in text)))
    width = max(len(r) for r in expected_rewards)
    padded = torch.zeros(len(OUTPUTS), width, dtype=torch.float64)
    mask = torch.zeros(len(OUTPUTS), width)
    for row, values in enumerate(expected_rewards):
        padded[row, : len(values)] = torch.tensor(values)
        mask[row, : len(values)] = 1
    expected_advantages = reference_bot_grpo(padded, mask, np.array(["u0", "u0", "u1", "u1"], dtype=object))

    page = out.read_text(encoding="utf-8")
    reward_rows = re.findall(r"<div class='row' data-kind='reward'>(.*?)</div>", page)
    assert len(reward_rows) == len(OUTPUTS)
    for row, cells in enumerate(reward_rows):
        titles = re.findall(r"title='token (\d+): reward ([-\d.e]+), advantage ([-\d.e]+)'>(.*?)</span>", cells)
        assert [int(t[0]) for t in titles] == list(range(len(expected_rewards[row])))
        np.testing.assert_allclose([float(t[1]) for t in titles], expected_rewards[row], atol=1e-3)
        np.testing.assert_allclose([float(t[2]) for t in titles], expected_advantages[row, : len(titles)], atol=1e-3)
        assert "".join(html.unescape(t[3]) for t in titles).replace("\u2205", "") == OUTPUTS[row]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rollouts_without_outputs_are_refused(tmp_path):
    (tmp_path / "bad.jsonl").write_text(json.dumps({"input": "p"}))
    with pytest.raises(ValueError, match=r"bad.jsonl:1: a rollout needs 'input' and 'output', missing \['output'\]"):
        heatmap.load_rollouts(tmp_path / "bad.jsonl")
