"""A raw OpenAI-API request through a model's own path: for a harness's model class that builds its payloads itself
(lm-evaluation-harness's ``local-completions`` and ``local-chat-completions``) and needs only the transport.

The request goes where the model's chat calls go (its pinned base URL, else the replica this process's run serves
it on, with that replica's own model name, read together once per attempt: :class:`~runner.models._route.Route`),
holds a permit of the run's limiter, and is retried, timed and explained as a chat call is
(:meth:`Attempts.run <runner.models._attempts.Attempts.run>`). Its answer is read and checked as a chat call's is
(:class:`~runner.models._reading.ReplyReader`): an answer that is not the API is a protocol error, one without a
choice is ``no_choice``, one that lacks what the request asked for (``echo``'s prompt log-probabilities, ``n``
choices) is ``ignored_option`` (:mod:`runner.models._asked`). The run's response cache answers it when its policy
takes the request, as for a chat call. Usage is not recorded here: one request may carry the prompts of several
items, and its caller knows whose they are; :class:`Posted` gives it the server's counts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import structlog

from runner.core.cache import cache_key, cacheable, current_cache, current_repeat, current_weights, deterministic
from runner.core.limits import Answer, estimate_tokens
from runner.models._body import json_body
from runner.models._model_errors import ModelError, one_line
from runner.models._openai import OpenAICompatibleModel
from runner.models._route import Route
from runner.models._types import Usage

PATHS = ("completions", "chat/completions")
"""The routes :func:`post_json` sends to, below the API root."""


@dataclass(frozen=True)
class Posted:
    """The answer of one raw request.

    Args:
        body: the answer's JSON body, as the server sent it (or as the response cache kept it).
        usage: the server's token counts of the whole request (``None`` counts: it reported none; 0 for a reply
            from the cache, which cost nothing).
        cache: ``"hit"`` (the response cache answered: no request was sent), ``"miss"`` (a cacheable request the
            cache did not hold), ``None`` (the cache was not asked).
    """

    body: dict[str, Any]
    usage: Usage
    cache: Literal["hit", "miss"] | None = None


async def post_json(model: OpenAICompatibleModel, path: str, payload: dict[str, Any]) -> Posted:
    """``POST <api root>/<path>`` with ``payload`` (its ``model`` replaced by the name the server knows), and its
    answer, checked against the request.

    Args:
        model: the model whose server, retries, timeout and limiter endpoint the request uses.
        path: ``completions`` or ``chat/completions`` (:data:`PATHS`).
        payload: the request body (prompt or messages, ``max_tokens``, ``logprobs``, ``echo``, ``stop``...).

    Raises:
        ValueError: another ``path``.
        ModelError: the request failed for good (after retries; the message is one line with the fix); the answer
            holds no choice (``no_choice``) or lacks what the request asked for (``ignored_option``).
        ModelProtocolError: the answer is not JSON of the OpenAI API.
    """
    if path not in PATHS:
        raise ValueError(f"path {path!r}: use one of {', '.join(PATHS)}")
    body = dict(payload)
    endpoint = model.endpoint
    cache = current_cache()
    key = None
    if cache is not None and endpoint.base_url and cacheable(cache.policy, body.get("temperature"), body.get("seed")):
        repeat = None if deterministic(body.get("temperature"), body.get("seed")) else current_repeat()
        key = cache_key(model.provider, endpoint.base_url, model.model, {"path": path, **body}, repeat,
                        current_weights(model.name))
        cached = await _cached(model, cache, key)
        if cached is not None:
            return Posted(cached, Usage(input_tokens=0, output_tokens=0), "hit")

    reader = model._reader()

    async def once(route: Route, answer: Answer) -> Posted:
        sent = {**body, "model": route.wire_model}
        response = await model._http(route).post(f"/{path}", cast_to=httpx.Response, body=sent)
        answer.set(response.status_code, response.headers)
        try:
            reply = reader.reply(route, response, turn=0, asked=sent, path=path)
        except ModelError as exc:
            if exc.status is not None:
                # An error body with status 200 (its code says what happened: a 429 is a refusal for rate).
                answer.set(exc.status, response.headers)
            raise
        answer.tokens = reply.usage.total_tokens
        return Posted(json_body(response), reply.usage, "miss" if key is not None else None)

    posted = await model._attempts().run(once, tokens=estimate_tokens(body, body.get("max_tokens")))
    if cache is not None and key is not None:
        entry = {"provider": model.provider, "base_url": endpoint.base_url, "model": model.model, "path": path,
                 "body": posted.body, "created_at": time.time()}
        try:
            await asyncio.to_thread(cache.put, key, entry)
        except Exception as exc:  # noqa: BLE001 - the answer is good even when it cannot be cached
            structlog.get_logger("runner.models").warning("model.cache_unwritable", model=model.name, key=key,
                                                          error=one_line(exc, 200))
    return posted


async def _cached(model: OpenAICompatibleModel, cache: Any, key: str) -> dict[str, Any] | None:
    """The answer body stored under ``key``, or ``None`` (also when the cache cannot be read: logged, then the
    server is called)."""
    try:
        entry = await asyncio.to_thread(cache.get, key)
        return dict(entry["body"]) if entry is not None else None
    except Exception as exc:  # noqa: BLE001 - a broken cache must not fail the call
        structlog.get_logger("runner.models").warning("model.cache_unreadable", model=model.name, key=key,
                                                      error=one_line(exc, 200), detail="calling the server")
        return None
