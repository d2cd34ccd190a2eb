"""Java and JavaScript calls in prompting mode, parsed as BFCL parses them: with tree-sitter.

Ports of ``parse_java_function_call`` (``bfcl_eval/model_handler/parser/java_parser.py``) and
``parse_javascript_function_call`` (``.../parser/js_parser.py``) of ``bfcl-eval`` 2026.3.23, on the same tree-sitter
releases the package pins (``tree_sitter==0.21.3``, ``tree-sitter-java==0.21.0``, ``tree-sitter-javascript==0.21.4``,
the ``bfcl`` extra), so a parse error is an error exactly where it is for BFCL.

Their quirks are kept: only the first call of the text is read; a string literal's quotes are removed without
unescaping; an unnamed argument lands under the key ``None``; no call found gives ``{}`` (Java) or ``None``
(JavaScript), which the evaluator then rejects as not a list of calls.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from runner.core.errors import BenchmarkError

EXTRA_HINT = "pip install 'ray-bench-runner[bfcl]' (tree-sitter 0.21.3 and its Java and JavaScript grammars)"
_PARSING = threading.Lock()
"""A parser is not meant to be used by two threads at once (metrics of concurrent items may run in threads)."""


@functools.cache
def _parser(language: str) -> Any:
    try:
        from tree_sitter import Language, Parser

        if language == "java":
            import tree_sitter_java as grammar
        else:
            import tree_sitter_javascript as grammar
    except ImportError as exc:
        raise BenchmarkError(f"BFCL's {language} items need tree-sitter ({exc}); {EXTRA_HINT}") from None
    parser = Parser()
    parser.set_language(Language(grammar.language(), language))
    return parser


def check_available(language: str) -> None:
    """Load the tree-sitter parser of ``java`` or ``javascript``.

    Raises:
        BenchmarkError: tree-sitter or the grammar is not installed (the message names the extra).
    """
    _parser(language)


def parse_java(source: str) -> Any:
    """``parse_java_function_call(source)``: ``[{name: {argument: text}}]``, or ``{}`` when there is no call.

    Raises:
        SyntaxError: the text does not parse as Java (tree-sitter reports an error node).
        ValueError: an argument name is given twice.
    """
    parser = _parser("java")
    with _PARSING:
        tree = parser.parse(bytes(source, "utf8"))
    root = tree.root_node
    if "ERROR" in root.sexp():
        raise SyntaxError("Error parsing java the source code.")

    def text(node: Any) -> str:
        # Byte offsets index the str, as in the original (they differ on non-ASCII text).
        return source[node.start_byte : node.end_byte]

    def traverse_node(node: Any, nested: bool = False) -> str:
        if node.type in ("string_literal", "character_literal"):
            return text(node) if nested else text(node)[1:-1]
        if node.type in ("identifier", "class_literal", "type_identifier", "method_invocation"):
            return text(node)
        if node.type == "array_creation_expression":
            type_text = traverse_node(node.child_by_field_name("type"), True)
            value_text = traverse_node(node.child_by_field_name("value"), True)
            return f"new {type_text}[]{value_text}"
        if node.type == "object_creation_expression":
            type_text = traverse_node(node.child_by_field_name("type"), True)
            arguments_node = node.child_by_field_name("arguments")
            if arguments_node:
                parts = [traverse_node(child, True) for child in arguments_node.children
                         if child.type not in (",", "(", ")")]
                return f"new {type_text}({', '.join(parts)})"
            return f"new {type_text}()"
        if node.type == "set":
            items = [traverse_node(n, True) for n in node.children if n.type not in (",", "set")]
            return "{" + ", ".join(items) + "}"
        if node.child_count > 0:
            return "".join(traverse_node(child, True) for child in node.children)
        return text(node)

    def extract_arguments(args_node: Any) -> dict[Any, Any]:
        arguments: dict[Any, Any] = {}
        for child in args_node.children:
            if child.type == "assignment_expression":
                name = text(child.children[0])
                _add(arguments, name, traverse_node(child.children[2]))
            elif child.type in ("identifier", "class_literal", "set"):
                _add(arguments, None, traverse_node(child))
        return arguments

    def traverse(node: Any) -> Any:
        if node.type == "method_invocation":
            method_name = text(node.child_by_field_name("name"))
            object_node = node.child_by_field_name("object")
            name = f"{text(object_node)}.{method_name}" if object_node else method_name
            arguments_node = node.child_by_field_name("arguments")
            if arguments_node:
                arguments = extract_arguments(arguments_node)
                _refuse_repeats(arguments)
                return [{name: arguments}]
            return None
        for child in node.children:
            result = traverse(child)
            if result:
                return result
        return None

    result = traverse(root)
    return result if result else {}


def parse_javascript(source: str) -> Any:
    """``parse_javascript_function_call(source)``: ``[{name: {argument: text}}]``, or ``None`` when the text holds
    no call statement.

    Raises:
        SyntaxError: the text does not parse as JavaScript.
        ValueError: an argument name is given twice.
    """
    parser = _parser("javascript")
    with _PARSING:
        tree = parser.parse(bytes(source, "utf8"))
    root = tree.root_node
    if "ERROR" in root.sexp():
        raise SyntaxError("Error js parsing the source code.")

    def extract_arguments(node: Any) -> dict[Any, Any]:
        arguments: dict[Any, Any] = {}
        for child in node.children:
            if child.type == "assignment_expression":
                name = child.children[0].text.decode("utf-8")
                value = child.children[2].text.decode("utf-8")
                if (value.startswith('"') and value.endswith('"')) or (value.startswith("'") and value.endswith("'")):
                    value = value[1:-1]
                _add(arguments, name, value)
            elif child.type in ("identifier", "true"):
                _add(arguments, None, child.text.decode("utf-8"))
        return arguments

    if root.type == "program":
        for child in root.children:
            if child.type != "expression_statement":
                continue
            for sub_child in child.children:
                if sub_child.type == "call_expression":
                    name = sub_child.children[0].text.decode("utf8")
                    arguments = extract_arguments(sub_child.children[1])
                    _refuse_repeats(arguments)
                    return [{name: arguments}]
    return None


def _add(arguments: dict[Any, Any], name: Any, value: str) -> None:
    if name in arguments:
        if not isinstance(arguments[name], list):
            arguments[name] = [arguments[name]]
        arguments[name].append(value)
    else:
        arguments[name] = value


def _refuse_repeats(arguments: dict[Any, Any]) -> None:
    if any(isinstance(value, list) for value in arguments.values()):
        raise ValueError("Error: Multiple arguments with the same name are not supported.")
