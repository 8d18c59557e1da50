"""The demo's tasks: each one's corpus, its verl dataset rows, how its samples are measured, its default sizes.

:data:`REACT`: React/TSX components (:mod:`demo.react_corpus`), measured by the compile rate of
``bot_grpo_verl/rewards/react_tsx.py``. :data:`ARITHMETIC` and :data:`ARITHMETIC_HARD`: multi-step arithmetic
(:mod:`demo.arithmetic`), measured by ``bot_grpo_verl/rewards/arithmetic_steps.py``. Both reward files are the installed
ones (``bot-grpo-verl reward-path``), loaded by path as verl loads a ``custom_reward_function``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Protocol

from bot_grpo_verl.__main__ import reward_path
from bot_grpo_verl.rewards.react_requirements import SPEC_KEY
from demo import arithmetic, react_corpus, tool_arithmetic
from demo.settings import DemoSettings

DATA_SOURCE = "react_tsx"
# The demo's React reward: compilation only. Its rows carry specs (:func:`react_reference`) for the composed reward
# and for evaluation; the demo keeps the compile reward whose runs the docs report.
REACT_COMPILE_ONLY = (("requirements", "false"),)
REACT_TSX = reward_path("react_tsx")  # the installed reward files (in a clone: bot_grpo_verl/rewards/)
ARITHMETIC_STEPS = reward_path("arithmetic_steps")
TOOL_ARITHMETIC = reward_path("tool_arithmetic")
CALCULATOR = reward_path("calculator")  # the tool of TOOL_ARITHMETIC_TASK (verl's function_tool_path)


Tool = Callable[[str], "str | None"]  # an assistant turn's text -> the tool's answer to its call (None: no call)


class Example(Protocol):
    """What a task's corpus is made of: a user prompt and the reference response to it."""

    @property
    def prompt(self) -> str: ...

    @property
    def response(self) -> str: ...


@dataclass(frozen=True)
class Task:
    """A demo task: its corpus, its verl rows, how its samples are measured and its default settings.

    Attributes:
        name: the CLI's ``--task`` value; part of the cache key.
        data_source: verl's ``data_source`` column.
        ability: verl's ``ability`` column.
        generate: ``(size, seed) -> examples``: ``size`` examples with distinct prompts, the same for the
            same seed (raises ``ValueError`` for a negative size).
        reference: ``example -> (ground_truth, info)``: the row's ``reward_model.ground_truth`` and the
            task's ``extra_info`` fields (also written to the SFT corpus lines).
        score_samples: ``(responses, examples) -> metrics``: the task's measurements of decoded samples,
            ``responses[i]`` answering ``examples[i]`` (see :func:`compile_metrics`, :func:`answer_metrics`).
        sources: the corpus generator's files, whose bytes enter the cache key with the builder's.
        settings: the default :class:`DemoSettings` of :func:`demo.assets.build_assets`.
        tool: for an agentic task, what the tool answers to an assistant turn (None: single-turn), with which the
            build samples whole sessions (:func:`demo.sft.sample_responses`).
        rollout: the verl overrides of the task's rollout besides the CPU demo's (an agentic task: verl's tool agent
            loop with its tool).
    """

    name: str
    data_source: str
    ability: str
    generate: Callable[[int, int], Sequence[Example]]
    reference: Callable[[Example], tuple[str, dict]]
    score_samples: Callable[[Sequence[str], Sequence[Example]], dict]
    sources: tuple[Path, ...]
    settings: DemoSettings
    tool: Tool | None = None
    rollout: tuple[str, ...] = ()


def load_reward_file(path: Path) -> ModuleType:
    """The reward file at ``path``, loaded by path as verl's ``custom_reward_function`` loads it."""
    spec = importlib.util.spec_from_file_location(f"demo_reward_{path.stem}", path)
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    return reward


@functools.cache
def react_reward() -> ModuleType:
    """``bot_grpo_verl/rewards/react_tsx.py``, loaded once per process (so its checker worker starts once)."""
    return load_reward_file(REACT_TSX)


def react_reference(example: react_corpus.Example) -> tuple[str, dict]:
    """A React row's ground truth (the reference solution) and ``extra_info``: the component's kind and name, and the
    requirement spec of the reference (``react_spec``, :func:`bot_grpo_verl.rewards.react_tsx.reference_spec`)."""
    spec = react_reward().reference_spec(example.code)
    return example.code, {"kind": example.kind, "component": example.name, SPEC_KEY: spec}


def compile_rate(responses: Sequence[str]) -> tuple[float | None, str]:
    """``(rate, how)``: the fraction of ``responses`` that the demo's reward marks ``compiled``.

    The reward is ``bot_grpo_verl/rewards/react_tsx.py`` at its defaults (esbuild's TSX parser), loaded by path as
    verl's ``custom_reward_function`` loads it. ``rate`` is None, and ``how`` says why, when that file is
    missing or its checker cannot start (``npm ci`` not run in ``bot_grpo_verl/rewards/tsx``).
    """
    if not REACT_TSX.exists():
        return None, f"not measured: {REACT_TSX} is missing"
    reward = react_reward()
    try:
        compiled = [reward.compute_score(DATA_SOURCE, response)["compiled"] for response in responses]
    except reward.CheckerSetupError as error:
        return None, f"not measured: {error}"
    return sum(compiled) / len(compiled), "bot_grpo_verl/rewards/react_tsx.py compute_score (esbuild TSX syntax)"


