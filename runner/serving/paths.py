"""Where serving keeps files between runs: the converted embedded model and the replicas' compile caches.

The root is ``$RUNNER_CACHE_DIR`` (as for benchmark downloads), else ``$XDG_CACHE_HOME/runner``, else
``~/.cache/runner``. Converted models go to ``<root>/models`` (``$RUNNER_MODEL_CACHE`` overrides it: a shared volume
on Kubernetes, so that the replicas of one node convert once); compile caches to ``<root>/compile``.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runner.serving.spec import ReplicaSpec


def cache_root() -> Path:
    """``$RUNNER_CACHE_DIR``, else ``$XDG_CACHE_HOME/runner``, else ``~/.cache/runner`` (not created)."""
    if os.environ.get("RUNNER_CACHE_DIR"):
        return Path(os.environ["RUNNER_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "runner"


def model_cache() -> Path:
    """Where converted models live: ``$RUNNER_MODEL_CACHE``, else ``<cache root>/models`` (created)."""
    path = Path(os.environ["RUNNER_MODEL_CACHE"]).expanduser() if os.environ.get("RUNNER_MODEL_CACHE") \
        else cache_root() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


class CompileSlot:
    """A compile-cache directory held by one replica at a time: ``<cache root>/compile/<engine>-<model>/slot-N``,
    the first slot no other live replica holds (an exclusive ``flock`` on its ``.lock``, released when the holder
    closes it or dies).

    Each replica gets its own (vllm#18851: two servers writing one ``torch.compile`` cache at once can corrupt it),
    and a later replica of the same model reuses a slot, so that a restart or the next run starts warm (vLLM measured
    64 s cold against 30 s warm there).

    Args:
        spec: the replica's model.
        root: the compile caches' root (default ``<cache root>/compile``).
    """

    def __init__(self, spec: ReplicaSpec, root: Path | None = None) -> None:
        base = (root or cache_root() / "compile") / f"{spec.engine}-{spec.slug}"
        base.mkdir(parents=True, exist_ok=True)
        index = 0
        while True:
            path = base / f"slot-{index}"
            path.mkdir(exist_ok=True)
            handle = open(path / ".lock", "a")  # noqa: SIM115 - held open for the slot's life
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                index += 1
                continue
            self.path = path
            self._handle = handle
            return

    def close(self) -> None:
        """Release the slot (another replica may take it)."""
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
