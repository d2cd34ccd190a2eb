"""A matrix from start to end: every cell's run directory opened, one executor started once, every cell's items run
by the workers that hold their model, each directory closed; ``matrix.json`` kept up to date. The report is built
by the caller afterwards (:func:`runner.evaluators.evaluate_matrix`), from the cells' records.

The order keeps bad input from touching stored results, as for a run (:func:`runner.engine.run.execute_run`): the
executor's preflight and every cell's models first; the root checked (a run's storage is refused); each cell's
directory opened (its lease, fingerprint and listing: a cell whose settings changed is refused with one line); the
executor started only when some cell has work; only then ``matrix.json`` and the cells' ``run.json`` are written.

One cell's failure never stops the others: a model whose replica does not start stops its cells (``load_failed``,
with the engine's line; a watch tries it again at its next look, up to ``--replica-restarts`` times), a server that
fails every call the same way stops its cell, and the matrix ends with the cells it could finish done
(:class:`MatrixOutcome`; the caller exits 3 while some cell is not, 4 when the budget stopped it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from runner._version import __version__
from runner.core.errors import ConfigError, RunStopped, ServerStop
from runner.core.matrix import benchmark_key
from runner.engine.matrix.checkpoints import CheckpointWatch, describe, expand, until_reached
from runner.engine.matrix.request import MatrixCellPlan, MatrixModelSlot, MatrixRequest, keyed
from runner.engine.run import Executor, execute_while_owned
from runner.engine.run_directory import RunDirectory
from runner.engine.workload import Cell, PlacedModel, WorkerSetup, Workload
from runner.serving import ReplicaSpec
from runner.storage.matrix_manifest import MatrixCell, MatrixManifest, MatrixModel, read_matrix, write_matrix
from runner.storage.probe import check_conditional_writes
from runner.traffic.control import TrafficControl


@dataclass
class CellOutcome:
    """How one cell ended in this invocation: its status, items ``done`` now and before, ``errors``, ``total``."""

    plan: MatrixCellPlan
    status: str
    error: str | None = None
    executed: int = 0
    done: int = 0
    errors: int = 0
    total: int | None = None


@dataclass
class MatrixOutcome:
    """What a matrix did: each cell's outcome, the manifest written, whether the budget stopped it, the traffic's
    final state and the wall time (seconds)."""

    manifest: MatrixManifest
    cells: list[CellOutcome] = field(default_factory=list)
    budget_stopped: bool = False
    budget_line: str = ""
    seconds: float = 0.0

    @property
    def incomplete(self) -> list[CellOutcome]:
        """The cells that could not finish."""
        return [cell for cell in self.cells if cell.status != "done"]


class _Cells:
    """The cells a matrix runs now, their directories and the workload that feeds the executor."""

    def __init__(self, request: MatrixRequest, stack: contextlib.ExitStack) -> None:
        self.request = request
        self.stack = stack
        self.plans: list[MatrixCellPlan] = []
        self.directories: dict[int, RunDirectory] = {}

    def open(self, plans: list[MatrixCellPlan]) -> None:
        """Open the directories of ``plans`` (lease, fingerprint check, listing).

        Raises:
            FingerprintMismatch: a cell whose settings changed (one line naming it).
            LeaseHeld: another driver runs the cell.
        """
        for plan in plans:
            directory = RunDirectory(plan.request, cell=plan.index, name=plan.name)
            self.stack.enter_context(directory.owned())
            directory.check()
            directory.list_done()
            self.directories[plan.index] = directory
            self.plans.append(plan)

    def begin(self, plan: MatrixCellPlan, executor: Executor, traffic: TrafficControl, work: Workload) -> None:
        """Plan the cell, write its first files and give its items to ``work``."""
        directory = self.directories[plan.index]
        progress = directory.begin(executor, traffic,
                                   on_stop=lambda stop, index=plan.index: self._stopped(work, index, stop))
        placed = PlacedModel(plan.slot.model, plan.slot.order, plan.slot.baseline, plan.slot.step) \
            if plan.placed is not None else None
        work.add(Cell(plan.index, directory.context(traffic), progress, plan.placed, plan.replicas),
                 directory.planned.remaining() if directory.planned is not None else iter(()), placed)

    def _stopped(self, work: Workload, index: int, stop: ServerStop) -> None:
        """A cell's server fails every call the same way: that cell stops, the others go on."""
        structlog.get_logger("runner").warning("matrix.cell_stopped", cell=self.by_index(index).name,
                                               reason=str(stop)[:300], detail="the other cells go on")
        work.stop_cell(index, f"failed: {stop}")

    def by_index(self, index: int) -> MatrixCellPlan:
        return next(plan for plan in self.plans if plan.index == index)


