"""What an executor runs: one run's items, or the cells of a matrix, each cell an ordinary run executed together.

A :class:`WorkerSetup` is what every worker (the driver, when sequential) gets once: the cells it may run from its
start, the replicas it keeps for its whole life, the run's traffic settings and response cache. A
:class:`Workload` is what the executor then executes: every cell (its :class:`~runner.engine.run_context.RunContext`,
its :class:`~runner.engine.progress.Progress`, the model a worker must hold to run it) and their items, grouped by
that model. A run alone is a workload of one cell whose items any worker runs
(:meth:`Workload.single`); a matrix (:mod:`runner.engine.matrix`) has a group per placed model, and a worker runs the
items of the model it holds (:mod:`runner.engine.pool.placement`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

from runner.core.config import RunSettings
from runner.engine.plan import WorkItem
from runner.engine.progress import Progress
from runner.engine.run_context import RunContext
from runner.serving import ReplicaSpec
from runner.storage.response_cache import StoredCache
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker of an execution gets once (pickled to each Ray worker).

    Args:
        cells: the cells any worker runs from its start, by cell number: a run alone, or a matrix's cells whose
            model needs no placement (a hosted model, a server at a URL). Each is built when the worker starts, so
            a solution that cannot be built stops the run before it writes anything.
        pinned: the replicas every worker keeps for its whole life: a run's served models, a matrix's served judge.
        settings: the traffic settings (limits, budget, prices, cache policy), the same for every cell.
        cache: the response cache, or ``None``.
        log_store: where the pinned replicas' logs go (``replicas/``).
        model_env: what the replicas need from the driver's environment (``HF_TOKEN``...); secrets, never written or
            logged (``repr`` leaves them out).
        places: some cells need a worker to hold their model (a matrix of served or in-process models): workers
            start replicas after they start, and an embedded Ray yields the cores to them.
        name: what the workload is called in messages (the solution of a run alone).
    """

    cells: dict[int, RunContext]
    pinned: tuple[ReplicaSpec, ...]
    settings: RunSettings
    cache: StoredCache | None
    log_store: ResultStore
    model_env: dict[str, str] = field(default_factory=dict, repr=False)
    places: bool = False
    name: str = "the solution"

    @classmethod
    def single(cls, context: RunContext) -> WorkerSetup:
        """The setup of a run alone: its one cell, its replicas pinned, its traffic settings."""
        return cls({0: context}, context.replicas, context.settings, context.cache, context.store, context.model_env,
                   name=context.solution.display)

    @property
    def serves(self) -> bool:
        """Whether workers start model replicas (pinned, or with the models they hold)."""
        return bool(self.pinned) or self.places


@dataclass
class Cell:
    """One run of a workload.

    Args:
        index: its number (its items carry it: :attr:`WorkItem.cell <runner.engine.plan.WorkItem.cell>`).
        context: what its items share.
        progress: where its acknowledgements go.
        model: the model a worker must hold to run its items (``None``: any worker).
        replicas: that model's replicas, which a worker starts when it takes the model.
        stopped: why the cell stopped before its end (its model could not load, its server failed every call the
            same way, its solution could not be built), one line; its remaining items are not handed out.
    """

    index: int
    context: RunContext
    progress: Progress
    model: str | None = None
    replicas: tuple[ReplicaSpec, ...] = ()
    stopped: str | None = None


@dataclass
class PlacedModel:
    """A model workers hold to run its cells: its rank among the matrix's models (``order``), whether it is the
    baseline, and its checkpoint's step (``None``: not a checkpoint)."""

    model: str
    order: int = 0
    baseline: bool = False
    step: int | None = None


class Workload:
    """The cells an executor runs together and their items, grouped by the model a worker must hold (``None``: any
    worker).

    Args:
        newest_first: a watch of checkpoints runs: among equals, a drained worker takes the newest checkpoint.
        open: more cells may come (:meth:`add`) until :meth:`close`.
    """

    def __init__(self, *, newest_first: bool = False, open: bool = False) -> None:
        self.cells: dict[int, Cell] = {}
        self.groups: dict[str | None, list[Iterator[WorkItem]]] = {}
        self.models: dict[str, PlacedModel] = {}
        self.newest_first = newest_first
        self.open = open
        self.changed = asyncio.Event()

    @classmethod
    def single(cls, context: RunContext, progress: Progress, items: Iterator[WorkItem]) -> Workload:
        """The workload of a run alone: one cell, any worker runs its items."""
        work = cls()
        work.add(Cell(0, context, progress), items)
        return work

    def add(self, cell: Cell, items: Iterator[WorkItem], placed: PlacedModel | None = None) -> None:
        """Add ``cell`` and its items (to its model's group), and wake the executor."""
        self.cells[cell.index] = cell
        if cell.model is not None and cell.model not in self.models:
            self.models[cell.model] = placed or PlacedModel(cell.model, order=len(self.models))
        self.groups.setdefault(cell.model, []).append(self._unless_stopped(cell, items))
        self.changed.set()

    def close(self) -> None:
        """No more cells come: the executor ends once every item ran."""
        self.open = False
        self.changed.set()

    def stop_cell(self, index: int, reason: str) -> None:
        """Stop cell ``index`` (``reason``: one line): its items not handed out yet are dropped."""
        cell = self.cells[index]
        if cell.stopped is None:
            cell.stopped = reason

    def load_of(self, model: str) -> tuple[dict[int, RunContext], tuple[ReplicaSpec, ...]]:
        """What a worker loads to hold ``model``: the contexts of its cells that have not stopped, and the replicas
        those cells serve it with (one per served model: a cell whose solution loads the model in the worker's own
        process, lm-eval's ``HFLM``, has none)."""
        cells = {index: cell for index, cell in self.cells.items() if cell.model == model and cell.stopped is None}
        replicas: dict[str, ReplicaSpec] = {}
        for cell in cells.values():
            for spec in cell.replicas:
                replicas.setdefault(spec.model, spec)
        return {index: cell.context for index, cell in cells.items()}, tuple(replicas.values())

    def take_group(self, model: str | None) -> Iterator[WorkItem]:
        """The items of ``model``'s cells added since the last call, one cell after another."""
        streams = self.groups.pop(model, [])
        return (item for stream in streams for item in stream)

    @staticmethod
    def _unless_stopped(cell: Cell, items: Iterator[WorkItem]) -> Iterator[WorkItem]:
        for item in items:
            if cell.stopped is not None:
                return
            yield item

    def progress(self, cell: int) -> Progress:
        """Where cell ``cell``'s acknowledgements go."""
        return self.cells[cell].progress

    def context(self, cell: int) -> RunContext:
        """What cell ``cell``'s items share."""
        return self.cells[cell].context
