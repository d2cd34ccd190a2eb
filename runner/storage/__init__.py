"""Where results live: an fsspec result store with atomic records, result shards (Parquet) consolidated by the
driver's :class:`Compactor`, resume from one listing, and a run manifest.

May import ``runner.core`` only; the engine, the report and the faces import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.storage.keys import decode_key, encode_key
from runner.storage.manifest import BenchmarkInfo, RunManifest, new_run_id, utc_now
from runner.storage.store import ResultStore, normalize_uri

if TYPE_CHECKING:
    from runner.storage.compaction import Compactor


class FileEvaluatorStorage(ResultStore):
    """AgentScope's name for the result store: ``FileEvaluatorStorage(save_dir)``.

    Args:
        save_dir: the run URI (any path or fsspec URL); ``None`` for ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: fsspec options, as for :class:`ResultStore`.
    """

    def __init__(self, save_dir: str | None = None, storage_options: dict | None = None) -> None:
        super().__init__(save_dir, storage_options)


def __getattr__(name: str) -> Any:
    # The compactor is imported on first use: it loads pyarrow (and numpy), which a run without shards and the
    # CLI's start do not need.
    if name == "Compactor":
        from runner.storage.compaction import Compactor

        return Compactor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
