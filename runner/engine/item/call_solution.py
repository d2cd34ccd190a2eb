"""Calling a built solution: whatever the user wrote, as one ``await solution(task, context) -> SolutionOutput``.

The recipe that builds it (:class:`~runner.core.solution.SolutionSpec`) is in ``core``, so plug-ins never import the
engine; how it is called (in the event loop, or in a thread that a timeout can abandon) is decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable
from typing import Any

from runner.core import signature
from runner.core.solution import SolutionContext, SolutionOutput
from runner.core.task import Task
from runner.engine.item.guard import Escaped


class Solution:
    """A solution callable adapted to ``await solution(task, context) -> SolutionOutput``.

    Sync callables run in a daemon thread when ``in_thread`` is set (so a timeout can stop waiting for them and a
    hung one cannot keep the process alive), or directly in the event loop otherwise (easier to debug).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.is_async = signature.is_async(fn)
        self.wants_context = signature.takes_two_positional(fn)

    async def __call__(self, task: Task, context: SolutionContext, in_thread: bool = True) -> SolutionOutput:
        args = (task, context) if self.wants_context else (task,)
        if self.is_async:
            result = await self.fn(*args)
        elif in_thread:
            result = await in_daemon_thread(self.fn, *args)
        else:
            result = self.fn(*args)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, SolutionOutput) else SolutionOutput(success=True, output=result)


def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``fn(*args)`` in a new daemon thread with the caller's context variables; an awaitable for its result.

    An ``Exception`` ``fn`` raises is raised by the awaitable as it is; any other ``BaseException`` (``SystemExit``,
    ``GeneratorExit``, a ``KeyboardInterrupt``, which is never a Ctrl-C outside the main thread) as
    :class:`~runner.engine.item.guard.Escaped`: asyncio throws a future's exception into the awaiting coroutines, and a
    thrown ``GeneratorExit`` would close them rather than reach their handlers.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def target() -> None:
        try:
            outcome = (future.set_result, context.run(fn, *args))
        except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (future.set_exception, exc)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as an Exception
            outcome = (future.set_exception, Escaped(exc))
        # The loop is gone when the caller stopped waiting (timeout) and the run ended meanwhile.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name="runner-solution", daemon=True).start()
    return future
