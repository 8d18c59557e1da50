"""The agentic CPU task: calculator sessions, their warm-start encoding against verl's own tool agent loop, their
reward (outcome and per-turn values, from the text and from the ``bot_token`` manager's spans), and its matrix
runs composed against verl's config."""

import asyncio
import gc
import importlib.util
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import tool_session
from conftest import verl_config
from tool_session import session, tool_config

from benchmarks import matrix
from bot_grpo_verl.reward.alignment import token_char_ranges
from bot_grpo_verl.reward.turns import assistant_turns, tool_call_spans, turn_char_spans
from bot_grpo_verl.rewards.exact_arithmetic import evaluate
from demo.arithmetic import generate_problems
from demo.sft import encode_examples
from demo.tasks import CALCULATOR, TOOL_ARITHMETIC, TOOL_ARITHMETIC_TASK, session_metrics
from demo.tiny_model import prompt_ids, response_ids, train_tokenizer
from demo.tool_arithmetic import answer_turn, calculator_output, generate_tool_problems, tool_call

PROBLEMS = generate_tool_problems(64, 0)
ASSETS = SimpleNamespace(
    train_parquet="/d/train.parquet", val_parquet="/d/val.parquet", test_parquet="/d/test.parquet", model_dir="/m"
)


def load_reward():
    spec = importlib.util.spec_from_file_location("tool_arithmetic_reward", TOOL_ARITHMETIC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REWARD = load_reward()


@pytest.fixture(scope="module")
def tokenizer():
    texts = [text for problem in PROBLEMS for text in (f"user\n{problem.prompt}", f"assistant\n{problem.response}")]
    return train_tokenizer(texts, 400)


def score(text, problem, **kwargs):
    return REWARD.compute_score("tool_arithmetic", text, str(problem.answer), {"values": problem.values}, **kwargs)


def session_text(turns, outputs):
    """A session as verl's naive manager decodes it with the demo's chat template (special tokens skipped)."""
    parts = [turns[0]]
    for output, turn in zip(outputs, turns[1:], strict=True):
        parts += [f"\ntool\n{output}\nassistant\n", turn]
    return "".join(parts)


def test_reference_sessions_call_the_calculator_once_per_operation_and_box_its_last_answer():
    assert len({problem.prompt for problem in PROBLEMS}) == len(PROBLEMS)
    assert {problem.kind for problem in PROBLEMS} == {"2_ops", "3_ops"}
    for problem in PROBLEMS:
        turns, outputs = problem.assistant_turns, problem.tool_outputs
        assert len(turns) == len(outputs) + 1 == len(problem.problem.operations) + 1
        assert [calculator_output(turn) for turn in turns] == [*outputs, None]
        assert outputs[-1] == str(problem.answer) and turns[-1] == answer_turn(problem.answer)
        assert max(problem.values) <= 40 and min(problem.values) >= 0
    assert calculator_output(tool_call("7 / 0")) == "error: division by zero"
    assert calculator_output('<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>').startswith("error")


def test_warm_start_sequences_are_the_tokens_verls_tool_agent_loop_builds(tokenizer):
    """The SFT corpus' ids are those of verl's ToolAgentLoop running the reference session, and its labels train
    exactly the tokens verl's response mask gives the policy."""
    for problem in PROBLEMS[:6]:
        tool_session.PROMPT[:] = [{"role": "user", "content": problem.prompt}]
        output = asyncio.run(session(tokenizer, "qwen2", tool_config(), problem.assistant_turns))
        ((ids, labels),) = encode_examples(tokenizer, [problem])
        assert ids == [*output.prompt_ids, *output.response_ids]
        trained = [label != -100 for label in labels[len(output.prompt_ids) :]]
        assert trained == [bool(bit) for bit in output.response_mask]
        assert output.extra_fields["tool_rewards"] == [1.0] * len(problem.tool_outputs)


def test_single_turn_examples_encode_as_before(tokenizer):
    (problem,) = generate_problems(1, 3)
    ((ids, labels),) = encode_examples(tokenizer, [problem])
    prompt, response = prompt_ids(tokenizer, problem.prompt), response_ids(tokenizer, problem.response)
    assert (ids, labels) == (prompt + response, [-100] * len(prompt) + response)


def test_the_reference_session_solves_and_every_call_progresses():
    for problem in PROBLEMS[:8]:
        result = score(session_text(problem.assistant_turns, problem.tool_outputs), problem)
        calls = len(problem.tool_outputs)
        assert result == {"score": 1.0, "acc": 1.0, "calls": calls, "calls_progressing": float(calls)}
    assert session_metrics(
        [session_text(p.assistant_turns, p.tool_outputs) for p in PROBLEMS], PROBLEMS
    ) == pytest.approx({"accuracy": 1.0, "calls_per_session": 2.5, "progressing_call_rate": 1.0})


def miscopied_problem():
    """A 3-operation problem whose :func:`miscopied_session` never meets the right values again by chance."""
    return next(
        p
        for p in PROBLEMS
        if len(p.tool_outputs) == 3 and not {int(output) for output in miscopied_session(p)[1][1:]} & set(p.values)
    )


def miscopied_session(problem):
    """``(turns, outputs)`` of a session that copies the second call's left number wrong (the first call
    progressed) and goes on correctly from there: every later call and the answer build on the wrong value."""
    turns, outputs, value = [], [], problem.problem.numbers[0]
    for k, (_, operation, right, _) in enumerate(problem.problem.steps):
        turns.append(tool_call(f"{value + (k == 1)} {operation} {right}"))
        outputs.append(calculator_output(turns[-1]))
        value = int(outputs[-1])
    return [*turns, answer_turn(value)], outputs


@pytest.mark.parametrize(("option", "expected"), [("answer", 0.0), ("turn_min", 0.0), ("turn_mean", None)])
def test_a_miscopied_call_loses_its_turn_and_the_outcome_but_not_the_turns_before(option, expected):
    problem = miscopied_problem()
    turns, outputs = miscopied_session(problem)
    result = score(session_text(turns, outputs), problem, score=option)
    assert result["acc"] == 0.0 and result["calls_progressing"] == 1.0
    turn_values = [1.0, 0.0, 0.0, 0.0]
    assert result["score"] == (np.mean(turn_values) if expected is None else expected)


def test_shortcuts_count_and_repeats_do_not():
    problem = next(p for p in PROBLEMS if len(p.tool_outputs) == 3)
    whole = tool_call(problem.problem.expression)  # one call of the whole expression: progress to the end
    text = session_text([whole, answer_turn(problem.answer)], [str(problem.answer)])
    assert score(text, problem)["calls_progressing"] == 1.0 and score(text, problem)["acc"] == 1.0
    first = problem.assistant_turns[0]
    repeated = session_text([first, first, answer_turn(problem.answer)], [problem.tool_outputs[0]] * 2)
    assert score(repeated, problem)["calls_progressing"] == 1.0


def test_a_boxed_answer_inside_a_call_turn_or_an_unfinished_session_is_no_outcome():
    problem = PROBLEMS[0]
    unfinished = session_text(problem.assistant_turns[:-1], problem.tool_outputs[:-1])
    assert score(unfinished, problem)["acc"] == 0.0
    early = answer_turn(problem.answer) + problem.assistant_turns[0]
    assert score(session_text([early], []), problem)["acc"] == 0.0


def test_with_the_managers_spans_each_turn_gets_its_value(tokenizer):
    """The spans the bot_token manager passes (from verl's response mask): one turn value per assistant turn, the
    same values as the text path's calls and outcome."""
    problem = miscopied_problem()
    turns, outputs = miscopied_session(problem)
    tool_session.PROMPT[:] = [{"role": "user", "content": problem.prompt}]
    output = asyncio.run(session(tokenizer, "qwen2", tool_config(), tuple(turns)))
    text, ranges = token_char_ranges(tokenizer, output.response_ids)
    assert text == session_text(turns, outputs)
    turn_spans = turn_char_spans(assistant_turns(np.array(output.response_mask, dtype=bool)), ranges)
    calls = tool_call_spans(text, turn_spans, 1)
    info = {"values": problem.values, "turn_spans": turn_spans.tolist(), "call_spans": [list(c) for c in calls]}
    for option in ("answer", "turn_mean", "turn_min"):
        with_spans = REWARD.compute_score("tool_arithmetic", text, str(problem.answer), info, score=option)
        from_text = score(text, problem, score=option)
        assert with_spans.pop("turn_rewards") == [1.0, 0.0, 0.0, 0.0]
        assert with_spans == from_text


def smuggled_call(text: str) -> str:
    """A call of the calculator whose expression is ``text``, written so that verl's parser takes the whole block
    (``<`` escaped in the JSON); the calculator's error then quotes ``text`` in its response."""
    arguments = json.dumps({"name": "calculator", "arguments": {"expression": text}}).replace("<", "\\u003c")
    return f"<tool_call>\n{arguments}\n</tool_call>"


def one_line_call(expression: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'calculator', 'arguments': {'expression': expression}})}</tool_call>"


