"""Every HTTP provider: an OpenAI-compatible server reached through the official ``openai`` package's async client.

The client sends the requests and raises for error statuses and connection failures; the bodies of its successful
answers are read by the model layer (:mod:`runner.models._reading`, with :mod:`runner.models._body` and
:mod:`runner.models._replies`) rather than through its typed objects, which take an HTML page for a string and a list
of content parts for a validation error far from the call.

:class:`OpenAICompatibleModel` holds the model's settings and the calls' order; each concern is a module of its own:
what is sent and the client that sends it (:mod:`runner.models._requests`), the attempt loop
(:mod:`runner.models._attempts`), the reading of an answer (:mod:`runner.models._reading`) and the error each failure
ends with (:mod:`runner.models._failures`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import structlog

from runner.core.errors import ConfigError
from runner.core.limits import Answer, Endpoint, estimate_tokens
from runner.core.served import ServedEndpoint
from runner.models._attempts import Attempts
from runner.models._base import ChatModel
from runner.models._body import is_page, json_body, media_type
from runner.models._context_check import fit
from runner.models._counting import with_counted_usage
from runner.models._failures import ModelFailures
from runner.models._model_errors import CONTEXT_LENGTH_EXCEEDED, ErrorReply, ModelError, UnreadableReply
from runner.models._model_options import ModelOptions
from runner.models._providers import Provider
from runner.models._reading import ReplyReader
from runner.models._replies import served_models
from runner.models._requests import ClientPool, import_chat_api, request_kwargs, stream_kwargs
from runner.models._retry import RetryPolicy
from runner.models._route import Route, route_of
from runner.models._stream import read_events
from runner.models._types import ChatReply, ChatRequest

DEFAULT_TIMEOUT = 300.0


class OpenAICompatibleModel(ChatModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` API (OpenAI, vLLM, Ollama, DashScope...).

    Prefer :meth:`ChatModel.from_name`; construct directly for a provider of your own.

    Args:
        provider: a :class:`Provider` (see ``PROVIDERS``).
        model: the model name the server knows.
        options: :class:`ModelOptions`. ``base_url`` default: the replica this process's run serves the model on
            (:mod:`runner.core.served`, read once at the start of every attempt: :meth:`route`), else the provider's
            environment variable, else its default. ``timeout``: seconds one HTTP request may take in all, from
            sending it to the last byte of its answer (default 300): a deadline that holds however slowly the bytes
            arrive (the HTTP client's own timeouts only bound each wait for the next byte). A request past it is
            retried like a connection failure, per ``retry``; a call's longest time is about ``retry.max_attempts``
            times it, plus the delays between attempts.

    Raises:
        ConfigError: a required API key is missing, or the provider has no base URL and none was given.
    """

    def __init__(self, provider: Provider, model: str, options: ModelOptions | None = None) -> None:
        options = options or ModelOptions()
        base_url, api_key, timeout, retry = options.base_url, options.api_key, options.timeout, options.retry
        super().__init__(provider.name, model, **options.call_defaults, structured_mode=provider.structured_mode)
        url = provider.base_url(base_url)
        if not url:
            raise ConfigError(f"model provider {provider.name!r} has no default server; pass --model-base-url")
        self.spec = provider
        self._pinned = base_url is not None
        self.base_url = url.rstrip("/")
        self._api_key = provider.api_key(api_key)
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        self.retry = retry or RetryPolicy()
        # One HTTP client per event loop (runner.models._requests.ClientPool).
        self._clients = ClientPool()
        self._dropped_noted: set[str] = set()
        import_chat_api()

    def route(self) -> Route:
        """Where a request sent now goes (:class:`~runner.models._route.Route`): the replica this process's run serves
        the model on, read once from :mod:`runner.core.served`, when the model was given no base URL and one is
        ready; else the base URL fixed when the model was built. Every attempt of a call takes one, at its start,
        and uses nothing else."""
        return route_of(self.provider, self.model, self._base_url, self._pinned)

    @property
    def served(self) -> ServedEndpoint | None:
        """The replica of this model that the run serves in this process (:mod:`runner.core.served`), when the
        model was given no base URL and one is ready; ``None`` otherwise. A look at this moment: a call reads it
        through :meth:`route`."""
        return self.route().replica

    @property
    def base_url(self) -> str:  # type: ignore[override]
        """The API root calls go to now: the served replica's, else the one fixed when the model was built."""
        return self.route().base_url

    @base_url.setter
    def base_url(self, value: str | None) -> None:
        self._base_url = value  # type: ignore[assignment]

    @property
    def url(self) -> str:
        """The base URL as messages and logs show it: a password in it masked (:func:`runner.core.secrets.mask`)."""
        return self.route().url

    @property
    def endpoint(self) -> Endpoint:
        """As :attr:`ChatModel.endpoint`; every replica of a served model is one endpoint (``served-by-run``), so its
        limits and cached replies hold across replicas and their ports."""
        return self.route().endpoint

    @classmethod
    def for_provider(cls, provider: Provider, model: str, options: ModelOptions) -> OpenAICompatibleModel:
        """The model ``model`` of ``provider`` with ``options`` (:func:`model_from_name
        <runner.models.model_from_name>`); ``mock_policy`` applies to the mock provider only.

        Raises:
            ConfigError: as the constructor.
        """
        return cls(provider, model, options)

    def __getstate__(self) -> dict[str, Any]:
        # HTTP clients belong to this process's event loops; a copy in another process builds its own.
        state = dict(self.__dict__)
        state["_clients"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_pinned", True)
        state.setdefault("_dropped_noted", set())
        self.__dict__.update(state)
        self._clients = ClientPool()
        import_chat_api()

    def _failures(self) -> ModelFailures:
        """The errors of this model's calls, from its settings now (:mod:`runner.models._failures`)."""
        return ModelFailures(self.name, self.provider, self.spec, self.timeout, self._pinned)

    def _reader(self) -> ReplyReader:
        """The reader of this model's answers (:mod:`runner.models._reading`)."""
        return ReplyReader(self.name, self.provider, self.model, self._failures())

    def _attempts(self) -> Attempts:
        """The attempt loop of this model's calls, from its settings now (:mod:`runner.models._attempts`): each try
        takes its :meth:`route`."""
        return Attempts(self.name, self.retry, self.timeout, self._pinned, self.route, self._failures())

    def _http(self, route: Route) -> openai.AsyncOpenAI:
        """The HTTP client of the running event loop for ``route`` (:meth:`ClientPool.client
        <runner.models._requests.ClientPool.client>`)."""
        return self._clients.client(route, api_key=self._api_key, timeout=self.timeout, name=self.name)

    async def aclose(self) -> None:
        """Close the running event loop's HTTP client (a later call in this loop opens a new one)."""
        await self._clients.aclose()

    async def _generate(self, request: ChatRequest) -> ChatReply:
        """One call: to the replica the run serves when there is one (its default output limit filled in for a
        call that sets none, its answer streamed when its server cancels only streams), else to :attr:`base_url`.
        A replica published with its tokenizer whose server reports no usage has the call's tokens counted here
        (:mod:`runner.models._counting`, ``counted_by="runner"``).

        The output limit and the prompt's fit are decided once, from the route the call sees first: the replica's
        engine and tokenizer are facts of the model, which its restarts keep. Where each attempt goes, and under
        which name, is its own route's (:meth:`Attempts.run <runner.models._attempts.Attempts.run>`)."""
        kwargs = request_kwargs(request, self.spec, name=self.name, noted=self._dropped_noted)
        turn = request.count("assistant")
        attempts, reader = self._attempts(), self._reader()

        async def once(route: Route, answer: Answer) -> ChatReply:
            body = {**kwargs, "model": route.wire_model}
            if route.stream:
                return await self._streamed(route, body, answer, turn)
            raw = await self._http(route).chat.completions.with_raw_response.create(**body)
            return reader.answered(route, raw.http_response, answer, turn, asked=body)

        await attempts.replica_ready()
        first = self.route()
        # The output limit of a call to a served model that sets none (runner.core.served.SERVED_MAX_TOKENS).
        limit = first.max_tokens if request.max_tokens is None else None
        counted = first.tokenizer is not None
        prompt = None
        if first.tokenizer is not None:
            # Its server hangs on a conversation longer than the context instead of refusing it: count it here,
            # and give the answer no more than the room the prompt leaves (at least one token).
            asked = request.max_tokens
            if asked is None and limit is not None:
                asked = 1
            checked = await asyncio.to_thread(fit, first.tokenizer, kwargs.get("messages") or [],
                                              kwargs.get("tools"), asked)
            if checked.why is not None:
                return reader.too_long(first, checked.why)
            prompt = checked.prompt
            if limit is not None and checked.room is not None:
                limit = min(limit, checked.room)
        if limit is not None:
            kwargs[self.spec.max_tokens_param] = limit
        tokens = estimate_tokens(kwargs, limit or request.max_tokens)
        uses_tools = bool(request.tools)
        try:
            reply = await attempts.run(once, uses_tools=uses_tools, tokens=tokens)
        except ModelError as exc:
            if exc.error_code != CONTEXT_LENGTH_EXCEEDED:
                raise
            refusal = exc
        else:
            if first.tokenizer is None or reply.usage.total_tokens is not None:
                return reply
            # The server reported no usage (a stream that carries none): counted with the model's own tokenizer.
            return await asyncio.to_thread(with_counted_usage, first.tokenizer, reply, kwargs.get("messages") or [],
                                           kwargs.get("tools"), prompt)
        if limit is not None and not counted:
            # The limit chosen here does not fit beside the prompt (vLLM and SGLang refuse prompt plus max_tokens
            # over the context): without it the server gives the answer the room left, which is less than it.
            del kwargs[self.spec.max_tokens_param]
            try:
                return await attempts.run(once, uses_tools=uses_tools, tokens=tokens)
            except ModelError as exc:
                if exc.error_code != CONTEXT_LENGTH_EXCEEDED:
                    raise
                refusal = exc
        return reader.too_long(first, str(refusal))

    async def _streamed(self, route: Route, body: dict[str, Any], answer: Answer, turn: int) -> ChatReply:
        """One request with its answer streamed (``stream: true``), put together into the reply a plain request
        would have had (:mod:`runner.models._stream`). Leaving it early (the model timeout, a cancellation) closes
        the stream, which is what makes ``transformers serve`` stop generating. An answer that is plain JSON after
        all (a server that does not stream) is read as one.

        Raises:
            openai.APIStatusError: an error status, as for a plain request.
            ModelProtocolError: an event stream that is not the OpenAI API's.
            ModelError: as :meth:`ReplyReader.reply <runner.models._reading.ReplyReader.reply>`.
        """
        reader = self._reader()
        # The usage is asked for (runner.models._requests.stream_kwargs).
        extra = stream_kwargs(self.spec)
        async with self._http(route).chat.completions.with_streaming_response.create(**body, **extra) as raw:
            response = raw.http_response
            if media_type(response) == "application/json":
                await response.aread()
                return reader.answered(route, response, answer, turn, asked=body)
            try:
                events = await read_events(response.aiter_lines())
            except UnreadableReply as exc:
                raise reader.failures.protocol_error(route, response, exc) from None
        return reader.answered(route, response, answer, turn, events, asked=body)

    async def check(self) -> None:
        """List the server's models once (no retries: a preflight should fail fast).

        A server without ``/models`` (404, 405 or 501) passes: it answered, unless it answered with a web page (a web
        server's "Not Found" page: the URL is not the API's). So does one whose list is JSON of another shape (a
        warning). A body that is not JSON (a web page, text, nothing) is refused: the URL is not the API.
        A model missing from the list is an error for servers that list exactly what they serve (vLLM, Ollama;
        ``name`` and ``name:latest`` both match), a warning elsewhere.

        Raises:
            ModelError: cannot connect, the key is rejected, the server fails or answers an error, or it does not
                serve the model.
            ModelProtocolError: the answer is not the OpenAI API (``text/html: ... is the URL missing /v1?``).
        """
        log = structlog.get_logger("runner.models")
        route = self.route()
        failures = self._failures()
        try:
            answer = await self._attempts().within_deadline(self._http(route).models.with_raw_response.list())
        except asyncio.TimeoutError as exc:
            raise failures.timeout_error(route, 1) from exc
        except openai.APIConnectionError as exc:
            if isinstance(exc.__cause__, httpx.DecodingError):
                raise failures.undecodable(route, exc.__cause__) from exc
            raise failures.connection_error(route, exc, 1) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                # No /models here: a server of the API that lacks the route still answers JSON or nothing; a web
                # page says the URL is not the API's.
                missing = failures.missing_route(route, exc)
                if missing is not None and is_page(exc.response):
                    raise missing from None
                return
            raise failures.status_error(route, exc, 1, uses_tools=False) from exc
        response = answer.http_response
        try:
            served = served_models(json_body(response))
        except UnreadableReply as exc:
            raise failures.protocol_error(route, response, exc) from None
        except ErrorReply as exc:
            raise ModelError(f"{self.name} at {route.url}: GET /models answered HTTP {response.status_code} with "
                             f"an error: {exc.detail}; check the server", status=exc.status) from None
        if served is None:
            log.warning("model.list_unreadable", model=self.name, url=str(response.url))
            return
        name = route.wire_model
        if not served or name in served or f"{name}:latest" in served:
            return
        shown = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
        if self.spec.lists_served_models:
            raise ModelError(f"{self.name}: the server at {route.url} does not serve model {self.model!r}; "
                             f"it serves: {shown}; pass --model {self.provider}:<one of them>")
        log.warning("model.not_listed", model=self.name, url=route.url, served=served[:10])

