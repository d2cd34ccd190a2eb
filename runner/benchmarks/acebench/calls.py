"""Function-call strings: ``[ApiName(key1='value1', ...), ...]``, the output format ACEBench asks models for.

Parsing follows the authors' ``decode_ast`` (``model_inference/utils.py``, functions ``ast_parse`` and
``resolve_ast_by_type``; fork zeppombal/ACEBench at c9391d0, identical in yxli2123/ACEBench) through Python's
``ast``, with its quirks: positional arguments are dropped, a bare name is read as its text (``city=Paris`` gives
``"Paris"``), any unary operator negates, a nested call becomes ``{name: {kwargs}}``. One deliberate difference: the
authors ``eval`` binary operations (``1+2``, ``'a'*3``); here only arithmetic and concatenation of constants are
computed, with size bounds, so a model's output can never run code or exhaust memory (same value on every input
that is not an attack).

Before parsing, the scorer extracts the text to parse as the authors' ``eval_main.py`` does at commit 56dd66c:
single-turn categories take the first outermost ``[...]`` (:func:`first_outermost_brackets`), multi-turn ones
remove all whitespace (``"".join(text.split())``).
"""

from __future__ import annotations

import ast
import operator
from typing import Any

Call = dict[str, dict[str, Any]]
"""One decoded call: ``{function name: {argument: value}}``."""

_MAX_REPEAT = 10_000
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


class CallSyntaxError(ValueError):
    """Text that does not decode into a list of calls (the authors' "wrong_output_format")."""


def first_outermost_brackets(text: str) -> str | None:
    """The first balanced ``[...]`` of ``text`` (brackets inside strings count too, as in the original), or ``None``."""
    start, depth = -1, 0
    for index, char in enumerate(text):
        if char == "[":
            if depth == 0:
                start = index
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0 and start != -1:
                return text[start : index + 1]
    return None


def without_whitespace(text: str) -> str:
    """``text`` with every whitespace character removed (the multi-turn preprocessing)."""
    return "".join(text.split())


def decode_calls(text: str | None) -> list[Call]:
    """Decode ``"[f(a=1), g(b='x')]"`` into ``[{"f": {"a": 1}}, {"g": {"b": "x"}}]``.

    The expression must be a list, tuple or set whose elements are all calls.

    Raises:
        CallSyntaxError: anything else.
    """
    if not isinstance(text, str):
        raise CallSyntaxError("no bracketed call list found")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise CallSyntaxError(f"not a Python expression: {exc}") from None
    body = tree.body
    if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        raise CallSyntaxError("the output is not a list of calls")
    calls = []
    for element in body.elts:
        if not isinstance(element, ast.Call):
            raise CallSyntaxError(f"list element {ast.unparse(element)[:80]!r} is not a call")
        calls.append(resolve_value(element))
    return calls


def dotted_name(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain, ``f`` for a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def resolve_value(node: ast.AST) -> Any:
    """The value of an argument expression, read as the authors' ``resolve_ast_by_type`` reads it."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        operand = getattr(node.operand, "value", None)
        if not isinstance(operand, (int, float, complex)):
            raise CallSyntaxError(f"unsupported operand {ast.unparse(node)[:80]!r}")
        return -operand
    if isinstance(node, ast.List):
        return [resolve_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CallSyntaxError("dictionary unpacking is not supported")
        resolved = {}
        for key, value in zip(node.keys, node.values):
            resolved_key = resolve_value(key)
            try:
                resolved[resolved_key] = resolve_value(value)
            except TypeError:
                raise CallSyntaxError(f"unhashable dictionary key {ast.unparse(key)[:80]!r}") from None
        return resolved
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        name = dotted_name(node.func)
        return {name: {kw.arg: resolve_value(kw.value) for kw in node.keywords if kw.arg is not None}}
    if isinstance(node, ast.Tuple):
        return tuple(resolve_value(v) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise CallSyntaxError(f"unsupported expression {type(node).__name__}")


def _binary(node: ast.BinOp) -> Any:
    """Arithmetic on numbers and ``+``/``*`` on strings and lists of constants, bounded in size."""
    left, right = resolve_value(node.left), resolve_value(node.right)
    op = _BINARY.get(type(node.op))
    if isinstance(node.op, ast.Pow) and isinstance(left, (int, float)) and isinstance(right, (int, float)):
        if abs(right) > 100 or abs(left) > 1e6:
            raise CallSyntaxError("exponent too large")
        return left**right
    if op is None:
        raise CallSyntaxError(f"unsupported operator {type(node.op).__name__}")
    sequences = (str, list, tuple)
    if isinstance(node.op, ast.Mult) and (isinstance(left, sequences) or isinstance(right, sequences)):
        count = right if isinstance(left, sequences) else left
        if not isinstance(count, int) or count > _MAX_REPEAT:
            raise CallSyntaxError("repetition too large")
    try:
        return op(left, right)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise CallSyntaxError(f"cannot compute {ast.unparse(node)[:80]!r}: {exc}") from None


def format_value(value: Any) -> str:
    """A value as a Python literal (``repr``), nested calls as ``name(k=v)``."""
    return repr(value)


def format_call(name: str, arguments: dict[str, Any]) -> str:
    """``name(k1=v1, k2=v2)`` with values written by :func:`format_value`."""
    rendered = ", ".join(f"{key}={format_value(value)}" for key, value in arguments.items())
    return f"{name}({rendered})"


def format_calls(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """``[name(k=v), name2(k=v)]``: the official output format."""
    return "[" + ", ".join(format_call(name, args) for name, args in calls) + "]"
