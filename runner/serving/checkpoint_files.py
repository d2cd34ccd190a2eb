"""A served checkpoint's files on the worker: a folder at a URL copied to the node once, and whether two checkpoints
share an architecture (so that a running replica may swap one's weights for the other's).

Engines load local folders (``transformers serve`` only those, vLLM and SGLang best), so a checkpoint named by an
fsspec URL (``s3://``, ``gs://``, ``az://``) is copied into ``<cache root>/checkpoints/<digest of the URL>/`` first,
once per node: a ``.complete`` mark is written last, and a copy without it (a worker killed midway) is made again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import fsspec

from runner.core.errors import ReplicaStartError
from runner.serving.paths import cache_root

COMPLETE = ".complete"
"""The mark of a finished copy."""

ARCHITECTURE_KEYS = ("architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "intermediate_size", "vocab_size")
"""The ``config.json`` keys two checkpoints must share for one to be loaded in place of the other: what shapes the
weights' tensors (SGLang's rule for ``/update_weights_from_disk``: "the same architecture and parameter size")."""


def local_folder(source: str, storage_options: dict[str, Any] | None = None) -> str:
    """``source`` as a local folder: a path or Hugging Face id as it is; a URL copied to the node's cache first,
    read with ``storage_options`` (fsspec's, e.g. an S3-compatible store's endpoint and keys).

    Raises:
        ReplicaStartError: the URL cannot be read (missing, no credentials): one line naming it.
    """
    if "://" not in source or source.startswith("file://"):
        return source.removeprefix("file://")
    target = cache_root() / "checkpoints" / hashlib.sha256(source.encode()).hexdigest()[:24]
    if (target / COMPLETE).exists():
        return str(target)
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    try:
        fs, path = fsspec.core.url_to_fs(source, **(storage_options or {}))
        shutil.rmtree(partial, ignore_errors=True)
        fs.get(path.rstrip("/") + "/", str(partial) + "/", recursive=True)
    except Exception as exc:  # noqa: BLE001 - any backend's failure becomes the replica's one line
        shutil.rmtree(partial, ignore_errors=True)
        raise ReplicaStartError(f"the checkpoint {source} could not be copied to this node ({type(exc).__name__}: "
                                f"{str(exc)[:200]}); check the URL and that the workers have the store's "
                                "credentials", cause="checkpoint_unreadable") from None
    (partial / COMPLETE).write_text(source)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return str(target)


def architecture(folder: str) -> dict[str, object] | None:
    """The :data:`ARCHITECTURE_KEYS` of a local folder's ``config.json``; ``None`` when it has none (a Hugging Face
    id, a folder without it) or it cannot be read."""
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return {key: config.get(key, text.get(key)) for key in ARCHITECTURE_KEYS}


def same_architecture(a: str, b: str) -> bool:
    """Whether the local folders ``a`` and ``b`` hold checkpoints of one architecture (both ``config.json`` files
    read and equal on :data:`ARCHITECTURE_KEYS`)."""
    first, second = architecture(a), architecture(b)
    return first is not None and first == second
