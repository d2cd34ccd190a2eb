"""Model outputs of our own making for BFCL items: the gold answer in each accepted shape, and realistic mistakes.

Each function returns ``{variant name: output}`` for one task; the parity tests score every output with the
official evaluator and with ours. Which mistakes an item gets rotates with its position (``seed``), so that every
kind is exercised on every category without scoring each item dozens of times.
"""

from __future__ import annotations

import ast
import copy
import json
from typing import Any

from runner.benchmarks.bfcl.reference import (
    NO_CALL,
    chosen_arguments,
    required_parameters,
    java_value,
    javascript_value,
    reference_output,
)
from runner.core.task import Task

Calls = list[tuple[str, dict[str, Any]]]


def gold_calls(task: Task) -> Calls:
    """The reference's calls of a single-turn task: ``[(name, {param: value})]``."""
    functions = (task.metadata or {}).get("functions") or []
    required = required_parameters(functions)
    return [(name, chosen_arguments(arguments, required.get(name, []))) for call in task.ground_truth
            for name, arguments in call.items()]


def python_text(calls: Calls) -> str:
    """``[name(k=v)]`` with ``repr`` values."""
    return "[" + ", ".join(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})" for name, args in calls) + "]"


def tool_calls(calls: Calls, dots: bool = False) -> list[dict[str, Any]]:
    """The calls as native tool calls (arguments as the JSON string a server sends); ``.`` in names becomes ``_``
    unless ``dots``."""
    return [{"name": name if dots else name.replace(".", "_"), "arguments": json.dumps(args)} for name, args in calls]


def official_fc(output: Any) -> Any:
    """A tool-call list in the shape the official function-calling handler stores: ``[{name: arguments JSON}]``."""
    return [{call["name"]: call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])}
            for call in output]


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, str):
        return value + " and more"
    if isinstance(value, list):
        return [*value, value[0] if value else "extra"]
    if isinstance(value, dict):
        return {**value, "unexpected_key": 1}
    return "changed"


