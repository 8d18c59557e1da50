"""verl's real trainer (``python -m verl.trainer.main_ppo``, V1 path) runs BoT-GRPO on CPU for 2 steps.

A tiny random Qwen2, a tiny tokenizer, a verl parquet and a reward function file are built here; a spy
module, loaded by verl itself in every process (``VERL_USE_EXTERNAL_MODULES``), records each call of the
registered ``bot_grpo`` estimator so that its output can be checked against the independent reference.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from conftest import environment_without_cpu_mode
from cpu_assets import read_jsonl, save_tiny_model, write_dataset, write_reward_function
from reference import reference_bot_grpo

from bot_grpo_verl import heatmap

pytestmark = pytest.mark.slow  # verl's whole trainer: minutes
TIMEOUT_S = 900  # ~70 s on an idle 2-core machine; generous for a loaded one
SPY_MODULE = "bot_grpo_estimator_spy"
SPY_SOURCE = '''
"""Wraps verl's registered bot_grpo estimator and saves every call's inputs and outputs."""
import dataclasses
import inspect
import json
import os
import uuid

import torch

import bot_grpo_verl.plugin  # noqa: F401  (registers bot_grpo in this process)
from bot_grpo_verl.estimator import BoTGRPOConfig
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

_original = ADV_ESTIMATOR_REGISTRY["bot_grpo"]
_signature = inspect.signature(_original)


def _spy(*args, **kwargs):
    call = _signature.bind(*args, **kwargs).arguments
    advantages, returns = _original(*args, **kwargs)
    config = call.get("config")
    record = {
        "token_level_rewards": call["token_level_rewards"].detach().cpu(),
        "response_mask": call["response_mask"].detach().cpu(),
        "index": [str(i) for i in call["index"]],
        "advantages": advantages.detach().cpu(),
        "options": dataclasses.asdict(BoTGRPOConfig.from_algorithm_config(config)),
        "norm_adv_by_std_in_grpo": bool(config.get("norm_adv_by_std_in_grpo", True)),
    }
    torch.save(record, os.path.join(os.environ["BOT_GRPO_SPY_DIR"], f"{uuid.uuid4().hex}.pt"))
    return advantages, returns


ADV_ESTIMATOR_REGISTRY["bot_grpo"] = _spy
'''


def overrides(root: Path, model: Path, ray_dir: str) -> list[str]:
    return [
        "+preset=[bot_grpo,cpu]",
        f"data.train_files={root / 'train.parquet'}",
        f"data.val_files={root / 'val.parquet'}",
        "data.train_batch_size=4",
        "data.max_prompt_length=32",
        "data.max_response_length=32",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.actor.use_kl_loss=true",  # builds the FSDP2 forward-only reference engine
        "actor_rollout_ref.actor.optim.lr=1e-3",
        f"reward.custom_reward_function.path={root / 'reward.py'}",
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=[console,file]",
        "trainer.project_name=cpu_e2e",
        "trainer.experiment_name=smoke",
        f"trainer.default_local_dir={root / 'checkpoints'}",
        f"trainer.rollout_data_dir={root / 'rollouts'}",
        f"+ray_kwargs.ray_init._temp_dir={ray_dir}",
    ]


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


def run_and_watch(command: list[str], env: dict, cwd: Path, log: Path) -> tuple[int, float]:
    """Run ``command`` to completion; return its exit code and the peak total RSS (bytes) of its process tree."""
    peak = 0
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TIMEOUT_S
        root = psutil.Process(process.pid)
        while process.poll() is None:
            if time.monotonic() > deadline:
                for child in root.children(recursive=True):
                    child.kill()
                process.kill()
                process.wait()
                pytest.fail(f"main_ppo did not finish in {TIMEOUT_S} s; log: {log}")
            total = 0
            for member in [root, *root.children(recursive=True)]:
                try:
                    total += member.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            peak = max(peak, total)
            time.sleep(0.5)
    return process.returncode, peak


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
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's AF_UNIX socket paths must fit 107 bytes
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(tmp_path, model, ray_dir)]
    started = time.monotonic()
    try:
        returncode, peak_rss = run_and_watch(command, env, tmp_path, tmp_path / "main_ppo.log")
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
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
        expected = reference_bot_grpo(
            call["token_level_rewards"],
            call["response_mask"],
            call["index"],
            weighting=call["options"]["weighting"],
            norm_by_std=call["norm_adv_by_std_in_grpo"],
            outcome_broadcast=call["options"]["outcome_broadcast"],
            eps=call["options"]["epsilon"],
        )
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
