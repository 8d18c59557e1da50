"""Multi-turn rollouts through verl's own ``ToolAgentLoop`` with the plugin's calculator tool, scored by the
``bot_token`` manager: turns and tool calls get their values, tool output gets none.

The policy is scripted (a server that returns fixed assistant turns: random weights never call a tool), everything
else is verl's: the tool agent loop, its hermes tool parser, its token builder and ``response_mask``, the
function-tool loader, ``AgentLoopWorker._compute_score`` (with the plugin's seam) building the reward worker's
input, and ``AgentLoopOutput.as_dict`` writing ``rm_scores``. Two tokenizer families with their own chat
templates (Qwen3's real tokenizer, a SentencePiece-style one with byte fallback) and multi-byte text. The
expected rewards come from the mask runs and a prefix-decoding reference written here.
"""

import asyncio
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import environment_without_cpu_mode
from tokenizer_fixtures import INST_TOOL_TEMPLATE, QWEN_TOOL_TEMPLATE, qwen3_or_skip
from tool_session import CALCULATOR, CALL, TURNS, ScriptedServer, session, tool_config
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.tools.function_tool import load_function_tools_from_path

from benchmarks.local_tokenizers import sentencepiece_style
from bot_grpo_verl.reward.manager import REWARD_ERROR_KEY, BoTTokenRewardManager
from bot_grpo_verl.reward.turns import RESPONSE_MASK_KEY, assistant_turns


def family(name: str):
    """(tokenizer with its tool chat template, verl's model type for the token builder)."""
    if name == "qwen3":
        tokenizer = qwen3_or_skip()
        tokenizer.chat_template = QWEN_TOOL_TEMPLATE
        return tokenizer, "qwen3"
    tokenizer = sentencepiece_style()
    tokenizer.chat_template = INST_TOOL_TEMPLATE
    return tokenizer, None


FAMILIES = ("qwen3", "sentencepiece_style")


class RewardWorker:
    """A reward worker handle (``handle.compute_score.remote(data)``) that runs the manager in this process."""

    def __init__(self, manager):
        self.compute_score, self.seen = self, []

    def remote(self, data):
        self.seen.append(data)
        return self.manager.run_single(data)


async def scored(tokenizer, output, config, compute_score):
    """Score ``output`` through verl's ``AgentLoopWorker._compute_score`` and the ``bot_token`` manager; return
    its ``rm_scores`` (from ``as_dict``) and the reward worker's input."""
    handle = RewardWorker(None)
    handle.manager = BoTTokenRewardManager(config, tokenizer, compute_score)
    worker = object.__new__(AgentLoopWorker)  # the attributes _compute_score reads
    worker.config, worker.processor, worker.mm_processor_kwargs = config, None, {}
    worker.reward_loop_worker_handles = [handle]
    kwargs = {"data_source": "calc", "reward_model": {"ground_truth": "21"}, "extra_info": {}, "uid": "u0"}
    await worker._compute_score([output], kwargs=kwargs)
    return output.as_dict()["rm_scores"].double().numpy(), handle.seen[-1]


def run(tokenizer, model_type, compute_score, *overrides, turns=TURNS):
    """(output, rm_scores, reward input) of one scripted session scored with ``+preset=bot_grpo``."""
    config = tool_config("+preset=bot_grpo", *overrides)

    async def both():
        output = await session(tokenizer, model_type, config, turns)
        return (output, *await scored(tokenizer, output, config, compute_score))

    return asyncio.run(both())


def prefix_char_ranges(tokenizer, ids) -> np.ndarray:
    """Token k's characters, [len(decode(ids[:k])), len(decode(ids[:k+1]))): exact away from split characters."""
    lengths = [len(tokenizer.decode(ids[:k], skip_special_tokens=True)) for k in range(len(ids) + 1)]
    return np.stack([lengths[:-1], lengths[1:]], axis=1)


def turn_of_token(mask) -> list[int]:
    """The assistant turn of each token (-1 for tool output), counted in a plain loop."""
    turns, turn, previous = [], -1, 0
    for value in mask:
        turn += value == 1 and previous == 0
        turns.append(turn if value == 1 else -1)
        previous = value
    return turns


@pytest.mark.parametrize("name", FAMILIES)
def test_tool_agent_loop_calls_the_calculator_and_masks_its_output(name):
    tokenizer, model_type = family(name)
    config = tool_config()
    output = asyncio.run(session(tokenizer, model_type, config))
    server = ScriptedServer(tokenizer)
    generated = [token for token, mask in zip(output.response_ids, output.response_mask, strict=True) if mask]
    assert generated == server.turns[0] + server.turns[1]  # the policy's tokens, exactly, and nothing else
    tool_output = [token for token, mask in zip(output.response_ids, output.response_mask, strict=True) if not mask]
    assert "21" in tokenizer.decode(tool_output)  # (12 + 30) * 2 / 4, computed by the tool
    assert output.extra_fields["tool_rewards"] == [1.0]


