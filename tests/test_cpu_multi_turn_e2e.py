"""verl's real trainer (``python -m verl.trainer.main_ppo``, V1, ``+preset=[bot_grpo,cpu]``) runs 2 steps with verl's
``tool_agent`` loop, the plugin's calculator tool (loaded by verl's ``function_tool_path``), the ``hf_cpu`` rollout and
``reward.bot_token.verl_values=tool_rewards``; the estimator spy of :mod:`test_cpu_e2e` records what ``bot_grpo``
received and returned.

What it covers: the multi-turn configuration end to end on CPU (verl's tool agent loop, its tool chat template with
the tools in the prompt, the plugin's response-mask seam and manager in verl's reward worker, the estimator), with
masked tokens getting no reward. Its random tiny policy does not emit well-formed tool calls; the second test runs the
benchmark's agentic task, whose warm-started policy calls the calculator in the trainer's rollout, and checks the
per-turn rewards ``bot_grpo`` gets. Turns, calls and tool output are checked exactly on verl's real ``ToolAgentLoop``
with a scripted policy in :mod:`test_multi_turn`.
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import environment_without_cpu_mode
from cpu_assets import SPY_MODULE, SPY_SOURCE, WORDS, read_jsonl, reference_advantages, run_and_watch
from tokenizer_fixtures import QWEN_TOOL_TEMPLATE
from tool_session import CALCULATOR, PROMPT
from transformers import PreTrainedTokenizerFast
from verl.tools.function_tool import load_function_tools_from_path

from benchmarks import matrix
from benchmarks.local_tokenizers import byte_level_bpe_model
from bot_grpo_verl.reward.turns import assistant_turns
from demo.assets import build_assets
from demo.tiny_model import EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS, build_model
from demo.training import verl_command

pytestmark = pytest.mark.slow  # verl's whole trainer: minutes
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "(12 + 30) * 2 / 4"}}\n</tool_call>'
REWARD_SOURCE = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Outcome: the last assistant turn says the ground truth (the calls' values come from verl's tool_rewards)."""
    start, end = extra_info["turn_spans"][-1] if extra_info["turn_spans"] else (0, 0)
    return float(solution_str[start:end].strip() == ground_truth)
