"""One limiter per run on Ray: an actor that holds the run's :class:`~runner.traffic.state.TrafficState`, and the
client each worker installs for its model calls.

A call usually costs no round trip to the actor: a worker keeps a small lease of reserved request starts per
endpoint (:meth:`TrafficState.lease <runner.traffic.state.TrafficState.lease>`: its share of the next
:data:`~runner.traffic.state.LEASE_S` seconds), takes one per request, and asks for the next lease in the background
when half of it is used.

The starts are times of the actor's clock, and every worker sends on its own (another node's monotonic clock has
another origin). A worker reads the actor's clock as NTP does: each lease reply (and :data:`SYNC_SAMPLES` readings
when it first leases) carries the actor's time, whose difference to the reply's arrival is the clocks' offset plus
the reply's travel; the smallest difference of the last :data:`OFFSET_S` seconds is the worker's offset, late by
the fastest reply's travel (a millisecond or so) and never early, so no request goes before its reserved start.
Counting each lease from its own arrival instead shifted each lease by its own travel, which varies with the load
(0 to 120 ms measured here): two workers' leases overlapped, and the server saw 60 requests in one second of a 50/s
schedule. A start that a worker could only take more than :data:`LATE_S` late is dropped unused, and the actor's
schedule runs :data:`SPREAD_S` below the rate, so that these delays never put more than the rate into one second
(:class:`~runner.traffic.state.EndpointTraffic`). Delays the limiter does not see are not covered: a
worker's process waiting for a core when a start is due, or its model client's first use, delays some requests more
than others (docs/performance.md measures them).

Answers and usage are reported in batches every :data:`REPORT_S` seconds, at once for a 429 or a pause; every
answer of the actor carries the endpoint's pause and whether the budget is reached, so one worker's 429 holds back
every worker within a report's round trip. With ``max_connections``, a request also takes one of the endpoint's
connection slots from the actor (one round trip, first come, first served).

The actor runs on the driver's node (its loss ends the run anyway) and reserves no CPU. :class:`RemoteTraffic` is
the run's :class:`~runner.traffic.control.TrafficHub` on Ray. Each worker is built with a copy of it (which names the
actor, and finds it on first use), so a worker's limiter is part of the worker from its construction, while the
actor itself starts after the workers' processes. Example (the driver)::

    hub = RemoteTraffic(settings)
    backend = RayBackend(spec, context, hub)    # every worker is built with hub (the actor's name)
    ...                                 # the pool starts its workers
    await hub.start(budget, workers)    # the actor, under that name, before any item goes out
    traffic.use(hub)                    # the run's TrafficControl reads the actor's state from now on
    ...
    await hub.close()                   # its final state stays in hub.snapshot(); the actor is gone
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import threading
import time
import uuid
from collections import defaultdict, deque
from typing import Any

import ray
import structlog
from ray.exceptions import RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from runner.core.config import RunSettings
from runner.core.errors import ConfigError
from runner.core.limits import Endpoint, Permit, RateSignal
from runner.storage.response_cache import StoredCache
from runner.traffic.slots import Clock, Slots, wait_until
from runner.traffic.state import Budget, TrafficState

REPORT_S = 0.2
"""Seconds a worker holds reports back to send them in one batch (a 429 or a pause goes at once)."""
LATE_S = 0.02
"""Seconds after its start a reserved request may still be sent: a start that a request would take later is dropped
unused (sent that late, it would share one second at the server with the starts of more than a second)."""
SPREAD_S = 0.025
"""Seconds by which a worker's sends may follow their reserved starts: :data:`LATE_S`, and the error of the worker's
reading of the actor's clock (its fastest reply's travel). The actor's schedule runs at the rate over
``1 + SPREAD_S`` (2.4 % below it), so that a second at the server, which may see the starts of ``1 + SPREAD_S``
seconds, holds no more than the rate."""
SYNC_SAMPLES = 4
"""Readings of the actor's clock a worker asks for, one after another, when it first leases (as NTP's ``iburst``), so
that its offset is a fast reply's from the start, not the first lease's alone (a cold first call can take 100 ms)."""
OFFSET_S = 30.0
"""Seconds of lease replies from which a worker reads the actor's clock (the fastest of them): older ones are
forgotten, so a drift of the two clocks (NTP holds it to parts per million) cannot accumulate."""
POLL_S = 0.5
"""Seconds between the driver's looks at the actor's state (budget, progress log)."""

Spent = tuple[bool, int, float, int]
"""What the actor tells a client of the budget: whether it is reached, the tokens and USD spent, and the number of
the client's latest report counted in them."""


