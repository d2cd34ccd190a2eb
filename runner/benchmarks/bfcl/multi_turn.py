"""BFCL's multi-turn checking: a model's calls and the ground truth's, executed on fresh simulated APIs, compared
turn by turn.

Ports of ``bfcl_eval/eval_checker/multi_turn_eval/multi_turn_utils.py`` (``execute_multi_turn_func_call``,
``_process_method_calls``, ``is_empty_execute_response``) and ``multi_turn_checker.py`` (``multi_turn_checker``,
``state_checker``, ``response_checker``) of ``bfcl-eval`` 2026.3.23:

- each call string has every ``name(`` that is a method of an involved API rewritten to ``<instance>.name(``
  (inside string literals too, as the official regular expression does), is refused when its function is one of
  ``kill``, ``exit``, ``quit``, ``remove``, ``unlink``, ``popen``, ``Popen``, ``run``, and its result becomes a
  string (a dict as JSON); an exception becomes ``"Error during execution: <message>"``;
- after every turn whose ground truth is not empty: the model's turn must hold at least one decoded step; every
  API's public attributes must equal the ground truth's (state checker); the ground truth's results of the turn
  must all be among the model's results so far, in any order, counting repeats (response checker). A turn whose
  ground truth is empty (the miss_func and miss_param turns) is not checked, and the model's calls in it are still
  executed.

Two differences, documented in ``docs/bfcl.md``: the official executor keeps its instances in its module's globals
keyed by model name and item id, so an item scored twice in one process starts from the state the first scoring
left (here every check starts from fresh instances); and it runs each call string with Python's ``eval``, so a call
to a builtin or to a module its globals hold (``len``, ``json``) runs, where here only the APIs' methods and literal
values are evaluated (any other name is the ``NameError`` that ``eval`` gives for an unknown name).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import threading
from collections.abc import Sequence
from typing import Any

from runner.benchmarks.bfcl.apis import new_instance
from runner.benchmarks.bfcl.decode import DecodeError, evaluate_literal

FORBIDDEN = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
"""Function names the official executor refuses to run."""
_EXECUTING = threading.Lock()
"""Calls run one at a time in a process: ``MathAPI`` sets mpmath's global precision before computing, so two items
scored in two threads at once could otherwise change each other's results."""


class Environment:
    """The simulated APIs of one multi-turn item: fresh instances loaded from its initial configuration.

    Args:
        involved_classes: the item's ``involved_classes`` (API class names).
        initial_config: the item's ``initial_config`` (class name -> scenario).
        long_context: load the long-context variants (categories with ``long_context`` in their name).
        label: distinguishes environments of one item in rewritten call strings (``model``, ``ground_truth``).
        item_id: the item's id, part of each instance's name as in the official executor.

    Raises:
        BenchmarkError: an unknown API class, or a missing dependency of one (``mpmath``).
    """

    def __init__(self, involved_classes: Sequence[str], initial_config: dict[str, Any], long_context: bool,
                 label: str = "model", item_id: str = "item") -> None:
        self.instances: dict[str, Any] = {}
        self._by_name: dict[str, Any] = {}
        self._methods: dict[str, str] = {}
        for class_name in involved_classes:
            instance = new_instance(class_name, initial_config, long_context)
            instance_name = re.sub(r"[-./:]", "_", f"{label}_{item_id}_{class_name}_instance")
            self.instances[class_name] = instance
            self._by_name[instance_name] = instance
            for method_name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self._methods[method_name] = instance_name

    def execute(self, calls: Sequence[str]) -> list[str]:
        """Run call strings in order (``execute_multi_turn_func_call``); one result string per call."""
        return [self._execute_one(call) for call in calls]

    def _execute_one(self, call: str) -> str:
        call = process_method_calls(call, self._methods)
        try:
            head = call.split("(")[0] if "(" in call else call
            if "." in head:
                head = head.split(".")[1]
            if head in FORBIDDEN:
                raise Exception(f"Function call {head} is not allowed.")  # noqa: TRY002 - the official message
            tree = ast.parse(call, filename="<string>", mode="eval").body
            with _EXECUTING:
                result = self._evaluate(tree)
        except Exception as exc:  # noqa: BLE001 - the official executor turns every failure into a result
            return f"Error during execution: {exc}"
        if type(result) is str:
            return result
        if type(result) is dict:
            try:
                return json.dumps(result)
            except Exception:  # noqa: BLE001 - as the original: objects that do not serialise are written with str
                return str(result)
        return str(result)

    def _evaluate(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Call):
            function = self._evaluate(node.func)
            args: list[Any] = []
            for arg in node.args:
                if isinstance(arg, ast.Starred):
                    args.extend(self._evaluate(arg.value))
                else:
                    args.append(self._evaluate(arg))
            kwargs: dict[str, Any] = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    kwargs.update(self._evaluate(keyword.value))
                else:
                    kwargs[keyword.arg] = self._evaluate(keyword.value)
            return function(*args, **kwargs)
        if isinstance(node, ast.Name):
            if node.id in self._by_name:
                return self._by_name[node.id]
            raise NameError(f"name '{node.id}' is not defined")
        if isinstance(node, ast.Attribute):
            owner = self._evaluate(node.value)
            if not any(owner is instance for instance in self.instances.values()):
                raise NameError(f"attribute {node.attr!r} of a non-API value is not evaluated")
            return getattr(owner, node.attr)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            values = [self._evaluate(v) for v in node.elts]
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](values)
        if isinstance(node, ast.Dict):
            result = {}
            for key, value in zip(node.keys, node.values):
                if key is None:
                    result.update(self._evaluate(value))
                else:
                    result[self._evaluate(key)] = self._evaluate(value)
            return result
        try:
            return evaluate_literal(node)
        except DecodeError as exc:
            raise ValueError(str(exc)) from None

    def state(self) -> dict[str, dict[str, Any]]:
        """Class name -> its public attributes (what the state checker compares), for records and prompts."""
        return {name: {k: v for k, v in vars(instance).items() if not k.startswith("_")}
                for name, instance in self.instances.items()}


