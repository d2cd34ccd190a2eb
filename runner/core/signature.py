"""What a callable's signature says: the one place that asks :func:`inspect.signature` about user code.

Solutions, solution recipes, benchmark constructors, metric adapters and judges are user code; the runner adapts to
them by their parameters (a solution that takes ``(task, context)`` gets a context; a plug-in that declares nothing
gets the run's values its parameters name, :mod:`runner.core.plugin`, which also makes a plug-in's arguments a
pydantic model from its signature). Every such question is answered here, the same way: a callable whose signature cannot be read
(a builtin, some C extensions) is treated as taking nothing by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

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
