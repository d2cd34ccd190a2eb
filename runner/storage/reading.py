"""Reading records in batches bounded by count and by bytes, so that a reader's memory does not grow with the
number or the size of records (``report`` over 200 records of 5 MB holds 16 MiB of them at a time, not 1 GB); one
pass over a run's shards and the record objects no shard holds yet (:class:`Scan`); and the run's records, done and
failed items read through it (:func:`records`, :func:`done_items`, :func:`failed_items`), which
:class:`runner.storage.store.ResultStore` offers as methods. Each takes the run's
:class:`~runner.storage.layout.RunLayout`.

Each batch is fetched in one call (concurrently on object stores: one ``_cat_file`` coroutine of fsspec's
asynchronous filesystems per record), then each record is parsed and its bytes dropped before the next one, so at
most one batch of bytes and one parsed record are held at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fsspec
import structlog
from fsspec.asyn import AsyncFileSystem, sync

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.core.secrets import mask
from runner.storage import shards
from runner.storage.keys import encode_key
from runner.storage.layout import Item, item_of

if TYPE_CHECKING:
    from runner.storage.layout import RunLayout
    from runner.storage.object_store import ObjectStore

_log = structlog.get_logger("runner")

READ_BATCH = 256
"""The most records fetched in one batch."""
READ_BATCH_BYTES = 16 * 2**20
"""The most bytes of records fetched in one batch; a record larger than this is fetched alone."""

CONCURRENT_READS = 64
"""The most record reads in flight at once on an object store."""


def read_batches(sizes: Iterable[tuple[str, int]], max_bytes: int = READ_BATCH_BYTES,
                 max_count: int = READ_BATCH) -> Iterator[list[str]]:
    """Group ``(path, size in bytes)`` into batches of at most ``max_count`` paths and ``max_bytes`` bytes, in
    order; a file larger than ``max_bytes`` makes a batch of its own."""
    batch: list[str] = []
    held = 0
    for path, size in sizes:
        if batch and (held + size > max_bytes or len(batch) >= max_count):
            yield batch
            batch, held = [], 0
        batch.append(path)
        held += size
    if batch:
        yield batch


def parse_records(store: ObjectStore, sizes: Mapping[str, int]) -> Iterator[tuple[str, TaskRecord | None]]:
    """``(path, record)`` for the record files of ``sizes`` (path -> bytes, from a listing) in ``store``, in path
    order, in batches of :data:`READ_BATCH` records and :data:`READ_BATCH_BYTES` bytes; ``record`` is ``None`` when
    the file does not parse, and a file removed since the listing is left out.

    Raises:
        Exception: whatever the store's backend raises (a file that is gone excepted).
    """
    for batch in read_batches(sorted(sizes.items()), READ_BATCH_BYTES, READ_BATCH):
        contents = _fetch(store.fs, batch)
        for path in batch:
            data = contents.pop(path, None)
            if data is None:
                continue
            try:
                record = TaskRecord.model_validate_json(data)
            except ValueError:
                record = None
            del data
            yield path, record


def _fetch(fs: fsspec.AbstractFileSystem, batch: list[str]) -> dict[str, bytes]:
    """The bytes of the files at ``batch`` (one request each, concurrent on object stores); absent ones are left
    out."""
    if len(batch) > 1 and isinstance(fs, AsyncFileSystem):
        return sync(fs.loop, _fetch_concurrently, fs, batch)
    if len(batch) > 1:
        return fs.cat(batch, on_error="omit")
    try:
        return {batch[0]: fs.cat_file(batch[0])}
    except FileNotFoundError:
        return {}


async def _fetch_concurrently(fs: AsyncFileSystem, batch: list[str]) -> dict[str, bytes]:
    """The bytes of the files at ``batch``, at most :data:`CONCURRENT_READS` requests at a time; absent ones are
    left out, any other failure is raised.

    Not ``fs.cat`` nor ``fs._cat``: adlfs makes both check each path's existence first, one HEAD after another
    (``AzureBlobFileSystem.cat`` and ``_expand_path``), which doubled a report's requests on Azure and made them
    sequential; every backend's ``_cat_file`` is one GET.
    """
    gate = asyncio.Semaphore(CONCURRENT_READS)

    async def one(path: str) -> bytes | None:
        async with gate:
            try:
                return await fs._cat_file(path)
            except FileNotFoundError:
                return None

    contents = await asyncio.gather(*(one(path) for path in batch))
    return {path: data for path, data in zip(batch, contents) if data is not None}


@dataclass(frozen=True)
class Stored:
    """One stored record as a :class:`Scan` finds it.

    Args:
        item: (task key, repeat).
        path: the shard that holds its row, or its record object.
        row: the shard row's requested columns (``None`` for a record object).
        record: the parsed record object (``None`` for a shard row, for an object not read, and for one that does
            not parse).
    """

    item: Item
    path: str
    row: dict[str, Any] | None = None
    record: TaskRecord | None = None


class Scan:
    """One pass over what a run holds: the rows of its shards, then the record objects of the items no shard holds,
    each item once.

    Order, so that a compaction or a merge running meanwhile cannot hide a record: ``records/`` and ``shards/`` are
    listed together (:meth:`RunLayout.listing <runner.storage.layout.RunLayout.listing>`, one listing of the run;
    an object store lists keys in order, so ``records/`` before ``shards/``). A record object listed that is gone
    when read was consolidated since into a shard written after the listing, and a listed shard that is gone was
    merged into one written since: either way ``shards/`` is listed again at the end and the new shards read
    (:data:`RELISTS` times at most).

    An item in several shards (two drivers consolidated it, or a merge was interrupted before it deleted its
    parts) is taken from the first, in name order; a record object of an item a shard holds is not taken (a
    record whose deletion an interruption left behind, or the object a large record's row points to). Memory: the
    set of items seen, one shard's bytes and one row group, or one batch of record objects
    (:func:`parse_records`).

    Args:
        store: the run's store.
        columns: the shard columns each :attr:`Stored.row` holds (``task_key`` and ``repeat`` always).
        read_objects: parse the record objects (else they are listed only).
    """

    RELISTS = 3

    def __init__(self, store: RunLayout, columns: Sequence[str] = (), read_objects: bool = True) -> None:
        self.store = store
        self.columns = list(dict.fromkeys([*shards.KEY_COLUMNS, *columns]))
        self.read_objects = read_objects
        self.unreadable_shards: list[str] = []
        self.seen: set[Item] = set()
        self.objects, self.shards = store.listing()

    def __iter__(self) -> Iterator[Stored]:
        gone = yield from self._shard_rows(list(self.shards))
        pending = {path: size for path, size in self.objects.items()
                   if (item := item_of(path)) is not None and item not in self.seen}
        if self.read_objects:
            found = set()
            for path, record in parse_records(self.store, pending):
                found.add(path)
                item = item_of(path)
                assert item is not None
                if item not in self.seen:  # a later row of a shard read meanwhile cannot hold it: read above
                    self.seen.add(item)
                    yield Stored(item, path, record=record)
            gone = gone or len(found) < len(pending)
        else:
            for path in pending:
                item = item_of(path)
                assert item is not None
                self.seen.add(item)
                yield Stored(item, path)
        for _ in range(self.RELISTS):
            if not gone:
                break
            fresh = [path for path in self.store.shard_sizes() if path not in self.shards]
            self.shards.update(dict.fromkeys(fresh, 0))
            gone = yield from self._shard_rows(fresh)

    def _shard_rows(self, paths: list[str]) -> Generator[Stored, None, bool]:
        """The rows of the shards at ``paths`` of items not seen yet; whether a shard was gone."""
        gone = False
        for path in paths:
            try:
                for rows in shards.batches(self.store, path, self.columns):
                    for values in rows:
                        item = (values["task_key"], values["repeat"])
                        if item not in self.seen:
                            self.seen.add(item)
                            yield Stored(item, path, row=values)
            except FileNotFoundError:
                gone = True
            except shards.ShardUnreadable as exc:
                self.unreadable_shards.append(path)
                _log.warning("store.unreadable_shard", path=mask(self.store.display(path)), error=str(exc),
                             detail="not a shard of this runner (cut short, or written from outside): its rows are "
                             "not counted; remove it")
            except Exception as exc:  # noqa: BLE001 - a backend failure becomes one line
                raise StorageError(self.store.explain(f"cannot read {self.store.display(path)}", exc)) from None
        return gone



@dataclass
class UnusableFiles:
    """The files that :func:`records` skipped, by path as the user writes it: record objects that are ``unreadable``
    (not a record) or ``misplaced`` (the record of another item than their path's), and ``unreadable_shards`` (files
    under ``shards/`` that are not shards)."""

    unreadable: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    unreadable_shards: list[str] = field(default_factory=list)


def done_items(store: RunLayout) -> set[Item]:
    """(task key, repeat) of every stored record of the run ``store``: the rows of the shards and a listing of the
    record objects (:class:`Scan`: one listing of ``records/``, one of ``shards/``, one read of each shard).

    Raises:
        StorageError: the store cannot be listed or read.
    """
    return {stored.item for stored in Scan(store, read_objects=False)}


def failed_items(store: RunLayout) -> set[Item]:
    """(task key, repeat) of every stored record of the run ``store`` whose status is not ``ok``, and of every
    record object that does not parse as a record (damaged outside the runner). Reads the shards' statuses and the
    record objects no shard holds; writes nothing.

    Raises:
        StorageError: the store cannot be listed or read.
    """
    failed = set()
    for stored in Scan(store, ("status",)):
        status = stored.row["status"] if stored.row is not None else stored.record and stored.record.status
        if status != "ok":
            failed.add(stored.item)
    return failed


def records(store: RunLayout, left_out: UnusableFiles | None = None, *, full: bool = True) -> Iterator[TaskRecord]:
    """Every stored record of the run ``store`` once: those of the shards, then the record objects no shard holds
    (:class:`Scan`), fetched in batches (:data:`READ_BATCH` records, :data:`READ_BATCH_BYTES` bytes).

    Args:
        store: the run.
        left_out: collects the files skipped (:meth:`runner.storage.store.ResultStore.iter_records` says which).
        full: yield a large record (one whose row points to its own object) whole, fetching its object; ``False``:
            as its row holds it, without its input, output, trajectory and solution metadata.

    Raises:
        StorageError: the store cannot be listed or read.
    """
    scan = Scan(store, ("record", "record_path"))
    large: dict[str, TaskRecord] = {}
    held = 0
    for stored in scan:
        if stored.row is None:
            checked = _checked(store, stored.path, stored.record, left_out)
            if checked is not None:
                yield checked
            continue
        record = TaskRecord.model_validate_json(stored.row["record"])
        pointed = stored.row["record_path"]
        if not full or pointed is None:
            yield record
            continue
        large[store.path(pointed)] = record
        held += scan.objects.get(store.path(pointed), 0)
        if len(large) >= READ_BATCH or held >= READ_BATCH_BYTES:
            yield from _read_pointed(store, large, scan.objects)
            large, held = {}, 0
    if left_out is not None:
        left_out.unreadable_shards.extend(mask(store.display(path)) for path in scan.unreadable_shards)
    yield from _read_pointed(store, large, scan.objects)


def _read_pointed(store: RunLayout, rows: dict[str, TaskRecord], sizes: dict[str, int]) -> Iterator[TaskRecord]:
    """The full records of large rows (object path -> the row's record) from their objects; the row's record
    when its object is gone or damaged (from outside the runner: a retirement rewrites the shard first)."""
    found = parse_records(store, {path: sizes.get(path, 0) for path in rows})
    for path, record in found:
        slim = rows.pop(path)
        yield record if record is not None and record.write_id == slim.write_id else slim
    for path, slim in rows.items():
        _log.warning("store.missing_record_object", path=mask(store.display(path)), task_id=slim.task_id,
                     repeat=slim.repeat, detail="a shard's row points to this record object, which is gone: "
                     "its input, output and trajectory are not shown")
        yield slim


def record_objects(store: RunLayout, paths: Iterable[str],
                   left_out: UnusableFiles | None = None) -> Iterator[TaskRecord]:
    """The records of the record objects at ``paths`` (from :meth:`RunLayout.list_record_paths
    <runner.storage.layout.RunLayout.list_record_paths>`), read in bounded batches, skipping those :func:`records`
    skips.

    Raises:
        StorageError: the store cannot be listed.
    """
    sizes = store.record_sizes()
    wanted = {path: sizes[path] for path in paths if path in sizes}
    for path, record in parse_records(store, wanted):
        checked = _checked(store, path, record, left_out)
        if checked is not None:
            yield checked


def _checked(store: RunLayout, path: str, record: TaskRecord | None,
             left_out: UnusableFiles | None) -> TaskRecord | None:
    """``record``, read from the object at ``path``, or ``None`` (logged, and noted in ``left_out``) when it
    does not parse or is not its path's item's."""
    if record is None:
        _log.warning("store.unreadable_record", path=mask(store.display(path)),
                     detail="not a valid record; --rerun-failed retires it and runs its item again")
        if left_out is not None:
            left_out.unreadable.append(mask(store.display(path)))
        return None
    if item_of(path) != (encode_key(record.task_id), record.repeat):
        _log.warning("store.misplaced_record", path=mask(store.display(path)), task_id=record.task_id,
                     repeat=record.repeat, detail="this file holds the record of another item (a copy "
                     "made outside the runner): it is not counted; remove it")
        if left_out is not None:
            left_out.misplaced.append(mask(store.display(path)))
        return None
    return record
