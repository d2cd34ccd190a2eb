"""The response cache interface between the model layer and the engine: which requests are cached, under which
key, and the cache the engine installs for the calls of a work item.

:meth:`ChatModel.chat <runner.models.ChatModel.chat>` looks a request up in the current cache
(:func:`current_cache`) before calling the server, and stores the reply after; the engine installs the run's cache
(``--cache URI``, kept in storage by :mod:`runner.storage.cache`) with :func:`cache_scope` around each work item.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

CachePolicy = Literal["always", "deterministic", "off"]
"""Which requests the cache answers: ``always`` every one, ``deterministic`` (the default) those whose reply does
not depend on chance (temperature 0, or a seed set), ``off`` none."""


def cacheable(policy: CachePolicy, temperature: float | None, seed: int | None) -> bool:
    """Whether a request with ``temperature`` and ``seed`` (``None``: the server's default, which samples) is
    cached under ``policy``."""
    if policy == "always":
        return True
    if policy == "deterministic":
        return temperature == 0 or seed is not None
    return False


def cache_key(provider: str, base_url: str, model: str, body: Mapping[str, Any]) -> str:
    """The cache key of a request: sha256 (hex) of the canonical JSON (sorted keys, no whitespace) of the provider,
    the API root, the model and the full request body (messages, tools, sampling parameters, seed...)."""
    canonical = json.dumps({"provider": provider, "base_url": base_url, "model": model, "body": body},
                           sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache(Protocol):
    """Replies stored by key, each written once. Calls block (storage I/O): the model layer runs them in a thread.

    A cache that cannot be read or written raises; the model layer then logs it and calls the server.
    """

    policy: CachePolicy

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key``, or ``None``."""
        ...

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store ``entry`` under ``key`` unless an entry is there already (the first one stays)."""
        ...


_cache: contextvars.ContextVar[ResponseCache | None] = contextvars.ContextVar("runner_cache", default=None)


@contextlib.contextmanager
def cache_scope(cache: ResponseCache | None) -> Iterator[None]:
    """Make ``cache`` the current one inside the block (``None``: no cache)."""
    token = _cache.set(cache)
    try:
        yield
    finally:
        _cache.reset(token)


def current_cache() -> ResponseCache | None:
    """The response cache the engine installed for the current work item, or ``None``."""
    return _cache.get()
