"""Token usage attributed to the work item that spent it.

The engine gives each (task, repeat) its usage in the item's :class:`~runner.core.scope.CallScope` (or a
:func:`usage_scope`); model clients call :func:`record_usage` after each request. A context variable carries the
scope, so concurrent items on one worker (asyncio tasks, or the thread a sync solution runs in) never mix their
counts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

from runner.core.record import TokenUsage
from runner.core.scope import call_scope, current_scope


@contextlib.contextmanager
def usage_scope(usage: dict[str, TokenUsage] | None = None) -> Iterator[dict[str, TokenUsage]]:
    """Collect usage recorded inside the block into the yielded dict (model name -> :class:`TokenUsage`): ``usage``
    when given (to go on counting into it), else a new one."""
    usage = usage if usage is not None else {}
    with call_scope(usage=usage):
        yield usage


def record_usage(model: str, input_tokens: int | None = 0, output_tokens: int | None = 0, *,
                 cache: Literal["hit", "miss"] | None = None,
                 counted_by: Literal["server", "runner"] = "server") -> None:
    """Add one model call's tokens to the current item; outside an item it does nothing.

    A count of ``None`` is unknown (the server reported none): the call is counted in ``calls_without_usage``, and
    the unknown count adds nothing to its sum, so a reader sees how many calls the sums leave out.

    Args:
        input_tokens, output_tokens: the call's prompt and answer tokens, or ``None`` when unknown.
        cache: ``"hit"``: the response cache answered, no call was made (counted in ``cached_calls`` only, the
            tokens are ignored); ``"miss"``: a cacheable call the cache did not hold (counted in ``calls`` and
            ``cache_misses``); ``None``: a call the cache was not asked about.
        counted_by: ``"runner"`` when the server reported no count and the runner counted the tokens itself, with
            the model's own tokenizer (counted in ``calls_counted_by_runner``); ``"server"``: the server's counts.
    """
    usage = current_scope().usage
    if usage is None:
        return
    entry = usage.setdefault(model, TokenUsage())
    if cache == "hit":
        entry.cached_calls += 1
        return
    entry.input_tokens += int(input_tokens or 0)
    entry.output_tokens += int(output_tokens or 0)
    entry.calls += 1
    entry.cache_misses += cache == "miss"
    entry.calls_counted_by_runner += counted_by == "runner"
    if input_tokens is None or output_tokens is None:
        entry.calls_without_usage += 1


def record_timeout(model: str) -> None:
    """Count one request to ``model`` abandoned at the model timeout (its whole answer had not arrived; the request
    was cancelled) in the current item's usage (:attr:`TokenUsage.timeouts`); outside an item it does nothing."""
    usage = current_scope().usage
    if usage is not None:
        usage.setdefault(model, TokenUsage()).timeouts += 1
