"""Gold answers written as a model should write them (the ``reference`` solution's output).

- AST items: per expected call, every required parameter with its first allowed value other than ``""`` (the
  optional marker), every optional one that may not be left out with its first allowed value;
  Python items as prompting text (``[name(key=value)]``, Python literals); JavaScript items as prompting text with
  values in JavaScript syntax by the declared type (``12n``, ``[...]``, ``{...}``); Java items as tool calls whose
  arguments are Java source text by the declared type (``5L``, ``1.5f``, ``new int[]{1, 2}``,
  ``new ArrayList<>(Arrays.asList(...))``, ``new HashMap<String, String>() {{ put("k", v); }}``), because BFCL's
  parser drops a map's entries from prompting text (``docs/bfcl.md``); a value whose type is not the declared one
  is a variable name, written bare;
- relevance items: a call of the first function with no arguments (the checker asks only for a call);
  irrelevance items: a sentence that holds no call;
- multi-turn items: per turn, one step holding the turn's ground-truth calls, positional arguments written as
  keywords (the decoder drops positional arguments; the names come from the simulated API's method signature),
  or a sentence for a turn whose ground truth is empty.
"""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from runner.benchmarks.bfcl.apis import api_class
from runner.core.solution import SolutionOutput
from runner.core.task import Task

NO_CALL = "None of the available functions can do this; I need more information first."
"""The reply of an irrelevance item, and the step of a multi-turn turn whose ground truth is empty."""

def _pick(candidates: Any, required: bool) -> Any:
    """The value the reference writes for one answer parameter, or :data:`OMIT`: a required parameter takes its
    first allowed value that is not ``""`` (``""`` itself when it is the only one); an optional one is left out
    when ``""`` is allowed, else takes its first allowed value."""
    if not isinstance(candidates, list):
        return candidates
    values = [value for value in candidates if value != ""]
    if required:
        return values[0] if values else ("" if "" in candidates else OMIT)
    if "" in candidates or not candidates:
        return OMIT
    return candidates[0]


OMIT = object()
"""Marks an answer parameter the reference leaves out."""


