"""Fake clocks: a monotonic clock for code that takes ``clock`` and ``sleep`` arguments, where seconds pass only when a
test moves :attr:`FakeClock.now` or the code under test sleeps, and an event loop on virtual time for code on many
concurrent tasks (a time source is what cannot be made to run fast here)."""

from __future__ import annotations

import asyncio
import selectors


class FakeClock:
    """Monotonic seconds (call it) starting at ``start``; :meth:`sleep` (sync) and :meth:`asleep` (async) record the
    seconds asked for in :attr:`slept` and advance the clock by them."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on a virtual clock: when no callback is ready, it moves its time to the next timer
    instead of waiting, so every ``asyncio.sleep`` (and ``call_later``) takes no real time while concurrent tasks
    still wake in the order and at the (virtual) times they asked for. Its I/O is real but never waited for, except
    when it has no timer at all (then it waits for another thread's wake-up, as a real loop would).

    For code on many tasks whose timing matters (several clients of one schedule); ``loop.time()`` is the clock.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._virtual = start
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self._virtual


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that polls instead of waiting, and moves its loop's virtual time by the wait asked for."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(None if timeout is None else 0)
        if not events and timeout is not None and timeout > 0:
            self._loop._virtual += timeout
        return events
