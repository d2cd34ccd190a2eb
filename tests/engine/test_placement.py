"""The placement rule of a matrix (engine/pool/placement.py) as a pure function, and the pool placing models on fake
workers (the fake backend of test_pool.py, which now also loads models): every item runs on a worker that holds its
model, a model loads at most once per worker, a lost worker's model is placed again and no item runs twice."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

from runner.core.config import WorkerSpec
from runner.core.task import Task
from runner.engine.item.execute import Fault
from runner.engine.plan import WorkItem
from runner.engine.pool.placement import ModelDemand, choose_model
from runner.engine.pool.pool import WorkerLost, WorkerPool
from runner.engine.progress import Progress
from runner.engine.workload import Cell, PlacedModel, Workload

from tests.engine.test_pool import FakeBackend


def demand(model: str, pending: int | None, holders: int = 0, **extra: Any) -> ModelDemand:
    return ModelDemand(model, pending, holders, **extra)


def test_a_worker_keeps_its_model_while_it_has_pending_items() -> None:
    models = [demand("a", 3, holders=1), demand("b", 500)]
    assert choose_model("a", models) == "a"


def test_a_drained_worker_takes_the_model_with_the_most_pending_items_per_holder() -> None:
    """Models of different sizes: 900 items on 3 holders (300 each) weigh more than 200 on 1."""
    models = [demand("a", 0, holders=1), demand("big", 900, holders=3), demand("small", 200, holders=1)]
    assert choose_model("a", models) == "big"
    assert demand("big", 900, holders=3).per_holder == 300
    # a model nobody holds counts as infinitely many per holder, whatever its size
    assert choose_model("a", [*models, demand("new", 1)]) == "new"
    assert demand("new", 1).per_holder == math.inf


def test_the_baseline_goes_first_then_the_newest_checkpoint_in_a_watch() -> None:
    models = [demand("step_100", 50, step=100, order=1), demand("base", 50, baseline=True, order=0),
              demand("step_300", 50, step=300, order=3), demand("step_200", 50, step=200, order=2)]
    assert choose_model(None, models) == "base"
    rest = [model for model in models if model.model != "base"]
    assert choose_model(None, rest, newest_first=True) == "step_300"
    assert choose_model(None, rest, newest_first=False) == "step_100"   # the order of the matrix


def test_nothing_pending_anywhere_keeps_what_the_worker_holds() -> None:
    assert choose_model("a", [demand("a", 0, holders=1), demand("b", 0)]) == "a"
    assert choose_model(None, []) is None


def test_unknown_work_counts_as_more_than_any_number() -> None:
    """A benchmark of unknown size whose plan is not used up: it has work, as much as a model nobody holds."""
    assert demand("stream", None, holders=4).has_work
    assert choose_model(None, [demand("known", 10**9, holders=1), demand("stream", None, holders=5)]) == "stream"


class LoadingBackend(FakeBackend):
    """The fake workers load models: ``load`` answers after a turn (or with ``fails``'s error for a model), and
    each run checks that the worker holds the model of every item it gets (as a real worker has only the cells of the
    model it holds)."""

    def __init__(self, model_of: dict[int, str | None], fails: set[str] = frozenset(), **options: Any) -> None:
        super().__init__(**options)
        self.model_of = model_of
        self.fails = set(fails)
        self.held: dict[int, str | None] = {}
        self.loads: list[tuple[int, str]] = []
        self.wrong: list[tuple[int, str]] = []

    async def load(self, handle: int, model: str, cells: dict[int, Any], replicas: tuple[Any, ...]) -> dict[str, Any]:
        await asyncio.sleep(0.001)
        self._check(handle)
        self.loads.append((handle, model))
        if model in self.fails:
            self.held[handle] = None
            return {"model": model, "replica_starts": 0, "swaps": 0, "builds": 0, "seconds": 0.0,
                    "error": f"{model}: the server exited with status 1 while starting", "failed": {}}
        self.held[handle] = model
        return {"model": model, "replica_starts": 1, "swaps": 0, "builds": 0, "seconds": 0.001, "error": None,
                "failed": {}}

    async def run(self, handle: int, batch: list[tuple[WorkItem, int, bool]]) -> Any:
        for item, _, _ in batch:
            model = self.model_of[item.cell]
            if model is not None and self.held.get(handle) != model:
                self.wrong.append((handle, item.task.id))
        return await super().run(handle, batch)


def matrix_work(cells: dict[int, tuple[str | None, int]], baseline: str | None = None) -> tuple[Workload, list[Progress]]:
    """A workload of cells (number -> (model, items)), with one progress each."""
    work, progresses = Workload(), []
    for index, (model, count) in cells.items():
        progress = Progress(count, bar=False)
        progresses.append(progress)
        plan = [WorkItem(Task(id=f"c{index}-t{i}"), 0, i, index) for i in range(count)]
        placed = PlacedModel(model, order=index, baseline=model == baseline) if model is not None else None
        work.add(Cell(index, None, progress, model), iter(plan), placed)  # type: ignore[arg-type]
    return work, progresses


async def run_matrix_pool(backend: LoadingBackend, work: Workload, size: int, concurrency: int = 1) -> WorkerPool:
    async def record(item: WorkItem, attempt: int, fault: Fault) -> str:
        backend.recorded.add(item.task.id)
        return fault.status

    pool = WorkerPool(backend, WorkerSpec(max_concurrency=concurrency), size, record)
    try:
        await pool.start("fake")
        await asyncio.wait_for(pool.run(work), 30)
    finally:
        pool.close()
    return pool


async def test_items_run_only_on_workers_that_hold_their_model_each_loaded_once_per_worker() -> None:
    """Two models of two cells each and a cell any worker runs (a hosted model), three workers: every item once,
    each on a worker holding its model, and no model loaded twice on one worker."""
    cells = {0: ("base", 30), 1: ("base", 20), 2: ("ckpt", 40), 3: ("ckpt", 10), 4: (None, 15)}
    backend = LoadingBackend({index: model for index, (model, _) in cells.items()}, concurrency=2)
    work, progresses = matrix_work(cells, baseline="base")
    pool = await run_matrix_pool(backend, work, size=3, concurrency=2)
    assert backend.wrong == []
    assert Counter(task for _, task, _ in backend.executed) == Counter(
        {f"c{index}-t{i}": 1 for index, (_, count) in cells.items() for i in range(count)})
    assert max(Counter(backend.loads).values()) == 1
    assert {model for _, model in backend.loads} == {"base", "ckpt"}
    assert [progress.done for progress in progresses] == [30, 20, 40, 10, 15]
    assert sorted((load["worker"], load["model"]) for load in pool.loads) == sorted(backend.loads)


async def test_a_lost_worker_gives_its_items_and_its_model_back() -> None:
    """The worker holding a model dies mid-cell: its items run again (charged as for any death) on a worker that
    loads the model, and no item is recorded twice."""
    died: set[int] = set()

    def dies(worker: int, task: str, attempt: int) -> bool:
        if task == "c1-t5" and not died:
            died.add(worker)
            return True
        return False

    cells = {0: ("a", 12), 1: ("b", 12)}
    backend = LoadingBackend({0: "a", 1: "b"}, dies=dies)
    work, progresses = matrix_work(cells)
    await run_matrix_pool(backend, work, size=2)
    assert backend.wrong == []
    assert [progress.done for progress in progresses] == [12, 12]
    finished = Counter(task for _, task, _ in backend.executed if task != "c1-t5")
    assert set(finished.values()) == {1} and len(finished) == 23
    loaded_b = [worker for worker, model in backend.loads if model == "b"]
    assert loaded_b[0] in died and set(loaded_b[1:]) - died   # placed again, on other workers, after the death
    assert max(Counter(backend.loads).values()) == 1


async def test_a_model_that_cannot_load_stops_its_cells_only() -> None:
    """A checkpoint whose replica fails to start: its cell stops as load_failed with the engine's line, it is not
    tried again in this round, and the other model's cells finish."""
    backend = LoadingBackend({0: "good", 1: "broken"}, fails={"broken"})
    work, progresses = matrix_work({0: ("good", 8), 1: ("broken", 8)})
    await run_matrix_pool(backend, work, size=2)
    assert progresses[0].done == 8 and progresses[1].done == 0
    assert work.cells[1].stopped is not None and work.cells[1].stopped.startswith("load_failed: broken: the server")
    assert [model for _, model in backend.loads].count("broken") == 1


async def test_an_open_workload_waits_for_cells_added_later() -> None:
    """A watch: the pool waits once every item ran while the workload is open, runs a checkpoint added meanwhile on
    a worker that loads it, and ends once the workload is closed."""
    backend = LoadingBackend({0: "step_1", 1: "step_2"})
    work, progresses = matrix_work({0: ("step_1", 4)})
    work.open = True

    async def later() -> None:
        await asyncio.sleep(0.2)
        progress = Progress(3, bar=False)
        progresses.append(progress)
        plan = [WorkItem(Task(id=f"c1-t{i}"), 0, i, 1) for i in range(3)]
        work.add(Cell(1, None, progress, "step_2"), iter(plan), PlacedModel("step_2", 1, step=2))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        work.close()

    adding = asyncio.ensure_future(later())
    await run_matrix_pool(backend, work, size=1)
    await adding
    assert [progress.done for progress in progresses] == [4, 3]
    assert backend.loads == [(0, "step_1"), (0, "step_2")]
    assert backend.wrong == []




async def test_a_model_whose_cells_have_nothing_to_run_is_never_loaded() -> None:
    """Issue 42: a resumed matrix whose finished checkpoints' cells planned no item (``to_run 0``): the one worker
    loads only the model that has work, and never the finished ones, as placement's rule 3 says."""
    backend = LoadingBackend({0: "step_100", 1: "step_300", 2: "step_400"})
    work, progresses = matrix_work({0: ("step_100", 0), 1: ("step_300", 0), 2: ("step_400", 5)})
    await run_matrix_pool(backend, work, size=1)
    assert backend.loads == [(0, "step_400")]
    assert [progress.done for progress in progresses] == [0, 0, 5]
