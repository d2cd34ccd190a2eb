"""Where results live: an fsspec result store with atomic records, result shards (Parquet) consolidated by the
driver's :class:`Compactor`, resume from one listing, and a run manifest.

May import ``runner.core`` only; the engine, the report and the faces import it.
"""

from runner.storage.compaction import Compactor
from runner.storage.keys import decode_key, encode_key
from runner.storage.manifest import BenchmarkInfo, RunManifest, new_run_id, utc_now
from runner.storage.store import ResultStore, normalize_uri


class FileEvaluatorStorage(ResultStore):
    """AgentScope's name for the result store: ``FileEvaluatorStorage(save_dir)``.

    Args:
        save_dir: the run URI (any path or fsspec URL); ``None`` for ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: fsspec options, as for :class:`ResultStore`.
    """

    def __init__(self, save_dir: str | None = None, storage_options: dict | None = None) -> None:
        super().__init__(save_dir, storage_options)


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