def process_method_calls(call: str, methods: dict[str, str]) -> str:
    """``_process_method_calls``: ``name(`` becomes ``<instance>.name(`` for every method name of an API."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{methods[name]}.{name}" if name in methods else name

    return re.sub(r"\b([a-zA-Z_]\w*)\s*(?=\()", replace, call)


def is_empty_execute_response(items: Sequence[Any]) -> bool:
    """``is_empty_execute_response``: no call (``[]`` or ``[[]]``)."""
    return len(items) == 0 or (len(items) == 1 and len(items[0]) == 0)


def _compare_instances(model: Any, ground_truth: Any) -> tuple[bool, dict[str, Any]]:
    differences: dict[str, Any] = {}
    for name in vars(ground_truth):
        if name.startswith("_"):
            continue
        model_value, truth_value = getattr(model, name), getattr(ground_truth, name)
        if model_value != truth_value:
            differences[name] = {"model": model_value, "ground_truth": truth_value}
    return not differences, differences


def state_checker(model: Environment, ground_truth: Environment) -> dict[str, Any]:
    """``state_checker``: every API's public attributes equal the ground truth's."""
    for class_name, truth in ground_truth.instances.items():
        valid, differences = _compare_instances(model.instances[class_name], truth)
        if not valid:
            return {"valid": False,
                    "error_message": f"Model instance for {class_name} does not match the state with ground truth "
                                     "instance.",
                    "error_type": "multi_turn:instance_state_mismatch",
                    "details": {"differences": differences}}
    return {"valid": True}


def _missing_unordered(expected: list[str], got: list[str]) -> list[str]:
    remaining = list(got)
    missing = []
    for item in expected:
        try:
            remaining.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def response_checker(model_results: list[str], truth_results: list[str], turn_index: int) -> dict[str, Any]:
    """``response_checker``: the ground truth's results of this turn are all among the model's results so far."""
    missing = _missing_unordered(truth_results, model_results)
    if missing:
        return {"valid": False,
                "error_message": f"Model response execution results so far does not contain all the ground truth "
                                 f"response execution results for turn {turn_index}.",
                "error_type": "multi_turn:execution_response_mismatch",
                "details": {"missing_items": missing}}
    return {"valid": True}


def multi_turn_checker(decoded_turns: list[list[list[str]]], ground_truth: list[list[str]],
                       entry: dict[str, Any]) -> dict[str, Any]:
    """``multi_turn_checker``: execute and compare turn by turn.

    Args:
        decoded_turns: per turn, the model's decoded steps, each a list of call strings.
        ground_truth: per turn, the ground truth's call strings.
        entry: the item's ``id``, ``initial_config`` and ``involved_classes``.

    Returns:
        ``{"valid": True}`` or ``{"valid": False, "error_message", "error_type", "details"}``.
    """
    item_id = str(entry["id"])
    category = item_id.rsplit("_", 1)[0]
    long_context = "long_context" in category or "composite" in category
    classes, config = entry["involved_classes"], entry.get("initial_config") or {}
    model = Environment(classes, config, long_context, "model", item_id)
    truth = Environment(classes, config, long_context, "ground_truth", item_id)
    all_model_results: list[str] = []
    for turn_index, truth_calls in enumerate(ground_truth):
        steps = decoded_turns[turn_index]
        turn_results: list[str] = []
        for step in steps:
            turn_results.extend(model.execute(step))
        truth_results = truth.execute(truth_calls)
        all_model_results.extend(turn_results)
        if not truth_calls:
            continue
        if not steps or is_empty_execute_response(steps):
            return {"valid": False, "error_message": f"Model response list is empty for turn {turn_index}",
                    "error_type": "multi_turn:empty_turn_model_response", "details": {}}
        state = state_checker(model, truth)
        if not state["valid"]:
            return state
        response = response_checker(all_model_results, truth_results, turn_index)
        if not response["valid"]:
            return response
    return {"valid": True}
