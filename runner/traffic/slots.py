"""Waiting for a turn, from any thread and any event loop: connection slots served in order, and waiting until a
reserved start once the endpoint's pause is over. Used by the in-process limiter and by the run's limiter actor and
its clients on Ray (:mod:`runner.traffic.control`, :mod:`runner.engine.ray.limiter`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
"""Monotonic seconds (tests pass a fake clock)."""
Sleep = Callable[[float], Awaitable[None]]
"""Waits a number of seconds (tests pass one that advances the fake clock)."""


class Slots:
    """At most ``limit`` holders at once (an endpoint's connections); waiters are served in the order they came.

    Safe from any thread and any event loop: waiters wait on :class:`concurrent.futures.Future` objects.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: deque[concurrent.futures.Future[None]] = deque()
        self._lock = threading.Lock()

    async def acquire(self) -> None:
        """Take a slot, waiting for one if all are held."""
        with self._lock:
            if self.held < self.limit and not self._waiters:
                self.held += 1
                return
            granted: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._waiters.append(granted)
        try:
            await asyncio.wrap_future(granted)
        except BaseException:
            with self._lock:
                if granted in self._waiters:
                    self._waiters.remove(granted)
                    raise
            # The slot was handed over as the waiter gave up: pass it on.
            if not granted.cancelled():
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back (to the first waiter, if any)."""
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.set_running_or_notify_cancel():
                    waiter.set_result(None)
                    return
            self.held -= 1


async def wait_until(start: float, paused_until: Callable[[], float], clock: Clock, sleep: Sleep,
                     late_s: float = 0.0) -> bool:
    """Wait until ``start`` and past the end of the endpoint's pause (read again after each wait: a pause may begin
    or grow meanwhile); whether the start still holds: not when a pause ended more than ``late_s`` seconds after it.
    A start inside a pause is void: sent when the pause ends, its request would go together with every other start
    of the pause and the ones scheduled after it (the schedule restarts at the pause's end), so its caller takes
    another."""
    while True:
        target = max(start, paused_until())
        now = clock()
        if target <= now:
            return paused_until() <= start + late_s
        await sleep(target - now)
