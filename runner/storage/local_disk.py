"""Whole-file writes on a local disk: a temporary file beside the target, ``fsync``, then ``os.link`` (write once:
fails if the target exists) or ``os.replace`` (replace). A reader sees the old file, no file, or the whole new one.
No fsspec primitive gives this, so the result store calls it for local paths.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from typing import BinaryIO


def write_once(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` whole, only if ``path`` does not exist (``os.link`` refuses to overwrite).

    Raises:
        FileExistsError: ``path`` exists already.
    """
    _write(path, data, os.link)
    return True


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
