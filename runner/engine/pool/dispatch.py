"""Which items go to which worker next, and in calls of what size: the dispatch window of a
:class:`~runner.engine.pool.pool.WorkerPool`, apart from any cluster (``tests/engine/test_pool.py`` drives it alone).

New items come from the plan only when a worker has room (at most ``2 * max(batch, max_concurrency)`` items each:
those running and as many queued), so the driver's memory does not grow with the benchmark. Items that must run
again wait in two queues: *retries*, charged an attempt because their worker died while running them, each run alone
on an idle worker (so a second death is the item's own doing); and *requeued* items, not charged (they were queued
behind the running ones, or their worker was replaced for another item's fault), which go out first in ordinary
batches. Batches are sized by :func:`batch_size` from the workers' measured throughput (:class:`Throughput`).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from runner.engine.plan import WorkItem
from runner.engine.pool.workers import Batch, Entry, PoolWorker, WorkerState

TARGET_CALL_S = 0.1
"""Seconds of a worker's work one call should carry: long next to a cluster's per-call cost (about a millisecond on
Ray), short enough that progress and the end of the run stay smooth."""
MAX_BATCH = 256
"""The most items one call carries."""
EWMA_WEIGHT = 0.3
"""The weight of the newest measurement in the throughput's moving average."""


def batch_size(rate: float | None, target_s: float = TARGET_CALL_S, max_batch: int = MAX_BATCH) -> int:
    """Items one call should carry for a worker doing ``rate`` items/s (``None``: not measured yet): about
    ``target_s`` seconds of its work, between 1 and ``max_batch``."""
    if rate is None:
        return 1
    return max(1, min(max_batch, int(target_s * rate)))


@dataclass
class Throughput:
    """Items/s of one worker, as an exponentially weighted moving average of the calls it answered.

    A call of ``n`` items that kept a worker busy ``busy`` seconds at concurrency ``c`` means about
    ``max(n, c) / busy`` items/s (``n`` items finish in ``ceil(n / c)`` rounds).
    """

    concurrency: int = 1
    weight: float = EWMA_WEIGHT
    rate: float | None = None

    def observe(self, items: int, busy: float) -> None:
        """Account for a call of ``items`` items that kept its worker busy ``busy`` seconds (ignored if 0)."""
        if busy <= 0:
            return
        rate = max(items, self.concurrency) / busy
        self.rate = rate if self.rate is None else (1 - self.weight) * self.rate + self.weight * rate

    @property
    def batch(self) -> int:
        """The batch size for the measured rate (:func:`batch_size`)."""
        return batch_size(self.rate)


class DispatchWindow:
    """Which items go to a worker next (see the module's docstring).

    Args:
        plan: the items to run, in order (consumed lazily).
        concurrency: items a worker runs at the same time (``WorkerSpec.max_concurrency``).
        expected: how many items the plan holds (``None``: unknown), for :attr:`pending`.
    """

    def __init__(self, plan: Iterator[WorkItem], concurrency: int = 1, expected: int | None = None) -> None:
        self.plan = plan
        self.concurrency = concurrency
        self.expected = expected
        self.taken = 0
        self.retries: deque[Entry] = deque()
        self.requeued: deque[Entry] = deque()
        self.exhausted = False
        self.throughput = Throughput(concurrency)

    def extend(self, plan: Iterator[WorkItem], expected: int | None) -> None:
        """Hand out ``plan``'s items after the ones left (a cell added to this window's model)."""
        self.plan = itertools.chain(self.plan, plan) if not self.exhausted else plan
        self.exhausted = False
        self.expected = None if expected is None or self.expected is None else self.expected + expected

    @property
    def pending(self) -> int | None:
        """Items not handed out yet: those waiting to run again and what the plan still holds (at least one while
        it is not used up, unless it was planned empty: cells whose every item has its record, which placement never
        loads a model for; ``None``: unknown)."""
        queued = len(self.retries) + len(self.requeued)
        if self.exhausted:
            return queued
        if self.expected is None:
            return None
        return queued + (max(self.expected - self.taken, 1) if self.expected > 0 else 0)

    @property
    def finished(self) -> bool:
        """Whether nothing is left to hand out (the plan is used up and no item waits to run again)."""
        return self.exhausted and not self.retries and not self.requeued

    def room(self, worker: PoolWorker) -> int:
        """Items ``worker`` may still take: up to ``2 * max(batch, concurrency)`` in flight."""
        return 2 * max(self.throughput.batch, self.concurrency) - worker.in_flight

    def retry(self, item: WorkItem, attempt: int) -> None:
        """Queue ``item`` to run again, alone, as attempt ``attempt`` (its worker died while running it)."""
        self.retries.append((item, attempt, True))

    def requeue(self, item: WorkItem, attempt: int) -> None:
        """Queue ``item`` to run again at the same ``attempt``, ahead of the plan (it was not to blame)."""
        self.requeued.append((item, attempt, True))

    def batches_for(self, worker: PoolWorker) -> list[Batch]:
        """The calls to give ``worker`` now (nothing unless it is ``ready``: a pending worker has not answered yet,
        a suspect one has not answered since a worker of its node died).

        A retry goes alone to an idle worker (which is then ``isolated`` until the call ends), so a second death is
        the item's own doing and innocent items queued behind a crashing one lose at most one attempt; while
        retries wait, workers get nothing new and drain. Otherwise whole batches, requeued items first, then the
        plan, up to the worker's room (an idle worker takes what there is): many small calls cost more than few
        full ones.
        """
        if worker.state is not WorkerState.READY or worker.isolated:
            return []
        if self.retries:
            if worker.in_flight:
                return []
            worker.isolated = True
            return [[self.retries.popleft()]]
        batch, room, calls = self.throughput.batch, self.room(worker), []
        while room >= batch or (room > 0 and worker.in_flight == 0 and not calls):
            taken = self._take(min(batch, room))
            if not taken:
                break
            calls.append(taken)
            room -= len(taken)
        return calls

    def _take(self, count: int) -> Batch:
        """Up to ``count`` items: requeued ones first, then new ones from the plan (each at attempt 1)."""
        taken: Batch = []
        while self.requeued and len(taken) < count:
            taken.append(self.requeued.popleft())
        if len(taken) < count and not self.exhausted:
            wanted = count - len(taken)
            fresh = [(item, 1, False) for item in itertools.islice(self.plan, wanted)]
            self.taken += len(fresh)
            if len(fresh) < wanted:
                self.exhausted = True
            taken.extend(fresh)
        return taken
