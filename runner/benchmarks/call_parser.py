"""Reading the Python function calls a model wrote, ``[f(a=1), g(b='x')]``, through Python's ``ast``: the part of
BFCL's and ACEBench's decoders that is the same.

Both official decoders are one piece of code: ``ast_parse``, ``resolve_ast_call`` and ``resolve_ast_by_type`` of
``bfcl-eval``'s ``bfcl_eval/model_handler/utils.py``, which ACEBench's authors copied into their
``model_inference/utils.py``. What both read alike lives here, in :class:`CallParser`: the expression, a list (tuple,
set) whose elements are all calls, a call's dotted name, and argument values: constants (``...`` read as the text
``"..."``), lists, tuples, dicts, bare names (their text), subscripts (their source text), and a unary operator on a
number, which the official code always negates (``+5`` and ``not 1`` give ``-5`` and ``-1``).

What the two copies have come to do differently is chosen by each benchmark's subclass
(:class:`runner.benchmarks.bfcl.decode.BFCLCallParser`, :class:`runner.benchmarks.acebench.calls.ACECallParser`):
its error class and messages, a binary operation (both compute it without ``eval``, by their own bounded rules) and a
call inside an argument.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, NoReturn

Call = dict[Any, dict[Any, Any]]
"""One decoded call, the official form: ``{function name: {argument: value}}``."""

_SEQUENCES = (ast.List, ast.Tuple, ast.Set)


def dotted_name(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain ending in a name, ``f`` for a name (``resolve_ast_call``'s loop); the parts
    it cannot name (a call, a subscript) are left out, as there."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


class CallParser:
    """The official decoders' reading of a call list, with the hooks where BFCL's and ACEBench's copies differ.

    A subclass sets :attr:`error` and the message templates, and defines :meth:`binary` and :meth:`nested_call`.
    A template is formatted with ``kind`` (the node's class name), ``text`` (its source, first 80 characters) and
    the extra names a method passes.

    Raises:
        error: from every method, where the official code raises (any exception there is this one class here).
    """

    error: type[ValueError] = ValueError
    NOT_A_LIST = "{kind} is not a list of calls"
    NOT_A_CALL = "list element {kind} is not a call"
    BAD_UNARY = "unsupported unary operand {operand}"
    UNPACKING = "unsupported dictionary unpacking"
    UNHASHABLE = "unhashable dictionary key: {error}"
    UNSUPPORTED = "unsupported AST type {kind}"

    def fail(self, template: str, node: ast.AST, **extra: Any) -> NoReturn:
        """Raise :attr:`error` with ``template`` filled in for ``node`` (see the class docstring)."""
        text = ast.unparse(node)[:80] if "{text" in template else ""
        raise self.error(template.format(kind=type(node).__name__, text=text, **extra))

    def expression(self, text: str) -> ast.expr:
        """The body of ``text`` parsed as one Python expression (``ast.parse(text, mode="eval")``).

        Raises:
            error: ``text`` is not a Python expression.
        """
        try:
            return ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            raise self.error(f"not a Python expression: {exc}") from None

    def call_nodes(self, body: ast.expr, single: bool = False) -> Iterator[ast.Call]:
        """The calls of a list, tuple or set whose elements are all calls (``ast_parse``'s loop over ``elts`` and its
        ``assert isinstance(elem, ast.Call)``); with ``single``, a lone call too (BFCL's ``ast_parse``).

        Each element is checked when it is reached, as there: a caller that reads each call as it comes gets the
        first error in the order the official loop meets it.

        Raises:
            error: anything else (while iterating).
        """
        if single and isinstance(body, ast.Call):
            yield body
            return
        if not isinstance(body, _SEQUENCES):
            self.fail(self.NOT_A_LIST, body)
        for element in body.elts:
            if not isinstance(element, ast.Call):
                self.fail(self.NOT_A_CALL, element)
            yield element

    def call(self, node: ast.Call) -> Call:
        """``{name: {keyword: value}}`` (``resolve_ast_call``): positional arguments are dropped, a ``**mapping``
        lands under the key ``None``."""
        return {dotted_name(node.func): {keyword.arg: self.value(keyword.value) for keyword in node.keywords}}

    def value(self, node: ast.AST) -> Any:
        """The value of an argument expression, as ``resolve_ast_by_type`` reads it.

        Raises:
            error: a node the official function cannot read (a lambda, a starred or f-string expression...).
        """
        if isinstance(node, ast.Constant):
            return "..." if node.value is Ellipsis else node.value
        if isinstance(node, ast.UnaryOp):
            return self.unary(node)
        if isinstance(node, ast.List):
            return [self.value(v) for v in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(v) for v in node.elts)
        if isinstance(node, ast.Dict):
            return self.mapping(node)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call):
            return self.nested_call(node)
        if isinstance(node, ast.Subscript):
            return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
        self.fail(self.UNSUPPORTED, node)

    def unary(self, node: ast.UnaryOp) -> Any:
        """``-node.operand.value`` whatever the operator, as the official code computes it.

        Raises:
            error: the operand is not a number constant (the official code raises on anything else).
        """
        operand = node.operand
        if not isinstance(operand, ast.Constant) or not isinstance(operand.value, (int, float, complex)):
            self.fail(self.BAD_UNARY, node, operand=type(operand).__name__)
        return -operand.value

    def mapping(self, node: ast.Dict) -> dict[Any, Any]:
        """``{key: value}``, each key then its value read in order, as the official dict comprehension does.

        Raises:
            error: a ``**mapping`` entry, or a key that cannot be hashed (a list).
        """
        resolved: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                self.fail(self.UNPACKING, node)
            resolved_key, resolved_value = self.value(key), self.value(value)
            try:
                resolved[resolved_key] = resolved_value
            except TypeError as exc:
                self.fail(self.UNHASHABLE, key, error=exc)
        return resolved

    def binary(self, node: ast.BinOp) -> Any:
        """A binary operation (the official code ``eval``s its source; each benchmark bounds it its own way)."""
        raise NotImplementedError

    def nested_call(self, node: ast.Call) -> Any:
        """A call inside an argument (the copies differ on a call without keywords)."""
        raise NotImplementedError
