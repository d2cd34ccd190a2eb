"""Models a solution loads in its own process (lm-eval's ``HFLM``): one per process and key, shared by every cell of
a matrix that names the same model, counted, and released when the worker moves to another model.

A solution that builds a model in the worker asks :func:`shared` for it, with a key that names everything the
build depends on; a second build with the same key (another benchmark of the same model on the same worker) gets
the first one's object, so the model is loaded once per worker (:mod:`runner.engine.worker_cells` counts
:func:`builds` per load for ``matrix.json``). :func:`release` drops them all: the worker calls it when it stops
holding the model. A table per process, as :mod:`runner.core.served` is, for the same reason: the worker's items
run on several threads and event loops.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_models: dict[str, Any] = {}
_builds = 0


def shared(key: str, build: Callable[[], T]) -> T:
    """The object built by ``build()`` for ``key`` in this process: built on the first call (counted in
    :func:`builds`), the same object afterwards until :func:`release`.

    Raises:
        Exception: what ``build`` raises (nothing is kept then).
    """
    global _builds
    with _lock:
        if key in _models:
            return _models[key]  # type: ignore[no-any-return]
    value = build()
    with _lock:
        if key in _models:  # built meanwhile by another thread: keep the first
            return _models[key]  # type: ignore[no-any-return]
        _models[key] = value
        _builds += 1
    return value


def builds() -> int:
    """How many models :func:`shared` built in this process so far."""
    with _lock:
        return _builds


def release() -> None:
    """Drop every shared model (and free the accelerator's cache when torch is loaded)."""
    with _lock:
        dropped = list(_models.values())
        _models.clear()
    del dropped
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
