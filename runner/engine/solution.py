"""Turning whatever the user calls a solution into one async callable.

A solution is a function ``solve(task)`` or ``solve(task, context)``, sync or async, returning a
:class:`SolutionOutput` or a bare value. A class, or a function decorated with :func:`solution_factory`, is a
recipe: it is called once per worker (with the solution arguments it accepts, and ``benchmark=`` if it asks for it)
to build the solution, so a model is loaded once per worker, not once per task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import ConfigError, PluginError
from runner.core.solution import SolutionContext, SolutionOutput
from runner.core.task import Task

_FACTORY_MARK = "__runner_solution_factory__"


def solution_factory(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a factory: called once per worker, it returns the solution callable.

    Example::

        @solution_factory
        def my_agent(model: str):
            client = load_model(model)          # once per worker
            async def solve(task):
                return await client.answer(task.input)
            return solve
    """
    setattr(fn, _FACTORY_MARK, True)
    return fn


def describe(target: Any) -> str:
    """``module:qualname`` of a callable or class (for fingerprints and messages)."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{name}"


def _accepted_kwargs(fn: Callable[..., Any], offered: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}, list(offered)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered), []
    accepted = {k: v for k, v in offered.items() if k in params}
    return accepted, [k for k in offered if k not in params]


def _mistyped(fn: Callable[..., Any], offered: dict[str, Any]) -> dict[str, str]:
    """The arguments of ``offered`` that do not validate against ``fn``'s type annotations, with pydantic's reason.

    Validation is pydantic's lax mode (``"8"`` is an int, ``"hot"`` is not a float). Annotations pydantic cannot
    check (arbitrary classes, unresolvable forward references) are not checked.
    """
    try:
        hints = typing.get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: nothing to check
        return {}
    problems = {}
    for name, value in offered.items():
        if name not in hints:
            continue
        try:
            adapter = pydantic.TypeAdapter(hints[name])
        except Exception:  # noqa: BLE001 - a type pydantic cannot build a validator for
            continue
        try:
            adapter.validate_python(value)
        except pydantic.ValidationError as err:
            problems[name] = f"is not {_type_name(hints[name])} ({err.errors()[0]['msg']})"
    return problems


def _type_name(hint: Any) -> str:
    text = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
    return f"a valid {text}"


_ARGUMENT_FLAGS = {"model": "--model (provider:model, e.g. openai:gpt-4o)", "user_model": "--user-model"}
"""How a user passes a recipe's argument from the command line, where it has a flag of its own (else ``-S``)."""


def _missing_required(fn: Callable[..., Any], offered: set[str]) -> list[str]:
    """The parameters of ``fn`` that have no default and are not in ``offered`` (``*args``/``**kwargs`` aside)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params.values() if p.kind in kinds and p.default is p.empty and p.name not in offered]


def _wants_context(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


@dataclass
class SolutionSpec:
    """A picklable recipe for a solution: the target (callable, class or factory) and its arguments.

    Args:
        target: a solution callable, a class, or a :func:`solution_factory`.
        kwargs: arguments for a class or factory (e.g. ``{"model": "openai:gpt-4o"}``); one it does not accept
            is an error.
        name: how the run names the solution (built-in name or import path).
    """

    target: Any
    kwargs: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    @property
    def is_recipe(self) -> bool:
        """Whether :meth:`build` constructs something (a class or a factory) rather than using the target as is."""
        return inspect.isclass(self.target) or bool(getattr(self.target, _FACTORY_MARK, False))

    def accepts(self, name: str) -> bool:
        """Whether the target is a recipe whose constructor takes the argument ``name`` (e.g. ``model``)."""
        return self.is_recipe and not _accepted_kwargs(self.target, {name: None})[1]

    def check(self) -> None:
        """Raise ``ConfigError`` when arguments were given that the target cannot take, or a recipe's required
        argument is missing (``benchmark`` aside, which :meth:`build` passes).

        A recipe may also define ``check_arguments(**kwargs)`` (a static or class method raising ``ConfigError``):
        it is called here with the arguments, so that a bad value is reported before anything is written rather
        than when each worker builds the solution. Then every argument is validated against the recipe's type
        annotations (pydantic's lax mode), so ``-S temperature=hot`` is refused here too.
        """
        if self.is_recipe:
            missing = _missing_required(self.target, {*self.kwargs, "benchmark"})
            if missing:
                flags = " and ".join(_ARGUMENT_FLAGS.get(name, f"-S {name}=VALUE") for name in missing)
                raise ConfigError(f"solution {self.display!r} needs {flags}")
        if not self.kwargs:
            return
        if not self.is_recipe:
            raise ConfigError(
                f"solution {self.display!r} is a plain function and takes no arguments "
                f"({', '.join(sorted(self.kwargs))}); drop them or make it a class or @solution_factory"
            )
        _, rejected = _accepted_kwargs(self.target, self.kwargs)
        if rejected:
            raise ConfigError(
                f"solution {self.display!r} does not accept {', '.join(sorted(rejected))}; "
                f"drop {'it' if len(rejected) == 1 else 'them'} or use a solution that does"
            )
        check_arguments = getattr(self.target, "check_arguments", None)
        if callable(check_arguments):
            check_arguments(**self.kwargs)
        for name, problem in _mistyped(self.target, self.kwargs).items():
            raise ConfigError(
                f"solution {self.display!r}: argument {name}={self.kwargs[name]!r} {problem}; "
                f"fix -S {name}=VALUE (or the config's solution_args)"
            )

    @property
    def display(self) -> str:
        """The solution's name for messages."""
        return self.name or describe(self.target)

    def build(self, benchmark: BenchmarkBase | None = None) -> Solution:
        """Construct the solution (once per worker).

        Raises:
            ConfigError: arguments the target does not accept.
        """
        self.check()
        fn = self.target
        if self.is_recipe:
            offered = dict(self.kwargs)
            if benchmark is not None:
                offered.setdefault("benchmark", benchmark)
            accepted, _ = _accepted_kwargs(self.target, offered)
            fn = self.target(**accepted)
            if not callable(fn):
                raise PluginError(f"solution {self.display!r} built a {type(fn).__name__}, which is not callable")
        return Solution(fn)


class Solution:
    """A solution callable adapted to ``await solution(task, context) -> SolutionOutput``.

    Sync callables run in a daemon thread when ``in_thread`` is set (so a timeout can stop waiting for them and a
    hung one cannot keep the process alive), or directly in the event loop otherwise (easier to debug).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.is_async = _is_async(fn)
        self.wants_context = _wants_context(fn)

    async def __call__(self, task: Task, context: SolutionContext, in_thread: bool = True) -> SolutionOutput:
        args = (task, context) if self.wants_context else (task,)
        if self.is_async:
            result = await self.fn(*args)
        elif in_thread:
            result = await _in_daemon_thread(self.fn, *args)
        else:
            result = self.fn(*args)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, SolutionOutput) else SolutionOutput(success=True, output=result)


def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``fn(*args)`` in a new daemon thread with the caller's context variables; an awaitable for its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def target() -> None:
        try:
            outcome = (future.set_result, context.run(fn, *args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (future.set_exception, exc)
        # The loop is gone when the caller stopped waiting (timeout) and the run ended meanwhile.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name="runner-solution", daemon=True).start()
    return future
