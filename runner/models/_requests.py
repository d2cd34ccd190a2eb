"""What an HTTP model sends, and the client that sends it: the arguments of a chat request for the provider's server
(:func:`request_kwargs`, :func:`stream_kwargs`) and the ``openai`` package's async client of each event loop
(:class:`ClientPool`). This module imports ``openai``: only the HTTP model loads it.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from typing import Any

import openai
import structlog

from runner.core.loopback import tls_context
from runner.models._providers import Provider
from runner.models._route import Route
from runner.models._types import ChatRequest

# Strong references to the closer tasks: the event loop keeps only weak ones.
_CLOSERS: set[asyncio.Task[None]] = set()


@functools.cache
def import_chat_api() -> None:
    """Import what an ``openai`` client imports on its first use: its chat resources (on a client's first ``.chat``:
    the modules and their pydantic types, 0.15 to 0.3 s measured on 2 cores) and httpcore (httpx's transport, when
    the client is made, 30 ms). Done when a model is built or unpickled, not in an item's first call, where it held
    a worker's event loop, and so the start of every other item in flight. Once per process."""
    import httpcore  # noqa: F401
    import openai.resources.chat  # noqa: F401


async def _close_when_the_loop_ends(client: openai.AsyncOpenAI) -> None:
    """Wait until cancelled, then close ``client``.

    ``asyncio.run`` cancels the tasks still pending before it closes its loop, so the client's connections are
    closed while their loop can still run the close (a loop that closes first leaves them to leak).
    """
    try:
        await asyncio.Event().wait()
    finally:
        if not client.is_closed():
            await client.close()


class ClientPool:
    """One model's HTTP clients, one per event loop: a connection belongs to the loop that opened it, and one model
    may be used from several loops (a worker's loop, ``chat_sync``'s temporary ones). Pickled empty: a copy in
    another process builds its own clients."""

    def __init__(self) -> None:
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def client(self, route: Route, *, api_key: str, timeout: float, name: str) -> openai.AsyncOpenAI:
        """The HTTP client of the running event loop for ``route``'s URL (created on first use in that loop, and
        again when the URL moved: a served replica restarted on another port), closed when that loop ends.

        A served replica's client ignores the proxy variables of the environment (``trust_env=False``): a proxy
        cannot reach this machine's loopback (:mod:`runner.core.loopback`). Any other URL is reached as the
        ``openai`` client and httpx do, ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` included.

        Args:
            route: the attempt's route (its ``base_url``, and whether it is a served replica).
            api_key: the key the client sends.
            timeout: the client's own timeouts, in seconds (each wait for the next byte; the request's deadline is
                the attempt loop's).
            name: the model's ``provider:model`` name, in the closer task's name.

        Raises:
            RuntimeError: no event loop is running.
        """
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        url = route.base_url.rstrip("/")
        if client is not None and str(client.base_url).rstrip("/") != url:
            self._clients.pop(loop, None)
            client = None
        if client is None:
            http_client = (openai.DefaultAsyncHttpxClient(trust_env=False, verify=tls_context()) if route.served
                           else None)
            client = openai.AsyncOpenAI(api_key=api_key, base_url=url, timeout=timeout,
                                        max_retries=0, http_client=http_client)
            self._clients[loop] = client
            closer = loop.create_task(_close_when_the_loop_ends(client), name=f"close {name} client")
            _CLOSERS.add(closer)
            closer.add_done_callback(_CLOSERS.discard)
        return client

    async def aclose(self) -> None:
        """Close the running event loop's HTTP client, if it has one (a later call in this loop opens a new one)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


def request_kwargs(request: ChatRequest, spec: Provider, *, name: str, noted: set[str]) -> dict[str, Any]:
    """``client.chat.completions.create``'s arguments for ``request``, without the fields the provider's server
    does not take (:attr:`Provider.dropped_params <runner.models._providers.Provider.dropped_params>`, also from
    ``extra_body``); each attempt sets ``model``, its route's name for it.

    Args:
        request: the call.
        spec: the provider (its ``max_tokens_param`` and ``dropped_params``).
        name: the model's ``provider:model`` name, which the log of a dropped field gives.
        noted: the fields whose drop was logged already for this model; a dropped ``response_format`` or
            ``tool_choice`` is logged once (``model.params_dropped``) and added to it.
    """
    kwargs = request.to_openai_kwargs(spec.max_tokens_param)
    dropped = spec.dropped_params
    if not dropped:
        return kwargs
    removed = [key for key in dropped if key in kwargs]
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict) and dropped & extra.keys():
        removed += [key for key in dropped if key in extra]
        kwargs["extra_body"] = {key: value for key, value in extra.items() if key not in dropped} or None
        if kwargs["extra_body"] is None:
            del kwargs["extra_body"]
    for key in removed:
        kwargs.pop(key, None)
    fresh = {"response_format", "tool_choice"} & set(removed) - noted
    if fresh:
        noted |= fresh
        structlog.get_logger("runner.models").warning(
            "model.params_dropped", model=name, params=sorted(fresh),
            detail=f"the {spec.name} server does not take them; they are not sent")
    return kwargs


def stream_kwargs(spec: Provider) -> dict[str, Any]:
    """The arguments that stream a chat request's answer: ``stream``, and ``stream_options`` asking for the usage
    unless the provider drops that field. A server that honours ``stream_options`` sends the usage only then
    (``transformers serve`` 5.25, vLLM, OpenAI: a last chunk without choices); one that ignores it may send it
    anyway (5.17)."""
    extra: dict[str, Any] = {"stream": True}
    if "stream_options" not in spec.dropped_params:
        extra["stream_options"] = {"include_usage": True}
    return extra
