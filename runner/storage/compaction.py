"""Consolidating a run's finished records into result shards (:mod:`runner.storage.shards`), in the driver, while
the run goes on; and retiring records that shards hold (``--rerun-failed``).

The driver feeds a :class:`Compactor` the items it acknowledged. Every :data:`COMPACT_RECORDS` of them, or
:data:`COMPACT_S` seconds after the oldest one waiting, a thread of the compactor reads their record objects, writes
them as one shard with the store's conditional write, and only then deletes the record objects it consolidated (the
large ones stay: their rows point to them). Small shards are merged into larger ones (at most :data:`shards.
SHARD_BYTES`), so a report reads a few shards whatever the run's length. At the end of the run :meth:`Compactor.
finish` consolidates what is left, adopts the record objects earlier invocations left (a driver killed before it
compacted them), deletes records an interruption left behind in a shard, and merges the small shards.

Why the order makes every crash harmless (docs/storage.md, "Result shards"): a record object is deleted only after
a shard holding it is durable, and a shard is deleted only after a shard holding its rows is durable; readers take
each item once, shards first (:class:`runner.storage.reading.Scan`). A compaction that fails (a storage outage)
loses nothing either: its records stay objects, and it is tried again later; it never stops the run.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from runner.core.errors import StorageError, exception_line
from runner.core.record import TaskRecord
from runner.storage import reading, shards
from runner.storage.keys import encode_key
from runner.storage.layout import RECORDS, RETIRED, Item, item_of

if TYPE_CHECKING:
    from runner.storage.layout import RunLayout

COMPACT_RECORDS = 1000
"""Acknowledged items that make a compaction due."""
COMPACT_S = 60.0
"""Seconds after which an acknowledged item waiting for a compaction makes one due."""
MERGE_AT = 10
"""Small shards (under half of :data:`shards.SHARD_BYTES`) of this compactor that make a merge due."""

_log = structlog.get_logger("runner")


class Compactor:
    """Consolidates the records of the items a driver acknowledged into shards (see the module docstring).

    The engine's driver calls, on its own thread:

    - :meth:`add` for each acknowledged item that has a record (every status but ``skipped``), then
      :meth:`maybe_compact`, which returns at once (the work runs on the compactor's thread);
    - :meth:`finish` once the run's items are all acknowledged (the executor closed), before the report;
    - :meth:`close` instead, when the run stops early (interrupted, a fault, the lease lost): it waits for a
      compaction in progress and starts none (the next run's :meth:`finish` adopts what is left).

    Only acknowledged items may be added: the driver never sends an acknowledged item again, so no worker writes a
    record object of an item that a shard holds (docs/storage.md).

    Args:
        store: the run's store (the driver's).
        headline: the metrics a row's ``score`` takes its value from, in order of preference
            (``BenchmarkBase.headline_metrics``; see :func:`runner.storage.shards.row`).
        every_records: acknowledged items that make a compaction due (default :data:`COMPACT_RECORDS`).
        every_s: seconds after which the oldest acknowledged item waiting makes one due (checked at
            :meth:`maybe_compact`; default :data:`COMPACT_S`).
        check: called before each shard write and deletion; raises to stop compacting (the lease keeper's
            ``check``, which raises ``LeaseLost``: a driver that lost its run writes nothing more).
        clock: monotonic seconds.
    """

    def __init__(self, store: RunLayout, *, headline: Sequence[str] = (), every_records: int | None = None,
                 every_s: float | None = None, check: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.headline = tuple(headline)
        self.every_records = every_records if every_records is not None else COMPACT_RECORDS
        self.every_s = every_s if every_s is not None else COMPACT_S
        self.check = check or (lambda: None)
        self.clock = clock
        self._pending: list[Item] = []
        self._added: list[float] = []  # when each pending item was added (clock seconds)
        self._given: dict[Item, bytes] = {}  # the stored JSON of pending items, when the driver had it
        self._retry_at = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failed = False
        self._kept: set[Item] = set()
        self._undeleted: set[str] = set()
        self._small: dict[str, int] = {}
        self.records = 0
        """Records consolidated into shards by this compactor."""
        self.written = 0
        """Shards this compactor wrote (merges included)."""

    # -- the driver's calls -------------------------------------------------------------------------------------

    def add(self, task_id: str, repeat: int, record: bytes | None = None) -> None:
        """The driver acknowledged (``task_id``, ``repeat``), whose record is stored.

        Args:
            task_id, repeat: the item.
            record: the record's JSON exactly as this process stored it, when it did (the sequential executor's
                write that returned ``True``): spares the compaction a read of it. ``None``: read it.
        """
        item = (encode_key(task_id), repeat)
        with self._lock:
            self._pending.append(item)
            self._added.append(self.clock())
            if record is not None:
                self._given[item] = record

    def acknowledged(self, item: tuple[str, int], record: bytes | None = None) -> None:
        """:meth:`add`, then :meth:`maybe_compact`: what the driver calls for each item it counts done (``item``:
        (task id, repeat); ``record``: as for :meth:`add`)."""
        self.add(item[0], item[1], record)
        self.maybe_compact()

    def maybe_compact(self) -> None:
        """Start a compaction on the compactor's thread if one is due and none runs; returns at once."""
        with self._lock:
            if self._closed or (self._thread is not None and self._thread.is_alive()) or not self._due():
                return
            self._thread = threading.Thread(target=self._drain, name="runner-compactor", daemon=True)
            self._thread.start()

    def finish(self) -> None:
        """At the end of a run: wait for the compaction in progress, consolidate every item left, adopt the record
        objects no shard holds (left by earlier invocations), delete the record objects shards already hold, and
        merge the small shards. A failure is logged (``store.compaction_failed``), never raised: the records stay
        objects, and the next run's :meth:`finish` consolidates them."""
        self._join()
        with self._lock:
            batch, self._pending, self._added = self._pending, [], []
            self._closed = True
        try:
            for start in range(0, len(batch), self.every_records):
                self._compact(batch[start:start + self.every_records])
            self._merge(self._adopt(), everything=True)
        except Exception as exc:  # noqa: BLE001 - records stay the source of truth: never stop the run for this
            self._warn(exc)

    def close(self) -> None:
        """When a run stops early: wait for the compaction in progress (if any), start none."""
        with self._lock:
            self._closed = True
        self._join()

    def wait(self) -> None:
        """Wait until no compaction runs (the due ones done)."""
        self._join()

    # -- compacting -----------------------------------------------------------------------------------------------

    def _due(self) -> bool:
        if not self._pending or self.clock() < self._retry_at:
            return False
        return len(self._pending) >= self.every_records or self.clock() - self._added[0] >= self.every_s

    def _join(self) -> None:
        thread = self._thread
        if thread is not None:
            thread.join()

    def _drain(self) -> None:
        """The compactor's thread: compact while compactions are due, then merge if enough small shards wait."""
        while True:
            with self._lock:
                if self._closed or not self._due():
                    return
                batch, added = self._pending[:self.every_records], self._added[:self.every_records]
                del self._pending[:self.every_records], self._added[:self.every_records]
                given = {item: self._given[item] for item in batch if item in self._given}
            try:
                self._compact(batch)
                small = {path: size for path, size in self._small.items() if size < shards.SHARD_BYTES // 2}
                if len(small) >= MERGE_AT:
                    self._merge(small)
            except Exception as exc:  # noqa: BLE001 - logged; the batch waits for the next try, every_s later
                self._warn(exc)
                with self._lock:
                    self._given.update(given)
                    self._pending[:0], self._added[:0] = batch, added
                    self._retry_at = self.clock() + self.every_s
                return

    def _compact(self, items: Sequence[Item]) -> None:
        """Consolidate the records of ``items`` into shards (a new shard once the inline records reach
        :data:`shards.SHARD_BYTES`), then delete the record objects the shards hold whole."""
        rows: list[dict] = []
        inline = 0
        items = list(dict.fromkeys(items))  # an item acknowledged twice is one row
        with self._lock:
            given = {self._path(item): data for item in items if (data := self._given.pop(item, None)) is not None}
        fetched = self._fetch([path for path in map(self._path, items) if path not in given])
        for path, data in itertools.chain(given.items(), fetched):
            try:
                record = TaskRecord.model_validate_json(data)
            except ValueError:
                continue  # damaged outside the runner: it stays an object (the report counts it unreadable)
            item = item_of(path)
            if item != (encode_key(record.task_id), record.repeat):
                continue  # a copy of another item's record: it stays an object (the report counts it misplaced)
            rows.append(shards.row(record, data, f"{RECORDS}/{item[0]}/{item[1]}.json", self.headline))
            inline += len(rows[-1]["record"])
            if inline >= shards.SHARD_BYTES:
                self._consolidate(rows)
                rows, inline = [], 0
        if rows:
            self._consolidate(rows)

    def _path(self, item: Item) -> str:
        return self.store.item_path(item)

    def _consolidate(self, rows: list[dict]) -> None:
        """Write ``rows`` as one shard, then delete the record objects it holds whole."""
        data = shards.table(rows)
        self._write_shard(shards.encode([data]), shards.items_of(data))
        self.records += len(rows)
        small, kept = [], []
        for values in rows:
            item = (values["task_key"], values["repeat"])
            (kept if values["record_path"] is not None else small).append(item)
        self._kept.update(kept)
        self._delete([self.store.item_path(item) for item in small])

    def _fetch(self, paths: list[str]) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of the record objects at ``paths`` that exist: their first
        :data:`shards.INLINE_RECORD_BYTES` + 1 bytes fetched in batches of :data:`reading.READ_BATCH` (concurrent
        range requests on object stores, so a batch holds at most 256 x 64 KiB), a longer record then whole,
        alone."""
        limit = shards.INLINE_RECORD_BYTES + 1
        for start in range(0, len(paths), reading.READ_BATCH):
            batch = paths[start:start + reading.READ_BATCH]
            heads = self.store.call("cat_ranges", batch, [0] * len(batch), [limit] * len(batch),
                                    on_error="return", nbytes=limit * len(batch))
            for path, head in zip(batch, heads):
                if isinstance(head, FileNotFoundError):
                    continue
                if isinstance(head, BaseException):
                    raise head
                if len(head) >= limit:
                    try:
                        head = self.store.call("cat_file", path)
                    except FileNotFoundError:
                        continue
                yield path, head

    def _write_shard(self, data: bytes, items: list[tuple[str, int, str | None]]) -> str:
        """:func:`write_shard`, counted."""
        path = write_shard(self.store, data, items, self.check)
        self.written += 1
        self._small[path] = len(data)
        return path

    def _delete(self, paths: list[str]) -> None:
        """Delete the objects at ``paths``, whose content a durable shard holds; one that could not be deleted is
        tried again at :meth:`finish` (readers skip it meanwhile: a shard holds its item)."""
        if not paths:
            return
        self.check()
        try:
            self.store.call("rm", paths)
        except FileNotFoundError:
            pass
        except Exception as exc:  # noqa: BLE001 - the shard is durable: a leftover object is harmless
            self._undeleted.update(paths)
            _log.info("store.compaction_leftovers", records=len(paths), error=exception_line(exc)[:300],
                      detail="records already in a shard could not be deleted; the run's end tries again")
        if self.store.is_local:
            remove_empty_folders(paths)

    # -- merging --------------------------------------------------------------------------------------------------

    def _merge(self, sizes: dict[str, int], everything: bool = False) -> None:
        """Merge the small shards among ``sizes`` (path -> bytes; under half of :data:`shards.SHARD_BYTES`) into
        shards of at most :data:`shards.SHARD_BYTES`, smallest first; with ``everything``, every group of two or
        more, else only the first. Each merged shard is written before its parts are deleted."""
        small = sorted((size, path) for path, size in sizes.items() if size < shards.SHARD_BYTES // 2)
        groups: list[list[str]] = [[]]
        total = 0
        for size, path in small:
            if groups[-1] and total + size > shards.SHARD_BYTES:
                groups.append([])
                total = 0
            groups[-1].append(path)
            total += size
        for group in groups if everything else groups[:1]:
            if len(group) > 1:
                self._merge_group(group)

    def _merge_group(self, paths: list[str]) -> None:
        """Write the rows of the shards at ``paths`` (each item once) as one shard, then delete them. A part that is
        gone (another driver merged it) ends this merge; one that is not a shard stays out of it."""
        buffer = io.BytesIO()
        items: list[tuple[str, int, str | None]] = []
        seen: set[Item] = set()
        parts = []
        with pq.ParquetWriter(buffer, shards.SCHEMA, compression="zstd") as writer:
            for path in paths:
                try:
                    parsed = shards.parse(self.store.call("cat_file", path))
                except FileNotFoundError:
                    return
                except shards.ShardUnreadable:
                    continue
                parts.append(path)
                for group in range(parsed.num_row_groups):
                    rows = parsed.read_row_group(group, columns=shards.SCHEMA.names)
                    keep = []
                    for key, repeat, write_id in shards.items_of(rows):
                        keep.append((key, repeat) not in seen)
                        if keep[-1]:
                            seen.add((key, repeat))
                            items.append((key, repeat, write_id))
                    writer.write_table(rows.filter(pa.array(keep)), row_group_size=shards.ROW_GROUP_ROWS)
        if len(parts) < 2:
            return
        merged = self._write_shard(buffer.getvalue(), items)
        parts = [path for path in parts if path != merged]
        self._delete(parts)
        for path in parts:
            self._small.pop(path, None)

    # -- the run's end ----------------------------------------------------------------------------------------------

    def _adopt(self) -> dict[str, int]:
        """Consolidate the record objects no shard holds (an earlier driver was killed before it compacted them),
        and delete those a shard already holds whole (an interruption came between a shard's write and the
        deletion); the run's shards (path -> bytes) before it. Reads the shards only when ``records/`` holds
        objects this compactor does not know."""
        listing, held_shards = self.store.listing()
        retried = self._undeleted & set(listing)
        self._undeleted.clear()
        self._delete(sorted(retried))
        unknown = {item: path for path in listing
                   if (item := item_of(path)) is not None and item not in self._kept and path not in retried}
        if not unknown:
            return held_shards
        held: dict[Item, tuple[str | None, str | None]] = {}
        for stored in reading.Scan(self.store, ("write_id", "record_path"), read_objects=False):
            if stored.row is not None and stored.item in unknown:
                held[stored.item] = (stored.row["write_id"], stored.row["record_path"])
        orphans = sorted(item for item in unknown if item not in held)
        for start in range(0, len(orphans), self.every_records):
            self._compact(orphans[start:start + self.every_records])
        leftovers = {unknown[item]: write_id for item, (write_id, pointed) in held.items() if pointed is None}
        same = [path for path, record in reading.parse_records(self.store, {p: listing[p] for p in leftovers})
                if record is not None and record.write_id == leftovers[path]]
        self._delete(same)
        if orphans or same:
            _log.info("store.compaction_adopted", records=len(orphans), leftovers=len(same),
                      detail="records of earlier invocations consolidated into shards; copies already in a shard "
                      "deleted")
        return {**held_shards, **{path: size for path, size in self._small.items() if path not in held_shards}}

    def _warn(self, exc: BaseException) -> None:
        if not self._failed:
            self._failed = True
            _log.warning("store.compaction_failed", error=self.store.explain("cannot consolidate records", exc),
                         detail="the records stay as they are, nothing is lost; the run goes on and its end (or the "
                         "next run's) consolidates them")


class ShardConflict(RuntimeError):
    """A shard's name is taken by a file that does not hold the shard's records."""


def write_shard(store: RunLayout, data: bytes, items: list[tuple[str, int, str | None]],
                check: Callable[[], None] = lambda: None) -> str:
    """Write the shard ``data`` of ``items`` ((task key, repeat, write id) of its rows) once, whole, under its name
    (:func:`runner.storage.shards.name`); its path. A shard of that name written before (by another driver, or by
    this write whose response was lost) must hold those items. ``check`` is called first.

    Raises:
        ShardConflict: a shard of that name exists and does not hold them.
        Exception: whatever the store raises.
    """
    path = store.path(shards.SHARDS, shards.name(items))
    check()
    try:
        store.create(path, data)
    except FileExistsError:
        held = set(shards.items_of(shards.read(store, path)))
        if not held.issuperset(items):
            raise ShardConflict(f"{store.display(path)} exists and does not hold the records it is named after: "
                                "remove it") from None
    return path


def retire(store: RunLayout, items: set[Item], stamp: str) -> None:
    """Retire the records of ``items`` (see :meth:`ResultStore.retire <runner.storage.store.ResultStore.retire>`):
    for each, a copy of its record under ``retired/<task-key>/<repeat>.<stamp>.json`` first; then each shard that
    holds one of them is rewritten without them (the new shard written before the old one is deleted); then their
    record objects are deleted.

    Raises:
        StorageError: the store failed.
    """
    if not items:
        return
    copied: set[Item] = set()
    try:
        done: set[str] = set()
        for _ in range(reading.Scan.RELISTS):
            fresh = [path for path in store.shard_sizes() if path not in done]
            if not fresh:
                break
            for path in fresh:
                done.add(path)
                _retire_from_shard(store, path, items, copied, stamp)
        for key, repeat in sorted(items):
            path = store.item_path((key, repeat))
            try:
                data = store.read_object(path)
            except FileNotFoundError:
                continue
            if (key, repeat) not in copied:
                store.write_once(store.path(RETIRED, key, f"{repeat}.{stamp}.json"), data)
            with contextlib.suppress(FileNotFoundError):
                store.delete_object(path)
            if store.is_local:
                remove_empty_folders([path])
    except StorageError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise StorageError(store.explain("cannot retire the failed records", exc)) from None


def _retire_from_shard(store: RunLayout, path: str, items: set[Item], copied: set[Item], stamp: str) -> None:
    """Copy the rows of ``items`` in the shard at ``path`` to ``retired/`` and rewrite the shard without them, one
    row group at a time (a shard that holds none of them is left as it is)."""
    try:
        parsed = shards.parse(store.read_object(path))
        keys = parsed.read(columns=list(shards.KEY_COLUMNS))
    except (FileNotFoundError, shards.ShardUnreadable):
        return
    if not any((key, repeat) in items for key, repeat in zip(keys.column("task_key").to_pylist(),
                                                             keys.column("repeat").to_pylist())):
        return
    buffer = io.BytesIO()
    kept: list[tuple[str, int, str | None]] = []
    with pq.ParquetWriter(buffer, shards.SCHEMA, compression="zstd") as writer:
        for group in range(parsed.num_row_groups):
            rows = parsed.read_row_group(group, columns=shards.SCHEMA.names)
            drop = []
            for index, (key, repeat, write_id) in enumerate(shards.items_of(rows)):
                drop.append((key, repeat) in items)
                if not drop[-1]:
                    kept.append((key, repeat, write_id))
                elif (key, repeat) not in copied:
                    _copy_to_retired(store, rows.slice(index, 1).to_pylist()[0], stamp)
                    copied.add((key, repeat))
            writer.write_table(rows.filter(pc.invert(pa.array(drop))), row_group_size=shards.ROW_GROUP_ROWS)
    if kept:
        write_shard(store, buffer.getvalue(), kept)
    store.delete_object(path)


def _copy_to_retired(store: RunLayout, row: dict, stamp: str) -> None:
    """Write the record of a shard ``row`` (the full one: its object's, for a large record) to ``retired/``."""
    record = row["record"].encode()
    if row["record_path"] is not None:
        with contextlib.suppress(FileNotFoundError):
            record = store.read_object(store.path(row["record_path"]))
    store.write_once(store.path(RETIRED, row["task_key"], f"{row['repeat']}.{stamp}.json"), record)


def remove_empty_folders(paths: Iterable[str]) -> None:
    """Remove the folders of the deleted local files at ``paths`` that are empty now (a task's folder under
    ``records/``), so that a walk of ``records/`` stays proportional to the records it holds. A record write that
    meets its folder removed creates it again (:func:`runner.storage.local_disk.write_once`)."""
    for folder in sorted({os.path.dirname(path) for path in paths}):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


__all__ = ["COMPACT_RECORDS", "COMPACT_S", "MERGE_AT", "Compactor", "ShardConflict", "retire", "write_shard"]
