"""The result store: records, the run manifest and reports, on any fsspec filesystem.

Layout under the run URI::

    run.json                          RunManifest
    records/<task-key>/<repeat>.json  one TaskRecord each, written once and whole
    shards/<digest>.parquet           finished records consolidated (:mod:`runner.storage.shards`, written by
                                      :class:`runner.storage.compaction.Compactor`)
    retired/<task-key>/<repeat>.<UTC timestamp>.json  records --rerun-failed moved aside (:meth:`ResultStore.retire`)
    summary.json  results.csv         written by the report
    limits.json                       the model traffic of the latest invocation (rates, 429s, budget)

Promises: a record's existence, as an object or as a shard's row, means "done"; a reader never sees half a record
(local disk: temp file then ``os.link``, which fails rather than overwrite; object stores: one conditional write,
each store's own primitive, ``If-None-Match: *`` on S3 and Azure Blob, ``ifGenerationMatch=0`` on GCS
(:mod:`runner.storage.protocols`), which :func:`runner.storage.probe.check_conditional_writes` probes once per
run); a refused write whose stored record carries this write's id (its response was lost, a retry was refused) is
this write's success; a record write outlives a storage outage of up to :attr:`ResultStore.outage_s`
(:mod:`runner.storage.outage`), a store that hangs included (:mod:`runner.storage.deadline`); resume needs one
listing of ``records/`` and of ``shards/`` and one read of each shard; reading records holds at most one bounded
batch of them at once (:mod:`runner.storage.reading`). The code talks to ``fsspec.url_to_fs`` only, never to a
backend, except for the local temp-file-and-link write (:mod:`runner.storage.local_disk`), which no fsspec primitive
gives.

Three layers, each its own module, none importing a later one: the object store (:mod:`runner.storage.object_store`:
fsspec, the conditional write, outages, deadlines and advice), the run's layout over it
(:mod:`runner.storage.layout`: the names above, and the listings of ``records/`` and ``shards/``), which the readers
(:mod:`runner.storage.reading`), the shards and the compactor take, and :class:`ResultStore` here, the run's records
and manifest written and read over the layout, the name users and the engine know.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.core.secrets import redact
from runner.storage import reading
from runner.storage.layout import MANIFEST, RECORDS, RETIRED, SHARDS, RunLayout
from runner.storage.manifest import RunManifest, utc_now
from runner.storage.reading import UnusableFiles

LIMITS_FILE = "limits.json"
"""The model traffic of the run's latest invocation (rates, 429s, pauses, budget), written by the driver."""
MATRIX_FILE = "matrix.json"
"""What marks an evaluation matrix's root (its cells are runs under ``cells/``); a run is refused there."""
PROGRESS_FILE = "progress.json"
"""What the driver of a run that executes says about it (counts, rate, ETA, running means), at most 10 s old."""
REPORT_FILES = ("summary.json", "results.csv", LIMITS_FILE, PROGRESS_FILE)

_RUNS_WRITTEN: list[ResultStore] = []


def runs_written() -> list[ResultStore]:
    """The stores of the runs this process has started writing (written ``run.json`` to, which a run does before
    any record), oldest first: an interrupted command says from them whether anything it ran is kept."""
    return list(_RUNS_WRITTEN)


