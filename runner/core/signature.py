"""What a callable's signature says: the one place that asks :func:`inspect.signature` about user code.

Solutions, solution recipes, benchmark constructors, metric adapters and judges are user code; the runner adapts to
them by their parameters (a solution that takes ``(task, context)`` gets a context, a recipe that names ``model``
gets ``--model``). Every such question is answered here, the same way: a callable whose signature cannot be read
(a builtin, some C extensions) is treated as taking nothing by name.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

_NAMED_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POSITIONAL_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def parameters(fn: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    """``fn``'s parameters by name (a class: its constructor's, without ``self``), or ``None`` when its signature
    cannot be read."""
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def names_parameter(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` names the parameter ``name`` (a ``**kwargs`` does not count: code that wants a judge or a model
    says so by name)."""
    params = parameters(fn)
    return params is not None and name in params


def takes_var_keyword(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a ``**kwargs`` parameter."""
    params = parameters(fn)
    return params is not None and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def split_kwargs(fn: Callable[..., Any], offered: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(accepted, rejected)``: the keyword arguments of ``offered`` that ``fn`` takes (all of them with a
    ``**kwargs``), and the names of those it does not (all of them when its signature cannot be read)."""
    params = parameters(fn)
    if params is None:
        return {}, list(offered)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered), []
    return {k: v for k, v in offered.items() if k in params}, [k for k in offered if k not in params]


def named_parameters(fn: Callable[..., Any]) -> list[str]:
    """The names ``fn`` takes by keyword, in order (``*args``, ``**kwargs`` and positional-only ones left out)."""
    params = parameters(fn)
    return [] if params is None else [p.name for p in params.values() if p.kind in _NAMED_KINDS]


def missing_required(fn: Callable[..., Any], offered: set[str]) -> list[str]:
    """The parameters of ``fn`` that have no default and are not in ``offered`` (``*args``/``**kwargs`` aside)."""
    params = parameters(fn)
    if params is None:
        return []
    return [p.name for p in params.values() if p.kind in _NAMED_KINDS and p.default is p.empty and p.name not in offered]


def takes_two_positional(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with two positional arguments (``solve(task, context)``), ``*args`` included."""
    params = parameters(fn)
    if params is None:
        return False
    positional = [p for p in params.values() if p.kind in _POSITIONAL_KINDS]
    return len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params.values())


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (an ``async def`` function, or an object whose ``__call__`` is
    one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def mistyped(fn: Callable[..., Any], offered: Mapping[str, Any]) -> dict[str, str]:
    """The arguments of ``offered`` that do not validate against ``fn``'s type annotations (a class: its
    ``__init__``'s), with pydantic's reason, e.g. ``{"temperature": "is not a valid float (Input should be ...)"}``.

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
            text = getattr(hints[name], "__name__", None) or str(hints[name]).replace("typing.", "")
            problems[name] = f"is not a valid {text} ({err.errors()[0]['msg']})"
    return problems