@pytest.mark.parametrize("name", FAMILIES)
def test_turn_rewards_land_on_their_turns_and_tool_output_gets_none(name):
    tokenizer, model_type = family(name)
    seen = {}

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        seen.update(text=solution_str, turns=extra_info["turn_spans"], calls=extra_info["call_spans"])
        return {"score": 0.5, "turn_rewards": [-1.0, 2.0]}

    output, rewards, data = run(tokenizer, model_type, compute_score)
    mask = list(output.response_mask)
    np.testing.assert_array_equal(data.non_tensor_batch[RESPONSE_MASK_KEY][0], mask)
    # what the reward function was told: the characters of each turn's tokens, the call's text
    ranges, turns = prefix_char_ranges(tokenizer, list(output.response_ids)), turn_of_token(mask)
    first_last = [[k for k, turn in enumerate(turns) if turn == t] for t in (0, 1)]
    assert seen["turns"] == [[ranges[tokens[0], 0], ranges[tokens[-1], 1]] for tokens in first_last]
    assert [seen["text"][start:end] for start, end in seen["calls"]] == [CALL]

    turn_values = (-1.0, 2.0)  # on every token of the turn, its EOS and tokens without characters included
    expected = [0.0 if turn < 0 else turn_values[turn] for turn in turn_of_token(mask)]
    np.testing.assert_array_equal(rewards, expected)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("source", ["function", "verl_tool_rewards"])
def test_call_rewards_land_on_the_call(name, source):
    tokenizer, model_type = family(name)
    value = 3.0 if source == "function" else 1.0  # verl's tool_rewards: the calculator's 1.0

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": -0.5, "call_rewards": [value]} if source == "function" else -0.5

    options = [] if source == "function" else ["reward.bot_token.verl_values=tool_rewards"]
    output, rewards, _ = run(tokenizer, model_type, compute_score, *options)
    ids, mask = list(output.response_ids), np.array(output.response_mask, dtype=bool)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    start = text.index("<tool_call>")
    end = text.index("</tool_call>") + len("</tool_call>")
    ranges = prefix_char_ranges(tokenizer, ids)
    in_call = (ranges[:, 0] >= start) & (ranges[:, 1] <= end) & (ranges[:, 1] > ranges[:, 0])
    np.testing.assert_array_equal(rewards, np.where(mask, np.where(in_call, value, -0.5), 0.0))
    assert in_call.sum() >= 3 and not in_call[~mask].any()


@pytest.mark.parametrize("name", FAMILIES)
def test_verl_tool_rewards_go_to_the_calls_verl_executed(name):
    """A block verl's parser refuses and calls beyond max_parallel_calls (1) are not executed: no tool reward."""
    tokenizer, model_type = family(name)
    second = CALL.replace("(12 + 30) * 2 / 4", "1 / 0")
    turns = ("<tool_call>[1, 2]</tool_call> " + CALL + " " + second, "21")
    output, rewards, _ = run(
        tokenizer, model_type, lambda **kwargs: -0.5, "reward.bot_token.verl_values=tool_rewards", turns=turns
    )
    assert output.extra_fields["tool_rewards"] == [1.0]  # the calculator ran once, on the first valid call
    ids, mask = list(output.response_ids), np.array(output.response_mask, dtype=bool)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    start = text.index(CALL)
    ranges = prefix_char_ranges(tokenizer, ids)
    in_call = (ranges[:, 0] >= start) & (ranges[:, 1] <= start + len(CALL)) & (ranges[:, 1] > ranges[:, 0])
    np.testing.assert_array_equal(rewards, np.where(mask, np.where(in_call, 1.0, -0.5), 0.0))


@pytest.mark.parametrize(
    ("result", "options", "problem"),
    [
        ({"score": 1.0, "turn_rewards": [1.0, 2.0, 3.0]}, [], "'turn_rewards' has 3 values for 2 assistant turns"),
        ({"score": 1.0, "call_rewards": []}, [], "'call_rewards' has 0 values for 1 tool calls"),
        ({"score": 1.0, "turn_rewards": [1.0, math.nan]}, [], r"turn_rewards\[1\] is not finite: nan"),
        ({"score": 1.0, "call_rewards": ["1"]}, [], r"call_rewards\[0\] must be a number .*got str"),
        ({"score": 1.0, "spans": [], "turn_rewards": [1.0, 1.0]}, [], r"at most one of .*\['spans', 'turn_rewards'\]"),
        (
            {"score": 1.0, "turn_rewards": [1.0, 1.0]},
            ["reward.bot_token.verl_values=tool_rewards"],
            r"places verl's tool_rewards, but the reward function also returned \['turn_rewards'\]",
        ),
    ],
)
def test_bad_turn_and_call_values_fail_naming_the_sample(result, options, problem):
    """The sample is reported failed (the trainer's driver stops the run or leaves it out: run_checks), its
    token rewards NaN, never scored with a guess."""
    tokenizer, model_type = family("sentencepiece_style")
    output, rm_scores, _ = run(tokenizer, model_type, lambda **kwargs: result, *options)
    message = output.extra_fields["reward_extra_info"][REWARD_ERROR_KEY]
    assert re.search(f"sample uid=u0 data_source='calc': ValueError: .*{problem}", message), message
    assert np.isnan(rm_scores).any()


