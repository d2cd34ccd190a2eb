"""One agent task's world: the apps it involves, its tools, the calls made, and the end state the metrics score.

A fresh :class:`ACEEnvironment` is built per task and deep-copied with the task per repeat (``Task.fresh``); the
metrics hold a reference to the same object, so they score the state the solution left. Everything here is plain
data and pickles (Ray ships tasks to workers).

An agent uses it in one of two ways:

- ``env.tools()``: ``(callable, schema)`` pairs, one per function of the task (schemas from the data, with the
  data's ``"type": "dict"`` and ``"list"`` turned into JSON Schema's ``"object"`` and ``"array"``); each call is
  recorded as ``[name(key=value, ...)]``;
- ``env.execute(text)``: run a reply in the official format ``[f(a=1), g(b='x')]`` as the authors' executor does
  (``model_inference/multi_turn/execution_role.py``); the raw text is recorded, as the authors record it.

The recorded calls (:attr:`ACEEnvironment.calls`) are what process accuracy compares with the milestones.
"""

from __future__ import annotations

import ast
import copy
import difflib
import json
import re
from importlib import resources
from typing import Any

from runner.benchmarks.acebench.calls import CallSyntaxError, dotted_name, format_calls, resolve_value
from runner.benchmarks.acebench.phone import Device, FoodApp, MessageApp, ReminderApp
from runner.benchmarks.acebench.travel import TravelApp

APP_NAMES = ("BaseApi", "MessageApi", "ReminderApi", "FoodPlatform", "Travel")
_WORLDS: dict[str, dict[str, Any]] = {}
# An apostrophe between letters inside a single-quoted string (``'Domino's'``), as some milestones write it.
_APOSTROPHE = re.compile(r"(?<=[A-Za-z])'(?=[A-Za-z])")


def canonical_app(name: str) -> str:
    """The app a class name in the data means: exact, case-insensitive, or the closest spelling (the data writes
    ``ReminderAPI``, ``Reminderpi``, ``BaseAPI`` and ``Baspi``); the name itself when nothing is close."""
    if name in APP_NAMES:
        return name
    for known in APP_NAMES:
        if known.lower() == name.lower():
            return known
    close = difflib.get_close_matches(name, APP_NAMES, n=1, cutoff=0.75)
    return close[0] if close else name


def load_world(language: str) -> dict[str, Any]:
    """The initial world of ``language`` (a deep copy of ``worlds/<language>.json``)."""
    if language not in _WORLDS:
        text = resources.files("runner.benchmarks.acebench").joinpath(f"worlds/{language}.json").read_text("utf-8")
        _WORLDS[language] = json.loads(text)
    return copy.deepcopy(_WORLDS[language])


def json_state(value: Any) -> Any:
    """``value`` as it reads back from JSON (integer keys become strings), as the authors' stored results are."""
    return json.loads(json.dumps(value, ensure_ascii=False))


class ToolError(Exception):
    """A call the environment cannot run (unknown function, bad arguments)."""


