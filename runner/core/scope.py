"""What the model calls of one work item run with: the run's limiter, its response cache with the item's repeat, and
the item's token usage, held together in one :class:`CallScope`.

The engine sets one scope per item (:meth:`TrafficControl.scope <runner.traffic.control.TrafficControl.scope>`);
the model layer reads it through :func:`runner.core.limits.request_slot`, :func:`runner.core.cache.current_cache`
and :func:`runner.core.usage.record_usage`, never the engine. One context variable carries it, so concurrent items on
one worker (asyncio tasks, or the thread a sync solution runs in, which gets a copy of its caller's context) never
mix their limits, cache keys or counts. :func:`~runner.core.limits.limiter_scope`,
:func:`~runner.core.cache.cache_scope` and :func:`~runner.core.usage.usage_scope` change one part of it inside a
block (tests, and code that counts a call apart).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.core.cache import ResponseCache
    from runner.core.limits import Limiter
    from runner.core.record import TokenUsage


@dataclass(frozen=True)
class CallScope:
    """The scope of one work item's model calls (see the module's docstring).

    Args:
        limiter: the run's :class:`~runner.core.limits.Limiter` (``None``: every request goes out at once).
        cache: the run's :class:`~runner.core.cache.ResponseCache` (``None``: none).
        repeat: the item's repeat (0, 1, ...): a sampled request is cached per repeat.
        usage: the item's usage, model name -> :class:`~runner.core.record.TokenUsage`, which calls add to
            (``None``: not counted).
    """

    limiter: Limiter | None = None
    cache: ResponseCache | None = None
    repeat: int = 0
    usage: dict[str, TokenUsage] | None = None


_current: contextvars.ContextVar[CallScope] = contextvars.ContextVar("runner_call_scope", default=CallScope())


def current_scope() -> CallScope:
    """The scope of the current work item's model calls (outside an item: no limiter, cache or usage)."""
    return _current.get()


@contextlib.contextmanager
def call_scope(scope: CallScope | None = None, **changes: Any) -> Iterator[CallScope]:
    """Make ``scope`` (default: the current one), with the fields named in ``changes`` replaced, the current scope
    inside the block; yields it.

    Raises:
        TypeError: a name in ``changes`` that is no field of :class:`CallScope`.
    """
    chosen = dataclasses.replace(scope or _current.get(), **changes)
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)
