"""Decoding a model's output into calls, as BFCL's evaluator decodes it (``bfcl-eval`` 2026.3.23).

Two shapes of output, as the package's handlers produce them:

- prompting mode: the reply text, ``[func(a=1, b="x")]``, decoded by ``default_decode_ast_prompting`` and
  ``default_decode_execute_prompting`` (``bfcl_eval/model_handler/utils.py``): strip backticks, newlines and
  spaces from both ends, add the missing outer brackets, then ``ast_parse`` per language (Python through ``ast``;
  Java and JavaScript through tree-sitter, :mod:`.languages`);
- native tool calling: a list of tool calls, decoded as ``OpenAICompletionsHandler.decode_ast`` and
  ``decode_execute`` (``bfcl_eval/model_handler/api_inference/openai_completion.py``) do for function-calling
  models: each call's arguments are a JSON string loaded with ``json.loads``. A call here is ``{"name": ...,
  "arguments": ...}`` (arguments a JSON string as the server sent it, or an object) or BFCL's own
  ``{name: arguments}``.

The official quirks are kept: positional arguments are dropped; any unary operator negates its constant (``+5``
and ``not 1`` give ``-5`` and ``-1``); a call with no keyword arguments inside an argument becomes its source text,
one with keywords ``{name: {kwargs}}``; a ``` ```python ``` fence leaves ``python`` in front of the list, so it
fails to decode while a bare ``` ``` ``` fence passes. Python text is read by :class:`BFCLCallParser`: the reader
shared with ACEBench (:mod:`runner.benchmarks.call_parser`), with BFCL's rules for a binary operation and a call
inside an argument.

One deliberate difference, for safety: the official decoder passes a binary operation (``1+2``, ``'a'*3``) to
Python's ``eval``. Here it is computed only when it is arithmetic on literals (numbers, strings, bytes, lists,
tuples, dicts), with bounds on sizes; anything else in it (a name, a call, an attribute) is a decode failure, as
``eval`` gives for every name that is not a Python builtin. ``docs/bfcl.md`` lists the differences.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Mapping
from typing import Any

from runner.benchmarks.call_parser import Call, CallParser


class DecodeError(ValueError):
    """The output does not decode (the official decoder raised)."""


class BFCLCallParser(CallParser):
    """:class:`~runner.benchmarks.call_parser.CallParser` as ``bfcl-eval`` 2026.3.23's ``resolve_ast_by_type``
    reads: a binary operation by :func:`evaluate_literal`, a call inside an argument as its source text when it has
    no keywords, else ``{name: {kwargs}}``."""

    error = DecodeError

    def binary(self, node: ast.BinOp) -> Any:
        """The official ``eval(ast.unparse(node))``, here :func:`evaluate_literal` (literals only, bounded)."""
        return evaluate_literal(node)

    def nested_call(self, node: ast.Call) -> Any:
        """``ast.unparse(node)`` without keywords, else :meth:`call` (``resolve_ast_by_type``'s ``ast.Call``)."""
        return ast.unparse(node) if not node.keywords else self.call(node)


_PARSER = BFCLCallParser()


def strip_prompting(text: str) -> str:
    """The text the prompting decoder parses: ``text.strip("`\\n ")`` with outer brackets added where missing
    (``default_decode_ast_prompting``)."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    return text


def parse_python(text: str) -> list[Call]:
    """``ast_parse(text, ReturnFormat.PYTHON)``: wrapping quotes stripped, then a call, or a list, tuple or set of
    calls.

    Raises:
        DecodeError: anything the official parser raises on.
    """
    body = _PARSER.expression(text.strip().strip("'"))
    return [_PARSER.call(node) for node in _PARSER.call_nodes(body, single=True)]


_MAX_SIZE = 100_000
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitAnd: operator.and_, ast.BitXor: operator.xor}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}


def evaluate_literal(node: ast.AST) -> Any:
    """What Python's ``eval`` gives for an expression of literals and operators (the official decoder's
    ``eval(ast.unparse(node))`` for a binary operation), bounded in size.

    Raises:
        DecodeError: a name, call or other non-literal (``eval`` raises ``NameError`` for all but Python's
            builtins), an operation that raises, or a result too large to compute safely.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        values = [evaluate_literal(v) for v in node.elts]
        try:
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](values)
        except TypeError as exc:
            raise DecodeError(f"cannot evaluate: {exc}") from None
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise DecodeError("cannot evaluate dictionary unpacking")
        try:
            return {evaluate_literal(k): evaluate_literal(v) for k, v in zip(node.keys, node.values)}
        except TypeError as exc:
            raise DecodeError(f"cannot evaluate: {exc}") from None
    if isinstance(node, ast.UnaryOp):
        operand = evaluate_literal(node.operand)
        try:
            return _UNARY[type(node.op)](operand)
        except TypeError as exc:
            raise DecodeError(f"cannot evaluate: {exc}") from None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = evaluate_literal(node.left), evaluate_literal(node.right)
        _check_size(node.op, left, right)
        try:
            return _BINARY[type(node.op)](left, right)
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise DecodeError(f"cannot evaluate: {exc}") from None
    raise DecodeError(f"not evaluated: {type(node).__name__} in an expression (the official decoder would eval it)")


