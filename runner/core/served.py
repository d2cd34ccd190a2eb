"""Where this process reaches the models the run serves itself: a process-wide table from a model's name to the
address of its ready replica.

:mod:`runner.serving` starts one replica of each served model per worker (a ``vllm serve``, SGLang or ``transformers
serve`` subprocess on a loopback port) and publishes it here once it is ready; the model layer
(:class:`~runner.models.OpenAICompatibleModel`) looks its name up once at the start of every attempt of a call
when it was given no base URL, and uses only what it read for that attempt (``runner.models._route.Route``), so
a solution, a judge or a simulated user built anywhere (even unpickled from the driver) reaches this worker's replica
through the usual retries, limiter, cache, usage and budget. A replica restarted on another port is published again
and the next call goes there. The embedded model's folder is published here too (:func:`embedded_folder`). Plug-ins
import this module, never :mod:`runner.serving`.

A table per process rather than a context variable: a worker's replicas serve every item and every thread of the
process, and the engine's executors run items in several threads and event loops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from runner.core import tokenizers
from runner.core.engines import ENGINE_FACTS
from runner.core.errors import RunnerError
from runner.core.limits import model_key

SERVED_ENDPOINT = "served-by-run"
"""The API root that stands for every replica of a served model in rate limits and cache keys: replicas come and go
on random ports, while the model, and so its cached replies and its limits, stay the same."""


@dataclass(frozen=True)
class ServedEndpoint:
    """A ready replica of a model the run serves.

    Args:
        model: the model's name as the run names it (``provider:model``, e.g. ``vllm:Qwen/Qwen2.5-7B-Instruct``).
        base_url: the replica's API root (``http://127.0.0.1:PORT/v1``).
        served_name: the model name the replica answers to, sent as the request's ``model`` (unique per replica,
            so that a request that reaches another server is refused rather than answered by another model).
        tokenizer: where the model's tokenizer loads from (a local directory or a Hugging Face id) when its server
            does not refuse a conversation longer than its context (``transformers serve``): the model layer then
            counts each prompt's tokens itself before sending it (:mod:`runner.models._context_check`); ``None``: the
            server refuses such a request (vLLM, SGLang).
        stream: the model layer streams each call's answer, because its server cancels a generation whose client
            went away only when the answer is streamed (``transformers serve``): a call abandoned (past its
            deadline, cancelled, the run stopping) closes the stream and so ends its generation. ``False``: the
            server also cancels a plain request whose connection closed (vLLM, SGLang).
        max_tokens: the output limit, in tokens, of a call that sets none (:data:`SERVED_MAX_TOKENS`, by engine), so
            that a model that rambles cannot generate up to its context; ``None``: the server's own default.
    """

    model: str
    base_url: str
    served_name: str
    tokenizer: str | None = None
    stream: bool = False
    max_tokens: int | None = None


SERVED_MAX_TOKENS = {name: facts.default_max_tokens for name, facts in ENGINE_FACTS.items()}
"""The output limit, in tokens, of a call to a model the run serves that sets no ``max_tokens``, by engine
(:attr:`EngineFacts.default_max_tokens <runner.core.engines.EngineFacts.default_max_tokens>`: 4096 for vLLM and
SGLang, 1024 for ``transformers serve``). Left to themselves, vLLM and SGLang generate up to the model's context
(vLLM's ``get_max_tokens``: the context less the prompt; SGLang's scheduler the same), and ``transformers serve`` up
to the model's own ``max_new_tokens``, at least 1024: a model that rambles then holds its replica for minutes, and
past the model timeout. 4096 leaves a reasoning model room to think; 1024 is what ``transformers serve`` gives a
model without a limit of its own. A call's own ``max_tokens`` (``-S max_tokens=N``) wins, and the limit never
exceeds the room the prompt leaves in the context."""

_lock = threading.Lock()
_embedded_locator: list[Callable[[], str]] = []
_table: dict[str, ServedEndpoint] = {}
_expected: dict[str, float] = {}
_failed: dict[str, str] = {}


def publish_embedded_folder(locate: Callable[[], str]) -> None:
    """Publish how this process finds the embedded model's folder (:mod:`runner.serving` does, when imported:
    ``locate`` converts the packaged model on first use and returns its folder), for a plug-in that loads the model
    in its own process or renders prompts with its tokenizer (lm-eval's ``HFLM`` and chat template)."""
    _embedded_locator[:] = [locate]


def embedded_folder() -> str:
    """The embedded model's folder on this machine (``transformers:smollm2-135m-instruct``; converted on first use by
    what :func:`publish_embedded_folder` published).

    Raises:
        RunnerError: nothing published it (this process never imported :mod:`runner.serving`, which every run's
            driver and worker do), or what :mod:`runner.serving.embedded` raises (the ``local`` extra missing).
    """
    if not _embedded_locator:
        raise RunnerError("the embedded model's folder is published by runner.serving, which this process has not "
                          "imported; import runner.serving first")
    return _embedded_locator[0]()


def announce_tokenizer(source: str) -> None:
    """A replica starting in this process will be published with the tokenizer at ``source`` (its engine does not
    check the context: :attr:`ServedEndpoint.tokenizer`): it loads now, on a daemon thread, while the server starts,
    rather than on the first call of an item (:func:`runner.core.tokenizers.preload`)."""
    tokenizers.preload(source)


def publish(endpoint: ServedEndpoint) -> None:
    """Make ``endpoint`` the replica of its model in this process (replacing an earlier one)."""
    with _lock:
        _table[model_key(endpoint.model)] = endpoint


def withdraw(model: str) -> None:
    """Forget the replica of ``model`` (``provider:model``), e.g. while it restarts or once it is stopped; calls then
    go to the provider's default URL until one is published again (and fail there, retried as any connection
    failure)."""
    with _lock:
        _table.pop(model_key(model), None)


def served_endpoint(model: str) -> ServedEndpoint | None:
    """The ready replica of ``model`` (``provider:model``) in this process, or ``None`` when the run does not serve it
    here (or it is not ready)."""
    with _lock:
        return _table.get(model_key(model))


def published() -> dict[str, ServedEndpoint]:
    """A copy of the table: model name -> its replica."""
    with _lock:
        return dict(_table)


def expect(model: str, restart_s: float) -> None:
    """The run serves ``model`` in this process from now on: while its replica is not published (it starts again),
    a call waits up to ``restart_s`` seconds for it (:func:`pending`) instead of failing."""
    with _lock:
        _expected[model_key(model)] = restart_s
        _failed.pop(model_key(model), None)


def fail(model: str, reason: str) -> None:
    """``model``'s replica failed for good (past its restarts): calls to it fail at once with ``reason``."""
    with _lock:
        _failed[model_key(model)] = reason
        _table.pop(model_key(model), None)


def forget(model: str) -> None:
    """The run no longer serves ``model`` in this process (its replicas stopped): withdraw it; calls no longer wait
    for it."""
    with _lock:
        for table in (_expected, _failed, _table):
            table.pop(model_key(model), None)


def pending(model: str) -> float | str | None:
    """What a call to ``model`` must do first: ``None``, go (its replica is ready, or the run does not serve it
    here); seconds to wait at most for its replica (it starts again); or the reason it failed for good (a call
    fails at once)."""
    with _lock:
        key = model_key(model)
        if key in _failed:
            return _failed[key]
        return _expected.get(key) if key not in _table else None