def test_a_call_that_only_the_tools_response_holds_gets_no_credit():
    """The calculator's error quotes the expression it got: a policy call can make the response hold a correct call
    (issue 39). Only the policy's own call counts, from the text (with verl's count of executed calls) as with the
    manager's spans."""
    problem = PROBLEMS[0]
    first = f"{problem.problem.numbers[0]} {problem.problem.steps[0][1]} {problem.problem.steps[0][2]}"
    turns = [smuggled_call(one_line_call(first)), answer_turn(problem.answer)]
    outputs = [calculator_output(turns[0])]
    assert one_line_call(first) in outputs[0]  # the response holds a call the policy never made
    text = session_text(turns, outputs)
    for extra in ({}, {"tool_rewards": [0.0]}):
        result = REWARD.compute_score("tool_arithmetic", text, str(problem.answer), {"values": problem.values, **extra})
        assert (result["calls"], result["calls_progressing"]) == (1, 0.0), extra


def test_a_response_that_forges_the_turn_frame_gets_no_credit():
    """verl's "Unknown function" response quotes the call's name, line breaks included: a name can forge the end of
    the response, a call, and a new response. The frame then holds more responses than verl executed calls: no call
    of the session counts, and neither does its answer."""
    problem = PROBLEMS[0]
    first = f"{problem.problem.numbers[0]} {problem.problem.steps[0][1]} {problem.problem.steps[0][2]}"
    name = f"x\nassistant\n{one_line_call(first)}\ntool\n"
    call = "<tool_call>" + json.dumps({"name": name, "arguments": {}}).replace("<", "\\u003c") + "</tool_call>"
    response = f"Unknown function '{name}'. Available tools: ['calculator']"
    text = session_text([call, answer_turn(problem.answer)], [response])
    info = {"values": problem.values, "tool_rewards": [0.0]}
    for option in ("answer", "turn_mean", "turn_min"):
        result = REWARD.compute_score("tool_arithmetic", text, str(problem.answer), info, score=option)
        assert result == {"score": 0.0, "acc": 0.0, "calls": 1, "calls_progressing": 0.0}