'''


def tool_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE with Qwen's chat tokens and a tool-calling chat template, trained on the conversation."""
    (tool,) = load_function_tools_from_path(str(CALCULATOR))
    schema = json.dumps(tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True))
    corpus = [WORDS, CALL, schema, PROMPT[0]["content"], "<tool_response>\n21\n</tool_response>"] * 50
    return PreTrainedTokenizerFast(
        tokenizer_object=byte_level_bpe_model(corpus, 600, SPECIAL_TOKENS),
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=QWEN_TOOL_TEMPLATE,
    )


def save_tool_model(directory: Path) -> None:
    """A randomly initialised tiny Qwen2 over :func:`tool_tokenizer`, saved with it in ``directory``."""
    tokenizer = tool_tokenizer()
    build_model(
        tokenizer,
        0,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    ).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def write_dataset(path: Path, rows: int) -> None:
    records = [
        {
            "data_source": "calculator",
            "prompt": PROMPT,
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "21"},
            "extra_info": {"index": index},
        }
        for index in range(rows)
    ]
    pd.DataFrame(records).to_parquet(path)


def spied_environment(root: Path) -> tuple[Path, dict]:
    """The estimator spy's folder under ``root`` (the spy module written there) and the environment of a verl run that
    loads it, logs to ``root/metrics.jsonl`` and leaves the CPU mode to the preset."""
    spy_dir = root / "spy"
    spy_dir.mkdir()
    (root / f"{SPY_MODULE}.py").write_text(SPY_SOURCE)
    env = {
        **environment_without_cpu_mode(),  # the preset alone switches the CPU mode on
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "VERL_USE_EXTERNAL_MODULES": SPY_MODULE,
        "BOT_GRPO_SPY_DIR": str(spy_dir),
        "VERL_FILE_LOGGER_PATH": str(root / "metrics.jsonl"),
        "HF_HOME": str(root / "hf"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    return spy_dir, env


@pytest.mark.skipif(torch.cuda.is_available(), reason="exercises the CPU mode, for hosts without accelerator")
def test_verl_main_ppo_trains_a_tool_calling_policy_with_tool_rewards_on_cpu(tmp_path):
    save_tool_model(tmp_path / "model")
    write_dataset(tmp_path / "train.parquet", 8)
    write_dataset(tmp_path / "val.parquet", 4)
    (tmp_path / "reward.py").write_text(REWARD_SOURCE)
    spy_dir, env = spied_environment(tmp_path)
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's AF_UNIX socket paths must fit 107 bytes
    command = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        "+preset=[bot_grpo,cpu]",
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'val.parquet'}",
        "data.train_batch_size=4",
        "data.max_prompt_length=256",
        "data.max_response_length=64",
        f"actor_rollout_ref.model.path={tmp_path / 'model'}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.function_tool_path={CALCULATOR}",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        f"reward.custom_reward_function.path={tmp_path / 'reward.py'}",
        "reward.bot_token.verl_values=tool_rewards",
        "trainer.total_training_steps=2",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=[console,file]",
        "trainer.project_name=cpu_multi_turn",
        "trainer.experiment_name=smoke",
        f"trainer.default_local_dir={tmp_path / 'checkpoints'}",
        f"+ray_kwargs.ray_init._temp_dir={ray_dir}",
    ]
    try:
        returncode, _ = run_and_watch(command, env, tmp_path, tmp_path / "main_ppo.log")
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    log_tail = (tmp_path / "main_ppo.log").read_text(errors="replace")[-6000:]
    assert returncode == 0, log_tail
    assert [entry["step"] for entry in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2], log_tail

    calls = [torch.load(path) for path in sorted(spy_dir.glob("*.pt"))]
    assert len(calls) == 2, "verl did not call the bot_grpo estimator once per step"
    for call in calls:
        rewards, mask = call["token_level_rewards"], call["response_mask"].bool()
        assert (rewards[~mask] == 0).all()  # tool output, template tokens and padding get no reward
        expected = reference_advantages(call)
        torch.testing.assert_close(call["advantages"].double(), expected, atol=1e-5, rtol=1e-5)
    for entry in read_jsonl(tmp_path / "metrics.jsonl"):
        assert np.isfinite(entry["data"]["actor/pg_loss"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="exercises the CPU mode, for hosts without accelerator")
def test_the_agentic_task_trains_bot_grpo_on_per_turn_rewards_through_verls_tool_loop(tmp_path):
    """The benchmark's agentic task as the matrix runs it (``--task agent``, ``bot_grpo``): its warm start calls the
    calculator in verl's own tool agent loop, and ``bot_grpo`` gets one value per assistant turn on that turn's
    tokens, tool output at 0, with advantages as the reference computes them."""
    task = matrix.TASKS["agent"]
    assets = build_assets(tmp_path / "cache", task=task.assets, progress=lambda message: None)
    spy_dir, env = spied_environment(tmp_path)
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    overrides = matrix.run_overrides(task, assets, "bot_grpo", 0, 2, tmp_path / "run")
    command = [*verl_command(overrides), f"+ray_kwargs.ray_init._temp_dir={ray_dir}"]
    try:
        returncode, _ = run_and_watch(command, env, tmp_path, tmp_path / "main_ppo.log")
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    log_tail = (tmp_path / "main_ppo.log").read_text(errors="replace")[-6000:]
    assert returncode == 0, log_tail
    metrics = [entry["data"] for entry in read_jsonl(tmp_path / "metrics.jsonl")]
    assert len(metrics) == 2 and all(row["reward_extra/calls/mean"] > 1 for row in metrics), log_tail

    calls = [torch.load(path) for path in sorted(spy_dir.glob("*.pt"))]
    assert len(calls) == 2
    multi_turn = mixed = 0
    for call in calls:
        rewards, mask = call["token_level_rewards"], call["response_mask"].bool()
        assert (rewards[~mask] == 0).all()  # tool output and template tokens
        for row_rewards, row_mask in zip(rewards, mask, strict=True):
            turns = assistant_turns(row_mask.numpy())
            values = [row_rewards[start:end].unique().tolist() for start, end in turns]
            assert all(len(value) == 1 and value[0] in (0.0, 1.0) for value in values)  # one value per turn
            multi_turn += len(turns) > 1
            mixed += len({value[0] for value in values}) > 1
        torch.testing.assert_close(call["advantages"].double(), reference_advantages(call), atol=1e-5, rtol=1e-5)
    assert multi_turn > len(calls) * 16 and mixed > 0, (multi_turn, mixed)  # most sessions call the tool
