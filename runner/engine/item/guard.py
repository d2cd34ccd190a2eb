"""Calling user code (a solution, a metric) so that nothing it does stops the run.

Whatever leaves user code other than a return is that item's outcome: an ``Exception`` as it is, and every other
``BaseException`` (``SystemExit`` from ``sys.exit()`` or ``exit()``, which argparse- and click-based tools raise on
bad input; ``GeneratorExit``; a ``CancelledError`` the code raised itself; any ``BaseException`` subclass) as
:class:`Escaped`, an ``Exception`` that carries it. Left alone, such an exception ends an asyncio task's step by
re-raising out of the event loop (``SystemExit``, ``KeyboardInterrupt``: a Ray actor's loop then stops answering and
the run waits forever) or ends the process (``--sequential`` exited 0 midway).

Only two ways out are not the code's: an interrupt of the run (a ``KeyboardInterrupt`` on the main thread, where
Python delivers Ctrl-C) and a cancellation of the item's own asyncio task (the driver shutting down, or
:func:`asyncio.wait_for`'s timeout); :func:`is_interrupt` tells them apart, and they pass through.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

from runner.engine.item import watchdog

T = TypeVar("T")


class Escaped(Exception):
    """A ``BaseException`` other than an interrupt that left user code, carried as an ``Exception``.

    Args:
        original: the exception (its type and traceback go into the record).
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original


def describe(exc: BaseException) -> str:
    """One line for a ``BaseException`` that left user code."""
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r}) or exit() was called; SystemExit would end the worker, so it ends this item"
    if isinstance(exc, asyncio.CancelledError):
        return "the code raised CancelledError itself (nothing cancelled this item)"
    detail = str(exc)
    return f"{type(exc).__name__} was raised" + (f": {detail}" if detail else "")


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` stops the run rather than the item: a ``KeyboardInterrupt`` on the main thread, or a
    ``CancelledError`` while the current asyncio task is being cancelled (``Task.cancelling()``, Python 3.11; on
    3.10 every ``CancelledError`` counts as a cancellation)."""
    if isinstance(exc, KeyboardInterrupt):
        return threading.current_thread() is threading.main_thread()
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        return cancelling is None or cancelling() > 0
    return False


async def contained(awaitable: Awaitable[T]) -> T:
    """``await awaitable``, with every ``BaseException`` but an interrupt (:func:`is_interrupt`) raised as
    :class:`Escaped`."""
    try:
        return await awaitable
    except Exception:
        raise
    except BaseException as exc:
        if is_interrupt(exc) or _closing(exc):
            raise
        raise Escaped(exc) from exc


def _closing(exc: BaseException) -> bool:
    """Whether ``exc`` is the ``GeneratorExit`` of this coroutine being closed (thrown into its own frame, so its
    traceback has no deeper entry), not one the awaited code raised."""
    return isinstance(exc, GeneratorExit) and exc.__traceback__ is not None and exc.__traceback__.tb_next is None


async def guarded(awaitable: Awaitable[T], limit: float | None) -> T:
    """Await user code: :func:`contained`, under ``limit`` seconds (``None``: no limit). On Python 3.11+ in the
    current asyncio task (``asyncio.timeout``), which the watchdog already counts as the item's, so a
    ``KeyboardInterrupt`` the code raises on the main thread (a Ctrl-C) travels up the run's awaits like any
    exception; on 3.10 in a task of its own (``asyncio.wait_for``) that the watchdog adopts
    (:func:`runner.engine.item.watchdog.adopt`).

    Raises:
        Escaped: a ``BaseException`` other than an interrupt.
        asyncio.TimeoutError: past the limit.
        Exception: what the code raised.
    """
    if limit is None:
        return await contained(awaitable)
    timeout = getattr(asyncio, "timeout", None)
    if timeout is not None:
        async with timeout(limit):
            return await contained(awaitable)
    task = asyncio.ensure_future(contained(awaitable))
    watchdog.adopt(task)
    try:
        return await asyncio.wait_for(task, limit)
    finally:
        watchdog.forget(task)
