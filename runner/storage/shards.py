"""Result shards: finished records consolidated into Apache Parquet files under ``shards/``, the results format that
reports, resumes and users' own queries (pandas, Polars, DuckDB) read in a few requests.

A shard is one Parquet file of rows with the flat, typed columns of :data:`SCHEMA` (one row per record: task id,
repeat, status, category, the headline ``score``, every metric's value in ``metrics``, error type, latencies, tokens)
plus the record itself as JSON (``record``), so that a reader gets back the exact :class:`TaskRecord`. A record
whose JSON is longer than :data:`INLINE_RECORD_BYTES` keeps its own object (``records/<task-key>/<repeat>.json``):
its row holds the record without its input, output, trajectory and solution metadata (everything a report
aggregates stays), and ``record_path`` points to the full one. So a shard does not balloon with agent trajectories.

Naming: ``shards/<sha256 of the shard's items>.parquet``, the digest of the sorted ``(task key, repeat, write id)``
of its rows. The listing of ``shards/`` is the manifest: a shard is written once and whole with the store's
conditional write (:meth:`runner.storage.object_store.ObjectStore.create`), so it is listed only once it is
complete; two writers that consolidate the same records produce the same name, and the second write is refused.
The invariants that make a crash at any point lose and double-count nothing are in docs/storage.md ("Result
shards").
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from runner.core.metric import MetricType, number
from runner.core.record import TaskRecord
from runner.core.storable import too_large
from runner.storage import layout
from runner.storage.keys import encode_key

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runner.storage.object_store import ObjectStore

SHARDS = layout.SHARDS
"""The folder of the shards under the run URI (:data:`runner.storage.layout.SHARDS`)."""
SUFFIX = layout.SHARD_SUFFIX
"""How a shard's name ends (:data:`runner.storage.layout.SHARD_SUFFIX`)."""
is_shard = layout.is_shard
SHARD_SCHEMA_VERSION = "1"
INLINE_RECORD_BYTES = 64 * 1024
"""A record whose JSON is longer keeps its own object, and its shard row points to it (``record_path``). 64 KiB is
about 30 times a question-answering record (HotpotQA with its context: about 2 KiB) and below most agent
trajectories; with 1,000 records per compaction a shard's inline records are then at most 64 MiB before
compression, and typically a few MiB."""
SHARD_BYTES = 16 * 2**20
"""The size in bytes a merge of small shards aims for, and so the most a reader holds of one shard (the same bound
as :data:`runner.storage.reading.READ_BATCH_BYTES`)."""
ROW_GROUP_ROWS = 1000
"""Rows per Parquet row group: a reader decodes one row group at a time."""
SLIM_FIELDS = ("input", "output", "trajectory", "solution_meta")
"""The fields a row leaves out of a large record's JSON (its ``record_path`` object keeps them)."""

KEY_COLUMNS = ("task_key", "repeat")


