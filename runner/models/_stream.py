"""A streamed ``/chat/completions`` answer (server-sent events) read back into the body of a plain one.

The model layer streams its calls to a replica whose server cancels a generation only when its answer is streamed
(``transformers serve``, :attr:`runner.core.served.ServedEndpoint.stream`): a call it abandons closes the stream,
and the server stops generating. The answer is then one ``data: {...}`` event per ``chat.completion.chunk``, ending
with ``data: [DONE]``; :func:`read_events` puts the chunks together into the ``chat.completion`` body the server
would have sent without streaming, and :func:`runner.models._replies.read_completion` reads it as any other answer
(reasoning, tool calls, usage: one reader for both).

Put together, as OpenAI's streaming guide describes the deltas: ``content`` and the reasoning fields
(``reasoning_content``, ``reasoning``) are concatenated; a tool call's ``id``, ``type`` and ``function.name`` come
once and its ``function.arguments`` in pieces, keyed by the delta's ``index``; the last ``finish_reason`` and the
last ``usage`` of any chunk win (the chunk with the finish reason carries it in ``transformers serve`` 5.17; a last
chunk without choices when the request asks, ``stream_options.include_usage``, in OpenAI's API, vLLM and
``transformers serve`` 5.25; every chunk, cumulative, in vLLM's ``continuous_usage_stats``). An event that carries an ``error``
instead of choices (``transformers serve`` sends ``data: {"error": "..."}`` when generation fails) becomes the body's
``error``, which the reader raises as :class:`~runner.models._model_errors.ErrorReply`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from runner.models._model_errors import UnreadableReply, one_line

DONE = "[DONE]"
_REASONING = ("reasoning_content", "reasoning")


async def read_events(lines: AsyncIterator[str]) -> dict[str, Any]:
    """The ``chat.completion`` body of a streamed answer (see the module docstring).

    Args:
        lines: the answer's lines as they arrive (``httpx.Response.aiter_lines()``).

    Returns:
        the body: ``choices[0].message`` put together from the deltas, ``finish_reason``, ``usage``; or ``{"error":
        ...}`` when an event carried an error.

    Raises:
        UnreadableReply: an event whose data is not a JSON object, or a stream that held no event at all.
    """
    body: dict[str, Any] = {"object": "chat.completion"}
    message: dict[str, Any] = {"role": "assistant"}
    texts: dict[str, list[str]] = {"content": [], **{name: [] for name in _REASONING}}
    calls: dict[int, dict[str, Any]] = {}
    finish_reason = None
    events = 0
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, ': comments', 'event:' and 'id:' fields
        data = line[5:].strip()
        if data == DONE:
            break
        events += 1
        try:
            chunk = json.loads(data)
        except ValueError:
            raise UnreadableReply(f"a stream event that is not JSON ({one_line(data, 80)!r})") from None
        if not isinstance(chunk, Mapping):
            raise UnreadableReply(f"a stream event that is JSON {type(chunk).__name__}, not an object")
        if chunk.get("error") is not None and not chunk.get("choices"):
            return {"error": chunk["error"]}
        for key in ("id", "model", "created"):
            if chunk.get(key) and key not in body:
                body[key] = chunk[key]
        if isinstance(chunk.get("usage"), Mapping):
            body["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("finish_reason"), str):
                finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            for name, parts in texts.items():
                if isinstance(delta.get(name), str):
                    parts.append(delta[name])
            for position, call in enumerate(delta.get("tool_calls") or []):
                if isinstance(call, Mapping):
                    _add_call(calls, call, position)
    if not events:
        raise UnreadableReply("an event stream without a single event")
    for name, parts in texts.items():
        if parts:
            message[name] = "".join(parts)
    message.setdefault("content", None)
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    body["choices"] = [{"index": 0, "message": message, "finish_reason": finish_reason}]
    return body


def _add_call(calls: dict[int, dict[str, Any]], delta: Mapping[str, Any], position: int) -> None:
    """Fold one tool-call delta into ``calls`` (index -> the call so far)."""
    index = delta.get("index")
    index = index if isinstance(index, int) else position
    call = calls.setdefault(index, {"type": "function", "function": {"name": "", "arguments": ""}})
    for key in ("id", "type"):
        if isinstance(delta.get(key), str) and delta[key]:
            call[key] = delta[key]
    function = delta.get("function")
    if isinstance(function, Mapping):
        if isinstance(function.get("name"), str) and function["name"]:
            call["function"]["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["function"]["arguments"] += arguments
        elif arguments is not None:
            call["function"]["arguments"] = arguments
