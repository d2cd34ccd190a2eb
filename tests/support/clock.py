"""A fake monotonic clock for code that takes ``clock`` and ``sleep`` arguments: seconds pass only when a test moves
:attr:`FakeClock.now` or the code under test sleeps (a time source is what cannot be made to run fast here)."""

from __future__ import annotations


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