async def execute_matrix(request: MatrixRequest) -> MatrixOutcome:
    """Run every cell of ``request`` that has items without a record, on one executor (see the module's docstring).

    Returns:
        each cell's outcome (the caller reports, then exits 3 while a cell is not done, 4 if the budget stopped
        the matrix).

    Raises:
        RunnerError: bad input, before anything is written: a cell's refusal (its settings changed, its models do
            not answer), a matrix pointed at a run's storage, another driver running a cell.
        RunStopped: a fault of the whole matrix after writing started (the storage, a lost lease, every worker
            lost); finished records stay, and the same command resumes.
    """
    started = time.monotonic()
    executor = request.executor
    assert executor is not None
    executor.preflight()
    await asyncio.to_thread(_preflight_models, request)
    root = request.root
    root.outage_s = request.settings.storage_outage
    if root.read_manifest() is not None:
        raise ConfigError(f"{root.uri} holds a run (run.json), not a matrix; give the matrix another --storage (or "
                          "run that run with 'python -m runner')")
    check_conditional_writes(root, request.settings.allow_overwriting_store)
    manifest = read_matrix(root) or MatrixManifest()
    with contextlib.ExitStack() as stack:
        cells = _Cells(request, stack)
        cells.open(request.cells)
        traffic = TrafficControl.for_runs(request.settings, [(directory.store, directory.kept)
                                                             for directory in cells.directories.values()])
        for directory in cells.directories.values():
            directory.plan(traffic)
        setup = _setup(request, cells, traffic)
        expected = _expected(cells)
        has_work = request.config.watch is not None or any(
            directory.planned is not None and directory.planned.first is not None
            for directory in cells.directories.values())
        if has_work:
            await executor.start(setup, traffic, expected)
        watch_task: asyncio.Task[None] | None = None
        try:
            work = Workload(newest_first=request.config.watch is not None, open=request.config.watch is not None)
            _note_models(manifest, request, request.slots)
            manifest.invocations += 1
            manifest.runner_version = __version__
            write_matrix(root, manifest)
            for plan in cells.plans:
                cells.begin(plan, executor, traffic, work)
            if request.config.watch is not None:
                watch_task = asyncio.ensure_future(_watch(request, cells, executor, traffic, work, manifest))
            keepers = [directory.keeper for directory in cells.directories.values() if directory.keeper is not None]
            try:
                if has_work:
                    await execute_while_owned(_with_watch(executor.execute(work), watch_task), *keepers)
            except BaseException:
                for directory in cells.directories.values():
                    await directory.abandon()
                raise
            finally:
                for directory in cells.directories.values():
                    directory.end_progress()
        finally:
            if watch_task is not None:
                watch_task.cancel()
                with contextlib.suppress(BaseException):
                    await watch_task
            if has_work:
                await executor.close()
        for directory in cells.directories.values():
            await directory.finish(None)
            directory.finished_lines()
        traffic.write(root)
        outcome = MatrixOutcome(manifest, seconds=time.monotonic() - started)
        outcome.budget_stopped = traffic.stopped and any(
            directory.stopped_by_budget for directory in cells.directories.values())
        outcome.budget_line = traffic.budget_line() if traffic.settings.budgeted else ""
        for plan in cells.plans:
            outcome.cells.append(_cell_outcome(plan, cells.directories[plan.index], work))
        _note_cells(manifest, outcome, executor.loads, request)
        write_matrix(root, manifest)
        return outcome


async def _with_watch(execution: Any, watch_task: asyncio.Task[None] | None) -> None:
    """Await ``execution``; a failure of the watch (its storage, a cell it could not open) ends it too."""
    if watch_task is None:
        await execution
        return
    run = asyncio.ensure_future(execution)
    done, _ = await asyncio.wait({run, watch_task}, return_when=asyncio.FIRST_COMPLETED)
    if watch_task in done and watch_task.exception() is not None:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        raise watch_task.exception()  # type: ignore[misc]
    await run


def _preflight_models(request: MatrixRequest) -> None:
    """Each distinct set of models of the cells checked once (provider known, key set, server answering)."""
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for plan in request.cells:
        models = tuple(sorted(plan.request.models().items()))
        if models in seen:
            continue
        seen.add(models)
        try:
            plan.request.preflight()
        except ConfigError as exc:
            raise ConfigError(f"cell {plan.name}: {exc}") from None


