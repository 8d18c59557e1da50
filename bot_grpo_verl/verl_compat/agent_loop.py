"""Token rewards out of verl's agent loop: ``AgentLoopOutput.as_dict`` writes ``rm_scores`` densely.

verl 0.9.1 has no extension point here: ``AgentLoopOutput.as_dict``
(``verl/experimental/agent_loop/agent_loop.py``) writes a sample's reward on its last response token.
The wrapper writes the token rewards of a :class:`~bot_grpo_verl.reward_manager.TokenRewardScore`
instead (streaming reward path of the V1 trainer, training and validation). Only the ``bot_token``
manager (or a subclass) returns such a score, so a run that does not select it is left as verl made it.
"""

from __future__ import annotations

from bot_grpo_verl.verl_compat.guard import require, wrap_once


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
