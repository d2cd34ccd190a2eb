"""A deadline for each call to an object store during a run, so that a store that hangs fails like one that is down.

An object store that stops answering (a gateway that holds connections, a server that is paused) does not fail: its
client waits. botocore waits ``read_timeout`` (s3fs: 15 s) per attempt, retries up to 4 more times, and s3fs
retries that up to 5 times (``s3fs.core._error_wrapper``), so one call could hang for minutes before the run's
outage handling (:mod:`runner.storage.outage`) saw a failure. fsspec's asynchronous filesystems (s3fs, gcsfs,
adlfs...) run each blocking call as a coroutine through ``fsspec.asyn.sync``, whose ``timeout`` in seconds cancels
the call, inner retries included, when it passes; this module computes that deadline from the run's outage budget
and turns its expiry into a :class:`TimeoutError` that says so, which :func:`runner.storage.error_kinds.is_transient`
counts as temporary. Filesystems without asynchronous calls (a local disk, ``memory://``) are called as they are.

A call cut at its deadline may still have reached the store (a PUT that was sent, whose answer never came): the
record write that retries it is refused, and the store tells its own write by its write id
(:meth:`runner.storage.store.ResultStore.write_record`), as after a lost response.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem, sync

MIN_DEADLINE_S = 1.0
"""The shortest deadline of one call, in seconds."""
MAX_DEADLINE_S = 60.0
"""The longest deadline of one call (before the allowance for its bytes), in seconds."""
SLOWEST_RATE = 2**20
"""Bytes per second below which a store that is sending or receiving counts as hung: each MiB of a call adds 1 s."""


def deadline(outage_s: float, nbytes: int = 0) -> float | None:
    """Seconds one call moving ``nbytes`` may take in a run that waits out outages of up to ``outage_s`` seconds:
    the outage budget, within [:data:`MIN_DEADLINE_S`, :data:`MAX_DEADLINE_S`], so that a hung store is noticed
    within the budget, plus ``nbytes`` / :data:`SLOWEST_RATE`. ``None`` (no deadline) when ``outage_s`` is 0:
    outside a run (``report``, ``status``), where a call may take as long as the client lets it."""
    if outage_s <= 0:
        return None
    return min(max(outage_s, MIN_DEADLINE_S), MAX_DEADLINE_S) + nbytes / SLOWEST_RATE


def call(fs: fsspec.AbstractFileSystem, method: str, *args: Any, seconds: float | None, **kwargs: Any) -> Any:
    """``fs.<method>(*args, **kwargs)``, cancelled after ``seconds`` on an asynchronous filesystem (its coroutine
    ``fs._<method>``, run as fsspec runs it: ``fsspec.asyn.sync``, on the filesystem's loop).

    Raises:
        TimeoutError: the call passed its deadline ("the storage did not answer within N s").
        Exception: whatever the call raises.
    """
    coroutine = getattr(fs, f"_{method}", None) if isinstance(fs, AsyncFileSystem) else None
    if seconds is None or not inspect.iscoroutinefunction(coroutine):
        return getattr(fs, method)(*args, **kwargs)
    try:
        return sync(fs.loop, coroutine, *args, timeout=seconds, **kwargs)
    except asyncio.TimeoutError:  # fsspec's FSTimeoutError
        raise TimeoutError(f"the storage did not answer within {seconds:.0f} s") from None
