"""A run's model traffic: the limiter and response cache installed for every work item, the budget that stops the
run, and what is reported of them.

:class:`TrafficControl` is created once per run by :func:`~runner.engine.run.execute_run` and travels inside the
:class:`~runner.engine.context.RunContext`. Each item runs inside :meth:`TrafficControl.scope`, which installs the
run's limiter (:mod:`runner.core.limits`) and cache (:mod:`runner.core.cache`) for the model layer:

- sequentially, a :class:`LocalLimiter` over the run's :class:`~runner.engine.limiter.TrafficState` in this process;
- on Ray, the Ray executor starts one limiter actor per run (:mod:`runner.engine.ray_limiter`) and each worker talks
  to it through a :class:`~runner.engine.ray_limiter.LeasedLimiter`.

The budget (``--max-tokens``, ``--max-cost``) counts the tokens of this invocation and those in the records of
earlier ones. Once it is reached, :meth:`TrafficControl.gate` hands out no more items and
:meth:`TrafficControl.may_start` keeps queued items from starting; items in flight finish and are written, and
:func:`~runner.engine.run.execute_run` ends with :class:`~runner.core.errors.BudgetExhausted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import structlog

from runner.core.cache import cache_scope
from runner.core.config import RunSettings
from runner.core.limits import Endpoint, Limiter, Permit, RateSignal, limiter_scope
from runner.engine.limiter import Budget, TrafficState, spent_line
from runner.engine.plan import WorkItem
from runner.engine.slots import Clock, Sleep, Slots, wait_until
from runner.storage.cache import StoredCache
from runner.storage.keys import encode_key
from runner.storage.store import LIMITS_FILE, ResultStore


class LocalLimiter:
    """The :class:`~runner.core.limits.Limiter` of a run in this process (the sequential executor, tests): every
    request reserves its start in the run's :class:`TrafficState` at once.

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
        of any pause of the endpoint."""
        slots = self._slots_of(endpoint)
        if slots is not None:
            await slots.acquire()
        try:
            with self._lock:
                [start] = self.state.reserve(endpoint.key, endpoint.name, 1, tokens, self._clock())
            await wait_until(start, lambda: self.state.paused_until(endpoint.key), self._clock, self._sleep)
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

    def flush(self) -> None:
        """Nothing to send: answers and spend are counted as they come."""

    def _slots_of(self, endpoint: Endpoint) -> Slots | None:
        limit = self.state.settings.limits_for(endpoint.name).max_connections
        if limit is None:
            return None
        with self._lock:
            return self._slots.setdefault(endpoint.key, Slots(limit))


class TrafficControl:
    """The traffic control of one run (see the module's docstring).

    Args:
        settings: the run's limits, budget, prices and cache policy.
        budget: the budget, with what earlier invocations spent (default: from ``settings``, nothing spent).
        cache: the response cache, or ``None``.

    It pickles (without the limiter of this process), so it travels to Ray workers in the run's context; the Ray
    executor sets :attr:`actor` on the driver once the workers have started, and each worker gets it with its
    calls (:meth:`attach`).
    """

    def __init__(self, settings: RunSettings | None = None, budget: Budget | None = None,
                 cache: StoredCache | None = None) -> None:
        self.settings = settings or RunSettings()
        self.budget = budget if budget is not None else Budget.of(self.settings)
        self.cache = cache
        self.actor: Any = None
        self.view: dict[str, Any] | None = None
        self.poller: asyncio.Future[None] | None = None
        self._limiter: Any = None
        self._announced = False

    @classmethod
    def for_run(cls, settings: RunSettings, store: ResultStore, kept: set[tuple[str, int]]) -> TrafficControl:
        """The traffic control of a run at ``store``: with a budget, what the records of the items the run keeps
        (``kept``: (task key, repeat), those it does not run again) spent, read once; with ``settings.cache`` and a
        policy other than ``off``, the cache, reached once.

        The cache gets the run's storage options when it is on the same kind of filesystem as the run.

        Raises:
            StorageError: the records or the cache cannot be read.
        """
        budget = Budget.of(settings)
        if settings.budgeted and kept:
            for record in store.iter_records():
                if (encode_key(record.task_id), record.repeat) in kept:
                    budget.add_earlier(record.usage)
        cache = None
        if settings.cache is not None and settings.cache_policy != "off":
            same_kind = _protocol(settings.cache) == _protocol(store.uri)
            cache = StoredCache(settings.cache, store.storage_options if same_kind else None, settings.cache_policy)
            cache.check()
        return cls(settings, budget, cache)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_limiter"] = None
        state["view"] = None
        state["poller"] = None
        return state

    def attach(self, actor: Any) -> None:
        """Use the run's limiter actor ``actor`` (on a Ray worker, from the first call that carries it) for the model
        calls from now on."""
        if self.actor is None:
            self.actor, self._limiter = actor, None

    def limiter(self) -> Limiter:
        """This process's limiter: a client of the run's actor (on a Ray worker), else the in-process one."""
        if self._limiter is None:
            if self.actor is not None:
                from runner.engine.ray_limiter import LeasedLimiter

                self._limiter = LeasedLimiter(self.actor, self.settings)
            else:
                self._limiter = LocalLimiter(TrafficState(self.settings, self.budget))
        limiter: Limiter = self._limiter
        return limiter

    @contextlib.contextmanager
    def scope(self, repeat: int = 0) -> Iterator[None]:
        """Install the run's limiter and cache for the model calls inside the block (a work item of repeat
        ``repeat``)."""
        with limiter_scope(self.limiter()), cache_scope(self.cache, repeat):
            yield

    def flush(self) -> None:
        """Send what this process's limiter still holds back (reports of a worker's last calls)."""
        if self._limiter is not None:
            self._limiter.flush()

    def snapshot(self) -> dict[str, Any]:
        """The traffic's state: :meth:`TrafficState.snapshot` of this process's limiter, or the latest view of the
        run's actor (empty before the first)."""
        if self.actor is not None:
            return self.view or {"endpoints": {}}
        local = self.limiter()
        assert isinstance(local, LocalLimiter)
        return local.snapshot()

    @property
    def stopped(self) -> bool:
        """Whether the budget is reached: in this process's state, on a Ray worker as of its limiter's latest
        answer from the actor, on the Ray driver as of the actor's latest view."""
        if not self.settings.budgeted:
            return False
        if self.actor is None:
            return self.budget.reached
        if self._limiter is not None:
            return bool(self._limiter.stopped)
        return bool(((self.view or {}).get("budget") or {}).get("reached"))

    def may_start(self) -> bool:
        """Whether a new item may start its solution (no: the budget is reached)."""
        return not self.stopped

    def gate(self, items: Iterable[WorkItem]) -> Iterator[WorkItem]:
        """``items`` until the budget is reached (checked before each one is handed out)."""
        for item in items:
            if self.stopped:
                self._announce()
                return
            yield item

    def _announce(self) -> None:
        if not self._announced:
            self._announced = True
            structlog.get_logger("runner").warning(
                "run.budget_reached", spent=self.budget_line(),
                detail="no new item starts; items in flight finish and are written")

    def budget_line(self) -> str:
        """What the run spent against its budget, e.g. ``1,204 tokens of --max-tokens 1,000``."""
        return spent_line(self.snapshot().get("budget") or self.budget.snapshot())

    def progress_fields(self) -> dict[str, Any]:
        """What the progress log shows of the traffic: per endpoint its rate (requests per minute), 429s seen and
        pauses; the budget's spend."""
        snapshot = self.snapshot()
        fields: dict[str, Any] = {}
        endpoints = {key: {name: state[name] for name in ("rate_rpm", "rate_limited", "pauses", "paused_for_s")}
                     for key, state in snapshot.get("endpoints", {}).items()}
        if endpoints:
            fields["limits"] = endpoints
        if "budget" in snapshot:
            fields["spent"] = {"tokens": snapshot["budget"]["tokens"], "cost_usd": snapshot["budget"]["cost_usd"]}
        return fields

    def write(self, store: ResultStore) -> None:
        """Write the traffic's final state into the run's ``limits.json`` (when a model endpoint was used or the
        run has a budget), for ``summary.json``; warn about models that spent tokens without a price under
        ``max_cost``."""
        snapshot = self.snapshot()
        if snapshot.get("endpoints") or "budget" in snapshot:
            store.write_file(LIMITS_FILE, json.dumps(snapshot, indent=2).encode())
        unpriced = (snapshot.get("budget") or {}).get("unpriced")
        if unpriced:
            structlog.get_logger("runner").warning(
                "run.unpriced_models", models=unpriced,
                detail="these models spent tokens without a --price; --max-cost counted them as USD 0")


def _protocol(uri: str) -> str:
    """The protocol of a URI (``file`` for a plain path)."""
    return uri.split("://", 1)[0] if "://" in uri else "file"

