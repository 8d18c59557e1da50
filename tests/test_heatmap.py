"""The heat-map shows what training saw: the token dump's ids, rewards and advantages, whole groups, any text.

That the token dump holds the advantages the estimator computed is checked through verl's real trainer in
``test_cpu_e2e.py``; here, the dump's rows (:func:`token_dump_rows`) and what the heat-map makes of a dump.
"""

import html
import json
import re

import numpy as np
import pytest
import torch

from benchmarks.local_tokenizers import byte_level_bpe
from bot_grpo_verl import heatmap
from bot_grpo_verl.verl_compat.token_dump import token_dump_rows

OUTPUTS = ["const a = 1; <div>ok</div>", "return 🚀 <p>", "", "x = 42 \u202eevil\u202c done", "42 < 43 naïve", "ok"]
KEYS = ["u0_0_0", "u0_1_0", "u1_0_0", "u1_1_0", "u2_0_0", "u2_1_0"]


def cells(page: str, kind: str) -> list[list[tuple]]:
    rows = re.findall(rf"<div class='row' data-kind='{kind}'>(.*?)</div>", page)
    values = r"token (\d+): reward ([-\d.e+]+|nan), advantage ([-\d.e+]+|nan)"
    pattern = rf"title='{values}(?: \(not generated[^)]*\))?'>(.*?)</span>"
    return [re.findall(pattern, row) for row in rows]


@pytest.fixture
def dump(tmp_path):
    tokenizer = byte_level_bpe()
    tokenizer.save_pretrained(tmp_path / "tok")
    generator = np.random.default_rng(0)
    token_rows, text_rows = [], []
    for key, text in zip(KEYS, OUTPUTS, strict=True):
        ids = tokenizer.encode(text, add_special_tokens=False) + ([tokenizer.eos_token_id] if text else [])
        rewards, advantages = generator.normal(size=len(ids)).round(3), generator.normal(size=len(ids)).round(3)
        token_rows.append(
            {"key": key, "response_ids": ids, "token_rewards": rewards.tolist(), "advantages": advantages.tolist()}
        )
        text_rows.append({"input": f"prompt of {key[:2]}", "output": text, "score": 1.0, "step": 3, "uid": key})
    (tmp_path / "3.jsonl").write_text("\n".join(json.dumps(row) for row in text_rows), encoding="utf-8")
    (tmp_path / "3.tokens.jsonl").write_text("\n".join(json.dumps(row) for row in token_rows), encoding="utf-8")
    return tmp_path, token_rows


def run(folder, *extra):
    out, png = folder / "map.html", folder / "map.png"
    argv = [str(folder / "3.jsonl"), "--tokenizer", str(folder / "tok"), "--out", str(out), "--png", str(png), *extra]
    return heatmap.main(argv), out.read_text(encoding="utf-8") if out.exists() else "", png


def test_the_map_shows_the_dumped_ids_rewards_and_advantages_exactly(dump):
    folder, token_rows = dump
    code, page, png = run(folder, "--limit", "3")
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rewards, advantages = cells(page, "reward"), cells(page, "advantage")
    assert len(rewards) == len(token_rows)
    tokenizer = byte_level_bpe()
    for shown, row in zip(rewards, token_rows, strict=True):
        assert [int(cell[0]) for cell in shown] == list(range(len(row["response_ids"])))  # the EOS token too
        np.testing.assert_allclose([float(cell[1]) for cell in shown], row["token_rewards"], atol=1e-3)
        np.testing.assert_allclose([float(cell[2]) for cell in shown], row["advantages"], atol=1e-3)
        text = "".join(html.unescape(cell[3]) for cell in shown).replace("\u2205", "")
        expected = tokenizer.decode(row["response_ids"], skip_special_tokens=True)
        assert text == heatmap.visible(expected)
    assert [len(row) for row in advantages] == [len(row["response_ids"]) for row in token_rows]


def test_limit_counts_whole_groups_and_refuses_zero_or_negative(dump, capsys):
    folder, _ = dump
    code, page, _ = run(folder, "--limit", "2")
    assert code == 0 and len(cells(page, "reward")) == 4 and page.count("<h2>group ") == 2
    for bad in ("0", "-1"):
        with pytest.raises(SystemExit):
            run(folder, "--limit", bad)
        assert "invalid positive value" in capsys.readouterr().err


def test_empty_responses_and_empty_dumps_are_drawn(dump, tmp_path):
    folder, _ = dump
    code, page, _ = run(folder)
    assert code == 0 and "(empty response)" in page
    (folder / "3.tokens.jsonl").write_text("")
    code, page, png = run(folder)
    assert code == 0 and "No rollouts in this dump" in page and png.read_bytes()[:4] == b"\x89PNG"


