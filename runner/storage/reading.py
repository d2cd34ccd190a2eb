"""Reading records in batches bounded by count and by bytes, so that a reader's memory does not grow with the
number or the size of records (``report`` over 200 records of 5 MB holds 16 MiB of them at a time, not 1 GB).

Each batch is fetched in one call (concurrently on object stores: one ``_cat_file`` coroutine of fsspec's
asynchronous filesystems per record), then each record is parsed and its bytes dropped before the next one, so at
most one batch of bytes and one parsed record are held at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping

import fsspec
from fsspec.asyn import AsyncFileSystem, sync

from runner.core.record import TaskRecord

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
