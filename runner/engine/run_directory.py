"""A run directory from its opening to its close: one object owns a run's storage while the run executes.

:class:`RunDirectory` opens a run's storage in the order that keeps bad input from touching stored results (the
benchmark prepared, the store's conditional writes probed, the run's lease taken and renewed, every read-only check
of the directory: fingerprint, the listing of finished items), plans what is left, writes the run's first files once
the executor has started, feeds a :class:`~runner.engine.progress.Progress` and the result-shard compactor, and
closes (the compactor adopts and compacts what is left, the traffic and task counts are written, the lease is
released). :func:`runner.engine.run.execute_run` opens one.

Example (what :func:`~runner.engine.run.execute_run` does, less the executor)::

    directory = RunDirectory(request)
    with directory.owned():                 # prepare, probe, lease (released, and a new local folder removed if
        directory.check()                   # left empty, on the way out); fingerprint check
        kept = directory.list_done()        # one listing of what is done
        planned = directory.plan(traffic)   # the plan, gated by the run's traffic control
        ...                                 # executor.start(...)
        directory.begin(executor)           # force, rerun_failed, run.json; progress and compactor
        ...                                 # executor.execute(...)
        directory.finish()                  # compactor, limits.json, run.json's task counts
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from runner._version import __version__
from runner.core.config import fingerprint
from runner.core.errors import (BenchmarkError, BudgetExhausted, ConfigError, FingerprintMismatch, RunStopped,
                                ServerStop, StorageError)
from runner.core.secrets import redact
from runner.engine import progress as progress_module
from runner.engine.lease_keeper import LeaseKeeper
from runner.engine.plan import Plan, WorkItem
from runner.engine.progress import Progress
from runner.engine.request import RunRequest
from runner.engine.run_context import RunContext
from runner.storage import lease
from runner.storage.manifest import BenchmarkInfo, RunManifest, describe_difference, new_run_id, utc_now
from runner.storage.probe import check_conditional_writes
from runner.storage.store import MATRIX_FILE, PROGRESS_FILE, ResultStore
from runner.traffic.control import TrafficControl

if TYPE_CHECKING:
    from runner.storage.compaction import Compactor


class _Described(Protocol):
    """What a run directory shows of its executor (:meth:`Executor.details <runner.engine.run.Executor.details>`)."""

    name: str

    def details(self) -> dict[str, Any]: ...


def default_run_uri(benchmark_name: str) -> str:
    """``./runs/<benchmark>-<UTC timestamp>``, the benchmark name made path-safe."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", benchmark_name).strip("-").lower() or "run"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"./runs/{slug}-{stamp}"


@dataclass
class Planned:
    """What a run will execute, decided before the executor starts: the plan, its gated items (``first`` taken
    from them, ``None`` when there is nothing to run), the items expected, those already done, and the failed items
    to run again."""

    plan: Plan
    items: Iterator[WorkItem]
    first: WorkItem | None
    expected: int | None
    already_done: int
    failed: set[tuple[str, int]]

    def remaining(self) -> Iterator[WorkItem]:
        """Every item to run, ``first`` included."""
        if self.first is not None:
            yield self.first
        yield from self.items