def chosen_arguments(arguments: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """``{param: value}`` of one expected call (see :func:`_pick`), dict answers resolved the same way."""
    chosen = {}
    for key, candidates in arguments.items():
        value = _pick(candidates, key in required)
        if value is not OMIT:
            chosen[key] = _dict_value(value)
    return chosen


def _dict_value(value: Any) -> Any:
    """A dict answer (per-key allowed values) as one dict; a list of such, as a list."""
    if isinstance(value, dict):
        return {key: _dict_value(picked) for key, candidates in value.items()
                if (picked := _pick(candidates, False)) is not OMIT}
    if isinstance(value, list):
        return [_dict_value(item) for item in value]
    return value


def required_parameters(functions: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Function name -> its required parameters."""
    return {f["name"]: list((f.get("parameters") or {}).get("required") or []) for f in functions}


def python_calls(ground_truth: list[dict[str, Any]], functions: list[dict[str, Any]]) -> str:
    """``[name(k=v, ...), ...]`` with Python literals."""
    required = required_parameters(functions)
    calls = []
    for call in ground_truth:
        for name, arguments in call.items():
            chosen = chosen_arguments(arguments, required.get(name, []))
            calls.append(f"{name}({', '.join(f'{key}={value!r}' for key, value in chosen.items())})")
    return "[" + ", ".join(calls) + "]"


def _java_scalar(value: Any, declared: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long" and isinstance(value, int):
        return f"{value}L"
    if declared == "float" and isinstance(value, (int, float)):
        return f"{value}f"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value) if isinstance(value, str) else str(value)


def java_value(value: Any, spec: dict[str, Any]) -> str:
    """Java source text for ``value`` of the declared type ``spec["type"]`` (a string stays as it is: the checker
    converts a string-typed value by keeping its text)."""
    declared = spec.get("type", "String")
    if isinstance(value, str):
        return value
    nested = (spec.get("items") or {}).get("type", "String")
    if declared == "Array" and isinstance(value, list):
        # Each element is converted by the nested type, which keeps a string's text as it is.
        elements = [v if isinstance(v, str) else _java_scalar(v, nested) for v in value]
        return f"new {nested}[]{{{', '.join(elements)}}}"
    if declared == "ArrayList" and isinstance(value, list):
        # A String or char element loses its first and last characters (its quotes).
        elements = [f'"{v}"' if isinstance(v, str) else _java_scalar(v, nested) for v in value]
        return f"new ArrayList<>(Arrays.asList({', '.join(elements)}))"
    if declared == "HashMap" and isinstance(value, dict):
        puts = " ".join(f"put({json.dumps(str(k))}, {_java_scalar(v, 'any')});" for k, v in value.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    return _java_scalar(value, declared)


def java_tool_calls(ground_truth: list[dict[str, Any]], functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls whose arguments are Java source text (names with ``.`` written with ``_``, as tool names are)."""
    docs = {function["name"]: function for function in functions}
    required = required_parameters(functions)
    calls = []
    for call in ground_truth:
        for name, arguments in call.items():
            properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
            chosen = chosen_arguments(arguments, required.get(name, []))
            calls.append({"name": name.replace(".", "_"),
                          "arguments": {key: java_value(value, properties.get(key, {}))
                                        for key, value in chosen.items()}})
    return calls


def _js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_js_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def javascript_value(value: Any, spec: dict[str, Any]) -> str:
    """JavaScript source for ``value`` of the declared type ``spec["type"]``."""
    declared = spec.get("type", "String")
    if isinstance(value, str):
        if declared in ("String", "any") and '"' not in value and "\\" not in value:
            return f'"{value}"'
        return value
    if declared == "Bigint" and isinstance(value, int) and not isinstance(value, bool):
        return f"{value}n"
    return _js_literal(value)


def javascript_calls(ground_truth: list[dict[str, Any]], functions: list[dict[str, Any]]) -> str:
    """``[name(k=v, ...)]`` with JavaScript source values."""
    docs = {function["name"]: function for function in functions}
    required = required_parameters(functions)
    calls = []
    for call in ground_truth:
        for name, arguments in call.items():
            properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
            rendered = ", ".join(f"{key}={javascript_value(value, properties.get(key, {}))}"
                                 for key, value in chosen_arguments(arguments, required.get(name, [])).items())
            calls.append(f"{name}({rendered})")
    return "[" + ", ".join(calls) + "]"


def keyword_calls(calls: list[str], involved_classes: list[str]) -> str:
    """Ground-truth call strings as one prompting-mode list, positional arguments named from the simulated APIs'
    method signatures (a method of a later class wins, as in the official executor's name mapping)."""
    signatures: dict[str, inspect.Signature] = {}
    for class_name in involved_classes:
        for name, member in inspect.getmembers(api_class(class_name), predicate=inspect.isfunction):
            if not name.startswith("_"):
                signatures[name] = inspect.signature(member)
    rendered = []
    for text in calls:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.Call)
        name = ast.unparse(node.func)
        parameters = [p for p in signatures[name].parameters if p != "self"] if name in signatures else []
        pairs = [(parameters[i], ast.unparse(arg)) for i, arg in enumerate(node.args)]
        pairs += [(keyword.arg, ast.unparse(keyword.value)) for keyword in node.keywords]
        rendered.append(f"{name}({', '.join(f'{key}={value}' for key, value in pairs)})")
    return "[" + ", ".join(rendered) + "]"


def reference_output(task: Task) -> SolutionOutput:
    """The gold answer of a BFCL task (see the module docstring)."""
    category = task.tags["category"] if task.tags else ""
    inputs = task.input
    if "multi_turn" in category:
        turns = [[keyword_calls(calls, inputs["involved_classes"])] if calls else [NO_CALL]
                 for calls in task.ground_truth]
        return SolutionOutput(output=turns)
    if "relevance" in category or "irrelevance" in category:
        if "irrelevance" in category:
            return SolutionOutput(output=NO_CALL)
        first = (inputs.get("functions") or [{}])[0].get("name", "")
        return SolutionOutput(output=f"[{first}()]")
    functions = (task.metadata or {}).get("functions") or []
    language = inputs.get("language", "python")
    if language == "java":
        return SolutionOutput(output=java_tool_calls(task.ground_truth, functions))
    if language == "javascript":
        return SolutionOutput(output=javascript_calls(task.ground_truth, functions))
    return SolutionOutput(output=python_calls(task.ground_truth, functions))
