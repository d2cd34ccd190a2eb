"""A raw OpenAI-API request through a model's own path: for a harness's model class that builds its payloads itself
(lm-evaluation-harness's ``local-completions`` and ``local-chat-completions``) and needs only the transport.

The request goes where the model's chat calls go (its pinned base URL, else the replica this process's run serves
it on, with that replica's own model name, read together once per attempt: :class:`~runner.models._route.Route`),
holds a permit of the run's limiter, and is retried, timed and explained as a chat call is
(:meth:`OpenAICompatibleModel._with_retries <runner.models._openai.OpenAICompatibleModel._with_retries>`). Usage is
not recorded here: one request may carry the prompts of several items, and its caller knows whose they are.
"""

from __future__ import annotations

from typing import Any

import httpx

from runner.core.limits import Answer, estimate_tokens
from runner.models._body import json_body
from runner.models._model_errors import UnreadableReply
from runner.models._openai import OpenAICompatibleModel
from runner.models._route import Route

PATHS = ("completions", "chat/completions")
"""The routes :func:`post_json` sends to, below the API root."""


async def post_json(model: OpenAICompatibleModel, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``POST <api root>/<path>`` with ``payload`` (its ``model`` replaced by the name the server knows), and the JSON
    body of the answer.

    Args:
        model: the model whose server, retries, timeout and limiter endpoint the request uses.
        path: ``completions`` or ``chat/completions`` (:data:`PATHS`).
        payload: the request body (prompt or messages, ``max_tokens``, ``logprobs``, ``echo``, ``stop``...).

    Raises:
        ValueError: another ``path``.
        ModelError: the request failed for good (after retries; the message is one line with the fix).
        ModelProtocolError: the answer is not JSON of the OpenAI API.
    """
    if path not in PATHS:
        raise ValueError(f"path {path!r}: use one of {', '.join(PATHS)}")
    body = dict(payload)

    async def once(route: Route, answer: Answer) -> dict[str, Any]:
        sent = {**body, "model": route.wire_model}
        response = await model._http(route).post(f"/{path}", cast_to=httpx.Response, body=sent)
        answer.set(response.status_code, response.headers)
        try:
            data = json_body(response)
        except UnreadableReply as exc:
            raise model._protocol_error(route, response, exc) from None
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            answer.tokens = usage["total_tokens"]
        return data

    tokens = estimate_tokens(body, body.get("max_tokens"))
    return await model._with_retries(once, tokens=tokens)
