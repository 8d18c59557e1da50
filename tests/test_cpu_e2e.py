"""verl's real trainer (``python -m verl.trainer.main_ppo``, V1 path) runs BoT-GRPO on CPU for 2 steps.

A tiny random Qwen2, a tiny tokenizer, a verl parquet and a reward function file are built here; a spy
module, loaded by verl itself in every process (``VERL_USE_EXTERNAL_MODULES``), records each call of the
registered ``bot_grpo`` estimator so that its output can be checked against the independent reference.
"""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import environment_without_cpu_mode
from cpu_assets import (
    SPY_MODULE,
    SPY_SOURCE,
    read_jsonl,
    reference_advantages,
    run_trainer,
    save_tiny_model,
    write_dataset,
    write_reward_function,
)

from bot_grpo_verl import heatmap

pytestmark = pytest.mark.slow  # verl's whole trainer: minutes


def dumped_rows(path: Path) -> list[tuple]:
    """(uid, token rewards, advantages) of each row of a token dump, rounded, sorted."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(
        (row["key"].rsplit("_", 2)[0], tuple(np.round(row["token_rewards"], 5)), tuple(np.round(row["advantages"], 5)))
        for row in rows
    )


def estimated_rows(call: dict) -> list[tuple]:
    """The same of one estimator call the spy saved."""
    rows = zip(call["index"], call["token_level_rewards"], call["advantages"], call["response_mask"], strict=True)
    return sorted(
        (
            uid,
            tuple(np.round(rewards[mask.bool()].double().numpy(), 5)),
            tuple(np.round(advantages[mask.bool()].double().numpy(), 5)),
        )
        for uid, rewards, advantages, mask in rows
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="exercises the CPU mode, for hosts without accelerator")
def test_verl_main_ppo_trains_bot_grpo_on_cpu_for_two_steps(tmp_path):
    model = save_tiny_model(tmp_path / "model")
    write_dataset(tmp_path / "train.parquet", rows=8)
    write_dataset(tmp_path / "val.parquet", rows=4, seed=1)
    write_reward_function(tmp_path / "reward.py")
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir()
    (tmp_path / f"{SPY_MODULE}.py").write_text(SPY_SOURCE)
    metrics_path = tmp_path / "metrics.jsonl"
    env = {
        **environment_without_cpu_mode(),  # the preset alone switches the CPU mode on
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        "VERL_USE_EXTERNAL_MODULES": SPY_MODULE,
        "BOT_GRPO_SPY_DIR": str(spy_dir),
        "VERL_FILE_LOGGER_PATH": str(metrics_path),
        "HF_HOME": str(tmp_path / "hf"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    started = time.monotonic()
    returncode, peak_rss = run_trainer(tmp_path, model, env, "+preset=[bot_grpo,cpu]")
    wall = time.monotonic() - started
    log_tail = (tmp_path / "main_ppo.log").read_text(errors="replace")[-6000:]
    assert returncode == 0, log_tail

    steps = read_jsonl(metrics_path)
    assert [entry["step"] for entry in steps] == [1, 2], log_tail
    for entry in steps:
        data = entry["data"]
        assert torch.isfinite(torch.tensor(data["actor/pg_loss"])) and data["actor/grad_norm"] > 0
        # The rollout tracks the actor: after the step-1 update was synced, log-probs still agree.
        assert data["training/rollout_probs_diff_max"] < 1e-5  # 3.5e-3 at step 2 when the sync is skipped
        # the bot_token manager's logs reach training metrics (verl_compat's _compute_metrics adapter)
        assert 0.0 < data["reward_extra/span_coverage/mean"] < 1.0 and "reward_extra/score/mean" in data
        # the learning signal of the step's advantages (verl_compat's _compute_metrics adapter)
        assert 0.0 <= data["learning_signal/zero_advantage_groups"] < 1.0 and data["learning_signal/advantage_std"] > 0

    calls = [torch.load(path) for path in sorted(spy_dir.glob("*.pt"))]
    assert len(calls) == 2, "verl did not call the bot_grpo estimator once per step"
    dense_rows = [
        len(set(row[mask.bool()].tolist())) > 1
        for call in calls
        for row, mask in zip(call["token_level_rewards"], call["response_mask"], strict=True)
    ]
    assert any(dense_rows), "the estimator received no dense token rewards"
    for call in calls:
        assert call["token_level_rewards"].shape == call["response_mask"].shape
        assert call["options"].get("credit", "token") == "token"  # the reference covers token credit
        expected = reference_advantages(call)
        torch.testing.assert_close(call["advantages"].double(), expected, atol=1e-5, rtol=1e-5)
        assert expected.abs().sum() > 0  # groups had different rewards: the check is not vacuous

    # The token dump beside verl's rollout dump holds what the estimator computed, row for row; the heat-map
    # draws it (bot_grpo_verl.heatmap reads it, nothing recomputed).
    dumps = [dumped_rows(tmp_path / "rollouts" / f"{step}.tokens.jsonl") for step in (1, 2)]
    assert sorted(dumps) == sorted(estimated_rows(call) for call in calls)
    page = tmp_path / "map.html"
    assert heatmap.main([str(tmp_path / "rollouts" / "2.jsonl"), f"--tokenizer={model}", f"--out={page}"]) == 0
    assert page.read_text().count("data-kind='advantage'") == len(dumps[1])

    step_times = [round(entry["data"]["timing_s/step"], 1) for entry in steps]
    print(f"\ncpu e2e: wall {wall:.0f} s, step times {step_times} s, peak RSS {peak_rss / 2**30:.2f} GiB")
