r"""A seeded generator of multi-step arithmetic problems with step-by-step solutions: the demo's math task.

Each :class:`Problem` is a chain of operations (``+``, ``-``, ``*``; 2 to 4 of them at :data:`STANDARD`
difficulty, 6 to 8 at :data:`HARD`) on small non-negative integers,
evaluated left to right and written with the fewest parentheses that say so::

    Compute (7 + 5) * 3 - 4.

Its solution is one step per paragraph (steps separated by a blank line, as
:func:`bot_grpo_verl.reward.token_rewards.split_steps` splits them), then the boxed answer::

    7 + 5 = 12

    12 * 3 = 36

    36 - 4 = 32

    The answer is \boxed{32}.

Every step is ``a op b = c`` with single spaces, so an exact verifier (``bot_grpo_verl/rewards/arithmetic_steps.py``)
checks it. Numbers are small (see :class:`Difficulty`) so that the demo's ~1M-parameter policy learns the
format and part of the arithmetic from its short supervised warm start and RL has the rest to improve.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from demo.react_corpus import draw_distinct

DATA_SOURCE = "arithmetic"
OPERATIONS = ("+", "-", "*")


@dataclass(frozen=True)
class Difficulty:
    """How hard the generated problems are.

    Attributes:
        min_operations, max_operations (`int`): chain length; problems cycle through this range.
        max_operand (`int`): operands of ``+`` and ``-`` and the first number lie in ``[1, max_operand]``.
        max_factor (`int`): the right operand of ``*`` lies in ``[2, max_factor]``.
        max_value (`int`): every intermediate value lies in ``[0, max_value]``.
    """

    min_operations: int
    max_operations: int
    max_operand: int = 9
    max_factor: int = 4
    max_value: int = 40

    def __post_init__(self):
        if not 1 <= self.min_operations <= self.max_operations:
            raise ValueError(f"need 1 <= min_operations <= max_operations: {self}")
        if min(self.max_operand, self.max_factor - 1, self.max_value - 2 * self.max_operand) < 1:
            raise ValueError(f"need max_operand >= 1, max_factor >= 2 and max_value > 2 * max_operand: {self}")


STANDARD = Difficulty(min_operations=2, max_operations=4)
# Longer chains of the same numbers: the warm-started policy rarely gets every step right (AIME's regime: a
# sparse outcome), while each step stays as checkable as in STANDARD. (With values up to 60 the warm start
# solved none of 128 problems, step accuracy 0.38: no outcome signal at all.)
HARD = Difficulty(min_operations=6, max_operations=8)


def apply(left: int, operation: str, right: int) -> int:
    """``left operation right`` for an operation of :data:`OPERATIONS`."""
    if operation == "+":
        return left + right
    if operation == "-":
        return left - right
    if operation == "*":
        return left * right
    raise ValueError(f"unknown operation {operation!r}; expected one of {OPERATIONS}")


@dataclass(frozen=True)
class Problem:
    """One problem: ``numbers[0] operations[0] numbers[1] ...`` evaluated left to right.

    Attributes:
        numbers: the operands, one more than ``operations``.
        operations: each one of :data:`OPERATIONS`.
    """

    numbers: tuple[int, ...]
    operations: tuple[str, ...]

    def __post_init__(self):
        if len(self.numbers) != len(self.operations) + 1 or not self.operations:
            raise ValueError(f"need one more number than operations (at least one): {self}")

    @property
    def kind(self) -> str:
        """``"<n>_ops"``: the number of operations, e.g. ``"3_ops"``."""
        return f"{len(self.operations)}_ops"

    @property
    def steps(self) -> list[tuple[int, str, int, int]]:
        """``(left, operation, right, result)`` per operation, in evaluation order."""
        steps, value = [], self.numbers[0]
        for operation, number in zip(self.operations, self.numbers[1:], strict=True):
            result = apply(value, operation, number)
            steps.append((value, operation, number, result))
            value = result
        return steps

    @property
    def answer(self) -> int:
        """The value of the whole expression."""
        return self.steps[-1][3]

    @property
    def expression(self) -> str:
        """The expression with parentheses only where left-to-right order needs them: ``(a + b) * c``."""
        text, additive = str(self.numbers[0]), False
        for operation, number in zip(self.operations, self.numbers[1:], strict=True):
            if operation == "*" and additive:
                text = f"({text})"
            text, additive = f"{text} {operation} {number}", operation != "*"
        return text

    @property
    def prompt(self) -> str:
        """The user instruction, e.g. ``"Compute (7 + 5) * 3 - 4."``."""
        return f"Compute {self.expression}."

    @property
    def response(self) -> str:
        """The reference solution: one ``a op b = c`` step per paragraph, then ``The answer is \\boxed{n}.``."""
        lines = [f"{left} {operation} {right} = {result}" for left, operation, right, result in self.steps]
        return "\n\n".join([*lines, f"The answer is \\boxed{{{self.answer}}}."])


def random_problem(rng: random.Random, operations: int, difficulty: Difficulty = STANDARD) -> Problem:
    """A problem with ``operations`` operations whose intermediate values all lie in ``[0, difficulty.max_value]``.

    Each operation is drawn among those that keep the value in range and non-trivial: ``+`` needs a value
    below ``max_value``, ``-`` a value of at least 1, ``*`` a value in ``[1, max_value // 2]``; some
    operation is always possible.
    """
    top = difficulty.max_value
    value = rng.randint(1, difficulty.max_operand)
    numbers, chosen = [value], []
    for _ in range(operations):
        possible = {"+": value < top, "-": value >= 1, "*": 1 <= value <= top // 2}
        operation = rng.choice([operation for operation in OPERATIONS if possible[operation]])
        if operation == "+":
            number = rng.randint(1, min(difficulty.max_operand, top - value))
        elif operation == "-":
            number = rng.randint(1, min(difficulty.max_operand, value))
        else:
            number = rng.randint(2, min(difficulty.max_factor, top // value))
        value = apply(value, operation, number)
        numbers.append(number)
        chosen.append(operation)
    return Problem(tuple(numbers), tuple(chosen))


def generate_problems(size: int, seed: int, difficulty: Difficulty = STANDARD) -> list[Problem]:
    """``size`` distinct problems (distinct prompts), their chain lengths cycling through ``difficulty``'s range,
    from ``random.Random(seed)``.

    Raises ``ValueError`` for a negative size or when the generator cannot find enough distinct prompts.
    """
    counts = range(difficulty.min_operations, difficulty.max_operations + 1)
    return draw_distinct(
        size, seed, lambda rng, i: random_problem(rng, counts[i % len(counts)], difficulty), "problems"
    )
