"""A run's model traffic: the limiter and response cache installed for every work item, the budget that stops the
run, and what is reported of them.

:class:`TrafficControl` is created once per run by :func:`~runner.engine.run.execute_run` (and, on Ray, once per
worker). Each item runs inside :meth:`TrafficControl.scope`, which installs the run's limiter
(:mod:`runner.core.limits`) and cache (:mod:`runner.core.cache`) for the model layer, in the item's one
:class:`~runner.core.scope.CallScope`. Where the run's traffic state
lives is a :class:`TrafficHub`, injected by the executor:

- :class:`~runner.traffic.in_process.LocalTraffic` (the default): the state in this process (sequential runs);
- on Ray, :class:`~runner.engine.ray.limiter.RemoteTraffic`: one limiter actor per run holds the state, and the
  driver and every worker reach it through a client (:class:`~runner.engine.ray.limiter.LeasedLimiter`).

How a budget stops a run, in one place: every model call's tokens reach the hub (:func:`runner.core.limits.spend`
-> the hub's limiter); once the budget (``--max-tokens``, ``--max-cost``, earlier invocations' spend included) is
reached, :meth:`TrafficControl.gate` hands out no more items on the driver, :meth:`TrafficControl.may_start` keeps
queued items from starting on a worker, items in flight finish and are written, and
:func:`~runner.engine.run.execute_run` ends with :class:`~runner.core.errors.BudgetExhausted` (exit status 4).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

import structlog

from runner.core.config import RunSettings, options_for
from runner.core.limits import Limiter
from runner.core.record import TokenUsage
from runner.core.scope import CallScope, call_scope
from runner.storage.response_cache import StoredCache
from runner.storage.keys import encode_key
from runner.storage.store import LIMITS_FILE, ResultStore
from runner.traffic.in_process import LocalTraffic
from runner.traffic.state import Budget, spent_line

T = TypeVar("T")


class TrafficHub(Protocol):
    """Where a run's traffic state (every endpoint's schedule and backoff, the budget) lives, as one process sees
    it. Implementations: :class:`~runner.traffic.in_process.LocalTraffic` (in this process) and
    :class:`~runner.engine.ray.limiter.RemoteTraffic` (a Ray actor per run)."""

    def limiter(self) -> Limiter:
        """The limiter this process's model calls go through."""
        ...

    def reached(self) -> bool:
        """Whether the budget is spent, as far as this process knows (never before it is)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """The state: ``endpoints`` (key -> counts, rate, pauses) and, with a budget, ``budget``
        (:meth:`~runner.traffic.state.Budget.snapshot`)."""
        ...

    def flush(self) -> None:
        """Send what this process still holds back (a worker's last reports)."""
        ...


class TrafficControl:
    """The traffic control of one run in one process (see the module's docstring).

    Args:
        settings: the run's limits, budget, prices and cache policy.
        budget: the budget, with what earlier invocations spent (default: from ``settings``, nothing spent).
        cache: the response cache, or ``None``.
        hub: where the traffic state lives (default: in this process, :class:`LocalTraffic`).
    """

    def __init__(self, settings: RunSettings | None = None, budget: Budget | None = None,
                 cache: StoredCache | None = None, hub: TrafficHub | None = None) -> None:
        self.settings = settings or RunSettings()
        self.budget = budget if budget is not None else Budget.of(self.settings)
        self.cache = cache
        self.hub: TrafficHub = hub if hub is not None else LocalTraffic(self.settings, self.budget)
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
        return cls.for_runs(settings, [(store, kept)])

    @classmethod
    def for_runs(cls, settings: RunSettings, runs: list[tuple[ResultStore, set[tuple[str, int]]]]) -> TrafficControl:
        """The one traffic control of runs executed together (a matrix's cells: one budget, one set of limits, one
        cache), as :meth:`for_run` for each run's store and kept items; the cache gets the first store's options.

        Raises:
            StorageError: the records or the cache cannot be read.
        """
        budget = Budget.of(settings)
        for store, kept in runs:
            if settings.budgeted and kept:
                for record in store.iter_records(full=False):  # usage only: a large record's row holds it
                    if (encode_key(record.task_id), record.repeat) in kept:
                        budget.add_earlier(record.usage)
        cache = None
        if settings.cache is not None and settings.cache_policy != "off" and runs:
            store = runs[0][0]
            cache = StoredCache(settings.cache, options_for(settings.cache, store.uri, store.storage_options) or None,
                                settings.cache_policy)
            cache.check()
        return cls(settings, budget, cache)

    def use(self, hub: TrafficHub) -> None:
        """Keep the run's traffic state in ``hub`` from now on (the Ray executor's, once its limiter actor is up)."""
        self.hub = hub

    def limiter(self) -> Limiter:
        """This process's limiter (the hub's)."""
        return self.hub.limiter()

    @contextlib.contextmanager
    def scope(self, repeat: int = 0, usage: dict[str, TokenUsage] | None = None,
              weights: Mapping[str, str] | None = None) -> Iterator[CallScope]:
        """Install the run's limiter and cache for the model calls inside the block (a work item of repeat
        ``repeat``), in one :class:`~runner.core.scope.CallScope`, and with ``usage`` (model name ->
        :class:`~runner.core.record.TokenUsage`, which the calls add to) when given, else the usage the current scope
        counts into, and the digests of the run's models' ``weights`` (model name -> digest, which the cache keys
        take); yields the scope."""
        parts: dict[str, Any] = {"limiter": self.hub.limiter(), "cache": self.cache, "repeat": repeat}
        if usage is not None:
            parts["usage"] = usage
        if weights:
            parts["weights"] = weights
        with call_scope(**parts) as scope:
            yield scope

    def flush(self) -> None:
        """Send what this process's limiter still holds back (reports of a worker's last calls)."""
        self.hub.flush()

    def snapshot(self) -> dict[str, Any]:
        """The traffic's state as the hub knows it (``{"endpoints": {}}`` before it knows anything)."""
        return self.hub.snapshot()

    @property
    def stopped(self) -> bool:
        """Whether the run has a budget and it is spent, as far as this process knows."""
        return self.settings.budgeted and self.hub.reached()

    def may_start(self) -> bool:
        """Whether a new item may start its solution (no: the budget is reached)."""
        return not self.stopped

    def gate(self, items: Iterable[T]) -> Iterator[T]:
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
        """What the progress log (and ``progress.json``) shows of the traffic: per endpoint its rate (requests per
        minute), 429s seen and pauses; the budget's spend (``spent``: tokens, USD, whether it is reached, and the
        spend against the budget in words), so that ``status`` can say a spent budget stopped the run."""
        snapshot = self.snapshot()
        fields: dict[str, Any] = {}
        endpoints = {key: {name: state[name] for name in ("rate_rpm", "rate_limited", "pauses", "paused_for_s")}
                     for key, state in snapshot.get("endpoints", {}).items()}
        if endpoints:
            fields["limits"] = endpoints
        if "budget" in snapshot:
            budget = snapshot["budget"]
            fields["spent"] = {"tokens": budget["tokens"], "cost_usd": budget["cost_usd"],
                               "reached": budget["reached"], "line": spent_line(budget)}
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


