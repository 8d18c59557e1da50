"""verl's agent loop and the ``bot_token`` manager: the response mask in, dense token rewards out.

verl 0.9.1 has no extension point for either (``verl/experimental/agent_loop/agent_loop.py``):

- ``AgentLoopWorker._compute_score`` hands the streaming reward worker the outputs' token ids but not their
  ``response_mask``, so a reward manager cannot tell the assistant's turns from tool output. For the runs that
  use the plugin, the wrapper adds the final output's mask as one more input column
  (:data:`~bot_grpo_verl.reward.turns.RESPONSE_MASK_KEY`); reward functions never see it (verl's managers pass them
  only ``extra_info`` and the ``tool_extra_fields``).
- ``AgentLoopOutput.as_dict`` writes a sample's reward on its last response token. The wrapper writes the
  token rewards of a :class:`~bot_grpo_verl.reward.manager.TokenRewardScore` instead (streaming reward path
  of the V1 trainer, training and validation). Only the ``bot_token`` manager (or a subclass) returns such a
  score, so a run that does not select it is left as verl made it.
"""

from __future__ import annotations

import inspect
from weakref import WeakKeyDictionary

from bot_grpo_verl.reward.turns import RESPONSE_MASK_KEY
from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once


def adapt_agent_loop_output() -> None:
    """Make ``AgentLoopOutput.as_dict`` write a ``TokenRewardScore``'s token rewards as ``rm_scores``."""
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    require(
        {"reward_score", "response_ids", "response_mask"} <= set(AgentLoopOutput.model_fields)
        and hasattr(AgentLoopOutput, "as_dict"),
        "verl.experimental.agent_loop.agent_loop.AgentLoopOutput",
        "it has the fields reward_score, response_ids, response_mask and the method as_dict",
    )

    def make_wrapper(as_dict):
        def dense_as_dict(self):
            output = as_dict(self)
            token_rewards = getattr(self.reward_score, "token_rewards", None)
            # Earlier outputs of a multi-output session share the final output's score: they keep
            # verl's last-token reward, as with any other reward manager.
            if token_rewards is not None and len(token_rewards) == len(self.response_ids):
                output["rm_scores"] = torch.tensor(token_rewards, dtype=torch.float32)
            return output

        return dense_as_dict

    wrap_once(AgentLoopOutput, "as_dict", make_wrapper)


def adapt_reward_inputs(selects) -> None:
    """Give the reward worker each session's final ``response_mask`` (:data:`RESPONSE_MASK_KEY`) in the runs
    that ``selects(config, reward_manager_cls)`` (:data:`~bot_grpo_verl.verl_compat.metrics.RunSelector`)."""
    import numpy as np
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    require(
        list(inspect.signature(AgentLoopWorker._compute_score).parameters)[:3] == ["self", "outputs", "kwargs"]
        and "**{k: np.array([v] * n) for k, v in kwargs.items()}" in source_of(AgentLoopWorker._compute_score),
        "verl.experimental.agent_loop.agent_loop.AgentLoopWorker._compute_score",
        "it is (self, outputs, kwargs) and repeats each of kwargs as a reward input column",
    )

    decisions: WeakKeyDictionary = WeakKeyDictionary()  # per worker: its run's config does not change

    def make_wrapper(compute_score):
        async def with_response_mask(self, outputs, kwargs, *args, **more):  # more: Ray's tracing context
            if self not in decisions:
                decisions[self] = selects(self.config, resolve_reward_manager_cls(self.config))
            if decisions[self]:
                kwargs = {**kwargs, RESPONSE_MASK_KEY: np.asarray(outputs[-1].response_mask, dtype=np.int8)}
            return await compute_score(self, outputs, kwargs, *args, **more)

        return with_response_mask

    wrap_once(AgentLoopWorker, "_compute_score", make_wrapper)
