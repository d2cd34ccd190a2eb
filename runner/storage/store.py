"""The result store: records, the run manifest and reports, on any fsspec filesystem.

Layout under the run URI::

    run.json                          RunManifest
    records/<task-key>/<repeat>.json  one TaskRecord each, written once and whole
    summary.json  results.csv         written by the report

Promises: a record's existence means "done"; a reader never sees half a record (local disk: temp file then
``os.link``, which fails rather than overwrite; object stores: one conditional PUT, ``If-None-Match: *``); resume
needs one listing of ``records/``. The code talks to ``fsspec.url_to_fs`` only, never to a backend, except for the
local temp-file-and-link write, which no fsspec primitive gives.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import fsspec
import structlog

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.storage.keys import encode_key
from runner.storage.manifest import RunManifest, utc_now
from runner.storage.secrets import mask

_log = structlog.get_logger("runner")

MANIFEST = "run.json"
RECORDS = "records"
RETIRED = "retired"
REPORT_FILES = ("summary.json", "results.csv")
_LOCAL_PROTOCOLS = {"file", "local"}
_READ_BATCH = 256


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
            for S3). S3 credentials and endpoint otherwise come from the standard ``AWS_*`` variables, including
            ``AWS_ENDPOINT_URL``. Options are never logged or written to the manifest.

    The store pickles without its filesystem object, so it can be shipped to Ray workers.
    """

    def __init__(self, uri: str | None = None, storage_options: dict[str, Any] | None = None) -> None:
        self._uri = normalize_uri(uri) if uri else None
        self.storage_options = dict(storage_options or {})
        self._fs: fsspec.AbstractFileSystem | None = None
        self._root: str | None = None
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

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None
        state["_root"] = None
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._uri!r})"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem (created on first use)."""
        if self._fs is None:
            try:
                self._fs, self._root = fsspec.url_to_fs(self.uri, **self.storage_options)
            except (ImportError, ValueError) as exc:
                raise StorageError(self._explain("cannot open storage", exc)) from None
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
        return bool(protocols & _LOCAL_PROTOCOLS)

    @property
    def is_process_local(self) -> bool:
        """Whether the store lives in this process's memory (``memory://``): any other process, a Ray worker or a
        pod, opens an empty store of its own there, so what it writes never reaches this one."""
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return "memory" in protocols

    def path(self, *parts: str) -> str:
        """The filesystem path of ``parts`` under the run root."""
        return "/".join([self.root, *parts])

    def record_path(self, task_id: str, repeat: int) -> str:
        """Where the record of (``task_id``, ``repeat``) lives."""
        return self.path(RECORDS, encode_key(task_id), f"{repeat}.json")

    # -- writing ----------------------------------------------------------------------------------------------

    def write_once(self, path: str, data: bytes) -> bool:
        """Write ``data`` to ``path`` whole, unless ``path`` exists; return whether this call wrote it.

        Raises:
            StorageError: the store cannot be written.
        """
        try:
            if self.is_local:
                return _local_write_once(path, data)
            self.fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return False
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes one clear line
            raise StorageError(self._explain(f"cannot write {self._display(path)}", exc)) from None

    def write_file(self, name: str, data: bytes) -> None:
        """Replace the run-level file ``name`` (``run.json``, ``summary.json``...) whole.

        Raises:
            StorageError: the store cannot be written.
        """
        path = self.path(name)
        try:
            if self.is_local:
                _local_replace(path, data)
            else:
                self.fs.pipe_file(path, data)
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self._explain(f"cannot write {self._display(path)}", exc)) from None

    def write_record(self, record: TaskRecord) -> bool:
        """Store ``record``; ``False`` if a record of that (task, repeat) already exists (it is kept as it is)."""
        data = record.model_dump_json().encode()
        return self.write_once(self.record_path(record.task_id, record.repeat), data)

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write ``run.json``."""
        self.write_file(MANIFEST, manifest.model_dump_json(indent=2).encode())

    # -- reading ----------------------------------------------------------------------------------------------

    def read_manifest(self) -> RunManifest | None:
        """The run's manifest, or ``None`` if the URI holds no run yet.

        Raises:
            StorageError: the store cannot be reached, or ``run.json`` is not a manifest.
        """
        path = self.path(MANIFEST)
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self._explain(f"cannot reach storage {self._display(self.root)}", exc)) from None
        try:
            return RunManifest.model_validate_json(data)
        except ValueError:
            raise StorageError(
                f"{self._display(path)} is not a run manifest of this runner; point --storage at a new folder"
            ) from None

    def read_file(self, name: str) -> bytes | None:
        """The bytes of the run-level file ``name``, or ``None`` if absent."""
        try:
            return self.fs.cat_file(self.path(name))
        except FileNotFoundError:
            return None

    def list_record_paths(self) -> list[str]:
        """Paths of every record, by one listing of ``records/`` (temp files of interrupted writes excluded)."""
        try:
            found = self.fs.find(self.path(RECORDS))
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self._explain(f"cannot list {self._display(self.path(RECORDS))}", exc)) from None
        return sorted(p for p in found if p.endswith(".json") and not p.rsplit("/", 1)[-1].startswith("."))

    def done_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record, from one listing."""
        return {item for item in map(_item_of, self.list_record_paths()) if item is not None}

    def record_status(self, task_id: str, repeat: int) -> str | None:
        """The status of the stored record of (``task_id``, ``repeat``), or ``None`` if it has none.

        Read before an item runs again after its worker died: the dead worker may have stored it already.
        """
        try:
            data = self.fs.cat_file(self.record_path(task_id, repeat))
        except FileNotFoundError:
            return None
        return TaskRecord.model_validate_json(data).status

    def iter_records(self, paths: Iterable[str] | None = None) -> Iterator[TaskRecord]:
        """Yield every stored record (or those at ``paths``), fetched in batches (concurrently on object stores).

        A file that does not parse as a record (damaged outside the runner: records are written whole) is skipped
        with a ``store.unreadable_record`` warning naming it; ``--rerun-errors`` retires it and runs its item
        again. Nothing is held beyond one batch.
        """
        for path, record in self._parse_records(paths):
            if record is None:
                _log.warning("store.unreadable_record", path=mask(self._display(path)),
                                  detail="not a valid record; --rerun-errors retires it and runs its item again")
            else:
                yield record

    def _parse_records(self, paths: Iterable[str] | None = None) -> Iterator[tuple[str, TaskRecord | None]]:
        """``(path, record)`` for every record file (or those at ``paths``); ``record`` is ``None`` when the file
        does not parse. A file removed since the listing is left out."""
        paths = list(self.list_record_paths() if paths is None else paths)
        for start in range(0, len(paths), _READ_BATCH):
            batch = paths[start : start + _READ_BATCH]
            contents = self.fs.cat(batch, on_error="omit") if len(batch) > 1 else {batch[0]: self.fs.cat_file(batch[0])}
            for path in batch:
                data = contents.get(path)
                if data is None:
                    continue
                try:
                    yield path, TaskRecord.model_validate_json(data)
                except ValueError:
                    yield path, None

    # -- run again ---------------------------------------------------------------------------------------------

    def failed_items(self) -> set[tuple[str, int]]:
        """(task key, repeat) of every stored record whose status is not ``ok``, and of every record file that does
        not parse as a record (damaged outside the runner). Reads every record; writes nothing."""
        failed = set()
        for path, record in self._parse_records():
            item = _item_of(path)
            if item is not None and (record is None or record.status != "ok"):
                failed.add(item)
        return failed

    def retire(self, items: Iterable[tuple[str, int]]) -> None:
        """Move the records of ``items`` ((task key, repeat), from :meth:`failed_items`) from ``records/`` to
        ``retired/<task-key>/<repeat>.<UTC timestamp>.json`` (kept for the audit trail), so that the next plan runs
        those items again.

        The copy is written before the record is removed, so an interruption leaves the item either still failed
        or retired, never lost.
        """
        stamp = utc_now().replace(":", "").replace("-", "")
        for key, repeat in items:
            path = self.path(RECORDS, key, f"{repeat}.json")
            self.write_once(self.path(RETIRED, key, f"{repeat}.{stamp}.json"), self.fs.cat_file(path))
            self.fs.rm_file(path)

    # -- start over -------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Delete this run's records, retired records, manifest and reports (``--force``); other files under the URI
        stay."""
        for name in (MANIFEST, *REPORT_FILES):
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self.path(name))
        for folder in (RECORDS, RETIRED):
            with contextlib.suppress(FileNotFoundError):
                if self.fs.exists(self.path(folder)):
                    self.fs.rm(self.path(folder), recursive=True)

    # -- messages ---------------------------------------------------------------------------------------------

    def _display(self, path: str) -> str:
        """``path`` as the user wrote the run URI: a local path as is, else the URI followed by the path under it
        (filesystems differ in whether their paths keep the protocol, so it is never added to a path twice), with
        a password in the URI masked."""
        if self._fs is None or self.is_local:
            return path
        if self._root is not None and path.startswith(self._root):
            return mask(self.uri + path[len(self._root):])
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return mask(path if "://" in path else f"{protocol}://{path.lstrip('/')}")

    def _explain(self, what: str, exc: BaseException) -> str:
        """One line: ``what``, the cause and advice for the protocol, with every secret masked
        (:func:`runner.storage.secrets.mask`: secret storage options, a URL's password, a connection string's key)."""
        detail = f"{type(exc).__name__}: {exc}".strip().rstrip(":").splitlines()[0] if str(exc) else type(exc).__name__
        return mask(f"{what} ({detail}); {_advice(self._uri)}", self.storage_options)


def _advice(uri: str | None) -> str:
    """What to check when the store at ``uri`` fails, for its protocol."""
    protocol = uri.split("://", 1)[0] if uri and "://" in uri else "file"
    if protocol in _LOCAL_PROTOCOLS:
        return "check the storage URI and that this process can write there"
    if protocol in ("s3", "s3a"):
        where = "AWS_* variables or --storage-options"
    elif protocol in ("gs", "gcs"):
        where = "Google Cloud credentials (GOOGLE_APPLICATION_CREDENTIALS) or --storage-options"
    elif protocol in ("az", "abfs", "abfss", "adl"):
        where = "AZURE_STORAGE_* variables or --storage-options"
    else:
        where = f"the {protocol} filesystem's credentials or --storage-options"
    return f"check the storage URI and its credentials ({where})"


def _item_of(path: str) -> tuple[str, int] | None:
    """``(task key, repeat)`` of a record path ``.../records/<task-key>/<repeat>.json``; ``None`` for another file."""
    key, name = path.rsplit("/", 2)[-2:]
    stem = name.removesuffix(".json")
    return (key, int(stem)) if stem.isdigit() else None


def _local_write_once(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` whole, only if ``path`` does not exist (``os.link`` refuses to overwrite).

    Raises:
        FileExistsError: ``path`` exists already.
    """
    _local_write(path, data, os.link)
    return True


def _local_replace(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole, replacing what is there."""
    _local_write(path, data, os.replace)


def _local_write(path: str, data: bytes, place: Callable[[str, str], None]) -> None:
    """Write ``data`` to a temporary file beside ``path``, ``fsync`` it, then ``place(tmp, path)`` it: a reader sees
    the old file, no file, or the whole new one, never part of it."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        place(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
