"""The bookkeeping of a worker pool, apart from any cluster: each worker's state, node and calls in flight.

After Ray Data's actor-pool operator (``actor_pool_map_operator.py``), which keeps each actor's node and tasks in
flight and leaves out actors that are restarting or on draining nodes. A worker's life::

    pending --answers its first call--> ready --a worker of its node dies--> suspect --answers--> ready
       |                                  |                                     |
       +----------- dies, or is killed by the pool (replaced: the pool keeps its size) ---------> dead

A worker death is often a node's death seen early: the node's other workers are dead too, but the driver has not
heard yet. So a death puts the node's other workers under suspicion: a ``suspect`` gets no work until it answers a
call again (the pool probes it). Which items a death costs an attempt is decided by :func:`running_calls`.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.engine.plan import WorkItem

Entry = tuple[WorkItem, int, bool]
"""One item of a call: the item, its attempt (1 for a first execution; a worker death while running it adds one),
and whether it went out before (the worker then first looks for its record: a record the last worker wrote before
it died means the item is done)."""
Batch = list[Entry]
"""The items of one call."""


class WorkerState(str, enum.Enum):
    """Where a worker is in its life (see the module's docstring)."""

    PENDING = "pending"
    READY = "ready"
    SUSPECT = "suspect"
    DEAD = "dead"


@dataclass(eq=False)
class Call:
    """One call in flight on a worker: ``run`` (``items``), ``describe`` (its first call), ``probe`` (are you
    alive?), ``watch`` (answers when the worker must be replaced) or ``load`` (hold ``model``)."""

    worker: PoolWorker
    kind: Literal["run", "describe", "probe", "watch", "load"]
    items: Batch = field(default_factory=list)
    future: asyncio.Future[Any] | None = None
    model: str | None = None


@dataclass(eq=False)
class PoolWorker:
    """One worker of the pool.

    Args:
        handle: the backend's handle.
        index: a number for logs.
        state: see :class:`WorkerState`.
        in_flight: items of its run calls not answered yet.
        isolated: it runs a retried item alone.
        node: the node it runs on (from its description; ``None`` until it answered).
        description: what it reported about itself in its first answer.
        calls: its calls in flight, in the order they were sent.
        since: :func:`time.monotonic` when it was started (how long a pending worker has waited).
        model: the placed model it holds (:mod:`runner.engine.pool.placement`; ``None``: none).
        loading: the model it is loading now (it gets no item meanwhile).
    """

    handle: Any
    index: int
    state: WorkerState = WorkerState.PENDING
    in_flight: int = 0
    isolated: bool = False
    node: str | None = None
    description: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    since: float = field(default_factory=time.monotonic)
    model: str | None = None
    loading: str | None = None

    @property
    def run_calls(self) -> list[Call]:
        """Its run calls in flight, oldest first."""
        return [call for call in self.calls if call.kind == "run"]


def running_calls(worker: PoolWorker, concurrency: int) -> list[Call]:
    """The run calls of ``worker`` that were running, rather than queued behind, when it died.

    A worker executes calls in the order they were sent and runs ``concurrency`` items at a time, so the oldest calls
    up to ``concurrency`` items were running; the calls after them waited. Only the items of running calls are
    charged an attempt for the death (a call is charged whole: which of its items had started is not known).
    """
    running, before = [], 0
    for call in worker.run_calls:
        if before >= concurrency:
            break
        running.append(call)
        before += len(call.items)
    return running


class WorkerBook:
    """The pool's workers and what each reported (see the module's docstring).

    After a run, :attr:`descriptions` holds what every worker that became ready reported about itself and
    :attr:`deaths` the number of workers that died or were killed for a fault.
    """

    def __init__(self) -> None:
        self.workers: list[PoolWorker] = []
        self.descriptions: list[dict[str, Any]] = []
        self.deaths = 0
        self._numbers = itertools.count()

    def add(self, handle: Any) -> PoolWorker:
        """A new pending worker."""
        worker = PoolWorker(handle, next(self._numbers))
        self.workers.append(worker)
        return worker

    @property
    def pending(self) -> list[PoolWorker]:
        """The workers started that have not answered yet (waiting for resources, or starting)."""
        return [worker for worker in self.workers if worker.state is WorkerState.PENDING]

    def ready(self, worker: PoolWorker, description: dict[str, Any]) -> None:
        """``worker`` answered its first call with ``description`` (its ``node_id``, if any, is its node)."""
        worker.state = WorkerState.READY
        worker.node, worker.description = description.get("node_id"), description
        self.descriptions.append(description)

    def answered(self, worker: PoolWorker) -> bool:
        """``worker`` answered a call: a suspect one is ready again (``True`` then)."""
        if worker.state is WorkerState.SUSPECT:
            worker.state = WorkerState.READY
            return True
        return False

    def suspect(self, node: str) -> list[PoolWorker]:
        """Put every ready worker of ``node`` under suspicion; those it concerned."""
        suspects = [worker for worker in self.on_node(node) if worker.state is WorkerState.READY]
        for worker in suspects:
            worker.state = WorkerState.SUSPECT
        return suspects

    def on_node(self, node: str) -> list[PoolWorker]:
        """The live workers of ``node``."""
        return [worker for worker in self.workers if worker.node == node]

    def dead(self, worker: PoolWorker) -> bool:
        """Mark ``worker`` dead and drop it; ``False`` if it was dead already (one death, several calls)."""
        if worker.state is WorkerState.DEAD:
            return False
        worker.state = WorkerState.DEAD
        self.workers.remove(worker)
        self.deaths += 1
        return True

    @property
    def any_ready(self) -> bool:
        """Whether some worker has answered."""
        return any(worker.state is WorkerState.READY for worker in self.workers)
