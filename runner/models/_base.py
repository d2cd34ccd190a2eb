"""The chat-model interface every provider implements, and its convenience methods."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

import structlog
from pydantic import BaseModel, ValidationError
from typing_extensions import Self

from runner.core.cache import (ResponseCache, cache_key, cacheable, current_cache, current_repeat, current_weights,
                               deterministic)
from runner.core.limits import Endpoint, spend
from runner.core.usage import record_usage
from runner.models._model_errors import StructuredOutputError, one_line
from runner.models._json import parse_json, schema_instructions
from runner.models._types import (
    ChatReply,
    ChatRequest,
    Message,
    ToolChoice,
    normalize_messages,
    normalize_response_format,
    normalize_tool_choice,
    normalize_tools,
    system_message,
    user_message,
)


T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

StructuredMode = Literal["json_schema", "json_object", "prompt"]
"""How :meth:`ChatModel.chat_structured` asks for JSON: ``json_schema`` (the server constrains the output to the
schema; OpenAI, vLLM, Ollama), ``json_object`` (any JSON object, the schema in the system prompt; DashScope, whose
``json_schema`` works for few models) or ``prompt`` (no response format, the schema in the system prompt; for servers
that reject response formats)."""


class ChatModel(ABC):
    """A chat model: OpenAI-style messages and tools in, a :class:`ChatReply` out.

    Build one with :meth:`from_name` (``"openai:gpt-4o"``, ``"vllm:Qwen/Qwen2.5-7B-Instruct"``, ``"mock"``...) once
    per worker, and share it: it holds no conversation state, so concurrent calls are safe, and copies of it (as
    when a task holding a judge model is deep-copied per repeat) are the same object. It pickles without its HTTP
    client, which is rebuilt on first use, so it can travel to Ray workers inside a task or metric.

    Every call records its tokens with :func:`runner.core.usage.record_usage` under :attr:`name`, so the usage lands
    in the current item's record and is summed in ``summary.json``, and counts them against the run's budget
    (:func:`runner.core.limits.spend`). A model with a server (:attr:`base_url`) answers a cacheable request from the
    run's response cache when it holds it (:mod:`runner.core.cache`: no call, no tokens) and stores the replies of
    those it calls.

    Subclasses implement :meth:`_generate` (and may override :meth:`check` and :meth:`aclose`).

    Args:
        provider: the provider's name (``openai``, ``vllm``, ``ollama``, ``dashscope``, ``mock``).
        model: the model name as the server knows it.
        temperature, max_tokens, seed: defaults for every call that does not set them (``None``: the server's).
        structured_mode: the default :data:`StructuredMode` of :meth:`chat_structured`.
    """

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        structured_mode: StructuredMode = "json_schema",
    ) -> None:
        self.provider = provider
        self.model = model
        self.base_url: str | None = None
        self.defaults: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        self.structured_mode: StructuredMode = structured_mode

    @property
    def name(self) -> str:
        """``provider:model``: how usage is keyed in records and ``summary.json``."""
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def endpoint(self) -> Endpoint:
        """Where this model's calls go (provider, API root, model): the unit of the run's rate limits."""
        return Endpoint(self.provider, self.base_url or "", self.model)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __deepcopy__(self, memo: dict[int, Any]) -> ChatModel:
        # Stateless apart from its HTTP client, which copies must share rather than duplicate.
        return self

    @classmethod
    def from_name(cls, name: str, **options: Any) -> ChatModel:
        """The model ``provider:model``: :func:`runner.models.model_from_name` (its arguments, defaults and errors),
        e.g. ``ChatModel.from_name("vllm:Qwen/Qwen2.5-7B-Instruct", base_url="http://gpu:8000/v1")``."""
        from runner.models._providers import model_from_name

        return model_from_name(name, **options)

    async def chat(
        self,
        messages: str | Sequence[Message | ChatReply | BaseModel | str],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: str | dict[str, Any] | type[BaseModel] | None = None,
        seed: int | None = None,
        stop: str | list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatReply:
        """One chat completion.

        Args:
            messages: OpenAI-format messages (dicts; :class:`ChatReply` objects stand for their assistant message),
                or a string for a single user message.
            tools: function definitions, OpenAI form ``{"type": "function", "function": {"name", "description",
                "parameters"}}`` or short form ``{"name", "description", "parameters"}`` (``parameters``: JSON schema).
            tool_choice: ``"auto"`` (the servers' default when tools are given), ``"none"``, ``"required"``, or a
                tool name to force that tool; ignored without ``tools``.
            temperature: sampling temperature; default: the model's default, else the server's.
            max_tokens: the most output tokens; default as for ``temperature``.
            response_format: ``"json"`` for any JSON object, a pydantic model class for JSON matching its schema,
                an OpenAI response-format dict, or ``None``/``"text"``.
            seed: sampling seed, where the server supports one.
            stop: stop sequence(s). The reply is also cut here at the first of them, the stop sequence left out
                (OpenAI's rule): ``transformers serve`` with continuous batching ignores ``stop``, and a reply
                must not depend on whether the server applied it.
            extra_body: extra request fields passed as they are (e.g. ``{"top_k": 20}`` for vLLM).

        Returns:
            the :class:`ChatReply` (from the run's response cache when it holds the request); its tokens are also
            recorded for the current item and counted against the run's budget (a cached reply's are not).

        Raises:
            ModelError: the call failed for good (after retries); the message is one line with the fix.
            ModelProtocolError: the server's answer is not the OpenAI API (a web page, another API's reply, a
                message of a shape no known server sends); not retried.
            TypeError, ValueError: malformed messages or tools (a bug in the caller).
        """
        chosen = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed}
        settings = {key: value if value is not None else self.defaults.get(key) for key, value in chosen.items()}
        request = ChatRequest(
            model=self.model,
            messages=normalize_messages(messages),
            tools=normalize_tools(tools),
            tool_choice=normalize_tool_choice(tool_choice) if tools else None,
            response_format=normalize_response_format(response_format),
            stop=stop,
            extra_body=extra_body,
            **settings,
        )
        started = time.perf_counter()
        endpoint = self.endpoint  # one look, for the cache's key and entry
        cache, key = self._cache_for(request, endpoint)
        cached = await self._cached(cache, key) if cache is not None and key is not None else None
        if cached is not None:
            record_usage(self.name, cache="hit")
            reply = cached
        else:
            reply = cut_at_stop(await self._generate(request), request.stop)
            if cache is not None and key is not None:
                await self._store(cache, key, reply, endpoint)
            record_usage(self.name, reply.usage.input_tokens, reply.usage.output_tokens,
                         cache="miss" if key is not None else None, counted_by=reply.usage.counted_by)
            spend(self.name, reply.usage.input_tokens, reply.usage.output_tokens)
        structlog.get_logger("runner.models").debug(
            "model.call",
            model=self.name,
            seconds=round(time.perf_counter() - started, 4),
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            tool_calls=len(reply.tool_calls),
            finish_reason=reply.finish_reason,
            cached=cached is not None,
        )
        return reply

    def _cache_for(self, request: ChatRequest, endpoint: Endpoint) -> tuple[ResponseCache | None, str | None]:
        """The run's cache and the request's key in it (a sampled request's per repeat of the item), when the model
        has a server (``endpoint``: where its calls go) and the cache's policy takes the request (``(None, None)``
        otherwise)."""
        cache = current_cache()
        if cache is None or not endpoint.base_url or not cacheable(cache.policy, request.temperature, request.seed):
            return None, None
        repeat = None if deterministic(request.temperature, request.seed) else current_repeat()
        # The endpoint's API root, not base_url: every replica of a served model shares one (runner.core.served).
        return cache, cache_key(self.provider, endpoint.base_url, self.model, request.to_openai_kwargs(), repeat,
                                current_weights(self.name))

    async def _cached(self, cache: ResponseCache, key: str) -> ChatReply | None:
        """The reply stored under ``key``, or ``None`` (also when the cache cannot be read: logged, then the server
        is called)."""
        try:
            entry = await asyncio.to_thread(cache.get, key)
            return ChatReply.model_validate(entry["reply"]) if entry is not None else None
        except Exception as exc:  # noqa: BLE001 - a broken cache must not fail the call
            structlog.get_logger("runner.models").warning("model.cache_unreadable", model=self.name, key=key,
                                                          error=one_line(exc, 200), detail="calling the server")
            return None

    async def _store(self, cache: ResponseCache, key: str, reply: ChatReply, endpoint: Endpoint) -> None:
        """Store ``reply`` under ``key`` (a cache that cannot be written is logged; the reply stands); the entry names
        ``endpoint``'s API root (``served-by-run`` for a served model, whose replicas' ports come and go)."""
        entry = {"provider": self.provider, "base_url": endpoint.base_url, "model": self.model,
                 "reply": reply.model_dump(mode="json"), "created_at": time.time()}
        try:
            await asyncio.to_thread(cache.put, key, entry)
        except Exception as exc:  # noqa: BLE001 - the reply is good even when it cannot be cached
            structlog.get_logger("runner.models").warning("model.cache_unwritable", model=self.name, key=key,
                                                          error=one_line(exc, 200))

    async def chat_structured(
        self,
        messages: str | Sequence[Message | ChatReply | BaseModel | str],
        output_type: type[T],
        *,
        mode: StructuredMode | None = None,
        repair_attempts: int = 1,
        **options: Any,
    ) -> T:
        """A reply parsed into the pydantic model ``output_type`` (for judges and metric adapters).

        The reply's JSON is found tolerantly (:func:`parse_json`: code fences and surrounding prose are skipped)
        and validated. When that fails, the model is shown its reply and the validation error and asked again,
        up to ``repair_attempts`` times.

        Args:
            messages: as for :meth:`chat`.
            output_type: the pydantic model to fill.
            mode: ``json_schema``, ``json_object`` or ``prompt`` (see :data:`StructuredMode`); default: the
                provider's (:attr:`structured_mode`).
            repair_attempts: extra calls after an unparseable reply (0: none).
            options: other :meth:`chat` arguments (``temperature``, ``max_tokens``...).

        Raises:
            StructuredOutputError: no valid reply after the repair attempts (one line quoting the error).
            ModelError: a call failed for good.
            ValueError: an unknown ``mode``.
        """
        mode = mode or self.structured_mode
        if mode not in ("json_schema", "json_object", "prompt"):
            raise ValueError(f"mode {mode!r}: use json_schema, json_object or prompt")
        conversation = normalize_messages(messages)
        if mode != "json_schema":
            instructions = schema_instructions(output_type.model_json_schema())
            conversation = [system_message(instructions), *conversation]
        response_format: Any = {"json_schema": output_type, "json_object": "json", "prompt": None}[mode]
        problem = ""
        for attempt in range(repair_attempts + 1):
            reply = await self.chat(conversation, response_format=response_format, **options)
            try:
                return output_type.model_validate(parse_json(reply.content))
            except (ValueError, ValidationError) as exc:
                problem = one_line(exc, 200)
            if attempt < repair_attempts:
                conversation = [
                    *conversation,
                    reply.to_message(),
                    user_message(f"That reply is not valid: {problem}. Reply again with only the JSON object."),
                ]
        raise StructuredOutputError(
            f"{self.name}: the reply is not a valid {output_type.__name__} after {repair_attempts + 1} "
            f"attempt(s): {problem}"
        )

    def chat_sync(self, messages: str | Sequence[Message | ChatReply | BaseModel | str], **options: Any) -> ChatReply:
        """:meth:`chat` for synchronous code (e.g. a sync metric adapter's ``generate``); see :meth:`_run_sync`."""
        return self._run_sync(lambda: self.chat(messages, **options))

    def chat_structured_sync(
        self, messages: str | Sequence[Message | ChatReply | BaseModel | str], output_type: type[T], **options: Any
    ) -> T:
        """:meth:`chat_structured` for synchronous code; see :meth:`_run_sync`."""
        return self._run_sync(lambda: self.chat_structured(messages, output_type, **options))

    def _run_sync(self, call: Callable[[], Awaitable[R]]) -> R:
        """Run ``call()`` to completion in a fresh event loop, closing this model's connections in it after.

        From a thread that already runs a loop, the fresh loop runs in a helper thread (which blocks the caller's
        loop until the reply comes: prefer the async methods there). Usage is recorded for the caller's item
        either way (the caller's context variables are carried over).
        """

        async def once() -> R:
            try:
                return await call()
            finally:
                await self.aclose()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(once())
        context = contextvars.copy_context()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(context.run, asyncio.run, once()).result()

    async def check(self) -> None:
        """A cheap preflight request that fails fast when the model cannot be used (default: nothing to check).

        Raises:
            ModelError: the server cannot be reached, rejects the key, or does not serve the model.
            ModelProtocolError: the server's answer is not the OpenAI API.
        """

    async def aclose(self) -> None:
        """Release the running event loop's network resources (the model stays usable: they are re-created on the
        next call). ``async with model:`` calls it on exit."""

    @abstractmethod
    async def _generate(self, request: ChatRequest) -> ChatReply:
        """Answer one normalised request (retries included). Usage is recorded by :meth:`chat`, not here."""


def cut_at_stop(reply: ChatReply, stop: str | list[str] | None) -> ChatReply:
    """``reply`` with its text cut before the first occurrence of any of the ``stop`` sequences (and its
    ``finish_reason`` then ``stop``), as a server that applies ``stop`` sends it; unchanged when none occurs."""
    sequences = [stop] if isinstance(stop, str) else [term for term in stop or [] if term]
    if not sequences or not reply.content:
        return reply
    cuts = [reply.content.find(term) for term in sequences if term in reply.content]
    if not cuts:
        return reply
    return reply.model_copy(update={"content": reply.content[:min(cuts)], "finish_reason": "stop"})
