"""The layout of a run's objects under its URI (the full list is in :mod:`runner.storage.store`'s docstring)::

    run.json                          the run manifest
    records/<task-key>/<repeat>.json  one record each
    shards/<digest>.parquet           records consolidated (:mod:`runner.storage.shards`)
    retired/<task-key>/<repeat>.<UTC timestamp>.json  records moved aside (``--rerun-failed``)

:class:`RunLayout` is an :class:`~runner.storage.object_store.ObjectStore` that knows these names and lists them; the
readers (:mod:`runner.storage.reading`), the shards (:mod:`runner.storage.shards`) and the compactor
(:mod:`runner.storage.compaction`) take one, and :class:`runner.storage.store.ResultStore` adds what a run stores and
reads there. It imports no other module of the run's (so none of them imports back in a circle).
"""

from __future__ import annotations

from runner.storage.keys import encode_key
from runner.storage.object_store import ObjectStore

MANIFEST = "run.json"
"""The run manifest (:class:`runner.storage.manifest.RunManifest`)."""
RECORDS = "records"
"""The folder of the record objects."""
SHARDS = "shards"
"""The folder of the shards under the run URI."""
SHARD_SUFFIX = ".parquet"
"""How a shard's name ends."""
RETIRED = "retired"
"""The folder of the records ``--rerun-failed`` moved aside."""

Item = tuple[str, int]
"""(task key, repeat)."""


def is_record(path: str) -> bool:
    """Whether ``path``, under ``records/``, names a record object (not a temp file of an interrupted local
    write)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".json") and not name.startswith(".")


def is_shard(path: str) -> bool:
    """Whether ``path``, under ``shards/``, names a shard (not a temp file of an interrupted local write, whose name
    starts with ``.``)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(SHARD_SUFFIX) and not name.startswith(".")


def item_of(path: str) -> Item | None:
    """``(task key, repeat)`` of a record path ``.../records/<task-key>/<repeat>.json``; ``None`` for another file."""
    key, name = path.rsplit("/", 2)[-2:]
    stem = name.removesuffix(".json")
    return (key, int(stem)) if stem.isdigit() else None


class RunLayout(ObjectStore):
    """The objects of one run (see the module docstring): where each lives, and the listings of ``records/`` and
    ``shards/``. Built as an :class:`~runner.storage.object_store.ObjectStore` (same arguments, same pickling)."""

    def record_path(self, task_id: str, repeat: int) -> str:
        """Where the record of (``task_id``, ``repeat``) lives."""
        return self.path(RECORDS, encode_key(task_id), f"{repeat}.json")

    def item_path(self, item: Item) -> str:
        """Where the record object of ``item`` ((task key, repeat)) lives."""
        return self.path(RECORDS, item[0], f"{item[1]}.json")

    def list_record_paths(self) -> list[str]:
        """Paths of every record object, by one listing of ``records/`` (temp files of interrupted writes
        excluded): the records not yet consolidated into a shard, and the large ones shard rows point to.

        Raises:
            StorageError: the store cannot be listed.
        """
        return sorted(self.record_sizes())

    def record_sizes(self) -> dict[str, int]:
        """Path -> size in bytes of every record object, from one listing of ``records/``.

        Raises:
            StorageError: the store cannot be listed.
        """
        return self.find(RECORDS, is_record)

    def shard_sizes(self) -> dict[str, int]:
        """Path -> size in bytes of every result shard, from one listing of ``shards/`` (:mod:`runner.storage.shards`).

        Raises:
            StorageError: the store cannot be listed.
        """
        return self.find(SHARDS, is_shard)

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
        found = self.find(None, lambda path: is_record(path) or is_shard(path))
        records_at, shards_at = self.path(RECORDS) + "/", self.path(SHARDS) + "/"
        return ({path: size for path, size in found.items() if path.startswith(records_at)},
                {path: size for path, size in found.items() if path.startswith(shards_at)})
