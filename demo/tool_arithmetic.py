r"""The demo's agentic task: arithmetic on numbers too large for the policy, solved by calling a calculator tool.

Each :class:`ToolProblem` is a chain of 2 or 3 operations on numbers up to 40 (:data:`TOOL_DIFFICULTY`), asked as
in :mod:`demo.arithmetic`::

    Compute (7 + 5) * 3 - 4.

Its reference session calls the calculator (``rewards/calculator.py``, through verl's ``tool_agent`` loop) once
per operation, on the value the tool returned before, then boxes the last value::

    assistant: <tool_call>
               {"name": "calculator", "arguments": {"expression": "7 + 5"}}
               </tool_call>
    tool:      12
    assistant: <tool_call>
               {"name": "calculator", "arguments": {"expression": "12 * 3"}}
               </tool_call>
    tool:      36
    assistant: <tool_call> ... "36 - 4" ... </tool_call>
    tool:      32
    assistant: The answer is \boxed{32}.

The policy never has to compute: it has to call the tool in the right form and copy the right numbers from the
prompt and from the tool's answers, turn after turn. A session can go right for some turns and wrong at one of them,
which is where per-turn credit (``bot_grpo_verl/rewards/tool_arithmetic.py``) can tell more than the outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot_grpo_verl.reward.turns import TOOL_CALL, is_tool_call
from bot_grpo_verl.rewards.exact_arithmetic import answer
from demo.arithmetic import Difficulty, Problem, generate_problems

DATA_SOURCE = "tool_arithmetic"
TOOL_NAME = "calculator"
# The arithmetic task's numbers (values up to 40). With operands up to 99 and values up to 999 the warm start (480
# steps) learnt the sessions' format but not to copy a number: 0 of 128 sessions solved, 0.6% of calls progressing.
TOOL_DIFFICULTY = Difficulty(min_operations=2, max_operations=3)


def tool_call(expression: str) -> str:
    """A hermes-style call of the calculator, as verl's ``hermes`` tool parser reads it."""
    arguments = {"name": TOOL_NAME, "arguments": {"expression": expression}}
    return f"<tool_call>\n{json.dumps(arguments)}\n</tool_call>"


def answer_turn(answer: int) -> str:
    r"""The last assistant turn: ``The answer is \boxed{n}.``"""
    return f"The answer is \\boxed{{{answer}}}."


@dataclass(frozen=True)
class ToolProblem:
    """One problem and its reference session.

    Attributes:
        problem: the arithmetic chain (:class:`demo.arithmetic.Problem`).
    """

    problem: Problem

    @property
    def prompt(self) -> str:
        """The user instruction, e.g. ``"Compute (7 + 5) * 3 - 4."``."""
        return self.problem.prompt

    @property
    def kind(self) -> str:
        """``"<n>_ops"``: the number of operations, hence of reference tool calls."""
        return self.problem.kind

    @property
    def answer(self) -> int:
        return self.problem.answer

    @property
    def values(self) -> list[int]:
        """The value after each operation, in order (the last is the answer)."""
        return [result for _, _, _, result in self.problem.steps]

    @property
    def assistant_turns(self) -> tuple[str, ...]:
        """The reference session's assistant turns: one tool call per operation, then the answer."""
        calls = [tool_call(f"{left} {operation} {right}") for left, operation, right, _ in self.problem.steps]
        return (*calls, answer_turn(self.answer))

    @property
    def tool_outputs(self) -> tuple[str, ...]:
        """What the calculator answers to each call of :attr:`assistant_turns`."""
        return tuple(str(value) for value in self.values)

    @property
    def response(self) -> str:
        """The whole session as text, turns and tool outputs in order (the tokenizer's training text)."""
        parts = [
            part
            for turn, output in zip(self.assistant_turns[:-1], self.tool_outputs, strict=True)
            for part in (turn, output)
        ]
        return "\n".join([*parts, self.assistant_turns[-1]])


def generate_tool_problems(size: int, seed: int) -> list[ToolProblem]:
    """``size`` problems with distinct prompts at :data:`TOOL_DIFFICULTY` (see
    :func:`demo.arithmetic.generate_problems`)."""
    return [ToolProblem(problem) for problem in generate_problems(size, seed, TOOL_DIFFICULTY)]


def calculator_output(turn: str) -> str | None:
    """What verl's tool agent loop answers to an assistant turn with the calculator tool (one call per turn,
    ``multi_turn.max_parallel_calls=1``): the calculator's answer to the turn's first call, None when it makes none.
    The demo's build samples sessions with it; training and validation run verl's own loop."""
    calls = [found for found in TOOL_CALL.finditer(turn) if is_tool_call(found[1])]
    if not calls:
        return None
    arguments = json.loads(calls[0][1])["arguments"]
    expression = arguments.get("expression") if isinstance(arguments, dict) else None
    return answer(expression)[0] if isinstance(expression, str) else "error: the call has no expression string"