def _retyped(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return 42
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return list(value.items())
    return None


def _normalised(value: str) -> str:
    """What standardisation forgives: case, spaces, and the characters ``,./-_*^``."""
    return value.upper().replace(" ", "-") + "."


def _first_param(calls: Calls) -> tuple[int, str] | None:
    for index, (_, args) in enumerate(calls):
        if args:
            return index, next(iter(args))
    return None


def python_variants(task: Task, seed: int) -> dict[str, Any]:
    """Outputs for a Python single-turn task (AST categories)."""
    calls = gold_calls(task)
    text = python_text(calls)
    variants: dict[str, Any] = {"gold_text": text, "gold_tools": tool_calls(calls)}
    mistakes: dict[str, Any] = {
        "tools_with_dots": tool_calls(calls, dots=True),
        "bare_fence": f"```\n{text}\n```",
        "python_fence": f"```python\n{text}\n```",
        "prose": f"Sure, here you go: {text}",
        "wrong_function": python_text([(name + "_v2", args) for name, args in calls]),
        "extra_param": python_text([(calls[0][0], {**calls[0][1], "zzz_extra": 1}), *calls[1:]]) if calls else "[]",
        "reversed_calls": python_text(list(reversed(calls))),
        "dropped_call": python_text(calls[:-1]),
        "no_tool_call": [],
        "bad_json_arguments": [{"name": calls[0][0].replace(".", "_"), "arguments": "{'a': 1"}] if calls else [],
        "tuple_call": text[1:-1] + ("," if len(calls) == 1 else ""),
    }
    first = _first_param(calls)
    if first is not None:
        index, key = first
        value = calls[index][1][key]

        def edit(new_args: dict[str, Any]) -> Calls:
            changed = copy.deepcopy(calls)
            changed[index] = (changed[index][0], new_args)
            return changed

        args = calls[index][1]
        mistakes["wrong_value"] = python_text(edit({**args, key: _wrong(value)}))
        mistakes["wrong_type"] = python_text(edit({**args, key: _retyped(value)}))
        mistakes["missing_param"] = python_text(edit({k: v for k, v in args.items() if k != key}))
        rest = ", ".join(f"{k}={v!r}" for k, v in args.items() if k != key)
        positional = f"{calls[index][0]}({value!r}{', ' + rest if rest else ''})"
        mistakes["positional"] = "[" + ", ".join(
            positional if i == index else python_text([call])[1:-1] for i, call in enumerate(calls)) + "]"
        if isinstance(value, str) and value:
            mistakes["normalised_string"] = python_text(edit({**args, key: _normalised(value)}))
            mistakes["double_quotes"] = text.replace(repr(value), json.dumps(value), 1)
        if isinstance(value, float) and value.is_integer():
            mistakes["int_for_float"] = python_text(edit({**args, key: int(value)}))
        if isinstance(value, int) and not isinstance(value, bool):
            expression = f"{value - 1} + 1" if value >= 1 else f"{value + 1} - 1"
            mistakes["arithmetic"] = text.replace(f"{key}={value!r}", f"{key}={expression}", 1)
            mistakes["unary_plus"] = text.replace(f"{key}={value!r}", f"{key}=+{value}", 1)
        if isinstance(value, list):
            mistakes["tuple_for_list"] = text.replace(f"{key}={value!r}", f"{key}={tuple(value)!r}", 1)
    return {**variants, **_rotate(mistakes, seed, 5)}


def _rotate(mistakes: dict[str, Any], seed: int, count: int) -> dict[str, Any]:
    names = sorted(mistakes)
    if not names:
        return {}
    chosen = [names[(seed * count + i) % len(names)] for i in range(min(count, len(names)))]
    return {name: mistakes[name] for name in chosen}


def _java_text(task: Task) -> str:
    """``[name(k=v)]`` in Java syntax: string-typed values quoted, the rest as the reference writes them."""
    functions = (task.metadata or {}).get("functions") or []
    docs = {f["name"]: f for f in functions}
    parts = []
    for name, args in gold_calls(task):
        properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
        rendered = []
        for key, value in args.items():
            spec = properties.get(key, {})
            source = java_value(value, spec)
            if isinstance(value, str) and spec.get("type") in ("String", "any", "char") and '"' not in value:
                source = f'"{value}"'
            rendered.append(f"{key}={source}")
        parts.append(f"{name}({', '.join(rendered)})")
    return "[" + ", ".join(parts) + "]"


def typed_variants(task: Task, seed: int) -> dict[str, Any]:
    """Outputs for a Java or JavaScript task: the reference (tool calls for Java, text for JavaScript), the other
    shape, and mistakes in the typed values' syntax."""
    gold = reference_output(task).output
    variants: dict[str, Any] = {"gold": gold}
    java = task.tags["language"] == "java"
    if java:
        text = _java_text(task)
        variants["gold_text"] = text
        tools = gold
    else:
        text = gold
        functions = (task.metadata or {}).get("functions") or []
        docs = {f["name"]: f for f in functions}
        tools = []
        for name, args in gold_calls(task):
            properties = docs.get(name, {}).get("parameters", {}).get("properties", {})
            tools.append({"name": name.replace(".", "_"),
                          "arguments": {k: javascript_value(v, properties.get(k, {})) for k, v in args.items()}})
        variants["gold_tools"] = tools
    mistakes: dict[str, Any] = {
        "python_fence": f"```python\n{text}\n```",
        "bare_fence": f"```\n{text}\n```",
        "unquoted_spaces": text.replace('"', "", 2),
        "capital_booleans": text.replace("true", "True").replace("false", "False"),
        "typed_json_values": [{"name": c["name"], "arguments": {k: _untyped(v) for k, v in _args(c).items()}}
                              for c in tools],
        "long_without_suffix": [{"name": c["name"], "arguments": {k: v[:-1] if isinstance(v, str) and v[-1:] in "Lfn"
                                                                  and v[:-1].lstrip("-").replace(".", "").isdigit()
                                                                  else v for k, v in _args(c).items()}}
                                for c in tools],
        "wrong_value": [{"name": c["name"], "arguments": {k: (v + "x" if isinstance(v, str) else v)
                                                          for k, v in _args(c).items()}} for c in tools],
        "missing_param": [{"name": c["name"], "arguments": dict(list(_args(c).items())[1:])} for c in tools],
        "semicolon": text[:-1] + ";]",
        "two_calls": text[:-1] + ", " + text[1:],
    }
    return {**variants, **_rotate(mistakes, seed, 5)}


def _args(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call["arguments"]
    return json.loads(arguments) if isinstance(arguments, str) else dict(arguments)


def _untyped(value: Any) -> Any:
    """A typed value as JSON would carry it rather than as source text (``"true"`` -> ``True``, ``"5"`` -> 5)."""
    if value in ("true", "false"):
        return value == "true"
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def relevance_variants(task: Task, seed: int) -> dict[str, Any]:
    """Outputs for a relevance or irrelevance task: with and without a call, in each shape."""
    functions = task.input.get("functions") or [{"name": "f"}]
    name = functions[0]["name"]
    call = f"[{name}()]"
    variants = {
        "sentence": NO_CALL,
        "empty_list": "[]",
        "call": call,
        "tool_call": [{"name": name.replace(".", "_"), "arguments": "{}"}],
        "no_tool_call": [],
    }
    mistakes = {
        "fenced_call": f"```\n{call}\n```",
        "python_fenced_call": f"```python\n{call}\n```",
        "call_with_args": f"[{name}(query='weather', limit=3)]",
        "truncated_call": f"[{name}(query='weather'",
        "empty_call_list": "[{}]",
        "bad_json_tool_call": [{"name": name, "arguments": "not json"}],
        "two_calls": f"[{name}(), {name}(a=1)]",
    }
    return {**variants, **_rotate(mistakes, seed, 3)}


def _turn_calls(texts: list[str]) -> list[str]:
    """A reference step's calls, one string each."""
    node = ast.parse(texts[0], mode="eval").body
    assert isinstance(node, ast.List)
    return [ast.unparse(element) for element in node.elts]


def multi_turn_variants(task: Task, seed: int, every_kind: bool) -> dict[str, Any]:
    """Outputs for a multi-turn task; with ``every_kind``, every mistake, else the gold answer and one mistake."""
    gold = reference_output(task).output
    turns: list[list[str]] = [[] if turn == [NO_CALL] else _turn_calls(turn) for turn in gold]
    active = next((i for i, calls in enumerate(turns) if calls), 0)

    def text(calls: list[str]) -> str:
        return "[" + ", ".join(calls) + "]"

    def with_turn(index: int, steps: list[Any]) -> list[list[Any]]:
        changed = copy.deepcopy(gold)
        changed[index] = steps
        return changed

    def tools(calls: list[str]) -> list[dict[str, Any]]:
        result = []
        for call in calls:
            node = ast.parse(call, mode="eval").body
            arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            result.append({"name": ast.unparse(node.func), "arguments": json.dumps(arguments)})
        return result

    first_calls = turns[active]
    mistakes: dict[str, Any] = {
        "one_step_per_call": [[text([c]) for c in calls] if calls else [NO_CALL] for calls in turns],
        "tool_calls": [[tools(calls), []] if calls else [[]] for calls in turns],
        "dropped_call": with_turn(active, [text(first_calls[:-1])] if len(first_calls) > 1 else [NO_CALL]),
        "repeated_step": with_turn(active, [text(first_calls), text(first_calls)]),
        "wrong_value": with_turn(active, [text(first_calls).replace("='", "='x", 1)]),
        "ground_truth_verbatim": [[text(calls)] if calls else [NO_CALL] for calls in task.ground_truth],
        "force_terminated": gold[:-1],
        "no_steps": with_turn(active, []),
        "python_fence": with_turn(active, [f"```python\n{text(first_calls)}\n```"]),
        "bare_fence": with_turn(active, [f"```\n{text(first_calls)}\n```"]),
        "calls_in_every_turn": [[text(calls or first_calls)] for calls in turns],
    }
    if every_kind:
        return {"gold": gold, **mistakes}
    return {"gold": gold, **_rotate(mistakes, seed, 1)}
