"""The checkpoints a matrix's glob names: one model per matching folder, its step, its identity and whether it is
ready to be evaluated.

``transformers:/ckpts/run42/step_*`` (or ``vllm:s3://bucket/run42/step_*``: any fsspec URL) names one model per
folder the glob matches. Its step is the number at the end of the folder's name (``step_200`` -> 200; none: ``None``,
sorted last). Its identity is a digest of what decides its weights: the contents of its ``config.json`` and weight
index (``*.index.json``), and each weight file's name, size and the store's own checksum (an object store's ETag,
GCS's MD5) or, on a local disk, its modification time: a checkpoint rewritten in place gets a new digest, and its
old cell is kept as ``stale`` (:mod:`runner.engine.matrix.run`).

A checkpoint is ready once its ``ready_file`` exists (a trainer writes it last), or, without one, once its listing
(names, sizes, checksums) did not change between two looks. The watch ends once the ``until`` file exists next to
the checkpoints (in the folder the glob's matches are in).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from typing import Any

import fsspec

from runner.core.errors import ConfigError, exception_line
from runner.core.matrix import is_glob, model_key

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
"""The files that hold a checkpoint's weights."""

_STEP = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint folder a glob matched.

    Args:
        model: its model name, ``provider:path`` (the path a URL when the glob was one; its cells' ``--model``).
        key: the readable key of its cells' folder (the folder's name, e.g. ``step_200``).
        step: the number at the end of the folder's name (``None``: none).
        digest: its identity (16 hex digits).
        listing: its files' names, sizes and checksums, as seen (the two-looks readiness rule compares them).
        ready: its ``ready_file`` exists (always ``True`` without one: see :meth:`CheckpointWatch.ready`).
    """

    model: str
    key: str
    step: int | None
    digest: str
    listing: tuple[tuple[str, int, str], ...]
    ready: bool = True


def step_of(name: str) -> int | None:
    """The number at the end of a folder's name: ``step_200`` -> 200, ``ckpt-0012`` -> 12, ``final`` -> ``None``."""
    match = _STEP.search(name.rstrip("/"))
    return int(match.group(1)) if match else None


def _checksum(entry: dict[str, Any]) -> str:
    """A file's identity as its store gives it: an ETag or MD5, else its modification time."""
    for key in ("ETag", "etag", "md5Hash", "content_md5", "mtime", "LastModified", "last_modified", "updated"):
        if entry.get(key) is not None:
            return str(entry[key]).strip('"')
    return ""


def _listing(fs: fsspec.AbstractFileSystem, folder: str) -> tuple[tuple[str, int, str], ...]:
    """The files directly in ``folder``: (name, size, checksum), sorted."""
    entries = fs.ls(folder, detail=True)
    return tuple(sorted((posixpath.basename(entry["name"].rstrip("/")), int(entry.get("size") or 0),
                         _checksum(entry)) for entry in entries if entry.get("type") != "directory"))


def digest_of(fs: fsspec.AbstractFileSystem, folder: str,
              listing: tuple[tuple[str, int, str], ...]) -> str:
    """The checkpoint's identity: sha256 of its ``config.json`` and weight index contents and of its weight files'
    names, sizes and checksums (16 hex digits). A listed file that cannot be found when read (a link to nothing, a
    file removed meanwhile) counts as missing: its engine's load says what is wrong."""
    hasher = hashlib.sha256()
    for name, size, checksum in listing:
        if name == "config.json" or name.endswith(".index.json"):
            try:
                content = fs.cat_file(posixpath.join(folder, name))
            except FileNotFoundError:
                content = b"\0missing"
            hasher.update(name.encode() + b"\0" + content + b"\0")
        elif name.endswith(WEIGHT_SUFFIXES):
            hasher.update(f"{name}\0{size}\0{checksum}\0".encode())
    return hasher.hexdigest()[:16]


def weights_of(model: str, storage_options: dict[str, Any] | None = None) -> str | None:
    """The digest (:func:`digest_of`) of the folder a served model's name points at (``transformers:/ckpts/step_200``,
    ``vllm:s3://bucket/run42/step_200``), or ``None`` where there is none to read: a Hugging Face id, the embedded
    model, a glob, a folder that cannot be listed (its replica says why when it starts)."""
    from runner.core.config import SERVABLE_PROVIDERS

    provider, _, path = model.partition(":")
    if provider not in SERVABLE_PROVIDERS or not path or is_glob(path):
        return None
    if "://" not in path and not posixpath.isdir(path):
        return None
    try:
        fs, folder = fsspec.core.url_to_fs(path, **(storage_options or {}))
        fs.invalidate_cache()
        listing = _listing(fs, folder.rstrip("/"))
        return digest_of(fs, folder.rstrip("/"), listing) if listing else None
    except Exception:  # noqa: BLE001 - no digest: the model's replies are cached by its name
        return None


