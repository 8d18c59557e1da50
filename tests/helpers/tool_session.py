"""verl's tool agent loop driven by a scripted policy: the calculator tool, fixed assistant turns, verl's config."""

from pathlib import Path

from conftest import verl_config
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.function_tool import load_function_tools_from_path
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

CALCULATOR = Path(__file__).resolve().parents[2] / "bot_grpo_verl" / "rewards" / "calculator.py"
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "(12 + 30) * 2 / 4"}}\n</tool_call>'
TURNS = ("Rechne: 数学 ✓ 🚀 " + CALL, "Das Ergebnis ist 21 ✓ 数学")
PROMPT = [{"role": "user", "content": "What is (12 + 30) * 2 / 4?"}]


class ScriptedServer:
    """verl's LLM server client, answering each generate call with the next scripted assistant turn."""

    def __init__(self, tokenizer, turns=TURNS):
        self.turns = [tokenizer.encode(turn, add_special_tokens=False) + [tokenizer.eos_token_id] for turn in turns]
        self.calls = 0

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        ids = self.turns[self.calls]
        self.calls += 1
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids))


def tool_config(*overrides: str):
    return verl_config(
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        "actor_rollout_ref.rollout.prompt_length=512",
        "actor_rollout_ref.rollout.response_length=512",
        f"reward.custom_reward_function.path={CALCULATOR}",  # unused: the manager gets compute_score directly
        *overrides,
    )


async def session(tokenizer, model_type, config, turns=TURNS):
    """One rollout of verl's ToolAgentLoop with the calculator tool and the policy scripted to say ``turns``."""
    loop = ToolAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=ScriptedServer(tokenizer, turns),
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        hf_model_type=model_type,
        tools=ToolListWrap(load_function_tools_from_path(str(CALCULATOR))),
    )
    return await loop.run({"temperature": 1.0}, raw_prompt=list(PROMPT))