def _check_size(op: ast.operator, left: Any, right: Any) -> None:
    numbers = (int, float, complex)
    if isinstance(op, ast.Pow) and isinstance(left, numbers) and isinstance(right, numbers):
        if isinstance(right, complex) or abs(right) > 1_000 or (abs(right) > 64 and abs(left) > 2):
            raise DecodeError("power too large to evaluate")
    if isinstance(op, ast.LShift) and isinstance(right, int) and right > 4_096:
        raise DecodeError("shift too large to evaluate")
    if isinstance(op, ast.Mult):
        sized = (str, bytes, list, tuple)
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, sized) and isinstance(count, int) and len(sequence) * count > _MAX_SIZE:
                raise DecodeError("repetition too large to evaluate")


def is_tool_call_list(output: Any) -> bool:
    """Whether ``output`` is a list (or tuple) of tool calls rather than prompting text."""
    return isinstance(output, (list, tuple))


def _tool_call(call: Any) -> tuple[Any, Any]:
    """``(name, raw arguments)`` of one tool call in either accepted shape."""
    if isinstance(call, Mapping):
        if set(call) == {"name", "arguments"}:
            return call["name"], call["arguments"]
        if len(call) >= 1:
            name = next(iter(call))
            return name, call[name]
    raise DecodeError(f"not a tool call: {type(call).__name__}")


def _fc_arguments(raw: Any) -> Any:
    """``json.loads`` of the arguments as the server sent them (an object is passed through JSON, as its JSON
    string would be)."""
    try:
        return json.loads(raw if isinstance(raw, str) else json.dumps(raw))
    except (TypeError, ValueError) as exc:
        raise DecodeError(f"tool call arguments are not JSON: {exc}") from None


def decode_ast_fc(calls: Any) -> list[Call]:
    """The function-calling handler's ``decode_ast``: ``[{name: json.loads(arguments)}]``."""
    return [{name: _fc_arguments(raw)} for name, raw in map(_tool_call, calls)]


def decode_execute_fc(calls: Any) -> list[str]:
    """The function-calling handler's ``decode_execute`` (``convert_to_function_call``): ``name(k=repr(v),...)``
    per call, without spaces after the commas.

    Raises:
        DecodeError: where the official code raises (arguments that are not a JSON object among them).
    """
    if isinstance(calls, Mapping):
        calls = [calls]
    execution = []
    for call in calls:
        if not isinstance(call, Mapping):
            raise DecodeError(f"not a tool call: {type(call).__name__}")
        pairs = [_tool_call(call)] if set(call) == {"name", "arguments"} else list(call.items())
        for name, raw in pairs:
            value = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(value, Mapping):
                raise DecodeError(f"tool call {name!r}: arguments are not an object")
            execution.append(f"{name}({','.join(f'{k}={v!r}' for k, v in value.items())})")
    return execution


def parse_nested_value(value: Any) -> str:
    """A decoded value as source text (the package's ``parse_nested_value``): a dict whose values are all dicts is
    written as a call ``name(k=v)``, another dict as ``{'k': v}``, anything else with ``repr``."""
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            name = list(value.keys())[0]
            arguments = value[name]
            return f"{name}({', '.join(f'{k}={parse_nested_value(v)}' for k, v in arguments.items())})"
        return "{" + ", ".join(f"'{k}': {parse_nested_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def execution_list(decoded: list[Call]) -> list[str]:
    """``decoded_output_to_execution_list``: each call as ``name(k=v, ...)``."""
    return [f"{name}({', '.join(f'{k}={parse_nested_value(v)}' for k, v in arguments.items())})"
            for call in decoded for name, arguments in call.items()]
