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
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
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
        weights: model name (``provider:model``, as :func:`~runner.core.limits.model_key` writes it) -> a digest of
            the weights it serves, for the models whose weights the run can read (a checkpoint folder): the response
            cache keys their replies by it, so a checkpoint rewritten in place is asked anew.
    """

    limiter: Limiter | None = None
    cache: ResponseCache | None = None
    repeat: int = 0
    usage: dict[str, TokenUsage] | None = None
    weights: Mapping[str, str] = field(default_factory=dict)


def repeat_seed(seed: int, repeat: int) -> int:
    """The sampling seed of repeat ``repeat`` (0, 1, ...) of a run whose requests carry ``seed``: ``seed`` itself
    for repeat 0 (a run of one repeat sends what it always sent), else the first 31 bits of
    ``sha256("<seed>/<repeat>")``, so that a server that honours ``seed`` (vLLM) draws another sample in each repeat
    while a rerun of the same repeat draws the same one (evalchemy PR #75: one fixed seed made every repeat of a
    task answer alike, and pass@k flat)."""
    if repeat == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


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
