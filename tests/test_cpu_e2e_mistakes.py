"""A user's mistakes through verl's real trainer on CPU (``python -m verl.trainer.main_ppo``): each ends in our
one line naming the fix, not in a downstream verl error or a run that trains on nothing.

- a reward function that returns a bool score: the run stops at its first batch, our message last;
- a span reward with ``algorithm.adv_estimator=bot_grpo`` but without ``+preset=bot_grpo``: told at start-up,
  stopped at the first batch;
- ``reward.bot_token.on_error=skip``: failed samples (half of them) are left out and counted, in validation and
  training, and the run trains to its end, without verl's and TransferQueue's repeated warnings.
"""

import os
import re
from pathlib import Path

import pytest
import torch
from cpu_assets import REWARD_SOURCE, read_jsonl, run_trainer, save_tiny_model, write_dataset

pytestmark = [
    pytest.mark.slow,  # verl's whole trainer: a minute or more each
    pytest.mark.skipif(torch.cuda.is_available(), reason="exercises the CPU mode, for hosts without accelerator"),
]
BOOL_SCORE = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": ground_truth in solution_str}
"""
SOMETIMES_BOOL = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Half of a random policy's responses (odd lengths) get a bool score, the others a valid one."""
    correct = ground_truth in solution_str
    return {"score": correct if len(solution_str) % 2 else float(correct)}
'''
VERL_DOWNSTREAM_ERROR = "no materializable trajectories"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("model"))


def run(root: Path, model: Path, reward_source: str, *overrides: str) -> tuple[int, str]:
    """(exit code, output) of a 2-step CPU run of ``reward_source`` with ``overrides``."""
    write_dataset(root / "train.parquet", rows=8)
    write_dataset(root / "val.parquet", rows=4, seed=1)
    (root / "reward.py").write_text(reward_source)
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(root / "metrics.jsonl"), "TOKENIZERS_PARALLELISM": "false"}
    returncode, _ = run_trainer(root, model, env, *overrides)
    return returncode, (root / "main_ppo.log").read_text(errors="replace")


def last_lines(log: str, count: int) -> str:
    """The last ``count`` non-blank lines of ``log``, ANSI colours removed."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines() if line.strip()]
    return "\n".join(lines[-count:])


def test_a_bool_score_stops_the_run_at_its_first_batch_with_the_uid_the_key_and_the_fix(tmp_path, model):
    returncode, log = run(tmp_path, model, BOOL_SCORE, "+preset=[bot_grpo,cpu]")
    assert returncode != 0 and VERL_DOWNSTREAM_ERROR not in log
    message = (
        r"RuntimeError: bot-grpo-verl: bot_token reward failed for sample uid=\S+ data_source='cpu_smoke': "
        r"ValueError: score must be a number \(int, float or NumPy scalar\), got bool (True|False): a bool is no "
        r"reward, return float\(\.\.\.\); fix the reward function \(what it may return: "
        r"docs/token-rewards.md#the-contract; 'bot-grpo-verl check-reward FILE' tries it on real rows in seconds\), "
        r"or set reward.bot_token.on_error=skip to leave such samples out$"
    )
    assert re.search(message, last_lines(log, 4), re.MULTILINE), last_lines(log, 40)
    assert not (tmp_path / "metrics.jsonl").exists() or not read_jsonl(tmp_path / "metrics.jsonl")  # no step ran


def test_spans_without_the_preset_are_told_at_start_up_and_stop_the_run_at_its_first_batch(tmp_path, model):
    returncode, log = run(tmp_path, model, REWARD_SOURCE, "+preset=cpu", "algorithm.adv_estimator=bot_grpo")
    assert returncode != 0
    assert "algorithm.adv_estimator=bot_grpo with the 'naive' reward manager sees one score per response" in log
    message = (
        r"ValueError: bot-grpo-verl: the reward function returns 'spans', which the 'naive' reward manager drops: "
        r"algorithm.adv_estimator=bot_grpo trains on the score alone; run it with \+preset=bot_grpo$"
    )
    assert re.search(message, last_lines(log, 4), re.MULTILINE), last_lines(log, 40)


def test_with_on_error_skip_failed_samples_are_left_out_counted_and_the_run_trains(tmp_path, model):
    returncode, log = run(
        tmp_path,
        model,
        SOMETIMES_BOOL,
        "+preset=[bot_grpo,cpu]",
        "reward.bot_token.on_error=skip",
        "trainer.val_before_train=true",  # the run's first batch is a validation batch
        "actor_rollout_ref.rollout.val_kwargs.n=3",  # 12 validation samples, 16 training samples a step
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
    )
    assert returncode == 0, last_lines(log, 40)
    steps = {entry["step"]: entry["data"] for entry in read_jsonl(tmp_path / "metrics.jsonl")}
    assert any(key.startswith("val-core/cpu_smoke/acc/") for key in steps[0])  # verl counts a left-out one as 0
    skipped = [steps[step]["bot_token/skipped_samples"] for step in (1, 2)]
    assert sum(skipped) > 0 and all(count < 16 for count in skipped)
    left_out = re.findall(r"bot-grpo-verl: left \d+ of (\d+) samples out of the batch", log)
    assert left_out[0] == "12" and "16" in left_out  # the validation batch, then training batches
    assert "got bool" in log and VERL_DOWNSTREAM_ERROR not in log
    # quiet logs: verl's warnings about engines a CPU host lacks, TransferQueue's thread count at every transfer
    assert "engine is not available" not in log and "should not exceed total physical CPU cores" not in log