class ResultStore(RunLayout):
    """Records of one run on an fsspec filesystem.

    Args:
        uri: the run's URI: a path, ``file://``, ``memory://``, ``s3://bucket/prefix`` or any fsspec URL. ``None``
            leaves it to the evaluator, which uses ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: passed to ``fsspec.url_to_fs``; credentials otherwise come as each cloud's tools expect
            them (:class:`~runner.storage.object_store.ObjectStore` says how). Never logged or written to the
            manifest.
        flag: the option that named this store, when it is not the run's storage (``--cache``): its errors name it.

    Attributes a run sets before its records are written (they travel to Ray workers with the store):
        outage_s: seconds a record write retries a store that fails with errors that look temporary (0, the
            default outside a run: a failure is raised at once); it also bounds each call to the object store.
        conditional: whether writes use the store's conditional write; ``False`` only after the probe found a store
            that ignores it and the user allowed that.

    The store pickles without its filesystem object and its outage state, so it can be shipped to Ray workers.
    What it does on the filesystem is its :class:`~runner.storage.object_store.ObjectStore`'s, where each object of
    the run lives its :class:`~runner.storage.layout.RunLayout`'s; this class writes and reads the run's records and
    manifest over them.
    """

    def child(self, path: str) -> ResultStore:
        """The store of the run at ``path`` under this one's URI (a matrix's cell), with the same options."""
        return ResultStore(f"{self.uri}/{path.strip('/')}", self.storage_options, flag=self.flag)

    # -- writing ----------------------------------------------------------------------------------------------

    def write_record(self, record: TaskRecord) -> bool:
        """Store ``record`` once; whether this call stored it.

        The record gets a fresh ``write_id`` (unless it has one). When the store already holds a record of that
        (task, repeat), it is kept as it is, and this call stored it only if that record carries this write's
        run id, task, repeat, attempt and write id: a write whose response was lost after the store took it, and
        whose retry was then refused. Failures that look temporary are retried for up to :attr:`outage_s`.

        Raises:
            StorageOutage: the store kept failing for :attr:`outage_s` seconds (exit status 3).
            StorageError: any other failure.
        """
        return self.store_record(record) is not None

    def store_record(self, record: TaskRecord) -> bytes | None:
        """:meth:`write_record`, returning the record's JSON as this call stored it (``None``: it did not store
        it), for a caller that hands it on (the driver's compactor of result shards).

        Raises:
            StorageOutage, StorageError: as :meth:`write_record`.
        """
        if record.write_id is None:
            record = record.model_copy(update={"write_id": uuid.uuid4().hex})
        path = self.record_path(record.task_id, record.repeat)
        data = record.model_dump_json().encode()
        if self._write_once(path, data, outlast=True):
            return data
        stored = self._stored_record(path)
        return data if stored is not None and _same_write(stored, record) else None

    def _stored_record(self, path: str) -> TaskRecord | None:
        """The record at ``path`` (``None`` if absent or damaged), read through outages like a write."""
        data = self.read_outlasting(path)
        if data is None:
            return None
        try:
            return TaskRecord.model_validate_json(data)
        except ValueError:
            return None

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write ``run.json``, its configuration and fingerprint fields without secrets (:func:`redact`: a
        password in a URL, a key in ``benchmark_args``); the fingerprint itself is of the real values."""
        public = manifest.model_copy(update={"config": redact(manifest.config),
                                             "fingerprint_fields": redact(manifest.fingerprint_fields)})
        self.write_file(MANIFEST, public.model_dump_json(indent=2).encode())
        if not any(store is self for store in _RUNS_WRITTEN):
            _RUNS_WRITTEN.append(self)

    def read_manifest(self) -> RunManifest | None:
        """The run's manifest, or ``None`` if the URI holds no run yet.

        Raises:
            StorageError: the store cannot be reached, or ``run.json`` is not a manifest.
        """
        path = self.path(MANIFEST)
        try:
            data = self.call("cat_file", path)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot reach storage {self.display(self.root)}", exc)) from None
        try:
            return RunManifest.model_validate_json(data)
        except ValueError:
            raise StorageError(
                f"{self.display(path)} is not a run manifest of this runner; point --storage at a new folder"
            ) from None

    def done_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record: the rows of the shards and a listing of the record objects
        (:func:`runner.storage.reading.done_items`: one listing of ``records/``, one of ``shards/``, one read of
        each shard)."""
        return reading.done_items(self)

    def record_status(self, task_id: str, repeat: int) -> str | None:
        """The status of the stored record object of (``task_id``, ``repeat``), or ``None`` if it has none.

        Read before an item runs again after its worker died: the dead worker may have stored it already. Shards
        are not consulted: a record enters a shard only once the driver acknowledged its item, and the driver
        never sends an acknowledged item again (docs/storage.md, "Result shards").
        """
        try:
            data = self.call("cat_file", self.record_path(task_id, repeat))
        except FileNotFoundError:
            return None
        return TaskRecord.model_validate_json(data).status

    def iter_records(self, left_out: UnusableFiles | None = None, *, full: bool = True) -> Iterator[TaskRecord]:
        """Yield every stored record once: those of the shards, then the record objects no shard holds
        (:class:`~runner.storage.reading.Scan`), fetched in batches (concurrently on object stores).

        Args:
            left_out: collects the files skipped (below).
            full: yield a large record (one whose row points to its own object, :data:`~runner.storage.shards.
                INLINE_RECORD_BYTES`) whole, fetching its object; ``False``: as its row holds it, without its
                input, output, trajectory and solution metadata (what a summary needs, without a request per
                large record).

        Three kinds of file are skipped with a warning naming them (all come from outside the runner: records are
        written whole, each at its own item's path), and listed in ``left_out`` when given:

        - a record object that does not parse (``store.unreadable_record``): ``--rerun-failed`` retires it and runs
          its item again;
        - a record object that holds the record of another item than its path names (``store.misplaced_record``:
          a copy), which would count that item twice;
        - a file under ``shards/`` that is not a shard (``store.unreadable_shard``).

        Nothing is held beyond one shard or one batch (:mod:`runner.storage.reading`).
        """
        return reading.records(self, left_out, full=full)

    def read_record_objects(self, paths: Iterable[str],
                            left_out: UnusableFiles | None = None) -> Iterator[TaskRecord]:
        """The records of the record objects at ``paths`` (from :meth:`list_record_paths`), read in bounded
        batches, skipping those :meth:`iter_records` skips (:func:`runner.storage.reading.record_objects`)."""
        return reading.record_objects(self, paths, left_out)

    # -- run again ---------------------------------------------------------------------------------------------

    def failed_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record whose status is not ``ok``, and of every record object that
        does not parse as a record (damaged outside the runner). Reads the shards' statuses and the record objects
        no shard holds; writes nothing (:func:`runner.storage.reading.failed_items`)."""
        return reading.failed_items(self)

    def retire(self, items: Iterable[tuple[str, int]]) -> None:
        """Move the records of ``items`` ((task key, repeat), from :meth:`failed_items`) aside to
        ``retired/<task-key>/<repeat>.<UTC timestamp>.json`` (kept for the audit trail), so that the next plan runs
        those items again: a copy is written first, then the shards that hold them are rewritten without them,
        then their record objects are removed (:func:`runner.storage.compaction.retire`). An interruption leaves
        each item either still failed or retired, never lost.

        Raises:
            StorageError: the store failed (the same command resumes the retirement).
        """
        # pyarrow, loaded only where shards are rewritten
        from runner.storage import compaction

        compaction.retire(self, set(items), utc_now().replace(":", "").replace("-", ""))

    # -- start over -------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Delete this run's records, shards, retired records, manifest and reports (``--force``); other files under
        the URI stay."""
        for name in (MANIFEST, *REPORT_FILES):
            with contextlib.suppress(FileNotFoundError):
                self.delete_object(self.path(name))
        for folder in (RECORDS, SHARDS, RETIRED):
            self.delete_folder(self.path(folder))


def _same_write(stored: TaskRecord, record: TaskRecord) -> bool:
    """Whether ``stored`` is what the write of ``record`` stored (a write id is drawn per write)."""
    fields = ("run_id", "task_id", "repeat", "attempt", "write_id")
    return all(getattr(stored, name) == getattr(record, name) for name in fields)


class FileEvaluatorStorage(ResultStore):
    """AgentScope's name for the result store: ``FileEvaluatorStorage(save_dir)``.

    Args:
        save_dir: the run URI (any path or fsspec URL); ``None`` for ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: fsspec options, as for :class:`ResultStore`.
    """

    def __init__(self, save_dir: str | None = None, storage_options: dict | None = None) -> None:
        super().__init__(save_dir, storage_options)
