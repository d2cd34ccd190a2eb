"""A calculator that can run no code: arithmetic through a restricted walk of Python's AST.

Only number literals, ``+ - * / // % **``, unary ``+ -`` and parentheses are accepted; names, calls, attributes,
subscripts, comparisons and everything else are refused before anything is evaluated. Exponents and intermediate
results are bounded so that an expression like ``9**9**9`` cannot exhaust memory or time. This is the approach of
BeeAI's evaluation example ``CalculatorTool`` ("evaluates expressions through a restricted AST walk").
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any

from runner.core.plugin import declare
from runner.core.task import Task

MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300
MAX_EXPRESSION_CHARS = 1000

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_SYMBOLS = {"×": "*", "÷": "/", "−": "-", "^": "**"}


class CalculatorError(ValueError):
    """An expression the calculator refuses or cannot evaluate (the message says why)."""


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic ``expression`` such as ``"(3 + 4) * 2 ** 3"``.

    ``×``, ``÷``, ``−`` and ``^`` are read as ``*``, ``/``, ``-`` and ``**``.

    Raises:
        CalculatorError: anything but arithmetic on numbers, division by zero, an exponent above
            :data:`MAX_EXPONENT`, a result above :data:`MAX_MAGNITUDE`, or more than :data:`MAX_EXPRESSION_CHARS`.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    for symbol, replacement in _SYMBOLS.items():
        expression = expression.replace(symbol, replacement)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {expression!r} ({exc.msg})") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right} is above the limit of {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result too large") from None
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if abs(value) > MAX_MAGNITUDE or (isinstance(value, float) and math.isnan(value)):
            raise CalculatorError("result too large")
        return value
    raise CalculatorError(f"{type(node).__name__} is not allowed: only numbers and + - * / // % ** and parentheses")


_QUESTION = re.compile(r"^\s*(?:what\s+is|compute|calculate|evaluate)\s*:?\s*(.*?)\s*[?.=]?\s*$", re.IGNORECASE)


def extract_expression(text: str) -> str:
    """The arithmetic part of a question such as ``"What is 3 * (4 + 5)?"`` (the text itself if no prefix)."""
    match = _QUESTION.match(text)
    return match.group(1) if match else text


@declare("calculator")
def calculator(task: Task) -> int | float:
    """Built-in solution ``calculator``: answer an arithmetic question by :func:`evaluate`.

    Raises:
        CalculatorError: the task's input holds no arithmetic the calculator accepts.
    """
    return evaluate(extract_expression(str(task.input)))
