"""The response cache interface between the model layer and the engine: which requests are cached, under which
key, and the cache the engine installs for the calls of a work item.

:meth:`ChatModel.chat <runner.models.ChatModel.chat>` looks a request up in the current cache
(:func:`current_cache`) before calling the server, and stores the reply after; the engine installs the run's cache
(``--cache URI``, kept in storage by :mod:`runner.storage.response_cache`) in each work item's
:class:`~runner.core.scope.CallScope`, with the item's repeat.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

from runner.core.scope import call_scope, current_scope

CachePolicy = Literal["always", "deterministic", "off"]
"""Which requests the cache answers: ``always`` every one (a sampled one per repeat of its task, see
:func:`cache_key`), ``deterministic`` (the default) those whose reply does not depend on chance (temperature 0, or
a seed set), ``off`` none."""


def cacheable(policy: CachePolicy, temperature: float | None, seed: int | None) -> bool:
    """Whether a request with ``temperature`` and ``seed`` (``None``: the server's default, which samples) is
    cached under ``policy``."""
    if policy == "always":
        return True
    if policy == "deterministic":
        return deterministic(temperature, seed)
    return False


def deterministic(temperature: float | None, seed: int | None) -> bool:
    """Whether a request's reply does not depend on chance: temperature 0, or a seed set."""
    return temperature == 0 or seed is not None


def cache_key(provider: str, base_url: str, model: str, body: Mapping[str, Any], repeat: int | None = None,
              weights: str | None = None) -> str:
    """The cache key of a request: sha256 (hex) of the canonical JSON (sorted keys, no whitespace) of the provider,
    the API root, the model and the full request body (messages, tools, sampling parameters, seed...), of the
    ``repeat`` when one is given: a sampled request is cached per repeat, so that the repeats of a task (pass@k)
    stay independent samples while a rerun of the run finds each of them; and of the digest of the model's
    ``weights`` when the run knows it (a checkpoint folder, :func:`current_weights`): what answers, not only its
    name, so a checkpoint rewritten in place is asked anew (lm-eval#2715)."""
    fields: dict[str, Any] = {"provider": provider, "base_url": base_url, "model": model, "body": body}
    if repeat is not None:
        fields["repeat"] = repeat
    if weights is not None:
        fields["weights"] = weights
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
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


@contextlib.contextmanager
def cache_scope(cache: ResponseCache | None, repeat: int = 0) -> Iterator[None]:
    """Make ``cache`` the current one inside the block (``None``: no cache), for the calls of a work item of repeat
    ``repeat``; the rest of the current :class:`~runner.core.scope.CallScope` stays."""
    with call_scope(cache=cache, repeat=repeat if cache is not None else 0):
        yield


def current_cache() -> ResponseCache | None:
    """The response cache the engine installed for the current work item, or ``None``."""
    return current_scope().cache


def current_weights(model: str) -> str | None:
    """The digest of the weights ``model`` (``provider:model``) serves in the current work item's run, or ``None``
    when the run cannot read them (a hosted model, a Hugging Face id): :attr:`CallScope.weights
    <runner.core.scope.CallScope.weights>`."""
    from runner.core.limits import model_key

    return current_scope().weights.get(model_key(model))


def current_repeat() -> int:
    """The repeat of the current work item (0 outside one)."""
    return current_scope().repeat
