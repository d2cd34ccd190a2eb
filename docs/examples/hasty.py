"""A deliberately worse solution for the toy benchmark: mental arithmetic that forgets to carry.

Sums and differences are taken digit by digit, without carrying or borrowing (37 + 25 = 52, 52 - 37 = 25; the
sign of a difference is right); products and quotients are right. So additions, subtractions and the mixed
questions go wrong about half the time, multiplications and divisions never. docs/report.md compares it with the
``calculator`` solution:

    PYTHONPATH=docs/examples python -m runner -b toy -s hasty:hasty --sequential --storage runs/toy-hasty
"""

from __future__ import annotations

import ast

from runner.solutions.calculator import extract_expression
from runner.core.task import Task


def _digitwise(a: int, b: int, sign: int) -> int:
    """``a + sign * b`` of two non-negative integers, each digit on its own (no carry, no borrow)."""
    if sign < 0 and a < b:
        return -_digitwise(b, a, sign)
    result, place = 0, 1
    while a or b:
        digit = (a % 10 + sign * (b % 10)) if sign > 0 else abs(a % 10 - b % 10)
        result += (digit % 10) * place
        a, b, place = a // 10, b // 10, place * 10
    return result


def _eval(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Add):
            return _digitwise(left, right, 1)
        if isinstance(node.op, ast.Sub):
            return _digitwise(left, right, -1)
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            return left // right
    raise ValueError(f"hasty cannot do {ast.dump(node)}")


def hasty(task: Task) -> int:
    """Answer a toy question the hasty way (see the module docstring)."""
    return _eval(ast.parse(extract_expression(str(task.input)), mode="eval").body)
