"""Reading records in batches bounded by count and by bytes, so that a reader's memory does not grow with the
number or the size of records (``report`` over 200 records of 5 MB holds 16 MiB of them at a time, not 1 GB); and
one pass over a run's shards and the record objects no shard holds yet (:class:`Scan`).

Each batch is fetched in one call (concurrently on object stores: one ``_cat_file`` coroutine of fsspec's
asynchronous filesystems per record), then each record is parsed and its bytes dropped before the next one, so at
most one batch of bytes and one parsed record are held at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fsspec
import structlog
from fsspec.asyn import AsyncFileSystem, sync

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.core.secrets import mask
from runner.storage import shards

if TYPE_CHECKING:
    from runner.storage.store import ResultStore

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


def parse_records(fs: fsspec.AbstractFileSystem, sizes: Mapping[str, int]) -> Iterator[tuple[str, TaskRecord | None]]:
    """``(path, record)`` for the record files of ``sizes`` (path -> bytes, from a listing), in path order, in
    batches of :data:`READ_BATCH` records and :data:`READ_BATCH_BYTES` bytes; ``record`` is ``None`` when the file
    does not parse, and a file removed since the listing is left out."""
    for batch in read_batches(sorted(sizes.items()), READ_BATCH_BYTES, READ_BATCH):
        contents = _fetch(fs, batch)
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


Item = tuple[str, int]
"""(task key, repeat)."""


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
    listed together (:meth:`ResultStore.listing`, one listing of the run; an object store lists keys in order, so
    ``records/`` before ``shards/``). A record object listed that is gone when read was consolidated since into a shard written
    after the listing, and a listed shard that is gone was merged into one written since: either way ``shards/``
    is listed again at the end and the new shards read (:data:`RELISTS` times at most).

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

    def __init__(self, store: ResultStore, columns: Sequence[str] = (), read_objects: bool = True) -> None:
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
            for path, record in parse_records(self.store.fs, pending):
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


def item_of(path: str) -> Item | None:
    """``(task key, repeat)`` of a record path ``.../records/<task-key>/<repeat>.json``; ``None`` for another file."""
    key, name = path.rsplit("/", 2)[-2:]
    stem = name.removesuffix(".json")
    return (key, int(stem)) if stem.isdigit() else None