class TrafficActor:
    """The run's traffic state, for every worker (methods run one at a time on the actor's event loop).

    Args:
        settings: the run's limits, budget and prices.
        budget: the budget, with what earlier invocations spent.
        clients: the workers expected (each gets its share of an endpoint's schedule from the start).
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, settings: RunSettings, budget: Budget, clients: int = 1,
                 clock: Clock = time.monotonic) -> None:
        self.state = TrafficState(settings, budget, clients, spread_s=SPREAD_S)
        self._clock = clock
        self._slots: dict[str, Slots] = {}
        self._batches: dict[str, int] = {}

    async def lease(self, client: str, key: str, model: str, want: int,
                    tokens_each: float) -> tuple[list[float], float, float, Spent]:
        """Reserved starts for ``client``'s next requests to ``key`` (:meth:`TrafficState.lease`), as times of the
        actor's monotonic clock; that clock's time now; the seconds of the endpoint's pause left; the budget's
        :data:`Spent`. A client that holds its share of the schedule waits here until it has room."""
        while True:
            now = self._clock()
            starts, retry_at = self.state.lease(client, key, model, want, tokens_each, now)
            if starts:
                return starts, now, self._pause_left(key, now), self._spent(client)
            assert retry_at is not None
            await asyncio.sleep(retry_at - now)

    async def report(self, client: str, batch: int, answers: list[tuple[str, str, RateSignal, float, int | None]],
                     spends: list[tuple[str, int | None, int | None]]) -> tuple[dict[str, float], Spent]:
        """Account for ``client``'s report number ``batch``: ``answers`` (endpoint key, model, signal, tokens
        booked, tokens used) and ``spends`` (model, input and output tokens); the pause left of each endpoint
        answered, and the budget's :data:`Spent`."""
        now = self._clock()
        for key, model, signal, booked, tokens in answers:
            self.state.observe(key, model, signal, booked, tokens, now)
        for model, input_tokens, output_tokens in spends:
            self.state.budget.add(model, input_tokens, output_tokens)
        self._batches[client] = max(self._batches.get(client, -1), batch)
        keys = {answer[0] for answer in answers}
        return {key: self._pause_left(key, now) for key in keys}, self._spent(client)

    def _spent(self, client: str) -> Spent:
        budget = self.state.budget
        return budget.reached, budget.spent_tokens, budget.spent_cost, self._batches.get(client, -1)

    async def clock(self) -> float:
        """The actor's monotonic clock now (a worker's reading of it, :class:`LeasedLimiter`)."""
        return self._clock()

    async def connect(self, key: str, limit: int) -> None:
        """Take one of the ``limit`` connection slots of ``key``, waiting in line for one."""
        await self._slots.setdefault(key, Slots(limit)).acquire()

    async def disconnect(self, key: str) -> None:
        """Give a connection slot of ``key`` back."""
        self._slots[key].release()

    async def snapshot(self) -> dict[str, Any]:
        """:meth:`TrafficState.snapshot` now."""
        return self.state.snapshot(self._clock())

    def _pause_left(self, key: str, now: float) -> float:
        return max(0.0, self.state.paused_until(key) - now)


def check_cache(cache: StoredCache | None) -> None:
    """Refuse a response cache the run's workers could not use, before they start.

    Raises:
        ConfigError: a response cache in this process's memory, which workers cannot reach.
    """
    if cache is not None and cache.is_process_local:
        raise ConfigError(f"--cache {cache.uri} lives in this process's memory, where Ray workers cannot "
                          "reach it; use a path or shared storage such as s3://bucket/cache, or --sequential")


