"""A real FUSE filesystem without hard links, as a FUSE mount of a bucket is (gcsfuse, blobfuse): a passthrough to a
local folder whose ``link`` answers ``ENOSYS``, as a FUSE filesystem that does not implement the call does (the
Linux kernel then gives the caller ``EPERM``: seen here with kernel 6.18).

Run as ``python -m tests.support.fuse_mount BACKING MOUNTPOINT`` (root, ``/dev/fuse``, libfuse 2 and fusepy:
``.ci/run`` installs them); :func:`mounted` mounts one for a test and unmounts it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def mounted(backing: Path, mountpoint: Path, timeout: float = 20.0) -> Iterator[Path]:
    """``backing`` mounted at ``mountpoint`` through the filesystem of this module, in a process of its own.

    Raises:
        RuntimeError: the mount did not come up within ``timeout`` seconds (the process's output in the message).
    """
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen([sys.executable, "-m", "tests.support.fuse_mount", str(backing), str(mountpoint)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mountpoint):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.communicate()[0].decode(errors="replace")
                raise RuntimeError(f"the FUSE mount at {mountpoint} did not come up (it needs root, /dev/fuse, "
                                   f"libfuse 2: apt-get install libfuse2 fuse, and fusepy: the test extra): "
                                   f"{output[-2000:]}")
            time.sleep(0.05)
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=False, capture_output=True)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _operations(root: str) -> Any:
    from fuse import FuseOSError, Operations

    class NoHardLinks(Operations):  # type: ignore[misc]
        """Every call passed to the folder ``root``, except ``link``."""

        def _path(self, path: str) -> str:
            return os.path.join(root, path.lstrip("/"))

        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            st = os.lstat(self._path(path))
            return {key: getattr(st, key) for key in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                                      "st_nlink", "st_size", "st_uid")}

        def readdir(self, path: str, fh: Any) -> list[str]:
            return [".", "..", *os.listdir(self._path(path))]

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._path(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._path(path))

        def unlink(self, path: str) -> None:
            os.unlink(self._path(path))

        def rename(self, old: str, new: str) -> None:
            os.replace(self._path(old), self._path(new))

        def link(self, target: str, source: str) -> None:
            raise FuseOSError(errno.ENOSYS)

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            return os.open(self._path(path), os.O_WRONLY | os.O_CREAT, mode)

        def open(self, path: str, flags: int) -> int:
            return os.open(self._path(path), flags)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: Any = None) -> None:
            os.truncate(self._path(path), length)

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._path(path), mode)

        def utimens(self, path: str, times: Any = None) -> None:
            os.utime(self._path(path), times)

    return NoHardLinks()


if __name__ == "__main__":
    from fuse import FUSE

    FUSE(_operations(os.path.abspath(sys.argv[1])), sys.argv[2], foreground=True, nothreads=True)
