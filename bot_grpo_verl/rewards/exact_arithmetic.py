"""Exact integer arithmetic on untrusted text: the calculator tool's evaluator, shared by its task's reward.

:func:`evaluate` reads integers, ``+ - * /``, unary minus and parentheses from Python's parse tree (nothing is
executed), with bounds on the text's length and on every value; :func:`answer` is what the calculator tool says.
"""

from __future__ import annotations

import ast
import operator
import threading
from fractions import Fraction

MAX_LENGTH = 200  # characters of an expression
MAX_MAGNITUDE = 10**12  # of every intermediate value: no 9**9**9
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
# CPython 3.11's ast.parse is not safe in concurrent threads (SystemError "AST constructor recursion depth
# mismatch", gh-106905), and verl's reward managers score samples from several threads.
PARSE_LOCK = threading.Lock()


def evaluate(expression: str) -> Fraction:
    """The exact value of ``expression``: integers, ``+ - * /``, unary minus and parentheses.

    Raises:
        ValueError: anything else, a division by zero, an expression or a value too large.
    """
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        with PARSE_LOCK:
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


def answer(expression: str) -> tuple[str, float]:
    """The calculator's answer to ``expression`` and its reward: the value (a fraction in lowest terms when it is
    not an integer) and 1.0, or ``"error: <why>"`` and 0.0."""
    try:
        return str(evaluate(expression)), 1.0
    except ValueError as error:
        return f"error: {error}", 0.0