def _setup(request: MatrixRequest, cells: _Cells, traffic: TrafficControl) -> WorkerSetup:
    """What every worker gets: the cells any worker runs (no model to hold), the replicas every cell shares (a
    served judge), pinned.

    Raises:
        ConfigError: two cells serve one pinned model differently (other engine flags).
    """
    plans = cells.plans
    pinned: dict[str, ReplicaSpec] = {}
    for plan in plans:
        for spec in plan.pinned:
            if spec.model in pinned and pinned[spec.model] != spec:
                raise ConfigError(f"cell {plan.name} serves {spec.model} with other engine flags than another cell; "
                                  "give the model one set of engine_args across the matrix")
            pinned[spec.model] = spec
    contexts = {plan.index: cells.directories[plan.index].context(traffic) for plan in plans if plan.placed is None}
    model_env = next((plan.request.model_environment() for plan in plans if plan.replicas or plan.pinned), {})
    return WorkerSetup(contexts, tuple(pinned.values()), request.settings, traffic.cache, request.root, model_env,
                       places=any(plan.placed is not None for plan in plans), name="the matrix's solutions")


def _expected(cells: _Cells) -> int | None:
    """The items every cell expects (``None``: some cell's size is unknown)."""
    totals = [directory.planned.expected for directory in cells.directories.values() if directory.planned]
    return None if any(total is None for total in totals) else sum(total or 0 for total in totals)


def _cell_outcome(plan: MatrixCellPlan, directory: RunDirectory, work: Workload) -> CellOutcome:
    """How ``plan``'s cell ended."""
    planned, progress = directory.planned, directory.progress
    assert planned is not None and progress is not None
    cell = work.cells.get(plan.index)
    total = planned.already_done + planned.expected if planned.expected is not None else None
    done = planned.already_done + progress.done
    stopped = cell.stopped if cell is not None else None
    if stopped is not None:
        # "load_failed: <the engine's line>", else "failed: ..." or "build_failed: ...": the cell could not finish.
        status = "load_failed" if stopped.startswith("load_failed") else "failed"
    elif planned.plan.exhausted and not progress.skipped:
        status = "done"
    else:
        status = "incomplete"
    return CellOutcome(plan, status, stopped, progress.done, done, progress.errors, total)


def _note_models(manifest: MatrixManifest, request: MatrixRequest, slots: list[MatrixModelSlot]) -> None:
    """The matrix's models, benchmarks and baseline in ``manifest``: new models and benchmark entries added (every
    entry the matrix had stays, with its key, readable key and identity, so that its key stays its own), a checkpoint
    whose weights changed marked ``stale`` with its cells (its new weights got new cells)."""
    manifest.baseline = request.baseline
    manifest.config = request.config.model_dump(mode="json")
    for old in manifest.benchmarks:
        old["current"] = False
    for entry, key, identity in zip(request.config.benchmarks, request.benchmark_keys, request.identities):
        known = next((old for old in manifest.benchmarks if old.get("key") == key), None)
        noted = {"key": key, "base": benchmark_key(entry), "identity": identity, "explicit": bool(entry.key),
                 "current": True, "benchmark": entry.benchmark, "args": entry.args, "solution": entry.solution}
        if known is None:
            manifest.benchmarks.append(noted)
        else:
            known.update(noted)
    for slot in slots:
        current = next((entry for entry in manifest.models if entry.key == slot.key), None)
        for entry in manifest.models:
            if entry.model == slot.model and entry.key != slot.key and entry.status != "stale":
                entry.status = "stale"
                for cell in manifest.cells:
                    if cell.model_key == entry.key:
                        cell.status = "stale"
        digest = slot.checkpoint.digest if slot.checkpoint is not None else None
        if current is None:
            manifest.models.append(MatrixModel(model=slot.model, key=slot.key, step=slot.step, digest=digest,
                                               checkpoint=slot.checkpoint is not None, order=slot.order))
        else:
            current.digest, current.step, current.order = digest, slot.step, slot.order
    for plan in request.cells:
        if manifest.cell(plan.path) is None:
            manifest.cells.append(MatrixCell(model=plan.slot.model, model_key=plan.slot.key,
                                             benchmark=plan.entry.benchmark, benchmark_key=plan.benchmark_key,
                                             path=plan.path))


def _note_cells(manifest: MatrixManifest, outcome: MatrixOutcome, loads: list[dict[str, Any]],
                request: MatrixRequest) -> None:
    """Each cell's status and counts, each model's load state, and this invocation's loads, in ``manifest``."""
    for cell_outcome in outcome.cells:
        entry = manifest.cell(cell_outcome.plan.path)
        if entry is None:
            continue
        entry.status = cell_outcome.status  # type: ignore[assignment]
        entry.error = cell_outcome.error
        entry.counts = {"done": cell_outcome.done, "total": cell_outcome.total, "errors": cell_outcome.errors}
    for model in manifest.models:
        failed = [cell for cell in outcome.cells if cell.plan.slot.key == model.key and cell.status == "load_failed"]
        if failed:
            model.status, model.error = "load_failed", (failed[0].error or "").removeprefix("load_failed: ")
            model.load_attempts += 1
        elif model.status == "load_failed" and any(cell.plan.slot.key == model.key for cell in outcome.cells):
            model.status, model.error = "ok", None
    invocation = manifest.invocations
    manifest.loads.extend({**load, "invocation": invocation} for load in loads)


