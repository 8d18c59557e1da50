"""A calculator tool for verl's tool agent loop: exact arithmetic on integers, with a reward per call.

verl loads it by path (its ``@function_tool`` registers it there; importing it twice by two names would register
it twice, which verl refuses)::

    actor_rollout_ref.rollout.multi_turn.enable=true
    actor_rollout_ref.rollout.multi_turn.function_tool_path=$(bot-grpo-verl reward-path calculator)
    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent

A call returns the value (a fraction in lowest terms when it is not an integer) and the reward 1.0, or an
error message and the reward 0.0; verl collects the rewards of a rollout's calls in its ``tool_rewards``, which
``reward.bot_token.verl_values=tool_rewards`` places on the calls' tokens.
"""

from __future__ import annotations

import ast
import operator
from fractions import Fraction

from verl.tools.function_tool import function_tool

MAX_LENGTH = 200  # characters of an expression
MAX_MAGNITUDE = 10**12  # of every intermediate value: no 9**9**9
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expression: str) -> Fraction:
    """The exact value of ``expression``: integers, ``+ - * /``, unary minus and parentheses.

    Raises:
        ValueError: anything else, a division by zero, an expression or a value too large.
    """
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    return _value(tree)


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = Fraction(node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = -_value(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        value = OPERATORS[type(node.op)](left, right)
    else:
        raise ValueError(f"only integers, + - * / and parentheses are allowed, got {ast.unparse(node)!r}")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"a value exceeds {MAX_MAGNITUDE}")
    return value


@function_tool
def calculator(expression: str) -> tuple[str, float]:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: integers with + - * / and parentheses, such as "(12 + 30) / 2".
    """
    try:
        return str(evaluate(expression)), 1.0
    except ValueError as error:
        return f"error: {error}", 0.0
