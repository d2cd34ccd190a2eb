"""The object store under the result store: objects under one URI on any fsspec filesystem, written once and whole
with the store's conditional write (:mod:`runner.storage.protocols`; on a local disk a temp file and ``os.link``,
:mod:`runner.storage.local_disk`), through outages (:mod:`runner.storage.outage`) and deadlines
(:mod:`runner.storage.deadline`), with failures explained in one line (:mod:`runner.storage.error_kinds`).

It knows nothing of a run: the layout of a run's objects (``run.json``, ``records/``, ``shards/``) is
:class:`runner.storage.layout.RunLayout`'s, and what a run stores is :class:`runner.storage.store.ResultStore`'s. The
code talks to ``fsspec.url_to_fs`` only, never to a backend, except for the local temp-file-and-link write, which no
fsspec primitive gives.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import fsspec

from runner.core.errors import RunStopped, StorageError, exception_line
from runner.core.secrets import mask
from runner.storage import credentials, deadline, local_disk
from runner.storage.error_kinds import advice
from runner.storage.outage import OutageGuard
from runner.storage.protocols import LOCAL_PROTOCOLS


def normalize_uri(uri: str) -> str:
    """A plain path becomes an absolute ``file://`` URI (so every worker of a local cluster writes to the same
    place); URIs with a protocol are kept; trailing slashes are dropped."""
    if "://" not in uri:
        uri = "file://" + os.path.abspath(os.path.expanduser(uri))
    return uri.rstrip("/") if not uri.endswith("://") else uri


class ObjectStore:
    """Objects under one URI on an fsspec filesystem: the fsspec side of the result store, which knows nothing of a
    run's layout (:class:`runner.storage.layout.RunLayout` adds it).

    Args:
        uri: the URI of the objects (a run's): a path, ``file://``, ``memory://``, ``s3://bucket/prefix`` or any
            fsspec URL. ``None`` leaves it to the evaluator, which uses ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: passed to ``fsspec.url_to_fs`` (e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}``
            for S3). Credentials otherwise come as each cloud's tools expect them: S3 from the standard ``AWS_*``
            variables (including ``AWS_ENDPOINT_URL``), GCS from Application Default Credentials, Azure Blob from
            ``AZURE_STORAGE_ACCOUNT_NAME`` with ``DefaultAzureCredential`` or ``AZURE_STORAGE_CONNECTION_STRING``
            (:mod:`runner.storage.protocols`). Options are never logged or written to the manifest.
        flag: the option that named this store, when it is not the run's storage (``--cache``): its errors name it
            (``cannot open the --cache storage ...; check the --cache URI ...``).

    Attributes a run sets before its records are written (they travel to Ray workers with the store):
        outage_s: seconds a record write retries a store that fails with errors that look temporary (0, the
            default outside a run: a failure is raised at once); it also bounds each call to an object store
            (:mod:`runner.storage.deadline`), so that a store that hangs fails within it.
        conditional: whether writes use the store's conditional write (``If-None-Match: *``,
            ``ifGenerationMatch=0``); ``False`` only after the probe found a store that ignores it and the user
            allowed that (an existence check, then a plain write).

    The store pickles without its filesystem object and its outage state, so it can be shipped to Ray workers.
    """

    def __init__(self, uri: str | None = None, storage_options: dict[str, Any] | None = None, *,
                 flag: str | None = None) -> None:
        self._uri = normalize_uri(uri) if uri else None
        self.storage_options = dict(storage_options or {})
        self.flag = flag
        self.outage_s = 0.0
        self.conditional = True
        self._fs: fsspec.AbstractFileSystem | None = None
        self._root: str | None = None
        self._guard: OutageGuard | None = None
        self.uri_is_default = False  # no URI given: bind_default bound the default

    # -- identity -------------------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The URI (a run's). Raises ``StorageError`` when none was given and no default was bound."""
        if self._uri is None:
            raise StorageError("no storage URI: pass one (e.g. --storage ./runs/my-run)")
        return self._uri

    @property
    def has_uri(self) -> bool:
        """Whether a URI was given or bound."""
        return self._uri is not None

    def bind_default(self, uri: str) -> None:
        """Use ``uri`` if the store was created without one (:attr:`uri_is_default` then holds)."""
        if self._uri is None:
            self._uri = normalize_uri(uri)
            self.uri_is_default = True

    def __getstate__(self) -> dict[str, Any]:
        """The store's state without its filesystem object and outage state, which each process opens anew."""
        state = self.__dict__.copy()
        state["_fs"] = None
        state["_root"] = None
        state["_guard"] = None
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._uri!r})"

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem (created on first use)."""
        if self._fs is None:
            try:
                fs, root = fsspec.url_to_fs(self.uri, **self.storage_options)
            except Exception as exc:  # noqa: BLE001 - a missing backend, a bad option, a server that refuses: one line
                opened = f"the {self.flag} storage" if self.flag else "storage"
                raise StorageError(self.explain(f"cannot open {opened}", exc)) from None
            credentials.check(fs, mask(self.uri))
            self._fs, self._root = fs, root
        return self._fs

    @property
    def root(self) -> str:
        """The URI's path inside :attr:`fs` (the run's)."""
        self.fs  # noqa: B018 - creates _root
        assert self._root is not None
        return self._root

    @property
    def is_local(self) -> bool:
        """Whether the store is on a local disk."""
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return bool(protocols & LOCAL_PROTOCOLS)

    @property
    def is_process_local(self) -> bool:
        """Whether the store lives in this process's memory (``memory://``): any other process, a Ray worker or a
        pod, opens an empty store of its own there, so what it writes never reaches this one."""
        protocol = self.fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return "memory" in protocols

    @property
    def outage(self) -> OutageGuard:
        """This process's view of a storage outage (:mod:`runner.storage.outage`), with :attr:`outage_s`."""
        if self._guard is None:
            self._guard = OutageGuard(self.outage_s, mask=lambda text: mask(text, self.storage_options))
        self._guard.limit_s = self.outage_s
        return self._guard

    def call(self, method: str, *args: Any, nbytes: int = 0, **kwargs: Any) -> Any:
        """``fs.<method>(*args, **kwargs)`` for one object of ``nbytes`` bytes, within its deadline during a run
        (:mod:`runner.storage.deadline`: a store that hangs fails with a ``TimeoutError``, which looks temporary)."""
        return deadline.call(self.fs, method, *args, seconds=deadline.deadline(self.outage_s, nbytes), **kwargs)

    def path(self, *parts: str) -> str:
        """The filesystem path of ``parts`` under the root."""
        return "/".join([self.root, *parts])

    # -- writing ----------------------------------------------------------------------------------------------

    def write_once(self, path: str, data: bytes) -> bool:
        """Write ``data`` to ``path`` whole, unless ``path`` exists; return whether this call wrote it. One try: a
        failure is raised at once (:meth:`_write_once` with ``outlast`` is the write that outlives outages).

        Raises:
            StorageError: the store cannot be written.
        """
        return self._write_once(path, data, outlast=False)

    def _write_once(self, path: str, data: bytes, outlast: bool) -> bool:
        """:meth:`write_once`; with ``outlast``, failures that look temporary are retried for up to
        :attr:`outage_s` seconds (:attr:`outage`), which raises ``StorageOutage`` past them."""
        what = f"write {self.display(path)}"
        try:
            if outlast:
                self.outage.call(what, lambda: self.create(path, data))
            else:
                self.create(path, data)
            return True
        except FileExistsError:
            return False
        except RunStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes one clear line
            raise StorageError(self.explain(f"cannot {what}", exc)) from None

    def create(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` whole, in one try (see :attr:`conditional`): the primitive under
        :meth:`write_once`, for callers that read the backend's exception themselves. On an object store it is
        fsspec's ``pipe_file(..., mode="create")``, which s3fs, gcsfs and adlfs each send as their store's conditional
        write and answer with ``FileExistsError`` when the key exists (:mod:`runner.storage.protocols`).

        Raises:
            FileExistsError: ``path`` exists.
            Exception: whatever the backend raises.
        """
        if self.is_local:
            local_disk.write_once(path, data)
        elif self.conditional:
            self.call("pipe_file", path, data, mode="create", nbytes=len(data))
        elif self.call("exists", path):
            raise FileExistsError(path)
        else:
            self.call("pipe_file", path, data, nbytes=len(data))

    def write_file(self, name: str, data: bytes) -> None:
        """Replace the run-level file ``name`` (``run.json``, ``summary.json``...) whole.

        Raises:
            StorageError: the store cannot be written.
        """
        path = self.path(name)
        try:
            if self.is_local:
                local_disk.replace(path, data)
            else:
                self.call("pipe_file", path, data, nbytes=len(data))
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot write {self.display(path)}", exc)) from None

    def remove_file(self, name: str) -> None:
        """Delete the run-level file ``name``; nothing if it is absent.

        Raises:
            StorageError: the store cannot be written.
        """
        path = self.path(name)
        try:
            self.call("rm_file", path)
        except FileNotFoundError:
            return
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot delete {self.display(path)}", exc)) from None

    # -- reading ----------------------------------------------------------------------------------------------

    def read_outlasting(self, path: str) -> bytes | None:
        """The bytes of the object at ``path`` (``None`` if absent), read through outages like a write that outlasts
        them (:meth:`_write_once`).

        Raises:
            StorageOutage: the store kept failing for :attr:`outage_s` seconds.
            StorageError: any other failure.
        """
        what = f"read {self.display(path)}"
        try:
            return self.outage.call(what, lambda: self.call("cat_file", path))
        except FileNotFoundError:
            return None
        except RunStopped:
            raise
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot {what}", exc)) from None

    def read_object(self, path: str) -> bytes:
        """The bytes of the object at ``path``, in one request and without a deadline (a reader's fetch, outside
        any write).

        Raises:
            FileNotFoundError: nothing is at ``path``.
            Exception: whatever the backend raises.
        """
        return self.fs.cat_file(path)

    def delete_object(self, path: str) -> None:
        """Delete the object at ``path``, without a deadline.

        Raises:
            FileNotFoundError: nothing is at ``path``.
            Exception: whatever the backend raises.
        """
        self.fs.rm_file(path)

    def delete_folder(self, path: str) -> None:
        """Delete everything under the folder (or prefix) ``path``; nothing if it holds nothing.

        Raises:
            Exception: whatever the backend raises.
        """
        with contextlib.suppress(FileNotFoundError):
            if self.fs.exists(path):
                self.fs.rm(path, recursive=True)

    def read_file(self, name: str) -> bytes | None:
        """The bytes of the run-level file ``name``, or ``None`` if absent."""
        try:
            return self.call("cat_file", self.path(name))
        except FileNotFoundError:
            return None

    def find(self, folder: str | None, keep: Callable[[str], bool]) -> dict[str, int]:
        """Path -> size in bytes of the files under ``folder`` (relative to the root; ``None``: the root) that
        ``keep`` accepts, sorted by path, from one listing.

        Raises:
            StorageError: the store cannot be listed.
        """
        where = self.path(folder) if folder else self.root
        try:
            found = self.fs.find(where, detail=True)
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001
            raise StorageError(self.explain(f"cannot list {self.display(where)}", exc)) from None
        return {path: int(info.get("size") or 0) for path, info in sorted(found.items()) if keep(path)}

    # -- messages ---------------------------------------------------------------------------------------------

    def display(self, path: str) -> str:
        """``path`` as the user wrote the run URI: a local path as is, else the URI followed by the path under it
        (filesystems differ in whether their paths keep the protocol, so it is never added to a path twice), with
        a password in the URI masked."""
        if self._fs is None or self.is_local:
            return path
        if self._root is not None and path.startswith(self._root):
            return mask(self.uri + path[len(self._root):])
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return mask(path if "://" in path else f"{protocol}://{path.lstrip('/')}")

    def explain(self, what: str, exc: BaseException) -> str:
        """One line: ``what``, the cause and the advice that fits it (:func:`runner.storage.error_kinds.advice`), with
        every secret masked (:func:`runner.core.secrets.mask`: secret storage options, a URL's password, a
        connection string's key)."""
        detail = exception_line(exc)
        return mask(f"{what} ({detail}); {advice(self._uri, exc, self.flag)}", self.storage_options)
