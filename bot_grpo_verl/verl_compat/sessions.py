"""Multi-output agent sessions: the plugin's estimators count each session once, as verl's ``grpo`` does.

verl V1 keys a batch's rows ``{uid}_{session}_{index}``: an agent loop may return several outputs (``index``) of
one session. ``compute_advantage_for_multi_trajectories`` (``verl/trainer/ppo/v1/utils.py``) gives ``grpo`` only
each session's final output (its highest ``index``) and broadcasts that output's advantage to the session's other
outputs, but hands every output to any other estimator, so a plugin estimator would count a session once per
output, and ``bot_grpo`` on outcome rewards would no longer equal ``grpo`` there.

For the plugin's estimators this seam does what verl does for ``grpo``:

- the estimator sees each session's final output only, so the group statistics count every session once;
- the final output keeps its token advantages (token credit lives in the output that ends the session);
- every other output of the session gets, on each of its valid tokens, the final output's mean advantage over its
  valid tokens (the session's credit, each token weighing the same: :math:`1/L`, as in the bag).

On outcome rewards every token of a final output has the same advantage, so the broadcast is that advantage and
``bot_grpo`` equals ``grpo`` output for output. The other outputs' own token rewards are not used, as ``grpo``
does not use their scores. Single-output batches (every ``index`` 0) come out exactly as without this seam.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Collection

import torch

from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once

FUNCTION = "compute_advantage_for_multi_trajectories"


def final_outputs(batch_keys: list[str]) -> tuple[list[int], list[int]]:
    """``(final_rows, session_of_row)``: the row of each session's final output (sessions in order of first
    appearance) and, for every row, the position of its session in ``final_rows``.

    Raises:
        ValueError: a key that is not ``{uid}_{session}_{index}`` with an integer ``index``.
    """
    finals: dict[str, tuple[int, int]] = {}
    sessions = []
    for row, key in enumerate(batch_keys):
        parts = key.rsplit("_", 2)
        if len(parts) != 3 or not all(parts) or not parts[2].isdigit():
            raise ValueError(f"batch key {key!r} is not verl V1's {{uid}}_{{session}}_{{index}}")
        session, index = f"{parts[0]}_{parts[1]}", parts[2]
        sessions.append(session)
        if session not in finals or finals[session][0] < int(index):
            finals[session] = (int(index), row)
    position = {session: number for number, session in enumerate(finals)}
    return [row for _, row in finals.values()], [position[session] for session in sessions]


def session_advantages(data, batch_keys: list[str], compute: Callable) -> object:
    """``data`` (a ``DataProto``) with ``advantages`` and ``returns`` (B, T) for multi-output sessions (see the
    module docstring); ``compute(final_data)`` runs the estimator on the final outputs' rows (S, T)."""
    final_rows, session_of_row = final_outputs(batch_keys)
    final = compute(data.select_idxs(final_rows)).batch
    final_mask = final["response_mask"].to(final["advantages"].dtype)  # (S, T)
    session_mean = (final["advantages"] * final_mask).sum(-1) / final_mask.sum(-1).clamp(min=1)  # (S,)
    device = final["advantages"].device
    session = torch.as_tensor(session_of_row, device=device)  # (B,)
    is_final = torch.zeros(len(batch_keys), dtype=torch.bool, device=device)
    is_final[torch.as_tensor(final_rows, device=device)] = True
    advantages = torch.where(is_final[:, None], final["advantages"][session], session_mean[session][:, None])
    advantages = advantages * data.batch["response_mask"]  # (B, T)
    data.batch["advantages"] = advantages
    data.batch["returns"] = advantages
    return data


def adapt_multi_output_sessions(estimator_names: Collection[str]) -> None:
    """Route the plugin's estimators (``estimator_names``) through :func:`session_advantages` in verl V1's
    ``compute_advantage_for_multi_trajectories``; every other estimator takes verl's own path unchanged."""
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.v1 import trainer_base, utils

    parameters = ["data", "batch_keys", "adv_estimator", "gamma", "lam", "num_repeat", "norm_adv_by_std_in_grpo"]
    require(
        list(inspect.signature(getattr(utils, FUNCTION)).parameters) == [*parameters, "config"]
        and inspect.unwrap(getattr(trainer_base, FUNCTION)) is inspect.unwrap(getattr(utils, FUNCTION))
        and f"data = {FUNCTION}(" in source_of(trainer_base.PPOTrainer._compute_advantage),
        f"verl.trainer.ppo.v1.utils.{FUNCTION}",
        "PPOTrainer._compute_advantage calls it as (data, batch_keys, adv_estimator, gamma, lam, num_repeat, "
        "norm_adv_by_std_in_grpo, config), keys {uid}_{session}_{index}",
    )

    def make_wrapper(original: Callable) -> Callable:
        def for_sessions(
            data, batch_keys, adv_estimator, gamma=1.0, lam=1.0, num_repeat=1, norm_adv_by_std_in_grpo=True, config=None
        ):
            options = {"gamma": gamma, "lam": lam, "num_repeat": num_repeat, "config": config}
            options["norm_adv_by_std_in_grpo"] = norm_adv_by_std_in_grpo
            if adv_estimator not in estimator_names:
                return original(data, batch_keys, adv_estimator, **options)
            return session_advantages(
                data, batch_keys, lambda final: compute_advantage(final, adv_estimator=adv_estimator, **options)
            )

        return for_sessions

    for owner in (utils, trainer_base):
        wrap_once(owner, FUNCTION, make_wrapper)


def refuse_unadapted_multi_output_step(why: str) -> None:
    """Raise if this call runs inside verl's own ``compute_advantage_for_multi_trajectories`` (the adapter was not
    applied when the trainer called it) on a batch with multi-output sessions, which verl then hands whole to a
    plugin estimator: every session would count once per output. ``why`` says how the run got there."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == FUNCTION and frame.f_globals.get("__name__") == "verl.trainer.ppo.v1.utils":
            batch_keys = frame.f_locals.get("batch_keys", [])
            if len(final_outputs(batch_keys)[0]) < len(batch_keys):
                raise RuntimeError(
                    f"bot-grpo-verl: this batch has agent sessions with several outputs, which verl's {FUNCTION} "
                    f"hands to the plugin's estimator output by output: {why}"
                )
            return
        frame = frame.f_back