def test_the_reward_worker_gets_the_mask_only_in_runs_that_use_the_plugin():
    tokenizer, model_type = family("sentencepiece_style")
    config = tool_config("reward.reward_manager.name=naive")

    async def plain_run():
        output = await session(tokenizer, model_type, config)
        handle = RewardWorker(None)

        async def run_single(data):
            return {"reward_score": 1.0, "reward_extra_info": {}}

        handle.manager = type("Naive", (), {"run_single": staticmethod(run_single)})
        worker = object.__new__(AgentLoopWorker)
        worker.config, worker.processor, worker.mm_processor_kwargs = config, None, {}
        worker.reward_loop_worker_handles = [handle]
        await worker._compute_score([output], kwargs={"data_source": "calc", "uid": "u0"})
        return handle.seen[-1]

    assert RESPONSE_MASK_KEY not in asyncio.run(plain_run()).non_tensor_batch


def test_assistant_turns_are_the_runs_of_the_mask():
    generator = np.random.default_rng(0)
    for length in [0, 1, 2, 7, 50] * 20:
        mask = generator.random(length) < generator.random()
        turns = assistant_turns(mask)
        expected = sorted({(k - turn_length, k) for k, turn_length in runs_ending(mask)})
        assert [tuple(turn) for turn in turns.tolist()] == expected
        assert turns.dtype == np.int64 and turns.shape == (len(expected), 2)


def runs_ending(mask):
    """(end, length) of each run of True, by a loop."""
    length = 0
    for position, value in enumerate([*mask, False]):
        if not value and length:
            yield position, length
        length = length + 1 if value else 0


def test_step_end_puts_each_turn_value_on_its_last_token():
    tokenizer, model_type = family("sentencepiece_style")

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 0.5, "turn_rewards": [0.0, 2.0]}

    output, rewards, _ = run(
        tokenizer, model_type, compute_score, "reward.bot_token.placement=step_end", "algorithm.adv_estimator=ps_grpo"
    )
    turns = turn_of_token(output.response_mask)
    last = [max(k for k, turn in enumerate(turns) if turn == t) for t in (0, 1)]  # each turn's EOS
    steps = np.flatnonzero(~np.signbit(rewards) | (rewards != 0))  # the step_end layout's non -0.0 entries
    assert steps.tolist() == last and rewards[last].tolist() == [0.0, 2.0]
    assert torch.signbit(torch.tensor(rewards[~np.array(output.response_mask, dtype=bool)])).all()


@pytest.mark.parametrize(
    ("expression", "answer"),
    [("(12 + 30) * 2 / 4", ("21", 1.0)), ("7 / 2 - -1", ("9/2", 1.0)), ("2*3+4", ("10", 1.0))],
)
def test_calculator_is_exact(expression, answer):
    (tool,) = load_function_tools_from_path(str(CALCULATOR))
    assert tool.fn(expression) == answer


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("1 / (2 - 2)", "division by zero"),
        ("2 ** 10", "only integers"),
        ("__import__('os')", "only integers"),
        ("1.5 + 1", "only integers"),
        ("999999 * 999999 * 999999", "exceeds"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 201, "longer than 200"),
    ],
)
def test_calculator_refuses_with_a_message_and_no_reward(expression, problem):
    (tool,) = load_function_tools_from_path(str(CALCULATOR))
    text, reward = tool.fn(expression)
    assert text.startswith("error: ") and problem in text and reward == 0.0


PROBE_RAY_ACTOR_CLASS = """
import verl
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

def reaches_adapter(function, depth=0):
    if getattr(function, "__bot_grpo_adapter__", False):
        return True
    inner = [cell.cell_contents for cell in getattr(function, "__closure__", None) or ()]
    return depth < 4 and any(callable(f) and reaches_adapter(f, depth + 1) for f in inner)

method = AgentLoopWorkerTQ.__ray_metadata__.modified_class.__dict__["_compute_score"]
print("REACHES", reaches_adapter(method))
"""


@pytest.mark.parametrize("variable", ["BOT_GRPO_CPU", "BOT_GRPO_SELECTED"])
def test_the_ray_actor_class_of_verls_v1_agent_loop_worker_runs_the_mask_seam(variable):
    """``@ray.remote`` copies an actor class's methods when the class is decorated; verl's V1 ``AgentLoopWorkerTQ``
    is decorated while the plugin adapts verl (in the CPU mode, before the seam was set), and its copy of
    ``_compute_score`` must still go through the seam, or the reward worker never sees the response mask (a whole
    session scored as one turn, tool output rewarded)."""
    env = {**environment_without_cpu_mode(), variable: "1"}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE_RAY_ACTOR_CLASS], env=env, capture_output=True, text=True, timeout=300
    )
    assert "REACHES True" in probe.stdout, probe.stdout + probe.stderr[-3000:]
