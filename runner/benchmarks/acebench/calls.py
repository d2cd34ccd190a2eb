"""Function-call strings: ``[ApiName(key1='value1', ...), ...]``, the output format ACEBench asks models for.

Parsing follows the authors' ``decode_ast`` (``model_inference/utils.py``, functions ``ast_parse`` and
``resolve_ast_by_type``; fork zeppombal/ACEBench at c9391d0, identical in yxli2123/ACEBench) through Python's
``ast``, with its quirks: positional arguments are dropped, a bare name is read as its text (``city=Paris`` gives
``"Paris"``), any unary operator negates, a nested call becomes ``{name: {kwargs}}``. One deliberate difference: the
authors ``eval`` binary operations (``1+2``, ``'a'*3``); here only arithmetic and concatenation of constants are
computed, with size bounds, so a model's output can never run code or exhaust memory (same value on every input
that is not an attack). The reading shared with BFCL's decoder is :mod:`runner.benchmarks.call_parser`;
:class:`ACECallParser` holds what ACEBench's copy does differently.

Before parsing, the scorer extracts the text to parse as the authors' ``eval_main.py`` does at commit 56dd66c:
single-turn categories take the first outermost ``[...]`` (:func:`first_outermost_brackets`), multi-turn ones
remove all whitespace (``"".join(text.split())``).
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from runner.benchmarks.call_parser import CallParser, dotted_name

Call = dict[str, dict[str, Any]]
"""One decoded call: ``{function name: {argument: value}}``."""

_MAX_REPEAT = 10_000
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


class CallSyntaxError(ValueError):
    """Text that does not decode into a list of calls (the authors' "wrong_output_format")."""


class ACECallParser(CallParser):
    """:class:`~runner.benchmarks.call_parser.CallParser` as ACEBench's scorer reads: every call, in the list or
    inside an argument, is ``{name: {kwargs}}`` (the authors' ``ast_parse`` sends the list's elements through
    ``resolve_ast_by_type`` too, whose copy gives a call without keywords ``{name: {}}`` where BFCL's gives its
    text); a ``**mapping`` argument is dropped, as this port has always done (the authors' ``resolve_ast_call``
    would keep it under the key ``None``); a binary operation is :meth:`binary`. Messages quote the source they
    refuse."""

    error = CallSyntaxError
    NOT_A_LIST = "the output is not a list of calls"
    NOT_A_CALL = "list element {text!r} is not a call"
    BAD_UNARY = "unsupported operand {text!r}"
    UNPACKING = "dictionary unpacking is not supported"
    UNHASHABLE = "unhashable dictionary key {text!r}"
    UNSUPPORTED = "unsupported expression {kind}"

    def call(self, node: ast.Call) -> Call:
        """``{name: {keyword: value}}``, positional and ``**`` arguments dropped."""
        return {dotted_name(node.func): {kw.arg: self.value(kw.value) for kw in node.keywords if kw.arg is not None}}

    def mapping(self, node: ast.Dict) -> dict[Any, Any]:
        """As :meth:`CallParser.mapping`, but a ``**mapping`` entry is refused before any pair is read (the official
        comprehension meets it in order): so this port has always done, and its messages stay as they were."""
        if any(key is None for key in node.keys):
            self.fail(self.UNPACKING, node)
        return super().mapping(node)

    def nested_call(self, node: ast.Call) -> Call:
        """A call inside an argument reads as a call in the list does (:meth:`call`)."""
        return self.call(node)

    def binary(self, node: ast.BinOp) -> Any:
        """Arithmetic on numbers and ``+``/``*`` on strings and lists of constants, bounded in size (the authors
        ``eval`` it); each operand is read as an argument value first, so a bare name is its text."""
        left, right = self.value(node.left), self.value(node.right)
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


_PARSER = ACECallParser()


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
    """Decode ``"[f(a=1), g(b='x')]"`` into ``[{"f": {"a": 1}}, {"g": {"b": "x"}}]`` (the authors' ``decode_ast``).

    The expression must be a list, tuple or set whose elements are all calls (no stripping, no lone call).

    Raises:
        CallSyntaxError: anything else, ``None`` among it (no bracketed list was found).
    """
    if not isinstance(text, str):
        raise CallSyntaxError("no bracketed call list found")
    return [_PARSER.call(node) for node in _PARSER.call_nodes(_PARSER.expression(text))]


def resolve_value(node: ast.AST) -> Any:
    """The value of an argument expression, read as the authors' ``resolve_ast_by_type`` reads it
    (:class:`ACECallParser`).

    Raises:
        CallSyntaxError: a node it cannot read.
    """
    return _PARSER.value(node)


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