class RunDirectory:
    """One run's storage, owned from :meth:`owned` to its end (see the module's docstring).

    Args:
        request: the run.
        cell: the run's number among the runs executed together (0 for a run alone; a matrix's cell number): its
            items carry it (:attr:`WorkItem.cell <runner.engine.plan.WorkItem.cell>`).
        name: what a refusal calls the run (default: its storage URI; a matrix's cell by its keys).

    After :meth:`owned` and :meth:`check`: :attr:`manifest`; after :meth:`plan`: :attr:`planned`; after
    :meth:`begin`: :attr:`progress` and :attr:`context`.
    """

    def __init__(self, request: RunRequest, cell: int = 0, name: str | None = None) -> None:
        self.request = request
        self.cell = cell
        self.name = name
        self.manifest: RunManifest | None = None
        self.clear = False
        self.planned: Planned | None = None
        self.progress: Progress | None = None
        self.compactor: Compactor | None = None
        self.keeper: LeaseKeeper | None = None
        self.started = time.monotonic()
        self._resumable: set[tuple[str, int]] = set()
        self._failed: set[tuple[str, int]] = set()
        self._progress_ended = False

    @property
    def store(self) -> ResultStore:
        """The run's store."""
        return self.request.store

    @contextlib.contextmanager
    def owned(self) -> Iterator[RunDirectory]:
        """Prepare the benchmark, bind the default run URI, probe the store's conditional writes and take the run's
        lease (renewed from a thread) for the block; on the way out release it, and remove the local folders this
        run created if they are still empty (a run refused before it wrote anything leaves none).

        Raises:
            BenchmarkError: from preparing the benchmark.
            StorageError: conditional writes that do not hold, a store that cannot be reached.
            LeaseHeld: another driver owns the run.
        """
        request, store = self.request, self.request.store
        request.benchmark.prepare()
        store.bind_default(default_run_uri(request.benchmark.name))
        store.outage_s = request.settings.storage_outage
        check_conditional_writes(store, request.settings.allow_overwriting_store)
        created = _new_folders(store.root) if store.is_local else []
        try:
            self.keeper = LeaseKeeper(store, lease.acquire(store, request.settings.lease_ttl,
                                                           request.settings.take_over))
            self.keeper.start()
            try:
                yield self
            finally:
                self.keeper.stop()
        finally:
            # Removed only while empty (the run was refused before it wrote anything), deepest first, and only the
            # folders this run created (./runs of a default run directory included).
            for folder in created:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)

    def check(self) -> RunManifest:
        """Every read-only check of the run directory (under the run's lease); the manifest to write if they pass
        (:attr:`manifest`), and whether earlier records are dropped (:attr:`clear`).

        Raises:
            FingerprintMismatch: the directory holds a run of another configuration (and ``force`` is off).
            ConfigError: the directory is an evaluation matrix's root (a run was pointed at it).
            StorageError: the store cannot be reached.
        """
        benchmark, store, settings, request = self.request.benchmark, self.store, self.request.settings, self.request
        fields = {**request.fingerprint_fields, "benchmark_version": benchmark.version}
        digest = fingerprint(fields)
        existing = store.read_manifest()
        if existing is None and self.name is None and store.read_file(MATRIX_FILE) is not None:
            raise ConfigError(f"{store.uri} is the root of an evaluation matrix (it holds {MATRIX_FILE}), not a run; "
                              "run the matrix again with 'python -m runner matrix', or point --storage at one of its "
                              "cells (cells/<model>/<benchmark>) or elsewhere")
        if existing is not None and existing.fingerprint != digest and not settings.force:
            if self.name is not None:
                raise FingerprintMismatch(
                    f"the cell {self.name} holds a run of other settings "
                    f"({describe_difference(existing.fingerprint_fields, redact(fields))}); put the entry back as it "
                    "was, or give it another key (key: ...) to make a new cell")
            raise FingerprintMismatch(
                f"{store.uri} holds a run of another configuration "
                f"({describe_difference(existing.fingerprint_fields, redact(fields))}); "
                "use another --storage, or --force to delete its records and start over"
            )
        size = benchmark.size()
        n_tasks = min(size, settings.limit) if size is not None and settings.limit is not None else size
        resumed = existing is not None and not settings.force
        widest = settings.limit
        if resumed and settings.limit is not None:
            previous = existing.benchmark.widest_limit
            widest = None if previous is None else max(previous, settings.limit)
        info = BenchmarkInfo(name=benchmark.name, version=benchmark.version, scoring_version=benchmark.scoring_version,
                             n_tasks=n_tasks, limit=settings.limit, widest_limit=widest)
        if resumed:
            self.manifest = existing.model_copy(update={"updated_at": utc_now(), "benchmark": info,
                                                        "n_repeats": settings.repeats, "config": request.config,
                                                        "runner_version": __version__})
            self.clear = False
        else:
            self.manifest = RunManifest(run_id=new_run_id(), fingerprint=digest, fingerprint_fields=fields,
                                        benchmark=info, n_repeats=settings.repeats, config=request.config,
                                        runner_version=__version__)
            self.clear = settings.force
        assert self.keeper is not None, "owned() first"
        self.keeper.bind_run(self.manifest.run_id)
        return self.manifest

    def list_done(self) -> set[tuple[str, int]]:
        """List what the run keeps, once: the items with a record (none when the run starts over), less the failed
        ones that run again (``rerun_failed``); what the plan skips and what the budget counts as spent before.

        Raises:
            StorageError: the store cannot be listed.
        """
        settings = self.request.settings
        done = set() if self.clear else self.store.done_items()
        self._failed = self.store.failed_items() if settings.rerun_failed and done else set()
        self._resumable = done - self._failed
        return self._resumable

    @property
    def kept(self) -> set[tuple[str, int]]:
        """What :meth:`list_done` found the run keeps."""
        return self._resumable

    def plan(self, traffic: TrafficControl) -> Planned:
        """The run's plan (:attr:`planned`): every item without a record (or with an error record, with
        ``rerun_failed``), gated by ``traffic`` (a spent budget hands out no item); after :meth:`list_done`.

        Raises:
            BenchmarkError: the benchmark yields no task at all.
        """
        settings, request, resumable = self.request.settings, self.request, self._resumable
        # Records of tasks past a lowered limit are counted too (their positions are known only inside the records).
        already_done = sum(1 for _, repeat in resumable if repeat < settings.repeats)
        plan = Plan(request.benchmark, settings.repeats, settings.limit, resumable, cell=self.cell)
        items = traffic.gate(iter(plan))
        first = next(items, None)
        if first is None and plan.exhausted and plan.n_tasks == 0:
            raise BenchmarkError(
                f"the benchmark {request.benchmark.name!r} yielded no tasks, so there is nothing to run; nothing was "
                "written; check its data and arguments (--data-dir, -B)")
        self.planned = Planned(plan, items, first, plan.expected_items(), already_done, self._failed)
        return self.planned

    def context(self, traffic: TrafficControl) -> RunContext:
        """What every item of the run shares, for the executor (after :meth:`check`)."""
        request = self.request
        assert self.manifest is not None, "check() first"
        return RunContext(request.benchmark, request.solution, request.store, self.manifest.run_id,
                          request.settings, traffic.cache, request.replicas, request.model_environment(),
                          request.weights)

    def begin(self, executor: _Described, traffic: TrafficControl,
              on_stop: Callable[[ServerStop], None] | None = None) -> Progress:
        """The run's first writes, once the executor has started: earlier records dropped (``force``), failed ones
        retired (``rerun_failed``), ``run.json`` written, the ``run.start`` line; then its compactor and its
        :class:`Progress` (:attr:`progress`; ``on_stop``: takes a server watch's stop instead of raising it, see
        :class:`Progress`).

        Raises:
            LeaseLost: another driver took the run over meanwhile.
            StorageError: the store refused a write.
        """
        store, log, planned, manifest = self.store, structlog.get_logger("runner"), self.planned, self.manifest
        assert planned is not None and manifest is not None and self.keeper is not None, "plan() first"
        self.end_progress()  # a matrix's cell planned again (its model failed to load before)
        self._progress_ended = False
        self.keeper.check()
        if self.clear:
            store.clear()
        if planned.failed:
            store.retire(planned.failed)
            log.info("run.rerun_failed", retired=len(planned.failed), detail="error and timeout records moved to retired/")
        store.write_manifest(manifest)
        log.info("run.start", benchmark=self.request.benchmark.name, storage=store.uri, executor=executor.name,
                 repeats=self.request.settings.repeats, already_done=planned.already_done, to_run=planned.expected)
        self.compactor = self._compactor()
        self.progress = Progress(planned.expected, bar=self.request.progress_bar,
                                 details=lambda: {**traffic.progress_fields(), **executor.details()},
                                 heartbeat_s=progress_module.HEARTBEAT_S,  # read here, so a test can shorten it
                                 headline=self.request.benchmark.headline_metrics, run_id=manifest.run_id,
                                 sink=functools.partial(store.write_file, PROGRESS_FILE),
                                 file_s=progress_module.PROGRESS_FILE_S,
                                 on_done=self.compactor.acknowledged if self.compactor is not None else None,
                                 on_stop=on_stop)
        return self.progress

    def _compactor(self) -> Compactor | None:
        """The run's compactor of result shards (:mod:`runner.storage.compaction`), or ``None``: ``--shards off``,
        or ``auto`` on a local disk or shared filesystem (where a record file costs next to nothing to list and
        read)."""
        store, mode = self.store, self.request.settings.shards
        if mode == "off" or (mode == "auto" and (store.is_local or store.is_process_local)):
            return None
        from runner.storage.compaction import Compactor  # pyarrow, loaded only by a run that writes shards

        assert self.keeper is not None
        return Compactor(store, headline=self.request.benchmark.headline_metrics, check=self.keeper.check)

    async def abandon(self) -> None:
        """The run stopped before its end: the compactor stops (the next run's finish adopts what is left) and the
        progress file says the run ended."""
        if self.compactor is not None:
            await asyncio.to_thread(self.compactor.close)
            self.compactor = None
        self.end_progress()

    def end_progress(self) -> None:
        """Stop the progress bar, the heartbeat and the progress file, which is written a last time (once: a second
        call does nothing)."""
        if self.progress is not None and not self._progress_ended:
            self._progress_ended = True
            self.progress.close()

    async def finish(self, traffic: TrafficControl | None) -> None:
        """The run's end (its items all acknowledged): the compactor adopts and compacts what is left, the traffic's
        final state goes to ``limits.json`` (``traffic`` ``None``: a matrix writes it at its root), and once the
        plan saw every task position ``run.json``'s task counts are made its.

        Raises:
            RunStopped: ``run.json`` cannot be written (the same command resumes).
        """
        self.end_progress()
        if self.compactor is not None:
            await asyncio.to_thread(self.compactor.finish)
            self.compactor = None
        if traffic is not None:
            traffic.write(self.store)
        self._count_tasks()

    def _count_tasks(self) -> None:
        planned, manifest = self.planned, self.manifest
        assert planned is not None and manifest is not None
        plan = planned.plan
        if not plan.exhausted:
            return
        counted = {"n_tasks": plan.n_tasks, "duplicate_tasks": plan.duplicate_tasks}
        if manifest.benchmark.model_dump(include=set(counted)) != counted:
            manifest.benchmark = manifest.benchmark.model_copy(update=counted)
            try:
                self.store.write_manifest(manifest)
            except StorageError as exc:
                raise interrupted(exc) from None

    def finished_lines(self) -> None:
        """The run's last lines: nothing to do, records of another writer, ``run.finished``."""
        log, planned, progress = structlog.get_logger("runner"), self.planned, self.progress
        assert planned is not None and progress is not None
        plan = planned.plan
        if progress.done == 0 and plan.exhausted:
            log.info("run.nothing_to_do", detail="every item already has a record file; nothing was executed")
        if progress.duplicates:
            log.warning("run.records_of_another_writer", items=progress.duplicates,
                        detail="items whose record another writer had stored when their first attempt ended (kept "
                        "as they were): a process that writes to this storage without the run's lease")
        log.info("run.finished", **({"cell": self.name} if self.name else {}), executed=progress.done,
                 errors=progress.errors,
                 duplicate_tasks=plan.duplicate_tasks, written_by_another=progress.duplicates,
                 seconds=round(time.monotonic() - self.started, 3))

    @property
    def stopped_by_budget(self) -> bool:
        """Whether items were left because the budget was spent (some were kept from starting, or the plan was
        not used up)."""
        planned, progress = self.planned, self.progress
        assert planned is not None and progress is not None
        return bool(progress.skipped) or not planned.plan.exhausted

    def items_line(self) -> str:
        """How many items are done, of how many: ``12 of 40`` (the total when it is known)."""
        planned, progress = self.planned, self.progress
        assert planned is not None and progress is not None
        done = planned.already_done + progress.done
        total = f" of {planned.already_done + planned.expected}" if planned.expected is not None else ""
        return f"{done}{total}"


def budget_stop(traffic: TrafficControl, items: str) -> BudgetExhausted:
    """The stop of a run whose budget is spent with items left (``items``: how many are done, in words)."""
    return BudgetExhausted(f"the budget is spent: {traffic.budget_line()}; {items} items are done; run the same "
                           "command with a larger budget to resume")


def interrupted(exc: StorageError) -> RunStopped:
    """A storage failure after the run started writing, as a fault (exit status 3) rather than bad input."""
    return RunStopped(f"{exc}; the run stopped after it started writing: the records written so far are kept, "
                      "and the same command resumes once this is fixed")


def _new_folders(path: str) -> list[str]:
    """The folders of ``path`` and its parents that do not exist yet, deepest first."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing
