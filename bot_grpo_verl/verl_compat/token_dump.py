"""What training saw, token by token, beside verl's rollout dump: the runs that select the plugin only.

verl 0.9.1's V1 trainer dumps each step's rollouts as text (``trainer.rollout_data_dir/<step>.jsonl``:
``input``, ``output`` decoded without special tokens, ``gts``, ``score``, ``uid``); re-encoding that text
loses the EOS token and can split tokens differently from what was sampled. The wrapper of
``PPOTrainer._log_rollout_data`` (``verl/trainer/ppo/v1/trainer_base.py``) also writes
``<step>.tokens.jsonl``: per rollout, in verl's order, its key ``{uid}_{session}_{index}``, the response's
token ids, the token rewards (``rm_scores``) and the advantages exactly as the update used them, and which tokens
the policy generated (``assistant``, verl's ``response_mask``), up to the response's last generated token: a
multi-turn response keeps the tool output between its turns (masked out of the loss). :mod:`bot_grpo_verl.heatmap`
reads it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once
from bot_grpo_verl.verl_compat.metrics import RunSelector, run_selection

TOKEN_DUMP_SUFFIX = ".tokens.jsonl"
FIELDS = ["responses", "response_mask", "rm_scores", "advantages"]


def token_dump_rows(keys: list[str], data) -> list[dict]:
    """One row per rollout, sorted as verl sorts its dump (uid, session, index).

    Args:
        keys: the batch's TransferQueue keys.
        data: :data:`FIELDS` read from TransferQueue for ``keys`` (nested tensors or lists of 1-D tensors).
    """
    rows = []
    for number, key in enumerate(keys):
        generated = data["response_mask"][number].bool()
        length = int(generated.nonzero().max()) + 1 if generated.any() else 0  # through the last generated token
        rows.append(
            {
                "key": key,
                "response_ids": data["responses"][number][:length].tolist(),
                "token_rewards": data["rm_scores"][number][:length].tolist(),
                "advantages": data["advantages"][number][:length].tolist(),
                "assistant": generated[:length].tolist(),
            }
        )
    return sorted(rows, key=lambda row: sort_key(row["key"]))


def sort_key(key: str) -> tuple:
    """verl's order of dumped rollouts: uid, then session and output index as numbers."""
    parts = key.rsplit("_", 2)
    return (parts[0], int(parts[1]), int(parts[2])) if len(parts) == 3 else (key, 0, 0)


def adapt_rollout_dump(selects: RunSelector) -> None:
    """Make the V1 trainer write ``<step>.tokens.jsonl`` beside each rollout dump of the runs ``selects`` picks."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    require(
        list(inspect.signature(PPOTrainer._log_rollout_data).parameters)
        == ["self", "batch", "timing_raw", "rollout_data_dir"]
        and "self._compute_advantage(batch" in source_of(PPOTrainer)
        and "self._log_rollout_data(batch, self.timing_raw, rollout_data_dir)" in source_of(PPOTrainer),
        "verl.trainer.ppo.v1.trainer_base.PPOTrainer._log_rollout_data",
        "it dumps a step's TransferQueue batch, after the advantages were written, as (self, batch, timing_raw, dir)",
    )
    selected = run_selection(selects)

    def make_wrapper(log_rollout_data):
        def log_rollout_data_and_tokens(self, batch, timing_raw, rollout_data_dir):
            result = log_rollout_data(self, batch, timing_raw, rollout_data_dir)
            if selected(self):
                data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=FIELDS)
                path = Path(rollout_data_dir) / f"{self.global_steps}{TOKEN_DUMP_SUFFIX}"
                path.parent.mkdir(parents=True, exist_ok=True)
                lines = [json.dumps(row) for row in token_dump_rows(list(batch.keys), data)]
                path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
            return result

        return log_rollout_data_and_tokens

    wrap_once(PPOTrainer, "_log_rollout_data", make_wrapper)