async def _watch(request: MatrixRequest, cells: _Cells, executor: Executor, traffic: TrafficControl,
                 work: Workload, manifest: MatrixManifest) -> None:
    """Every ``watch.every`` seconds: the checkpoints that became ready get cells, which join the workload; the
    cells whose model did not load are tried again (up to ``--replica-restarts`` times); once the ``until`` file
    exists, no more cells come and the executor ends when every item ran."""
    watch = request.config.watch
    assert watch is not None
    log = structlog.get_logger("runner")
    looker = CheckpointWatch(watch.ready_file)
    attempts: dict[str, int] = {model.model: model.load_attempts for model in manifest.models}
    globs = [entry for entry in request.config.models if entry.is_glob]
    failing_since: float | None = None
    while True:
        ended = watch.until is not None and globs and all(
            until_reached(entry.model, watch.until, request.checkpoint_options(entry.model)) for entry in globs)
        try:
            new = await asyncio.to_thread(_ready_checkpoints, request, globs, looker)
            failing_since = None
        except ConfigError as exc:
            # The store answered at the start (the globs were listed before anything was written): a look that
            # fails now is an outage, looked at again, until it lasts longer than --storage-outage.
            failing_since = failing_since if failing_since is not None else time.monotonic()
            waited = time.monotonic() - failing_since
            if waited > request.settings.storage_outage:
                raise RunStopped(f"the watch could not look at the checkpoints for {waited:.0f} s, longer than "
                                 f"--storage-outage ({exc}); the records are kept: fix the store or its credentials, "
                                 "then run the same command to resume") from None
            log.warning("matrix.checkpoints_unreadable", error=str(exc)[:300],
                        detail="looked at again at the next look")
            new, ended = [], False
        if new:
            slots = keyed([*request.slots, *new], {model.model: model for model in manifest.models
                                                    if model.status != "stale"},
                          {model.key for model in manifest.models}, warn=False)[len(request.slots):]
            for slot in slots:
                slot.baseline = slot.model == request.baseline
            plans = request.build_cells(slots, start=max((plan.index for plan in cells.plans), default=-1) + 1)
            request.slots.extend(slots)
            request.cells.extend(plans)
            await asyncio.to_thread(cells.open, plans)
            for directory in (cells.directories[plan.index] for plan in plans):
                directory.plan(traffic)
            _note_models(manifest, request, slots)
            write_matrix(request.root, manifest)
            log.info("matrix.checkpoints", added=describe([slot.checkpoint for slot in slots
                                                           if slot.checkpoint is not None]),
                     cells=len(plans), detail="new checkpoints are ready: their cells join the matrix")
            for plan in plans:
                cells.begin(plan, executor, traffic, work)
        _retry_load_failed(cells, executor, traffic, work, attempts, request)
        if ended:
            log.info("matrix.watch_ended", detail=f"{watch.until} exists: the matrix ends once every item ran")
            work.close()
            return
        await asyncio.sleep(watch.every)


def _ready_checkpoints(request: MatrixRequest, globs: list[Any], looker: CheckpointWatch) -> list[MatrixModelSlot]:
    """The checkpoints of ``globs`` that are ready and have no cells yet."""
    known = {slot.model for slot in request.slots}
    found = []
    for entry in globs:
        watch = request.config.watch
        for checkpoint in expand(entry.model, watch.ready_file if watch else None,
                                 request.checkpoint_options(entry.model)):
            if checkpoint.model in known or not looker.ready(checkpoint):
                continue
            found.append(MatrixModelSlot(checkpoint.model, checkpoint.key, entry, checkpoint=checkpoint))
    return found


def _retry_load_failed(cells: _Cells, executor: Executor, traffic: TrafficControl, work: Workload,
                       attempts: dict[str, int], request: MatrixRequest) -> None:
    """Give the cells whose model did not load another try (a new plan), while the model has tries left."""
    failed = [plan for plan in cells.plans
              if (cell := work.cells.get(plan.index)) is not None and (cell.stopped or "").startswith("load_failed")]
    retried: set[str] = set()
    for plan in failed:
        model = plan.slot.model
        if model not in retried:
            attempts[model] = attempts.get(model, 0) + 1
            retried.add(model)
        if attempts[model] > request.settings.replica_restarts:
            continue
        directory = cells.directories[plan.index]
        directory.list_done()
        directory.plan(traffic)
        cells.begin(plan, executor, traffic, work)
