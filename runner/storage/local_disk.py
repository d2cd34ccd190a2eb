"""Whole-file writes on a local disk: a temporary file beside the target, ``fsync``, then ``os.link`` (write once:
fails if the target exists) or ``os.replace`` (replace). A reader sees the old file, no file, or the whole new one.
No fsspec primitive gives this, so the result store calls it for local paths.

A filesystem that makes no hard links (a FUSE mount of a bucket: gcsfuse, blobfuse; some network filesystems)
cannot give the first: :func:`write_once` then raises :class:`HardLinksUnsupported`, whose :data:`WAY_OUT` the
store's messages give.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable
from typing import BinaryIO

NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV})
"""What ``link(2)`` answers on a filesystem that makes no hard links: ``EPERM`` (POSIX's answer, "the file system
does not support the creation of hard links", which FUSE libraries such as fuser return for it; a FUSE mount of a
bucket answered it in issue 37), ``ENOSYS`` (a FUSE filesystem that does not implement the call: gcsfuse, seen on
Cloud Run; rclone's mount), ``ENOTSUP``/``EOPNOTSUPP`` (FAT, some network filesystems), ``EXDEV`` (a union or FUSE
filesystem that puts the two names on different devices). The file linked is this process's own, fresh, in the
target's own folder, so none of them stands for a missing permission or another filesystem here."""

WAY_OUT = ("FUSE mounts of buckets (gcsfuse, blobfuse, s3fs-fuse) and some network filesystems make none: pass the "
           "bucket's own URL as --storage (s3://BUCKET/PATH, gs://BUCKET/PATH, az://CONTAINER/PATH), or a folder on a "
           "local disk")
"""The way out of a store on a filesystem without hard links, for messages."""


class HardLinksUnsupported(OSError):
    """The filesystem of a local store makes no hard links, so no file can be written once and whole there
    (:data:`NO_HARD_LINKS`); ``errno`` is ``link(2)``'s answer."""


def write_once(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` whole, only if ``path`` does not exist (``os.link`` refuses to overwrite).

    Raises:
        FileExistsError: ``path`` exists already.
        HardLinksUnsupported: the filesystem makes no hard links.
        OSError: whatever else the filesystem answers (a folder this process cannot write: ``PermissionError``).
    """
    _write(path, data, _link)
    return True


def _link(tmp: str, path: str) -> None:
    """``os.link(tmp, path)``, an answer of :data:`NO_HARD_LINKS` raised as :class:`HardLinksUnsupported`."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
        code = errno.errorcode.get(exc.errno, str(exc.errno))
        raise HardLinksUnsupported(exc.errno, f"os.link answered {code}: {exc.strerror or os.strerror(exc.errno)}"
                                   ) from exc


def replace(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole, replacing what is there."""
    _write(path, data, os.replace)


def _write(path: str, data: bytes, place: Callable[[str, str], None]) -> None:
    """Write ``data`` to a temporary file beside ``path``, ``fsync`` it, then ``place(tmp, path)`` it: a reader sees
    the old file, no file, or the whole new one, never part of it."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with _created(tmp) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        place(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _created(tmp: str, tries: int = 3) -> BinaryIO:
    """``tmp`` opened for writing, its folder created first. A compaction removes a task's folder once it consolidated
    the records in it (:mod:`runner.storage.compaction`), and can do so between the folder's creation and the open:
    the folder is then created again. (Once ``tmp`` exists the folder is not empty, so it stays.)"""
    for _ in range(tries - 1):
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        try:
            return open(tmp, "wb")
        except FileNotFoundError:
            continue
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    return open(tmp, "wb")
