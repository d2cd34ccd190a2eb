"""The response cache in storage (``--cache URI``): one JSON file per reply, written once, shared by every worker
and every run that names the same URI.

Layout under the cache URI::

    <key[:2]>/<key>.json      {"provider", "base_url", "model", "reply", "created_at"}

``key`` is :func:`runner.core.cache.cache_key` (sha256 of the endpoint and the full request body). An entry is
written with the records' own conditional write (:meth:`ObjectStore.write_once
<runner.storage.object_store.ObjectStore.write_once>`: temp file and ``os.link`` on a local disk, the store's
conditional write on an object store), so two workers that miss the same request at once both call the model and
the first reply stays.
"""

from __future__ import annotations

import json
from typing import Any

from runner.core.cache import CachePolicy
from runner.core.errors import StorageError, one_line
from runner.core.secrets import mask
from runner.storage.object_store import ObjectStore


class StoredCache:
    """A :class:`~runner.core.cache.ResponseCache` on any fsspec filesystem.

    Args:
        uri: the cache's URI (a path, ``s3://bucket/cache``...).
        storage_options: fsspec options for it.
        policy: which requests it answers.

    It pickles without its filesystem object, so it travels to Ray workers.
    """

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None,
                 policy: CachePolicy = "deterministic") -> None:
        self.policy: CachePolicy = policy
        self._files = ObjectStore(uri, storage_options, flag="--cache")

    @property
    def uri(self) -> str:
        """The cache's URI (a plain path made absolute)."""
        return self._files.uri

    @property
    def is_process_local(self) -> bool:
        """Whether it lives in this process's memory (``memory://``), out of reach of Ray workers."""
        return self._files.is_process_local

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._files.uri!r}, policy={self.policy!r})"

    def check(self) -> None:
        """Reach the cache once (a read of an entry that is not there), so an endpoint that does not answer or
        refused credentials stop the run before anything is written.

        Raises:
            StorageError: the cache cannot be reached.
        """
        try:
            self._files.read_file(_name("check"))
        except StorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes one line
            raise self._error(f"cannot reach the cache at {self.uri}", exc) from None

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or ``None``.

        Raises:
            StorageError: the cache cannot be read, or the entry is not JSON (damaged outside the runner).
        """
        try:
            data = self._files.read_file(_name(key))
        except Exception as exc:  # noqa: BLE001
            raise self._error(f"cannot read the cache entry {_name(key)} in {self.uri}", exc) from None
        if data is None:
            return None
        try:
            entry = json.loads(data)
        except ValueError:
            raise StorageError(f"the --cache entry {_name(key)} in {self.uri} is not JSON; delete it") from None
        return entry if isinstance(entry, dict) else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store ``entry`` under ``key`` once (an entry already there stays).

        Raises:
            StorageError: the cache cannot be written.
        """
        self._files.write_once(self._files.path(_name(key)), json.dumps(entry, ensure_ascii=False).encode())


    def _error(self, what: str, exc: BaseException) -> StorageError:
        """One line: ``what``, the cause and the way out, secrets masked."""
        cause = one_line(f"{type(exc).__name__}: {exc}", 200)
        return StorageError(mask(f"{what} ({cause}); check the --cache URI and its credentials",
                                 self._files.storage_options))


def _name(key: str) -> str:
    """The entry's path under the cache URI."""
    return f"{key[:2]}/{key}.json"
