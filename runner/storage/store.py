"""The result store: records, the run manifest and reports, on any fsspec filesystem.

Layout under the run URI::

    run.json                          RunManifest
    records/<task-key>/<repeat>.json  one TaskRecord each, written once and whole
    shards/<digest>.parquet           finished records consolidated (:mod:`runner.storage.shards`, written by
                                      :class:`runner.storage.compaction.Compactor`)
    summary.json  results.csv         written by the report
    limits.json                       the model traffic of the latest invocation (rates, 429s, budget)

Promises: a record's existence, as an object or as a shard's row, means "done"; a reader never sees half a record
(local disk: temp file then ``os.link``, which fails rather than overwrite; object stores: one conditional write,
each store's own primitive, ``If-None-Match: *`` on S3 and Azure Blob, ``ifGenerationMatch=0`` on GCS
(:mod:`runner.storage.protocols`), which
:func:`runner.storage.probe.check_conditional_writes` probes once per run); a refused write whose stored record
carries this write's id (its response was lost, a retry was refused) is this write's success; a record write
outlives a storage outage of up to :attr:`ResultStore.outage_s` (:mod:`runner.storage.outage`), a store that hangs
included (:mod:`runner.storage.deadline`); resume needs one
listing of ``records/`` and of ``shards/`` and one read of each shard; reading records holds at most one bounded batch of them at once
(:mod:`runner.storage.reading`). The code talks to ``fsspec.url_to_fs`` only, never to a backend, except for the
local temp-file-and-link write (:mod:`runner.storage.local_disk`), which no fsspec primitive gives.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import fsspec
import structlog

from runner.core.errors import RunStopped, StorageError, exception_line
from runner.core.record import TaskRecord
from runner.storage import credentials, deadline, local_disk, reading, shards
from runner.storage.error_kinds import advice
from runner.storage.keys import encode_key
from runner.storage.manifest import RunManifest, utc_now
from runner.storage.reading import item_of
from runner.core.secrets import mask, redact
from runner.storage.outage import OutageGuard
from runner.storage.protocols import LOCAL_PROTOCOLS

_log = structlog.get_logger("runner")

MANIFEST = "run.json"
RECORDS = "records"
RETIRED = "retired"
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


def normalize_uri(uri: str) -> str:
    """A plain path becomes an absolute ``file://`` URI (so every worker of a local cluster writes to the same
    place); URIs with a protocol are kept; trailing slashes are dropped."""
    if "://" not in uri:
        uri = "file://" + os.path.abspath(os.path.expanduser(uri))
    return uri.rstrip("/") if not uri.endswith("://") else uri


class ResultStore:
    """Records of one run on an fsspec filesystem.

    Args:
        uri: the run's URI: a path, ``file://``, ``memory://``, ``s3://bucket/prefix`` or any fsspec URL. ``None``
            leaves it to the evaluator, which uses ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: passed to ``fsspec.url_to_fs`` (e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``
            for S3). Credentials otherwise come as each cloud's tools expect them: S3 from the standard ``AWS_*``
            variables (including ``AWS_ENDPOINT_URL``), GCS from Application Default Credentials, Azure Blob from
            ``AZURE_STORAGE_ACCOUNT_NAME`` with ``DefaultAzureCredential`` or ``AZURE_STORAGE_CONNECTION_STRING``
            (:mod:`runner.storage.protocols`). Options are never logged or written to the manifest.
        flag: the option that named this store, when it is not the run's storage (``--cache``): its errors name it
            (``cannot open the --cache storage ...; check the --cache URI ...``).

    Attributes a run sets before its records are written (they travel to Ray workers with the store):
        outage_s: seconds a record write retries a store that fails with errors that look temporary (0, the
            default outside a run: a failure is raised at once); it also bounds each call to an object store
            (:mod:`runner.storage.deadline`), so that a store that hangs fails within it.
        conditional: whether writes use the store's conditional write (``If-None-Match: *``,
            ``ifGenerationMatch=0``); ``False`` only after the probe found a store that ignores it and the user
            allowed that (an existence check, then a plain write).

    The store pickles without its filesystem object and its outage state, so it can be shipped to Ray workers.
    """

    def __init__(self, uri: str | None = None, storage_options: dict[str, Any] | None = None, *,
                 flag: str | None = None) -> None:
        self._uri = normalize_uri(uri) if uri else None
        self.storage_options = dict(storage_options or {})
        self.flag = flag
        self.outage_s = 0.0
        self.conditional = True
        self._fs: fsspec.AbstractFileSystem | None = None
        self._root: str | None = None
        self._guard: OutageGuard | None = None
        self.uri_is_default = False  # no URI given: bind_default bound the default

    # -- identity -------------------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The run URI. Raises ``StorageError`` when none was given and no default was bound."""
        if self._uri is None:
            raise StorageError("no storage URI: pass one (e.g. --storage ./runs/my-run)")
        return self._uri

    @property
    def has_uri(self) -> bool:
        """Whether a URI was given or bound."""
        return self._uri is not None

    def bind_default(self, uri: str) -> None:
        """Use ``uri`` if the store was created without one (:attr:`uri_is_default` then holds)."""
        if self._uri is None:
            self._uri = normalize_uri(uri)
            self.uri_is_default = True

    def child(self, path: str) -> ResultStore:
        """The store of the run at ``path`` under this one's URI (a matrix's cell), with the same options."""
        return ResultStore(f"{self.uri}/{path.strip('/')}", self.storage_options, flag=self.flag)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None
        state["_root"] = None
        state["_guard"] = None
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._uri!r})"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem (created on first use)."""
        if self._fs is None:
            try:
                fs, root = fsspec.url_to_fs(self.uri, **self.storage_options)
            except Exception as exc:  # noqa: BLE001 - a missing backend, a bad option, a server that refuses: one line
                opened = f"the {self.flag} storage" if self.flag else "storage"
                raise StorageError(self.explain(f"cannot open {opened}", exc)) from None
            credentials.check(fs, mask(self.uri))
            self._fs, self._root = fs, root
        return self._fs

    @property
    def root(self) -> str:
        """The run's path inside :attr:`fs`."""
        self.fs  # noqa: B018 - creates _root
        assert self._root is not None
        return self._root

    @property
    def is_local(self) -> bool:
        """Whether the store is on a local disk."""
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return bool(protocols & LOCAL_PROTOCOLS)

    @property
    def is_process_local(self) -> bool:
        """Whether the store lives in this process's memory (``memory://``): any other process, a Ray worker or a
        pod, opens an empty store of its own there, so what it writes never reaches this one."""
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return "memory" in protocols

    @property
    def outage(self) -> OutageGuard:
        """This process's view of a storage outage (:mod:`runner.storage.outage`), with :attr:`outage_s`."""
        if self._guard is None:
            self._guard = OutageGuard(self.outage_s, mask=lambda text: mask(text, self.storage_options))
        self._guard.limit_s = self.outage_s
        return self._guard

    def _call(self, method: str, *args: Any, nbytes: int = 0, **kwargs: Any) -> Any:
        """``fs.<method>(*args, **kwargs)`` for one object of ``nbytes`` bytes, within its deadline during a run
        (:mod:`runner.storage.deadline`: a store that hangs fails with a ``TimeoutError``, which looks temporary)."""
        return deadline.call(self.fs, method, *args, seconds=deadline.deadline(self.outage_s, nbytes), **kwargs)

    def path(self, *parts: str) -> str:
        """The filesystem path of ``parts`` under the run root."""
        return "/".join([self.root, *parts])

    def record_path(self, task_id: str, repeat: int) -> str:
        """Where the record of (``task_id``, ``repeat``) lives."""
        return self.path(RECORDS, encode_key(task_id), f"{repeat}.json")

    # -- writing ----------------------------------------------------------------------------------------------

    def write_once(self, path: str, data: bytes) -> bool:
        """Write ``data`` to ``path`` whole, unless ``path`` exists; return whether this call wrote it. One try: a
        failure is raised at once (see :meth:`write_record` for the write that outlives outages).

        Raises:
            StorageError: the store cannot be written.
        """
        return self._write_once(path, data, outlast=False)

    def _write_once(self, path: str, data: bytes, outlast: bool) -> bool:
        what = f"write {self.display(path)}"
        try:
            if outlast:
                self.outage.call(what, lambda: self.create(path, data))
            else:
                self.create(path, data)
            return True
        except FileExistsError:
            return False
        except RunStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes one clear line
            raise StorageError(self.explain(f"cannot {what}", exc)) from None

    def create(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` whole, in one try (see :attr:`conditional`): the primitive under
        :meth:`write_once`, for callers that read the backend's exception themselves. On an object store it is
        fsspec's ``pipe_file(..., mode="create")``, which s3fs, gcsfs and adlfs each send as their store's conditional
        write and answer with ``FileExistsError`` when the key exists (:mod:`runner.storage.protocols`).

        Raises:
            FileExistsError: ``path`` exists.
            Exception: whatever the backend raises.
        """
        if self.is_local:
            local_disk.write_once(path, data)
        elif self.conditional:
            self._call("pipe_file", path, data, mode="create", nbytes=len(data))
        elif self._call("exists", path):
            raise FileExistsError(path)
        else:
            self._call("pipe_file", path, data, nbytes=len(data))

    def write_file(self, name: str, data: bytes) -> None:
        """Replace the run-level file ``name`` (``run.json``, ``summary.json``...) whole.

        Raises:
            StorageError: the store cannot be written.
        """
        path = self.path(name)
        try:
            if self.is_local:
                local_disk.replace(path, data)
            else:
                self._call("pipe_file", path, data, nbytes=len(data))
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot write {self.display(path)}", exc)) from None

    def remove_file(self, name: str) -> None:
        """Delete the run-level file ``name``; nothing if it is absent.

        Raises:
            StorageError: the store cannot be written.
        """
        path = self.path(name)
        try:
            self._call("rm_file", path)
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot delete {self.display(path)}", exc)) from None

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
        what = f"read {self.display(path)}"
        try:
            data = self.outage.call(what, lambda: self._call("cat_file", path))
        except FileNotFoundError:
            return None
        except RunStopped:
            raise
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot {what}", exc)) from None
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

    # -- reading ----------------------------------------------------------------------------------------------

    def read_manifest(self) -> RunManifest | None:
        """The run's manifest, or ``None`` if the URI holds no run yet.

        Raises:
            StorageError: the store cannot be reached, or ``run.json`` is not a manifest.
        """
        path = self.path(MANIFEST)
        try:
            data = self._call("cat_file", path)
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

    def read_file(self, name: str) -> bytes | None:
        """The bytes of the run-level file ``name``, or ``None`` if absent."""
        try:
            return self._call("cat_file", self.path(name))
        except FileNotFoundError:
            return None

    def list_record_paths(self) -> list[str]:
        """Paths of every record object, by one listing of ``records/`` (temp files of interrupted writes
        excluded): the records not yet consolidated into a shard, and the large ones shard rows point to."""
        return sorted(self.record_sizes())

    def record_sizes(self) -> dict[str, int]:
        """Path -> size in bytes of every record object, from one listing of ``records/``.

        Raises:
            StorageError: the store cannot be listed.
        """
        return self._find(RECORDS, _is_record)

    def shard_sizes(self) -> dict[str, int]:
        """Path -> size in bytes of every result shard, from one listing of ``shards/`` (:mod:`runner.storage.shards`).

        Raises:
            StorageError: the store cannot be listed.
        """
        return self._find(shards.SHARDS, shards.is_shard)

    def listing(self) -> tuple[dict[str, int], dict[str, int]]:
        """:meth:`record_sizes` and :meth:`shard_sizes`, ``records/`` listed before ``shards/``
        (:class:`~runner.storage.reading.Scan` needs that order). On an object store from one listing of the run,
        whose keys come in order: a listing of a prefix that holds nothing costs three requests (the listing, then
        whether the prefix is itself an object), and once the records are in shards ``records/`` is often empty.

        Raises:
            StorageError: the store cannot be listed.
        """
        if self.is_local or self.is_process_local:
            # A walk of a folder tree visits folders in no fixed order, and costs no request: records/ first.
            return self.record_sizes(), self.shard_sizes()
        found = self._find(None, lambda path: _is_record(path) or shards.is_shard(path))
        records_at, shards_at = self.path(RECORDS) + "/", self.path(shards.SHARDS) + "/"
        return ({path: size for path, size in found.items() if path.startswith(records_at)},
                {path: size for path, size in found.items() if path.startswith(shards_at)})

    def _find(self, folder: str | None, keep: Callable[[str], bool]) -> dict[str, int]:
        """Path -> size of the files under ``folder`` (``None``: the run) that ``keep`` accepts, sorted by path."""
        where = self.path(folder) if folder else self.root
        try:
            found = self.fs.find(where, detail=True)
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot list {self.display(where)}", exc)) from None
        return {path: int(info.get("size") or 0) for path, info in sorted(found.items()) if keep(path)}

    def done_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record: the rows of the shards and a listing of the record objects
        (:class:`~runner.storage.reading.Scan`: one listing of ``records/``, one of ``shards/``, one read of each
        shard)."""
        return {stored.item for stored in reading.Scan(self, read_objects=False)}

    def record_status(self, task_id: str, repeat: int) -> str | None:
        """The status of the stored record object of (``task_id``, ``repeat``), or ``None`` if it has none.

        Read before an item runs again after its worker died: the dead worker may have stored it already. Shards
        are not consulted: a record enters a shard only once the driver acknowledged its item, and the driver
        never sends an acknowledged item again (docs/storage.md, "Result shards").
        """
        try:
            data = self._call("cat_file", self.record_path(task_id, repeat))
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
        scan = reading.Scan(self, ("record", "record_path"))
        large: dict[str, TaskRecord] = {}
        held = 0
        for stored in scan:
            if stored.row is None:
                checked = self._checked(stored.path, stored.record, left_out)
                if checked is not None:
                    yield checked
                continue
            record = TaskRecord.model_validate_json(stored.row["record"])
            pointed = stored.row["record_path"]
            if not full or pointed is None:
                yield record
                continue
            large[self.path(pointed)] = record
            held += scan.objects.get(self.path(pointed), 0)
            if len(large) >= reading.READ_BATCH or held >= reading.READ_BATCH_BYTES:
                yield from self._read_pointed(large, scan.objects)
                large, held = {}, 0
        if left_out is not None:
            left_out.unreadable_shards.extend(mask(self.display(path)) for path in scan.unreadable_shards)
        yield from self._read_pointed(large, scan.objects)

    def _read_pointed(self, rows: dict[str, TaskRecord], sizes: dict[str, int]) -> Iterator[TaskRecord]:
        """The full records of large rows (object path -> the row's record) from their objects; the row's record
        when its object is gone or damaged (from outside the runner: a retirement rewrites the shard first)."""
        found = reading.parse_records(self.fs, {path: sizes.get(path, 0) for path in rows})
        for path, record in found:
            slim = rows.pop(path)
            yield record if record is not None and record.write_id == slim.write_id else slim
        for path, slim in rows.items():
            _log.warning("store.missing_record_object", path=mask(self.display(path)), task_id=slim.task_id,
                         repeat=slim.repeat, detail="a shard's row points to this record object, which is gone: "
                         "its input, output and trajectory are not shown")
            yield slim

    def read_record_objects(self, paths: Iterable[str],
                            left_out: UnusableFiles | None = None) -> Iterator[TaskRecord]:
        """The records of the record objects at ``paths`` (from :meth:`list_record_paths`), read in bounded
        batches, skipping those :meth:`iter_records` skips."""
        sizes = self.record_sizes()
        wanted = {path: sizes[path] for path in paths if path in sizes}
        for path, record in reading.parse_records(self.fs, wanted):
            checked = self._checked(path, record, left_out)
            if checked is not None:
                yield checked

    def _checked(self, path: str, record: TaskRecord | None, left_out: UnusableFiles | None) -> TaskRecord | None:
        """``record``, read from the object at ``path``, or ``None`` (logged, and noted in ``left_out``) when it
        does not parse or is not its path's item's."""
        if record is None:
            _log.warning("store.unreadable_record", path=mask(self.display(path)),
                         detail="not a valid record; --rerun-failed retires it and runs its item again")
            if left_out is not None:
                left_out.unreadable.append(mask(self.display(path)))
            return None
        if item_of(path) != (encode_key(record.task_id), record.repeat):
            _log.warning("store.misplaced_record", path=mask(self.display(path)), task_id=record.task_id,
                         repeat=record.repeat, detail="this file holds the record of another item (a copy "
                         "made outside the runner): it is not counted; remove it")
            if left_out is not None:
                left_out.misplaced.append(mask(self.display(path)))
            return None
        return record

    # -- run again ---------------------------------------------------------------------------------------------

    def failed_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record whose status is not ``ok``, and of every record object that
        does not parse as a record (damaged outside the runner). Reads the shards' statuses and the record objects
        no shard holds; writes nothing."""
        failed = set()
        for stored in reading.Scan(self, ("status",)):
            status = stored.row["status"] if stored.row is not None else stored.record and stored.record.status
            if status != "ok":
                failed.add(stored.item)
        return failed

    def retire(self, items: Iterable[tuple[str, int]]) -> None:
        """Move the records of ``items`` ((task key, repeat), from :meth:`failed_items`) aside to
        ``retired/<task-key>/<repeat>.<UTC timestamp>.json`` (kept for the audit trail), so that the next plan runs
        those items again: a copy is written first, then the shards that hold them are rewritten without them,
        then their record objects are removed (:func:`runner.storage.compaction.retire`). An interruption leaves
        each item either still failed or retired, never lost.

        Raises:
            StorageError: the store failed (the same command resumes the retirement).
        """
        from runner.storage import compaction  # pyarrow, loaded only where shards are rewritten

        compaction.retire(self, set(items), utc_now().replace(":", "").replace("-", ""))

    # -- start over -------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Delete this run's records, shards, retired records, manifest and reports (``--force``); other files under
        the URI stay."""
        for name in (MANIFEST, *REPORT_FILES):
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self.path(name))
        for folder in (RECORDS, shards.SHARDS, RETIRED):
            with contextlib.suppress(FileNotFoundError):
                if self.fs.exists(self.path(folder)):
                    self.fs.rm(self.path(folder), recursive=True)

    # -- messages ---------------------------------------------------------------------------------------------

    def display(self, path: str) -> str:
        """``path`` as the user wrote the run URI: a local path as is, else the URI followed by the path under it
        (filesystems differ in whether their paths keep the protocol, so it is never added to a path twice), with
        a password in the URI masked."""
        if self._fs is None or self.is_local:
            return path
        if self._root is not None and path.startswith(self._root):
            return mask(self.uri + path[len(self._root):])
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return mask(path if "://" in path else f"{protocol}://{path.lstrip('/')}")

    def explain(self, what: str, exc: BaseException) -> str:
        """One line: ``what``, the cause and the advice that fits it (:func:`runner.storage.error_kinds.advice`), with
        every secret masked (:func:`runner.core.secrets.mask`: secret storage options, a URL's password, a
        connection string's key)."""
        detail = exception_line(exc)
        return mask(f"{what} ({detail}); {advice(self._uri, exc, self.flag)}", self.storage_options)


def _is_record(path: str) -> bool:
    """Whether ``path``, under ``records/``, names a record object (not a temp file of an interrupted local
    write)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".json") and not name.startswith(".")


@dataclass
class UnusableFiles:
    """The files that :meth:`ResultStore.iter_records` skipped, by path as the user writes it: record objects that
    are ``unreadable`` (not a record) or ``misplaced`` (the record of another item than their path's), and
    ``unreadable_shards`` (files under ``shards/`` that are not shards)."""

    unreadable: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    unreadable_shards: list[str] = field(default_factory=list)


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