def test_control_characters_are_shown_as_escapes_never_as_themselves(dump):
    folder, _ = dump
    _, page, _ = run(folder)
    assert "\u202e" not in page and "\u202c" not in page
    assert "&lt;U+202E&gt;" in page and "&lt;U+202C&gt;" in page
    assert heatmap.visible("a\nb\tc\u200bd\x07") == "a\nb\tc<U+200B>d<U+0007>"


def test_a_dump_without_its_token_dump_ends_with_one_problem_line(dump, capsys):
    folder, _ = dump
    (folder / "3.tokens.jsonl").unlink()
    code, _, _ = run(folder)
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(error) == 1 and error[0].startswith("PROBLEM: no token dump ")


def test_token_dump_rows_keep_valid_tokens_in_verls_order():
    keys = ["b_0_0", "a_1_0", "a_0_1", "a_0_0"]
    lengths = [3, 1, 2, 0]

    def nested(values, dtype=torch.float32):
        return torch.nested.as_nested_tensor([torch.tensor(v, dtype=dtype) for v in values], layout=torch.jagged)

    responses = [list(range(10 * k, 10 * k + n)) for k, n in enumerate(lengths)]
    data = {
        "responses": nested(responses, torch.long),
        "response_mask": nested([[1] * n for n in lengths], torch.long),
        "rm_scores": nested([[float(k)] * n for k, n in enumerate(lengths)]),
        "advantages": nested([[-float(k)] * n for k, n in enumerate(lengths)]),
    }
    rows = token_dump_rows(keys, data)
    assert [row["key"] for row in rows] == ["a_0_0", "a_0_1", "a_1_0", "b_0_0"]
    assert [row["response_ids"] for row in rows] == [[], [20, 21], [10], [0, 1, 2]]
    assert rows[1]["token_rewards"] == [2.0, 2.0] and rows[1]["advantages"] == [-2.0, -2.0]


@pytest.mark.parametrize(
    ("piece", "label"), [("ab", "ab"), (" x", "·x"), ("\n", "↵"), ("\treturn", "→…"), ("", ""), ("😀", "😀")]
)
def test_png_cells_show_at_most_two_characters_of_their_token(piece, label):
    assert heatmap.cell_label(piece) == label


def test_token_dump_rows_keep_tool_output_between_turns_and_mark_it():
    mask = [1, 1, 0, 0, 1, 1, 0, 0]  # turn, tool output, turn, padding
    data = {
        "responses": torch.tensor([list(range(8))]),
        "response_mask": torch.tensor([mask]),
        "rm_scores": torch.tensor([[0.5, 0.5, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]]),
        "advantages": torch.tensor([[1.0, 1.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0]]),
    }
    (row,) = token_dump_rows(["u_0_0"], data)
    assert row["response_ids"] == [0, 1, 2, 3, 4, 5]
    assert row["assistant"] == [True, True, False, False, True, True]
    assert row["advantages"] == [1.0, 1.0, 0.0, 0.0, 2.0, 2.0]


def test_the_map_greys_tool_output_and_labels_each_later_turn(tmp_path):
    tokenizer = byte_level_bpe()
    tokenizer.save_pretrained(tmp_path / "tok")
    ids = tokenizer.encode("ask 2+3 -> 5 so 5", add_special_tokens=False)
    assistant = [True] * 3 + [False] * 3 + [True] * (len(ids) - 6)
    row = {"key": "u_0_0", "response_ids": ids, "token_rewards": [1.0] * len(ids), "advantages": [0.5] * len(ids)}
    (tmp_path / "3.tokens.jsonl").write_text(json.dumps({**row, "assistant": assistant}), encoding="utf-8")
    code, page, png = run(tmp_path)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    (shown,) = cells(page, "reward")[:1]
    assert len(shown) == len(ids)
    grey = re.findall(r"<span class='t m' title='token (\d+):", page.split("data-kind='advantage'")[0])
    assert [int(k) for k in grey] == [3, 4, 5]
    assert page.count("[turn 2]") == 2 and "[turn 3]" not in page  # once per row kind
    assert re.search(r"\[turn 2\]</span><span class='t' style='[^']*' title='token 6:", page)


def test_an_older_dump_without_the_assistant_mask_shows_every_token_generated(dump):
    folder, _ = dump
    _, page, _ = run(folder)
    assert "class='t m'" not in page and "[turn" not in page