def _arrow() -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet, imported on first use: a store that only lists and writes records (and the CLI's
    start) never loads them and numpy (0.2 s and 90 MB)."""
    import pyarrow
    import pyarrow.parquet

    return pyarrow, pyarrow.parquet


@functools.cache
def schema() -> pa.Schema:
    """The columns of a shard (see docs/storage.md for each one's meaning); also ``shards.SCHEMA``."""
    pa, _ = _arrow()
    metric_type = pa.struct([
        pa.field("name", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("label", pa.string()),
        pa.field("error", pa.string()),
    ])
    usage_type = pa.struct([
        pa.field("model", pa.string()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("calls", pa.int64()),
        pa.field("cached_calls", pa.int64()),
    ])
    time_type = pa.timestamp("ms", tz="UTC")
    shard_schema = pa.schema(
        [
            pa.field("task_id", pa.string(), nullable=False),
            pa.field("repeat", pa.int32(), nullable=False),
            pa.field("task_index", pa.int64()),
            pa.field("category", pa.string()),
            pa.field("status", pa.string(), nullable=False),
            pa.field("score", pa.float64()),
            pa.field("score_metric", pa.string()),
            pa.field("metrics", pa.list_(metric_type)),
            pa.field("error_type", pa.string()),
            pa.field("error_code", pa.string()),
            pa.field("error_message", pa.string()),
            pa.field("attempt", pa.int32()),
            pa.field("tries", pa.int32()),
            pa.field("solution_s", pa.float64()),
            pa.field("metrics_s", pa.float64()),
            pa.field("total_s", pa.float64()),
            pa.field("input_tokens", pa.int64()),
            pa.field("output_tokens", pa.int64()),
            pa.field("model_calls", pa.int64()),
            pa.field("cached_calls", pa.int64()),
            pa.field("usage", pa.list_(usage_type)),
            pa.field("started_at", time_type),
            pa.field("finished_at", time_type),
            pa.field("tags", pa.map_(pa.string(), pa.string())),
            pa.field("worker_host", pa.string()),
            pa.field("run_id", pa.string()),
            pa.field("task_key", pa.string(), nullable=False),
            pa.field("write_id", pa.string()),
            pa.field("record_path", pa.string()),
            pa.field("record", pa.string(), nullable=False),
        ],
        metadata={"runner.shard_schema": SHARD_SCHEMA_VERSION},
    )
    return shard_schema


def __getattr__(name: str) -> Any:
    if name == "SCHEMA":
        return schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ShardUnreadable(ValueError):
    """A file under ``shards/`` that is not a shard of this runner (cut short, or written from outside)."""


def row(record: TaskRecord, data: bytes, record_path: str, headline: Sequence[str] = ()) -> dict[str, Any]:
    """The shard row of ``record``, whose stored JSON is ``data``.

    Args:
        record: the parsed record.
        data: its JSON as stored; kept whole in ``record`` up to :data:`INLINE_RECORD_BYTES`, else without
            :data:`SLIM_FIELDS` and with ``record_path`` set.
        record_path: the record object's path under the run URI (``records/<task-key>/<repeat>.json``).
        headline: the metrics ``score`` takes its value from, in order of preference (the benchmark's
            ``headline_metrics``); the first of them the record has with a usable value, else its first
            ``NUMERICAL`` metric with one (:func:`runner.core.metric.number`).
    """
    large = len(data) > INLINE_RECORD_BYTES
    if large:
        slim = record.model_copy(update={"input": None, "output": None, "trajectory": [], "solution_meta": None})
        text = slim.model_dump_json()
    else:
        text = data.decode("utf-8")
    score_metric, score = _score(record, headline)
    error = record.error
    usage = [{"model": model, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "calls": u.calls,
              "cached_calls": u.cached_calls} for model, u in sorted(record.usage.items())]
    return {
        "task_id": record.task_id,
        "repeat": record.repeat,
        "task_index": record.task_index,
        "category": record.tags.get("category"),
        "status": record.status,
        "score": score,
        "score_metric": score_metric,
        "metrics": [_metric(m) for m in record.metrics],
        "error_type": error.type if error else None,
        "error_code": error.code if error else None,
        "error_message": error.message if error else None,
        "attempt": record.attempt,
        "tries": record.tries,
        "solution_s": record.timings.solution_s,
        "metrics_s": record.timings.metrics_s,
        "total_s": record.timings.total_s,
        "input_tokens": sum(u["input_tokens"] for u in usage),
        "output_tokens": sum(u["output_tokens"] for u in usage),
        "model_calls": sum(u["calls"] for u in usage),
        "cached_calls": sum(u["cached_calls"] for u in usage),
        "usage": usage,
        "started_at": _time(record.started_at),
        "finished_at": _time(record.finished_at),
        "tags": sorted(record.tags.items()),
        "worker_host": record.worker.get("host"),
        "run_id": record.run_id,
        "task_key": encode_key(record.task_id),
        "write_id": record.write_id,
        "record_path": record_path if large else None,
        "record": text,
    }


def _metric(metric: Any) -> dict[str, Any]:
    """A metric's entry in ``metrics``: ``value`` is the result as a float when it is a number a float can hold or
    a boolean (NaN and infinities kept as they are), ``label`` a ``CATEGORY`` or text result (a ``CORPUS`` metric's
    list or object as its JSON text, an integer no float can hold as its digits, exactly), ``error`` the type of
    what the metric raised."""
    result = metric.result
    value = float(result) if isinstance(result, (bool, int, float)) and not too_large(result) else None
    if isinstance(result, (list, dict)):
        label: str | None = json.dumps(result, ensure_ascii=False)
    elif isinstance(result, str) or too_large(result) or (metric.type is MetricType.CATEGORY and result is not None):
        label = str(result)
    else:
        label = None
    return {"name": metric.name, "value": value, "label": label,
            "error": metric.error.type if metric.error is not None else None}


def _score(record: TaskRecord, headline: Sequence[str]) -> tuple[str | None, float | None]:
    usable = {m.name: number(m.result, m.allows_infinite) for m in record.metrics
              if m.error is None and m.type is MetricType.NUMERICAL}
    for name in headline:
        if usable.get(name) is not None:
            return name, usable[name]
    return next(((name, value) for name, value in usable.items() if value is not None), (None, None))


def _time(text: str) -> _dt.datetime | None:
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.timezone.utc)


def table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """The rows (from :func:`row`) as a table of :data:`SCHEMA`."""
    pa, _ = _arrow()
    return pa.Table.from_pylist(list(rows), schema=schema())


def encode(tables: Iterable[pa.Table]) -> bytes:
    """``tables`` (of :data:`SCHEMA`) as one Parquet file: zstd-compressed, row groups of at most
    :data:`ROW_GROUP_ROWS` rows."""
    _, pq = _arrow()
    buffer = io.BytesIO()
    with pq.ParquetWriter(buffer, schema(), compression="zstd") as writer:
        for part in tables:
            writer.write_table(part, row_group_size=ROW_GROUP_ROWS)
    return buffer.getvalue()


def name(items: Iterable[tuple[str, int, str | None]]) -> str:
    """The file name of a shard of ``items`` ((task key, repeat, write id) of its rows): the sha256 of their sorted
    lines, so that two writers of the same records name the same shard."""
    digest = hashlib.sha256()
    for key, repeat, write_id in sorted((k, r, w or "") for k, r, w in items):
        digest.update(f"{key}\t{repeat}\t{write_id}\n".encode())
    return digest.hexdigest()[:40] + SUFFIX


def items_of(data: pa.Table) -> list[tuple[str, int, str | None]]:
    """(task key, repeat, write id) of every row of ``data``."""
    return list(zip(data.column("task_key").to_pylist(), data.column("repeat").to_pylist(),
                    data.column("write_id").to_pylist()))


def parse(data: bytes) -> pq.ParquetFile:
    """The shard whose bytes are ``data``.

    Raises:
        ShardUnreadable: ``data`` is no Parquet file, or one without this runner's shard columns.
    """
    pa, pq = _arrow()
    try:
        parsed = pq.ParquetFile(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ShardUnreadable(f"not a Parquet file ({type(exc).__name__}: {exc})") from None
    missing = [column for column in schema().names if column not in parsed.schema_arrow.names]
    if missing:
        raise ShardUnreadable(f"no column {missing[0]!r}: not a shard of this runner")
    return parsed


def batches(store: ObjectStore, path: str, columns: Sequence[str]) -> Iterator[list[dict[str, Any]]]:
    """The rows of the shard at ``path`` (fetched whole: one request), one row group at a time, each row a dict of
    ``columns``.

    Raises:
        FileNotFoundError: the shard is gone (a merge replaced it since it was listed).
        ShardUnreadable: the file is not a shard.
        Exception: whatever the store raises.
    """
    parsed = parse(store.read_object(path))
    pa, _ = _arrow()
    try:
        for group in range(parsed.num_row_groups):
            yield parsed.read_row_group(group, columns=list(columns)).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ShardUnreadable(f"cannot be decoded ({type(exc).__name__}: {exc})") from None


def read(store: ObjectStore, path: str) -> pa.Table:
    """Every row of the shard at ``path``.

    Raises:
        FileNotFoundError, ShardUnreadable, Exception: as :func:`batches`.
    """
    parsed = parse(store.read_object(path))
    pa, _ = _arrow()
    try:
        return parsed.read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ShardUnreadable(f"cannot be decoded ({type(exc).__name__}: {exc})") from None