def compile_metrics(
    responses: Sequence[str], examples: Sequence[react_corpus.Example]
) -> dict[str, float | str | None]:
    """:data:`REACT`'s sample metrics: ``{"compile_rate", "compile_checker"}`` (see :func:`compile_rate`)."""
    rate, how = compile_rate(responses)
    return {"compile_rate": rate, "compile_checker": how}


def answer_metrics(responses: Sequence[str], examples: Sequence[arithmetic.Problem]) -> dict[str, float]:
    """:data:`ARITHMETIC`'s sample metrics from ``bot_grpo_verl/rewards/arithmetic_steps.py`` at its defaults.

    ``{"accuracy", "answer_found_rate", "step_accuracy"}``: the fraction of responses whose boxed answer
    math-verify accepts, the fraction with a boxed answer at all, and the fraction of checked steps that
    are right over all responses (0 when no response has a step).
    """
    reward = load_reward_file(ARITHMETIC_STEPS)
    results = [
        reward.compute_score(arithmetic.DATA_SOURCE, response, str(example.answer))
        for response, example in zip(responses, examples, strict=True)
    ]
    steps = sum(result["steps"] for result in results)
    return {
        "accuracy": sum(result["acc"] for result in results) / len(results),
        "answer_found_rate": sum(result["answer_found"] for result in results) / len(results),
        "step_accuracy": sum(result["steps_correct"] for result in results) / steps if steps else 0.0,
    }


def session_metrics(responses: Sequence[str], examples: Sequence[tool_arithmetic.ToolProblem]) -> dict[str, float]:
    """:data:`TOOL_ARITHMETIC_TASK`'s sample metrics from the ``tool_arithmetic`` reward (the text path, as
    verl's ``naive`` manager reads a session): ``{"accuracy", "calls_per_session", "progressing_call_rate"}``, the
    fraction of sessions that box the answer, the mean number of tool calls and the fraction of calls that progress
    (0 without a call)."""
    reward = load_reward_file(TOOL_ARITHMETIC)
    results = [
        reward.compute_score(tool_arithmetic.DATA_SOURCE, response, str(example.answer), {"values": example.values})
        for response, example in zip(responses, examples, strict=True)
    ]
    calls = sum(result["calls"] for result in results)
    return {
        "accuracy": sum(result["acc"] for result in results) / len(results),
        "calls_per_session": calls / len(results),
        "progressing_call_rate": sum(result["calls_progressing"] for result in results) / calls if calls else 0.0,
    }


REACT = Task(
    name="react_tsx",
    data_source=DATA_SOURCE,
    ability="code",
    generate=react_corpus.generate_corpus,
    reference=react_reference,
    score_samples=compile_metrics,
    sources=(Path(react_corpus.__file__),),
    settings=DemoSettings(),
)
ARITHMETIC = Task(
    name="arithmetic",
    data_source=arithmetic.DATA_SOURCE,
    ability="math",
    generate=arithmetic.generate_problems,
    reference=lambda problem: (str(problem.answer), {"kind": problem.kind, "question": problem.prompt}),
    score_samples=answer_metrics,
    sources=(Path(arithmetic.__file__), Path(react_corpus.__file__)),  # it draws with react_corpus.draw_distinct
    settings=DemoSettings(
        sft_examples=4000,
        vocab_size=512,
        max_position_embeddings=256,
        # 480: the warm start solves 45% of validation samples (step accuracy 0.75). At 400 it solved 20% of them and
        # no algorithm improved it within 32 steps at any learning rate; at 800 it solves 80% (little left for RL).
        sft_steps=480,
        eval_samples=128,
        max_response_tokens=96,
    ),
)
# The same task with 6-8 operations: the warm start rarely solves a problem (sparse outcomes), while its
# steps stay checkable. Longer solutions need a longer budget.
ARITHMETIC_HARD = replace(
    ARITHMETIC,
    name="arithmetic_hard",
    generate=partial(arithmetic.generate_problems, difficulty=arithmetic.HARD),
    settings=replace(ARITHMETIC.settings, max_position_embeddings=320, max_response_tokens=160),
)
# The agentic task: the same chains on larger numbers, solved by calling the calculator tool once per operation.
TOOL_ARITHMETIC_TASK = Task(
    name="tool_arithmetic",
    data_source=tool_arithmetic.DATA_SOURCE,
    ability="math",
    generate=tool_arithmetic.generate_tool_problems,
    reference=lambda problem: (
        str(problem.answer),
        {"kind": problem.kind, "question": problem.prompt, "values": problem.values},
    ),
    score_samples=session_metrics,
    sources=(Path(tool_arithmetic.__file__), Path(arithmetic.__file__), Path(react_corpus.__file__)),
    # 360 warm-start steps: the sessions solve 12% of 128 validation samples and 32% of their calls progress (sparse
    # outcomes, denser turn values: where per-turn credit can matter). Copying numbers is learnt abruptly: 160, 240,
    # 320, 400 and 480 steps solved 4%, 5%, 5%, 59% and 98%.
    settings=replace(ARITHMETIC.settings, max_position_embeddings=256, max_response_tokens=160, sft_steps=360),
    tool=tool_arithmetic.calculator_output,
    # verl's own tool agent loop with the plugin's calculator, one call per turn (a reference session makes at most 3
    # calls, then answers)
    rollout=(
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.function_tool_path={CALCULATOR}",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
    ),
)
TASKS = {task.name: task for task in (REACT, ARITHMETIC, ARITHMETIC_HARD, TOOL_ARITHMETIC_TASK)}
