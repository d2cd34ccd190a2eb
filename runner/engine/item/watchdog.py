"""Watching the items of a worker from a thread of its own: what each item does and since when, whether the event
loop still turns, and the process's resident memory.

``asyncio.wait_for`` enforces a time limit only while the event loop turns: an ``async def`` solution that calls
``time.sleep`` or a synchronous HTTP client holds the loop, its timeout callback never runs, and every other item on
that loop freezes with it. A :class:`WorkerWatch` is a daemon thread that sees the loop stop turning (a callback on
the loop stamps the time every :data:`TICK_S` seconds) and, once the item holding it is :data:`GRACE_S` seconds past
its own limit, raises an :class:`Alarm` naming that item. The loop cannot be freed from outside, so the executor
gets the worker back instead: a Ray worker is killed and replaced (:mod:`runner.engine.pool.pool`), the sequential
executor abandons the item's loop (:class:`ItemLoop`). The same thread compares the process's resident memory with
``--memory-limit`` (:attr:`WorkerSpec.memory_limit <runner.core.config.WorkerSpec.memory_limit>`).

Each item registers a :class:`Running` while it goes through ``execute_one`` (:func:`tracked`), and names its
phase (:func:`phase`: the solution, each metric, each under its limit); a task that a limited call runs in is
adopted (:func:`adopt`), so the thread can tell which item holds the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal, TypeVar

import psutil

TICK_S = 0.2
"""Seconds between two stamps of a watched loop, and between two looks of the watching thread: well under
:data:`GRACE_S`, so a loop that turns is never taken for a blocked one, and an alarm comes at most this late. Each
look wakes the loop and the thread (at 0.05 s, 20 times a second: 5 to 10 ms of CPU a second per worker, measured on
2 cores, taken from a model served on the same cores)."""
GRACE_S = 0.5
"""Seconds a loop may overrun the limit of the item that holds it before it is declared blocked (a loop that turns
at all fires that item's timeout itself, well within this)."""

T = TypeVar("T")


@dataclass(eq=False)
class Running:
    """One item on its way through ``execute_one``, as the watching thread sees it.

    Args:
        task_id, repeat, attempt: the item.
        loop: the event loop it runs on.
        cell: the number of its run among the runs executed together (a matrix's cell; 0 for a run alone).
        phase: ``queued`` (waiting for a solution slot), ``solution``, ``metric 'name'`` or ``writing``.
        since: :func:`time.monotonic` when the phase began.
        limit: seconds the phase may take (``None``: no limit).
        abandoned: its executor gave up on it (its loop was declared blocked, its worker is replaced): it must not
            write its record if it ever gets that far.
    """

    task_id: str
    repeat: int
    attempt: int
    loop: asyncio.AbstractEventLoop
    cell: int = 0
    phase: str = "queued"
    since: float = field(default_factory=time.monotonic)
    limit: float | None = None
    abandoned: bool = False

    @property
    def deadline(self) -> float | None:
        """:func:`time.monotonic` at which the phase is over its limit (``None``: no limit)."""
        return None if self.limit is None else self.since + self.limit

    @property
    def active(self) -> bool:
        """Whether the item's own code runs (its solution or a metric), as opposed to waiting or being written."""
        return self.phase not in ("queued", "writing")


_CURRENT: ContextVar[Running | None] = ContextVar("runner_running_item", default=None)
_TASKS: dict[asyncio.Task[Any], Running] = {}
"""Every asyncio task of this process that runs an item's code, and that item (read by watching threads)."""


@contextlib.contextmanager
def tracked(task_id: str, repeat: int, attempt: int, cell: int = 0) -> Iterator[Running]:
    """Register the item that the current asyncio task runs, for as long as the block lasts."""
    running = Running(task_id, repeat, attempt, asyncio.get_running_loop(), cell)
    token = _CURRENT.set(running)
    task = asyncio.current_task()
    if task is not None:
        _TASKS[task] = running
    try:
        yield running
    finally:
        if task is not None:
            _TASKS.pop(task, None)
        # An item abandoned with its loop may be closed at exit from another context, where the token is foreign.
        with contextlib.suppress(ValueError):
            _CURRENT.reset(token)


def phase(name: str, limit: float | None = None) -> None:
    """The current item enters phase ``name``, which may take ``limit`` seconds (nothing outside an item)."""
    running = _CURRENT.get()
    if running is not None:
        running.phase, running.since, running.limit = name, time.monotonic(), limit


def adopt(task: asyncio.Task[Any]) -> None:
    """Count ``task`` (started by the current item) as the item's own until :func:`forget`."""
    running = _CURRENT.get()
    if running is not None:
        _TASKS[task] = running


def forget(task: asyncio.Task[Any]) -> None:
    """Stop counting ``task`` as an item's."""
    _TASKS.pop(task, None)


def abandoned() -> bool:
    """Whether the current item was given up by its executor (see :attr:`Running.abandoned`)."""
    running = _CURRENT.get()
    return running is not None and running.abandoned


def abandon(loop: asyncio.AbstractEventLoop) -> None:
    """Give up every item registered on ``loop``."""
    for running in running_on(loop):
        running.abandoned = True


def running_on(loop: asyncio.AbstractEventLoop) -> list[Running]:
    """The items registered on ``loop``, each once."""
    seen: dict[int, Running] = {}
    for running in list(_TASKS.values()):
        if running.loop is loop:
            seen[id(running)] = running
    return list(seen.values())


@dataclass(frozen=True)
class Alarm:
    """Why a worker must be replaced: its event loop is blocked, or its memory is over the limit.

    Args:
        kind: ``blocked`` or ``memory``.
        status: the record status of the blamed item (``timeout`` for a blocked loop, ``error`` for memory).
        error_type: the record's error type (``EventLoopBlocked``, ``MemoryLimitExceeded``).
        message: one line for the record and the log.
        task_id, repeat: the blamed item, or ``None`` when no single item can be blamed (then the worker's items
            are treated as after a worker death).
        cell: the blamed item's cell (:attr:`Running.cell`).
    """

    kind: Literal["blocked", "memory"]
    status: str
    error_type: str
    message: str
    task_id: str | None = None
    repeat: int | None = None
    cell: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The alarm as plain data (it crosses processes)."""
        return {"kind": self.kind, "status": self.status, "error_type": self.error_type, "message": self.message,
                "task_id": self.task_id, "repeat": self.repeat, "cell": self.cell}


class WorkerWatch:
    """A daemon thread that watches ``loop`` (and, with ``memory_limit``, this process's resident memory) and calls
    ``on_alarm`` once, from that thread, when the worker must be replaced.

    Args:
        loop: the event loop the items run on.
        on_alarm: called with the :class:`Alarm` (at most once; the watch stops after it).
        memory_limit: bytes of resident memory (RSS) the process may use; ``None``: not watched.
        tick: seconds between two looks.
        grace: seconds past an item's limit before its loop is declared blocked.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_alarm: Callable[[Alarm], None], *,
                 memory_limit: int | None = None, tick: float = TICK_S, grace: float = GRACE_S) -> None:
        self.loop = loop
        self.on_alarm = on_alarm
        self.memory_limit = memory_limit
        self.tick = tick
        self.grace = grace
        self.turned = time.monotonic()
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._process = psutil.Process() if memory_limit else None
        self._thread = threading.Thread(target=self._watch, name="runner-watchdog", daemon=True)

    def start(self) -> None:
        """Start stamping the loop and watching it."""
        self.loop.call_soon_threadsafe(self._stamp)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the thread ends within one tick)."""
        self._stop.set()

    def _stamp(self) -> None:
        self._loop_thread = threading.get_ident()
        self.turned = time.monotonic()
        if not self._stop.is_set():
            self.loop.call_later(self.tick, self._stamp)

    def _watch(self) -> None:
        while not self._stop.wait(self.tick):
            alarm = self.check(time.monotonic())
            if alarm is not None:
                self._stop.set()
                abandon(self.loop)  # the executor records what it must and replaces the worker
                self.on_alarm(alarm)

    def check(self, now: float) -> Alarm | None:
        """The alarm to raise at ``now`` (:func:`time.monotonic`), if any."""
        return self._blocked(now) or self._over_memory()

    def _blocked(self, now: float) -> Alarm | None:
        if now - self.turned < self.grace:
            return None
        items = running_on(self.loop)
        holder = _TASKS.get(asyncio.current_task(self.loop))  # type: ignore[arg-type]
        if holder is None and len([r for r in items if r.active]) == 1:
            holder = next(r for r in items if r.active)
        if holder is not None:
            deadline = holder.deadline
            if deadline is None or self.turned >= deadline or now < deadline + self.grace:
                return None
            return Alarm(
                "blocked", "timeout", "EventLoopBlocked",
                f"the event loop was blocked for {now - self.turned:.1f} s by task {holder.task_id!r} (repeat "
                f"{holder.repeat}) in its {holder.phase}{self._where()}, past its {holder.limit:g} s limit; blocking "
                "calls in async code (time.sleep, a synchronous HTTP client) stop every item on the worker: await "
                "asyncio.sleep or an async client, or make the solution a plain def (it then runs in a thread)",
                holder.task_id, holder.repeat, holder.cell,
            )
        deadlines = [r.deadline for r in items if r.deadline is not None]
        if not deadlines or self.turned >= min(deadlines) or now < min(deadlines) + self.grace:
            return None
        return Alarm("blocked", "timeout", "EventLoopBlocked",
                     f"the event loop was blocked for {now - self.turned:.1f} s{self._where()}, outside any item's "
                     "own task, past the items' limits")

    def _over_memory(self) -> Alarm | None:
        if self._process is None or self.memory_limit is None:
            return None
        rss = self._process.memory_info().rss
        if rss <= self.memory_limit:
            return None
        active = [r for r in running_on(self.loop) if r.active]
        size = f"{rss / 2**20:.0f} MiB, over the {self.memory_limit / 2**20:.0f} MiB --memory-limit"
        if len(active) == 1:
            item = active[0]
            return Alarm("memory", "error", "MemoryLimitExceeded",
                         f"the worker's resident memory reached {size} while task {item.task_id!r} (repeat "
                         f"{item.repeat}) ran its {item.phase}; the worker was replaced", item.task_id, item.repeat,
                         item.cell)
        return Alarm("memory", "error", "MemoryLimitExceeded",
                     f"the worker's resident memory reached {size} with {len(active)} items running; the worker was "
                     "replaced and its items retried")

    def _where(self) -> str:
        """`` (at function, file:line)``: the innermost Python frame of the loop's thread, and, when that is in the
        standard library (a socket read of a synchronous HTTP client), the innermost frame outside it that led
        there; empty if unknown."""
        frame = sys._current_frames().get(self._loop_thread) if self._loop_thread is not None else None
        if frame is None:
            return ""
        where = f" (at {_frame_line(frame)}"
        caller = frame
        while caller is not None and caller.f_code.co_filename.startswith(_STDLIB):
            caller = caller.f_back
        if caller is not None and caller is not frame:
            where += f", called from {_frame_line(caller)}"
        return where + ")"


_STDLIB = sysconfig.get_paths()["stdlib"]


def _frame_line(frame: FrameType) -> str:
    """``function, file:line`` of ``frame``."""
    return f"{frame.f_code.co_name}, {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class ItemLoop:
    """An event loop in a daemon thread of its own, watched by a :class:`WorkerWatch`: the sequential executor runs
    each item there, so that an item that blocks the loop for good can be abandoned with it.

    Args:
        grace: as for :class:`WorkerWatch`.
    """

    def __init__(self, grace: float = GRACE_S) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="runner-items", daemon=True)
        self._thread.start()
        self._alarm: Alarm | None = None
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self.watch = WorkerWatch(self.loop, self._raise, grace=grace)
        self.watch.start()

    def _raise(self, alarm: Alarm) -> None:
        self._alarm = alarm
        if self._waiter is not None:
            loop, waiter = self._waiter
            with contextlib.suppress(RuntimeError):  # the waiting loop is closed: nobody waits any more
                loop.call_soon_threadsafe(lambda: waiter.done() or waiter.set_result(None))

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T | Alarm:
        """Run ``coroutine`` on this loop (with the caller's context variables); its result, or the :class:`Alarm`
        of a blocked loop (the loop is then useless: :meth:`abandon` it).

        A cancellation of the caller cancels the coroutine too (without waiting for it).
        """
        running = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        done = asyncio.wrap_future(running)
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = (asyncio.get_running_loop(), waiter)
        try:
            if self._alarm is None:
                await asyncio.wait([done, waiter], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            running.cancel()  # at once: the loop may be closed before this loop's callbacks run
            raise
        finally:
            self._waiter = None
            waiter.cancel()
        if done.done():
            return done.result()
        running.cancel()  # delivered if the loop ever turns again
        assert self._alarm is not None
        return self._alarm

    def abandon(self) -> None:
        """Stop watching and leave the loop's thread to itself (a daemon: it cannot keep the process alive)."""
        self.watch.stop()

    def close(self) -> None:
        """Stop the watch, cancel what still runs on the loop and stop it, and close the loop once its thread has
        ended (at once for a loop that turns; a blocked one is left to its daemon thread)."""
        self.watch.stop()
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(_wind_down(), self.loop)
        self._thread.join(timeout=self.watch.tick * 4)
        if not self._thread.is_alive():
            self.loop.close()


async def _wind_down() -> None:
    """Cancel every other task of the running loop, wait for them, and stop the loop."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.get_running_loop().stop()