class RemoteTraffic:
    """The run's traffic state held by its :class:`TrafficActor`, as one process sees it: the
    :class:`~runner.traffic.control.TrafficHub` of a Ray run, on the driver and on every worker.

    Args:
        settings: the run's limits, budget and prices.
        actor: the run's limiter actor, when its handle is at hand (tests); default: the actor named :attr:`name`,
            found in Ray on first use (:attr:`actor`).

    The driver starts the actor (:meth:`start`), looks at its state every :data:`POLL_S` seconds (:meth:`snapshot`,
    the budget) and stops it (:meth:`close`), keeping its final state. A worker gets a copy of the hub when it is
    built (it pickles as its settings, the actor's name and handle). Each process's model calls go through a
    :class:`LeasedLimiter` of the actor.
    """

    def __init__(self, settings: RunSettings, actor: Any = None) -> None:
        self.settings = settings
        # The actor's name in Ray (unique per run): how a worker built before the actor started finds it.
        self.name = f"runner-traffic-{uuid.uuid4().hex[:16]}"
        self._actor = actor
        self._view: dict[str, Any] | None = None
        self._poller: asyncio.Future[None] | None = None
        self._limiter: LeasedLimiter | None = None

    def __getstate__(self) -> dict[str, Any]:
        # What a worker needs: the driver's view, its poller and this process's limiter stay here.
        return {"settings": self.settings, "name": self.name, "_actor": self._actor}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.settings, self.name, self._actor = state["settings"], state["name"], state["_actor"]
        self._view, self._poller, self._limiter = None, None, None

    @property
    def actor(self) -> Any:
        """The run's :class:`TrafficActor` (its Ray handle): found by :attr:`name` the first time a process needs it.

        Raises:
            ValueError: no actor has that name (the driver has not started it: :meth:`start` comes before any item
                is handed to a worker).
        """
        if self._actor is None:
            self._actor = ray.get_actor(self.name)
        return self._actor

    async def start(self, budget: Budget, workers: int = 1) -> None:
        """Start the run's limiter actor for a pool of ``workers`` (on this node, no CPU reserved), with ``budget``
        (what earlier invocations spent), wait until it answers, then look at its state every :data:`POLL_S`
        seconds until :meth:`close`.

        An actor whose node dies as it starts is started again once, anywhere (a node lost while the run starts: the
        workers it had are replaced by the pool).

        Raises:
            RayUnavailable: the second actor died too (nothing was written).

        Started after the pool's workers (which were built with this hub, and find the actor by :attr:`name`), so it
        never takes one of the idle worker processes Ray keeps for them (one per CPU): no worker of the pool waits for
        a new process (about 0.4 s on 2 cores) while the others run. Must be called after ``ray.init`` and before any
        item is handed to a worker.
        """
        from runner.engine.ray.cluster import RayUnavailable

        here = ray.get_runtime_context().get_node_id()
        for attempt in (1, 2):
            # On this node first; after its actor's node died under it, wherever Ray places it.
            options: dict[str, Any] = {"name": self.name, "num_cpus": 0}
            if attempt == 1:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=here, soft=True)
            actor_class = ray.remote(TrafficActor).options(**options)
            self._actor = actor_class.remote(self.settings, budget, workers)
            try:
                self._view = await _await(self.actor.snapshot.remote())
                break
            except RayActorError as exc:
                self._actor = None
                if attempt == 2:
                    raise RayUnavailable(f"the run's limiter actor died twice as it started ({str(exc).splitlines()[0]}"
                                         "): the cluster is losing nodes; nothing was written; run the same command "
                                         "once it is healthy") from None
                structlog.get_logger("runner").warning("ray.limiter_lost", error=str(exc).splitlines()[0][:200],
                                                       detail="its node died as it started; it starts again")
        self._poller = asyncio.ensure_future(self._poll())

    async def close(self) -> None:
        """Stop looking, keep the actor's final state (:meth:`snapshot` from now on) and kill the actor."""
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        if self._actor is not None:
            # A dead actor (its node lost) leaves the last state the driver saw.
            with contextlib.suppress(RayError):
                self._view = await _await(self._actor.snapshot.remote())
                ray.kill(self._actor, no_restart=True)

    def limiter(self) -> LeasedLimiter:
        """This process's client of the actor."""
        if self._limiter is None:
            self._limiter = LeasedLimiter(self.actor, self.settings)
        return self._limiter

    def reached(self) -> bool:
        """Whether the budget is spent: as this process's limiter knows it (a worker: the actor's latest answer
        plus its own spend not counted there yet), or as the driver's latest look at the actor says."""
        if self._limiter is not None and self._limiter.stopped:
            return True
        return bool(((self._view or {}).get("budget") or {}).get("reached"))

    def snapshot(self) -> dict[str, Any]:
        """The actor's state at the driver's latest look (empty before the first)."""
        return self._view or {"endpoints": {}}

    def flush(self) -> None:
        """Send this process's queued reports now."""
        if self._limiter is not None:
            self._limiter.flush()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            # An actor that cannot answer for now (its node's connections churn when another node dies) or for good
            # leaves the last view; the run does not depend on it.
            with contextlib.suppress(RayError):
                self._view = await _await(self.actor.snapshot.remote())


