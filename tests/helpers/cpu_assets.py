"""Tiny assets for the CPU-mode tests, built locally (no downloads): a ~1M-parameter Qwen2 with random
weights, a BPE tokenizer with the demo's chat format (:mod:`demo.tiny_model`), a verl RL parquet and a reward
function file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch
from reference import reference_bot_grpo
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from benchmarks.local_tokenizers import byte_level_bpe_model
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


SPY_MODULE = "bot_grpo_estimator_spy"
"""A module verl loads in every process (``VERL_USE_EXTERNAL_MODULES``) that records each ``bot_grpo`` call."""
SPY_SOURCE = '''
"""Wraps verl's registered bot_grpo estimator and saves every call's inputs and outputs."""
import dataclasses
import inspect
import json
import os
import uuid

import torch

import bot_grpo_verl.plugin  # noqa: F401  (registers bot_grpo in this process)
from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig
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


def reference_advantages(call: dict) -> torch.Tensor:
    """The independent reference's advantages for one call the estimator spy (:data:`SPY_SOURCE`) recorded, with
    the options that call ran with."""
    return reference_bot_grpo(
        call["token_level_rewards"],
        call["response_mask"],
        call["index"],
        weighting=call["options"]["weighting"],
        norm_by_std=call["norm_adv_by_std_in_grpo"],
        outcome_broadcast=call["options"]["outcome_broadcast"],
        eps=call["options"]["epsilon"],
    )


TIMEOUT_S = 900  # a 2-step run: ~70 s on an idle 2-core machine; generous for a loaded one


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trainer_overrides(root: Path, model: Path, ray_dir: str) -> list[str]:
    """A 2-step CPU run of verl's trainer on the files of :func:`write_dataset` and :func:`write_reward_function`
    in ``root``, logging to the console and verl's file logger; the preset comes from the caller."""
    return [
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


def run_trainer(root: Path, model: Path, env: dict, *overrides: str) -> tuple[int, float]:
    """Run ``python -m verl.trainer.main_ppo`` with :func:`trainer_overrides` and then ``overrides`` in ``root``, its
    output in ``root/main_ppo.log``; return its exit code and peak RSS (:func:`run_and_watch`)."""
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's AF_UNIX socket paths must fit 107 bytes
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *trainer_overrides(root, model, ray_dir), *overrides]
    try:
        return run_and_watch(command, env, root, root / "main_ppo.log")
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
