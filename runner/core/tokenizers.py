"""The tokenizers of the models the run serves, loaded once per process, while their servers start.

A replica of an engine that does not refuse a conversation longer than the model's context (``transformers
serve``) is published with its tokenizer's source (:attr:`runner.core.served.ServedEndpoint.tokenizer`), and the
model layer counts each prompt with it before sending it (:mod:`runner.models._context_check`). Importing
transformers and loading a tokenizer takes seconds (W7 in ``docs/performance.md``): a replica starts
loading it here (:func:`preload`) the moment it starts its server, on a daemon thread of this process, so that it is
ready when the first item calls; were it loaded on that first call, every call in flight would wait for it.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import structlog

_UNBOUNDED = 10**9
"""``model_max_length`` of a tokenizer that knows no bound (transformers' ``VERY_LARGE_INTEGER`` is 1e30)."""

_lock = threading.Lock()
_preloading: set[str] = set()


def load(source: str) -> tuple[Any, int] | None:
    """The tokenizer at ``source`` (a local model directory or a Hugging Face id) and the model's context in tokens,
    loaded once per process (a second caller waits for the first); ``None`` when either cannot be had here
    (transformers missing, files unreadable, no context in the config): logged once, as
    ``model.context_check_off``.

    The context is the model's ``max_position_embeddings`` (``transformers.AutoConfig``), else the tokenizer's
    ``model_max_length`` when it is a real bound.
    """
    with _lock:
        return _load(source)


def preload(source: str) -> None:
    """Start loading the tokenizer at ``source`` on a daemon thread, once per process (:func:`load`)."""
    with _lock:
        if source in _preloading:
            return
        _preloading.add(source)
    threading.Thread(target=load, args=(source,), name="runner-tokenizer-preload", daemon=True).start()


@functools.lru_cache(maxsize=8)
def _load(source: str) -> tuple[Any, int] | None:
    try:
        from transformers import AutoConfig, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        context = getattr(AutoConfig.from_pretrained(source), "max_position_embeddings", None)
    except Exception as exc:  # noqa: BLE001 - any failure to load only turns the check off
        structlog.get_logger("runner.models").warning("model.context_check_off", tokenizer=source,
                                                      reason=f"{type(exc).__name__}: {exc}"[:300])
        return None
    if not isinstance(context, int) or context <= 0:
        bound = getattr(tokenizer, "model_max_length", None)
        context = bound if isinstance(bound, int) and 0 < bound < _UNBOUNDED else None
    if context is None:
        structlog.get_logger("runner.models").warning("model.context_check_off", tokenizer=source,
                                                      reason="the model's context is not in its config")
        return None
    return tokenizer, context
