"""A run's traffic state in this process: the sequential executor's, and any run without a cluster.

:class:`LocalTraffic` is the in-process :class:`~runner.traffic.control.TrafficHub`; its :class:`LocalLimiter`
reserves every request's start in the run's :class:`~runner.traffic.state.TrafficState` at once, under a lock, so
it is safe from any thread and event loop of the process (a sync solution's ``chat_sync`` runs its own loop).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from runner.core.config import RunSettings
from runner.core.limits import Endpoint, Permit, RateSignal
from runner.traffic.slots import Clock, Sleep, Slots, wait_until
from runner.traffic.state import Budget, TrafficState


class LocalLimiter:
    """The :class:`~runner.core.limits.Limiter` of a run in this process: every request reserves its start in the
    run's :class:`TrafficState` at once.

    Args:
        state: the run's traffic state.
        clock: monotonic seconds (tests pass a fake one).
        sleep: waits (tests pass one that advances the fake clock).
    """

    def __init__(self, state: TrafficState, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.state = state
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._slots: dict[str, Slots] = {}

    async def acquire(self, endpoint: Endpoint, tokens: int) -> Permit:
        """Wait for a connection slot (with ``max_connections``), then until the request's reserved start and the end
        of any pause of the endpoint (a start inside a pause is void: the request reserves another after it)."""
        slots = self._slots_of(endpoint)
        if slots is not None:
            await slots.acquire()
        try:
            while True:
                with self._lock:
                    [start] = self.state.reserve(endpoint.key, endpoint.name, 1, tokens, self._clock())
                if await wait_until(start, lambda: self.state.paused_until(endpoint.key), self._clock, self._sleep):
                    break
        except BaseException:
            if slots is not None:
                slots.release()
            raise
        return Permit(endpoint, tokens, booked=tokens, connection=slots is not None)

    def report(self, permit: Permit, signal: RateSignal, tokens: int | None) -> None:
        """Account for the request's answer; release its connection slot."""
        with self._lock:
            self.state.observe(permit.endpoint.key, permit.endpoint.name, signal, permit.booked, tokens,
                               self._clock())
        if permit.connection:
            self._slots[permit.endpoint.key].release()

    def spend(self, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
        """Count one call against the budget."""
        with self._lock:
            self.state.budget.add(model, input_tokens, output_tokens)

    def snapshot(self) -> dict[str, Any]:
        """The state's :meth:`~TrafficState.snapshot` now."""
        with self._lock:
            return self.state.snapshot(self._clock())

    def _slots_of(self, endpoint: Endpoint) -> Slots | None:
        limit = self.state.settings.limits_for(endpoint.name).max_connections
        if limit is None:
            return None
        with self._lock:
            return self._slots.setdefault(endpoint.key, Slots(limit))


class LocalTraffic:
    """The run's traffic state held in this process (a :class:`~runner.traffic.control.TrafficHub`).

    Args:
        settings: the run's limits, budget and prices.
        budget: the budget, with what earlier invocations spent.
        clock, sleep: as for :class:`LocalLimiter`.
    """

    def __init__(self, settings: RunSettings, budget: Budget, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.budget = budget
        self._limiter = LocalLimiter(TrafficState(settings, budget), clock, sleep)

    def limiter(self) -> LocalLimiter:
        """The limiter of every model call of the run."""
        return self._limiter

    def reached(self) -> bool:
        """Whether the budget is spent (the state counts every call as it is made)."""
        return self.budget.reached

    def snapshot(self) -> dict[str, Any]:
        """:meth:`TrafficState.snapshot` now."""
        return self._limiter.snapshot()

    def flush(self) -> None:
        """Nothing held back: answers and spend are counted as they come."""