def expand(model: str, ready_file: str | None = None,
           storage_options: dict[str, Any] | None = None) -> list[Checkpoint]:
    """The checkpoints the glob in ``model`` (``provider:glob``) matches now, by step (those without one last, by
    name).

    Args:
        ready_file: a checkpoint is :attr:`Checkpoint.ready` once this file is in its folder (``None``: always).
        storage_options: fsspec options for the glob's filesystem (a matrix's ``storage_options`` when the glob is
            on the storage's kind of filesystem).

    Each call lists afresh (fsspec's cached listings of the filesystem are dropped first).

    A folder removed between the glob and its listing is left out (it is no checkpoint now).

    Raises:
        ConfigError: the glob's filesystem, or a folder it matched, cannot be read (one line naming it).
    """
    provider, _, pattern = model.partition(":")
    try:
        fs, path = fsspec.core.url_to_fs(pattern, **(storage_options or {}))
        fs.invalidate_cache()  # fsspec keeps a listing per filesystem instance: each look must see new objects
        matches = [match for match in fs.glob(path.rstrip("/")) if fs.isdir(match)]
    except Exception as exc:  # noqa: BLE001 - any backend's failure is one line
        raise ConfigError(f"the checkpoints {pattern} cannot be listed ({exception_line(exc)}); check the path and "
                          "the store's credentials") from None
    found = []
    for match in matches:
        name = posixpath.basename(match.rstrip("/"))
        where = match if "://" not in pattern else fs.unstrip_protocol(match)
        try:
            listing = _listing(fs, match)
            digest = digest_of(fs, match, listing)
        except FileNotFoundError:
            continue  # removed since the glob matched it (a trainer that keeps its last few checkpoints)
        except Exception as exc:  # noqa: BLE001 - any backend's failure is one line
            raise ConfigError(f"the checkpoint {where} cannot be read ({exception_line(exc)}); check the store's "
                              "credentials") from None
        ready = ready_file is None or any(entry[0] == ready_file for entry in listing)
        found.append(Checkpoint(f"{provider}:{where}", model_key(f"{provider}:{where}"), step_of(name), digest,
                                listing, ready))
    return sorted(found, key=lambda checkpoint: (checkpoint.step is None, checkpoint.step or 0, checkpoint.key))


def until_reached(model: str, until: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether the watch's ``until`` file exists next to the checkpoints of the glob in ``model`` (in the folder of
    the glob's last part)."""
    pattern = model.partition(":")[2]
    parent = posixpath.dirname(pattern.rstrip("/"))
    try:
        fs, path = fsspec.core.url_to_fs(posixpath.join(parent, until), **(storage_options or {}))
        fs.invalidate_cache()
        return bool(fs.exists(path))
    except Exception:  # noqa: BLE001 - a store that cannot answer now is asked again at the next look
        return False


class CheckpointWatch:
    """Which checkpoints are ready, look after look (see the module's docstring).

    Args:
        ready_file: the file that marks a checkpoint ready (``None``: an unchanged listing between two looks does).
    """

    def __init__(self, ready_file: str | None) -> None:
        self.ready_file = ready_file
        self._seen: dict[str, tuple[tuple[str, int, str], ...]] = {}

    def ready(self, checkpoint: Checkpoint) -> bool:
        """Whether ``checkpoint`` is ready at this look (and remember its listing for the next)."""
        if self.ready_file is not None:
            return checkpoint.ready
        before = self._seen.get(checkpoint.model)
        self._seen[checkpoint.model] = checkpoint.listing
        return before is not None and before == checkpoint.listing and any(
            name.endswith(WEIGHT_SUFFIXES) for name, _, _ in checkpoint.listing)


def describe(checkpoints: list[Checkpoint]) -> str:
    """The checkpoints as a short list for a log line: ``step_100, step_200 (+3)``."""
    names = [checkpoint.key for checkpoint in checkpoints]
    return ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")
