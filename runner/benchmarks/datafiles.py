"""A benchmark's pinned data files, read from any fsspec location: the bytes, their pinned sha256, JSON Lines.

:mod:`runner.benchmarks.download` gets a missing file into the cache; this module reads a file from wherever the data
folder is (the cache, or the user's ``--data-dir`` on any fsspec filesystem), checks it and decodes it. Every error
is a :class:`~runner.core.errors.BenchmarkError` of one line that names the benchmark, the file and the way out.
Used by ACEBench (:data:`runner.benchmarks.acebench.files.DATA`) and BFCL (:data:`runner.benchmarks.bfcl.files.DATA`),
whose files are JSON Lines despite their ``.json`` extension.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import fsspec

from runner.core.errors import BenchmarkError

UNVERIFIED_FIX = "or pass -B verify=false to use modified data (its results are then not comparable)"
"""The way out of a checksum mismatch that keeps the user's data, ending that message."""


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` as hex."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class DataFiles:
    """One benchmark's data files: where a message says they come from, their pinned digests, and how to read them.

    Args:
        label: the benchmark's name in messages (``"ACEBench"``).
        sha256: the pinned hex sha256 of every file, keyed by its path relative to the data folder.
        pinned: what the digests pin, in messages (``"commit 56dd66c"``, ``"bfcl-eval 2026.3.23"``).
        pinned_file: the right file, in the fix of a mismatch (``"the file of that commit"``).
        layout: the fix of a missing file: what the data folder must hold, and that leaving out ``--data-dir``
            downloads it.
    """

    label: str
    sha256: dict[str, str]
    pinned: str
    pinned_file: str
    layout: str

    def read_bytes(self, root: str, relative: str, storage_options: dict[str, Any] | None = None) -> bytes:
        """The bytes of ``<root>/<relative>`` on any fsspec filesystem.

        Args:
            root: the data folder (a local path or any fsspec URL).
            relative: the file's path below it.
            storage_options: fsspec options for ``root``.

        Raises:
            BenchmarkError: the file is missing (the message names it and :attr:`layout`) or unreadable.
        """
        url = f"{root.rstrip('/')}/{relative}"
        try:
            fs, path = fsspec.url_to_fs(url, **(storage_options or {}))
            with fs.open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            raise BenchmarkError(f"{self.label} file {url} is missing; {self.layout}") from None
        except (OSError, ValueError, ImportError) as exc:
            raise BenchmarkError(f"cannot read {self.label} file {url} ({type(exc).__name__}: {exc}); check "
                                 "--data-dir") from None

    def parse_jsonl(self, data: bytes, where: str) -> list[dict[str, Any]]:
        """Decode a JSON Lines file (blank lines skipped), one dict per line.

        Args:
            data: the file's bytes (UTF-8).
            where: the file's URL, for messages.

        Raises:
            BenchmarkError: a line that is not a JSON object (naming the file and line).
        """
        records = []
        for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchmarkError(f"{self.label} file {where} line {number} is not JSON ({exc.msg}); the file is "
                                     f"corrupt, replace it with the original") from None
            if not isinstance(record, dict):
                raise BenchmarkError(f"{self.label} file {where} line {number} is not a JSON object; replace the file")
            records.append(record)
        return records

    def verify(self, relative: str, data: bytes, where: str) -> None:
        """Check ``data`` against the pinned sha256 of ``relative``.

        Raises:
            BenchmarkError: it differs (naming the file, both digests, what is pinned and the fix).
            KeyError: ``relative`` has no pinned digest (a bug of the caller's file list).
        """
        expected = self.sha256[relative]
        actual = sha256_hex(data)
        if actual != expected:
            raise BenchmarkError(
                f"{self.label} file {where} is corrupt or of another version (sha256 {actual[:16]}..., expected "
                f"{expected[:16]}... for {self.pinned}); replace it with {self.pinned_file}, {UNVERIFIED_FIX}"
            )

    def load(self, root: str, relative: str, storage_options: dict[str, Any] | None = None,
             verify: bool = True) -> list[dict[str, Any]]:
        """The records of the JSON Lines file ``<root>/<relative>``: :meth:`read_bytes`, then :meth:`verify` (unless
        ``verify`` is false), then :meth:`parse_jsonl`.

        Raises:
            BenchmarkError: from any of the three.
        """
        where = f"{root.rstrip('/')}/{relative}"
        data = self.read_bytes(root, relative, storage_options)
        if verify:
            self.verify(relative, data, where)
        return self.parse_jsonl(data, where)
