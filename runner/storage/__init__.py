"""Where results live: an fsspec result store with atomic records, result shards (Parquet) consolidated by the
driver's :class:`Compactor`, resume from one listing, and a run manifest.

May import ``runner.core`` only; the engine, the report and the faces import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner._lazy import lazy_exports
from runner.storage.keys import decode_key, encode_key
from runner.storage.manifest import BenchmarkInfo, RunManifest, new_run_id, utc_now
from runner.storage.object_store import normalize_uri
from runner.storage.store import FileEvaluatorStorage, ResultStore

if TYPE_CHECKING:
    from runner.storage.compaction import Compactor


_LAZY = {"Compactor": "runner.storage.compaction"}
"""Loaded on first use: the compactor loads pyarrow (and numpy), which a run without shards and the CLI's start do
not need."""

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "BenchmarkInfo",
    "Compactor",
    "FileEvaluatorStorage",
    "ResultStore",
    "RunManifest",
    "decode_key",
    "encode_key",
    "new_run_id",
    "normalize_uri",
    "utc_now",
]