class ACEEnvironment:
    """The apps of one agent task.

    Args:
        involved_classes: the task's ``involved_classes`` (``BaseApi``, ``MessageApi``, ``ReminderApi``,
            ``FoodPlatform``, ``Travel``).
        initial_config: the task's ``initial_config`` (``{"BaseApi": {"wifi": ..., "logged_in": ...}}``; a
            misspelt class name is read as the app it means).
        functions: the task's function schemas; they decide which tools :meth:`tools` offers.
        language: ``en`` or ``zh`` (the world's names and texts).
    """

    def __init__(self, involved_classes: list[str], initial_config: dict[str, Any], functions: list[dict[str, Any]],
                 language: str) -> None:
        world = load_world(language)
        config = {canonical_app(k): v for k, v in (initial_config or {}).items()}
        base = {**world["BaseApi"], **config.get("BaseApi", {})}
        self.language = language
        self.functions = functions
        self.device = Device(wifi=base["wifi"], logged_in=base["logged_in"])
        self.apps: dict[str, Any] = {}
        for name in (canonical_app(c) for c in involved_classes):
            if name == "BaseApi":
                self.apps[name] = self.device
            elif name == "MessageApi":
                self.apps[name] = MessageApp(self.device, world["MessageApi"])
            elif name == "ReminderApi":
                self.apps[name] = ReminderApp(self.device, world["ReminderApi"])
            elif name == "FoodPlatform":
                self.apps[name] = FoodApp(self.device, world["FoodPlatform"], language)
            elif name == "Travel":
                self.apps[name] = TravelApp(world["Travel"])
        self.calls: list[str] = []
        """Every call made, in order: raw text for :meth:`execute`, ``[name(k=v)]`` for tool calls."""

    def _method(self, name: str) -> Any:
        for app in self.apps.values():
            method = getattr(app, name, None)
            if callable(method) and not name.startswith("_") and name in type(app).__dict__:
                return method
        raise ToolError(f"function {name!r} does not exist in this environment")

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run one tool call and record it as ``[name(k=v, ...)]``; an error comes back as a message (``name`` is
        positional-only, so a model's argument called ``name`` reaches the tool, which rejects it)."""
        self.calls.append(format_calls([(name, arguments)]))
        return self._run(name, arguments)

    def _run(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            return self._method(name)(**arguments)
        except ToolError as exc:
            return {"status": False, "message": str(exc)}
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            return {"status": False, "message": f"Error during execution of {name}: {exc}"}

    def execute(self, text: str) -> list[Any]:
        """Run a reply such as ``"[f(a=1), g(b='x')]"`` and return one result per call.

        The text is recorded as given. Parsing follows the authors' executor: brackets and quotes around the text
        are stripped, one call or a list of calls is read, positional arguments are ignored. A single quote between
        two letters inside a quoted string (``'Domino's'``) is read as an apostrophe when the text does not parse
        otherwise. Unparseable text gives one error result.
        """
        self.calls.append(text)
        try:
            calls = parse_executable(text)
        except CallSyntaxError as exc:
            return [{"status": False, "message": f"cannot parse the function call: {exc}"}]
        return [self._run(name, arguments) for name, arguments in calls]

    def tools(self) -> list[tuple[Any, dict[str, Any]]]:
        """``(callable, schema)`` per function of the task; calling one runs and records the call."""
        return [(_Tool(self, f["name"]), tool_schema(f)) for f in self.functions]

    def state(self) -> list[dict[str, Any]]:
        """The end state as the authors store it: ``[{app name: {saved attribute: value}}]`` per involved app,
        after a JSON round trip."""
        return json_state([{name: {attr: getattr(app, attr) for attr in app.saved}} for name, app in self.apps.items()])


class _Tool:
    """A picklable callable running one function of an :class:`ACEEnvironment`."""

    def __init__(self, environment: ACEEnvironment, name: str) -> None:
        self.environment = environment
        self.__name__ = name

    def __call__(self, **arguments: Any) -> Any:
        return self.environment.call(self.__name__, **arguments)


def tool_schema(function: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style tool schema from one of the data's function descriptions (``"dict"`` becomes ``"object"``,
    ``"list"`` becomes ``"array"``)."""
    return {"type": "function", "function": _object_types(copy.deepcopy(function))}


_JSON_SCHEMA_TYPES = {"dict": "object", "list": "array"}
"""The data's type names that JSON Schema spells otherwise (servers reject ``"list"`` in a tool schema)."""


def _object_types(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (_JSON_SCHEMA_TYPES.get(v, v) if k == "type" and isinstance(v, str) else _object_types(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_object_types(v) for v in node]
    return node


def parse_executable(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The calls in an agent's reply, read as the authors' executor reads them (see :meth:`ACEEnvironment.execute`).

    Raises:
        CallSyntaxError: no call can be read.
    """
    cleaned = text.strip().strip("[]'")
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError:
        try:
            tree = ast.parse(_APOSTROPHE.sub(r"\\'", cleaned), mode="eval")
        except SyntaxError as exc:
            raise CallSyntaxError(f"not a function call: {exc.msg}") from None
    nodes = [tree.body] if isinstance(tree.body, ast.Call) else (
        [e for e in tree.body.elts if isinstance(e, ast.Call)] if isinstance(tree.body, (ast.List, ast.Tuple)) else [])
    if not nodes:
        raise CallSyntaxError("no function call found")
    return [(dotted_name(n.func), {kw.arg: resolve_value(kw.value) for kw in n.keywords if kw.arg}) for n in nodes]