async def _await(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


class LeasedLimiter:
    """A worker's :class:`~runner.core.limits.Limiter`: leases of reserved starts from the run's actor (see the
    module's docstring). Safe from any thread and event loop of the worker.

    Args:
        actor: the run's :class:`TrafficActor`.
        settings: the run's settings (each endpoint's ``max_connections``).
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, actor: Any, settings: RunSettings, clock: Clock = time.monotonic) -> None:
        self._actor = actor
        self._settings = settings
        self._clock = clock
        self._client = uuid.uuid4().hex
        # Re-entrant: a Ray future already done runs its callback (which takes the lock) where it is added.
        self._lock = threading.RLock()
        # Reserved starts (the actor's clock) and their booked tokens.
        self._ready: dict[str, deque[tuple[float, float]]] = defaultdict(deque)
        # The clocks' offset as the actor's replies show it (this clock minus the actor's, plus the reply's travel):
        # the replies of the last OFFSET_S seconds whose offset is below every later one's, (arrival, offset), so the
        # first is the smallest.
        self._offsets: deque[tuple[float, float]] = deque()
        self._synced = False
        self._leasing: dict[str, concurrent.futures.Future[Any]] = {}
        self._lease_size: dict[str, int] = defaultdict(lambda: 1)
        self._waiting: dict[str, int] = defaultdict(int)
        self._recent: dict[str, deque[float]] = defaultdict(deque)
        self._paused: dict[str, float] = {}
        self._answers: list[tuple[str, str, RateSignal, float, int | None]] = []
        self._spends: list[tuple[str, int | None, int | None]] = []
        self._sent_at = clock()
        self._batch = 0
        # The budget as this worker knows it: the actor's latest totals, and its own spend they do not hold yet.
        self._prices = Budget.of(settings)
        self._spent: Spent = (False, 0, 0.0, -1)
        self._unsent: dict[int, list[float]] = {}

    async def acquire(self, endpoint: Endpoint, tokens: int) -> Permit:
        """A connection slot (with ``max_connections``), then a reserved start of the endpoint; waits until it and
        any pause the worker knows of are over (a start that a pause delayed more than :data:`LATE_S` is dropped
        for the next one)."""
        limit = self._settings.limits_for(endpoint.name).max_connections
        if limit is not None:
            await self._connect(endpoint.key, limit)
        try:
            while True:
                start, booked = await self._reserved(endpoint, tokens)
                if await wait_until(start, lambda: self._paused.get(endpoint.key, -math.inf), self._clock,
                                    asyncio.sleep, LATE_S):
                    break
        except BaseException:
            if limit is not None:
                self._actor.disconnect.remote(endpoint.key)
            raise
        return Permit(endpoint, tokens, booked=booked, connection=limit is not None)

    def report(self, permit: Permit, signal: RateSignal, tokens: int | None) -> None:
        """Queue the answer for the actor (sent at once for a 429 or a pause, which also holds this worker's
        requests back right away); release the connection slot."""
        key = permit.endpoint.key
        pause = signal.pause_s
        with self._lock:
            self._answers.append((key, permit.endpoint.name, signal, permit.booked, tokens))
            if pause:
                self._paused[key] = max(self._paused.get(key, -math.inf), self._clock() + pause)
        if permit.connection:
            self._actor.disconnect.remote(key)
        self._send(urgent=bool(pause))

    def spend(self, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
        """Queue one call's tokens for the budget (sent at once when the run has one)."""
        with self._lock:
            self._spends.append((model, input_tokens, output_tokens))
            own = self._unsent.setdefault(self._batch, [0, 0.0])
            own[0] += int(input_tokens or 0) + int(output_tokens or 0)
            own[1] += self._prices.cost_of(model, int(input_tokens or 0), int(output_tokens or 0))
        self._send(urgent=self._settings.budgeted)

    @property
    def stopped(self) -> bool:
        """Whether the budget is reached: as the actor last said, or counting this worker's spend it has not
        counted yet (a lower bound of the run's spend, so a worker never stops before the run's budget is
        reached)."""
        with self._lock:
            reached, tokens, cost, _ = self._spent
            if reached:
                return True
            tokens += sum(own[0] for own in self._unsent.values())
            cost += sum(own[1] for own in self._unsent.values())
        limits = self._settings
        return ((limits.max_tokens is not None and tokens >= limits.max_tokens)
                or (limits.max_cost is not None and cost >= limits.max_cost))

    def flush(self) -> None:
        """Send the queued reports now."""
        self._send(urgent=True)

    async def _connect(self, key: str, limit: int) -> None:
        granted = self._actor.connect.remote(key, limit).future()
        try:
            await asyncio.shield(asyncio.wrap_future(granted))
        except asyncio.CancelledError:
            # A slot granted after the caller gave up goes back.
            granted.add_done_callback(
                lambda done: None if done.cancelled() or done.exception() else self._actor.disconnect.remote(key))
            raise

    async def _reserved(self, endpoint: Endpoint, tokens: int) -> tuple[float, float]:
        """The next reserved start for ``endpoint`` (and its booked tokens), leasing more when this worker's reserved
        starts run low."""
        key = endpoint.key
        with self._lock:
            now = self._clock()
            recent = self._recent[key]
            recent.append(now)
            while recent and recent[0] < now - 1.0:
                recent.popleft()
        while True:
            with self._lock:
                now = self._clock()
                ready = self._ready[key]
                offset = self._offsets[0][1] if self._offsets else 0.0
                while ready and ready[0][0] + offset < now - LATE_S:
                    ready.popleft()
                if ready:
                    start, booked = ready.popleft()
                    if len(ready) < self._lease_size[key] // 2:
                        self._lease(endpoint, tokens)
                    return start + offset, booked
                self._waiting[key] += 1
                leasing = self._lease(endpoint, tokens)
            try:
                await asyncio.shield(asyncio.wrap_future(leasing))
            finally:
                with self._lock:
                    self._waiting[key] -= 1

    def _lease(self, endpoint: Endpoint, tokens: int) -> concurrent.futures.Future[Any]:
        """The lease in flight for ``endpoint``, asked for now if there is none (called with the lock held): room for
        the requests waiting and this worker's requests of the last second."""
        key = endpoint.key
        leasing = self._leasing.get(key)
        if leasing is not None:
            return leasing
        want = self._waiting[key] + len(self._recent[key])
        if not self._synced:
            self._synced = True
            self._sync(SYNC_SAMPLES)
        leasing = self._actor.lease.remote(self._client, key, endpoint.name, want, float(tokens)).future()
        self._leasing[key] = leasing
        leasing.add_done_callback(lambda done: self._leased(key, tokens, done))
        return leasing

    def _leased(self, key: str, tokens: int, done: concurrent.futures.Future[Any]) -> None:
        """Keep a lease's reserved starts (the actor's clock, read on this one's with :meth:`_offset`)."""
        with self._lock:
            self._leasing.pop(key, None)
            if done.cancelled() or done.exception() is not None:
                return
            starts, actor_now, pause, spent = done.result()
            arrived = self._clock()
            self._offset(arrived, arrived - actor_now)
            self._ready[key].extend((start, float(tokens)) for start in starts)
            self._lease_size[key] = len(starts)
            self._paused[key] = max(self._paused.get(key, -math.inf), arrived + pause)
            self._counted(spent)

    def _sync(self, left: int) -> None:
        """Read the actor's clock ``left`` more times, one after another (see :data:`SYNC_SAMPLES`)."""
        self._actor.clock.remote().future().add_done_callback(lambda done: self._synced_once(done, left))

    def _synced_once(self, done: concurrent.futures.Future[Any], left: int) -> None:
        """Take one reading of the actor's clock, and ask for the next of ``left``."""
        if done.cancelled() or done.exception() is not None:
            return
        with self._lock:
            now = self._clock()
            self._offset(now, now - done.result())
        if left > 1:
            self._sync(left - 1)

    def _offset(self, now: float, offset: float) -> None:
        """Take a reply's offset of the clocks into the smallest of the last :data:`OFFSET_S` seconds (called with
        the lock held; a sliding window's minimum, kept as the replies whose offset no later one undercuts)."""
        offsets = self._offsets
        while offsets and offsets[-1][1] >= offset:
            offsets.pop()
        offsets.append((now, offset))
        while offsets[0][0] < now - OFFSET_S:
            offsets.popleft()

    def _send(self, urgent: bool) -> None:
        with self._lock:
            now = self._clock()
            if not (self._answers or self._spends) or (not urgent and now - self._sent_at < REPORT_S):
                return
            answers, spends, batch = self._answers, self._spends, self._batch
            self._answers, self._spends, self._sent_at, self._batch = [], [], now, batch + 1
        self._actor.report.remote(self._client, batch, answers, spends).future().add_done_callback(self._reported)

    def _reported(self, done: concurrent.futures.Future[Any]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        pauses, spent = done.result()
        now = self._clock()
        with self._lock:
            for key, left in pauses.items():
                self._paused[key] = max(self._paused.get(key, -math.inf), now + left)
            self._counted(spent)

    def _counted(self, spent: Spent) -> None:
        """Take the actor's budget totals when they are newer than the ones held (called with the lock held), and
        forget this worker's reports they count."""
        if spent[1:] >= self._spent[1:]:
            self._spent = (spent[0] or self._spent[0], *spent[1:])
        elif spent[0]:
            self._spent = (True, *self._spent[1:])
        for batch in [batch for batch in self._unsent if batch <= self._spent[3]]:
            del self._unsent[batch]