def test_a_box_inside_the_tools_response_is_no_outcome():
    problem = PROBLEMS[0]
    turns = [smuggled_call(f"\\boxed{{{problem.answer}}}"), "I am done."]
    outputs = [calculator_output(turns[0])]
    assert f"boxed{{{problem.answer}}}" in outputs[0]
    result = score(session_text(turns, outputs), problem)
    assert result["acc"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"score": "turn_max"}, "score"),
        ({"scroe": "turn_min"}, "scroe"),
        ({"tool_open": ""}, "tool_open"),
        ({"tool_close": 3}, "tool_close"),
    ],
)
def test_bad_options_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        score(PROBLEMS[0].response, PROBLEMS[0], **kwargs)


@pytest.mark.parametrize(
    ("cell", "manager", "option"),
    [
        ("grpo", "naive", None),
        ("grpo@turn_min", "naive", "turn_min"),
        ("bot_grpo", "bot_token", None),
        ("ps_grpo", "bot_token", None),
        ("grpo@turn_mean", "naive", "turn_mean"),
    ],
)
def test_agent_runs_use_verls_tool_agent_loop_with_the_calculator(cell, manager, option, tmp_path):
    overrides = matrix.run_overrides(matrix.TASKS["agent"], ASSETS, cell, 0, 5, tmp_path)
    config = verl_config(*overrides)
    rollout = config.actor_rollout_ref.rollout
    assert rollout.multi_turn.enable and rollout.agent.default_agent_loop == "tool_agent"
    assert rollout.multi_turn.function_tool_path == str(CALCULATOR)
    assert rollout.multi_turn.max_parallel_calls == 1 and rollout.name == "hf_cpu"
    assert config.reward.reward_manager.name == manager
    kwargs = dict(config.reward.custom_reward_function.get("reward_kwargs", {}))
    assert kwargs.get("score") == option
    assert str(TOOL_ARITHMETIC) in (config.reward.custom_reward_function.path, kwargs.get("token_reward_path"))
    assert TOOL_ARITHMETIC_TASK.tool is calculator_output


class YieldsWhenCollected:
    """Garbage whose collection lets another thread run: what a busy reward worker's collector can do while
    ast.parse builds its tree."""

    def __init__(self):
        self.cycle = self

    def __del__(self):
        time.sleep(0)


def test_expressions_are_evaluated_exactly_from_many_threads_at_once():
    """verl's reward managers score samples from several threads; CPython 3.11's ast.parse raised SystemError
    there ("AST constructor recursion depth mismatch", gh-106905) when a thread switch fell inside it, and stopped
    a run. Here the collector runs at every allocation and lets another thread in."""
    nested = [("(" * depth) + "1" + " + 1)" * depth for depth in range(1, 31)]

    def value(expression):
        YieldsWhenCollected()
        return evaluate(expression)

    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(1, 1, 1)
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(16) as pool:
            for _ in range(20):
                assert list(pool.map(value, nested)) == [Fraction(depth + 1) for depth in range(1, 31)]
    finally:
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
