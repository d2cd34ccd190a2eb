"""The ``/chat/completions`` bodies that OpenAI-compatible servers send, read into one :class:`ChatReply`.

Servers agree on ``choices[0].message`` and little inside it. Read here (``docs/models.md`` has the table):

- **content**: a string; ``null`` (tool calls only); a list of parts, each a string or ``{"type": ...}``: text
  parts (``text``, ``output_text``, ``refusal``, or no type and a ``text`` string) make the answer, reasoning parts
  (``thinking``: Anthropic-style gateways, LiteLLM, Mistral's Magistral, whose ``thinking`` is itself a list of text
  chunks; ``reasoning``: OpenAI's Responses items and Databricks, text under ``summary`` or ``content``; ``thought``;
  OpenRouter's ``reasoning.text``/``reasoning.summary``) go to :attr:`ChatReply.reasoning`, tool parts (Anthropic's
  ``tool_use``, the Responses API's ``function_call``) become tool calls, and parts that carry no text (images,
  references, redacted or encrypted reasoning) are skipped. A part's text may sit under ``text``, ``content``,
  ``thinking``, ``reasoning``, ``summary``, ``value`` or ``refusal``, as a string, a list of such parts, or an object
  (``{"value": ..., "annotations": [...]}``). One part object instead of a list is read as a list of one.
- **reasoning** beside the content: ``reasoning_content`` (DeepSeek, SGLang, LiteLLM, vLLM before 0.11),
  ``reasoning`` (vLLM since, Ollama, OpenRouter, Groq), ``thinking`` (Ollama's native field), ``reasoning_details``
  (OpenRouter) and ``thinking_blocks`` (LiteLLM), each a string, a list of parts or an object; a source that only
  repeats another (OpenRouter sends ``reasoning`` and ``reasoning_details`` with one text) is kept once.
- ``<think>...</think>`` in the text (DeepSeek-R1 and Qwen3 served without a reasoning parser), also a ``</think>``
  without its opening tag (chat templates that open the block in the prompt) and an opening tag never closed (the
  reply was cut at ``max_tokens``): moved to the reasoning. The answer never holds reasoning.
- ``refusal`` with no content (OpenAI): the refusal is the answer.
- **tool calls**: ``tool_calls`` (also a single object), or the legacy ``function_call``; the function under
  ``function`` or at the call's top level; arguments a JSON string, an object, or a string that encodes a JSON string
  (see :meth:`ToolCall.parse`); a missing id is derived from the turn, the position and the call, so it is stable
  across runs and unique in the conversation.
- **usage**: ``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``; a count that is missing
  or not a non-negative integer is unknown (``None``), never 0.
- An ``error`` object in a success answer (OpenRouter and other gateways pass upstream failures on this way), at the
  top level or in the choice: :class:`ErrorReply`.
- A well-formed completion without a choice: ``choices: []`` (a content filter's block: Azure OpenAI's
  ``prompt_filter_results``, Gemini through LiteLLM or OpenAI's endpoint with ``prompt_feedback``, a gateway's
  ``error`` object), or a choice with a ``finish_reason`` and no message: :class:`NoChoice`, with the provider's
  reason when it gives one.

Anything else is :class:`UnreadableReply`, whose shape names the field and what it held, with a hint when the body
is another API's (Ollama's ``/api/chat``, Anthropic's Messages API, Gemini's ``generateContent``, OpenAI's Responses
API, a FastAPI error).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from runner.models._model_errors import ErrorReply, NoChoice, UnreadableReply, one_line
from runner.models._types import ChatReply, ToolCall, Usage

TEXT_PARTS = frozenset({"text", "output_text", "refusal"})
REASONING_PARTS = frozenset({"thinking", "reasoning", "thought", "reasoning.text", "reasoning.summary"})
TOOL_PARTS = frozenset({"tool_use", "function_call"})
TEXT_KEYS = ("text", "content", "thinking", "reasoning", "summary", "value", "refusal")
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking", "reasoning_details", "thinking_blocks")

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)

# Bodies of other APIs: (keys that identify one, the words for it, the fix).
_FOREIGN: tuple[tuple[frozenset[str], str, str], ...] = (
    (frozenset({"message", "done"}), "an Ollama-native /api/chat reply",
     "point --model-base-url at Ollama's OpenAI API, http://<host>:11434/v1"),
    (frozenset({"type", "content", "stop_reason"}), "an Anthropic Messages API reply",
     "use a gateway's OpenAI-compatible /v1 endpoint"),
    (frozenset({"candidates"}), "a Gemini generateContent reply",
     "use Gemini's OpenAI endpoint, https://generativelanguage.googleapis.com/v1beta/openai"),
    (frozenset({"output", "object"}), "an OpenAI Responses API reply", "use the server's /v1 chat completions API"),
    (frozenset({"detail"}), "a web framework's error", "check the URL: the server has no such endpoint"),
)


def read_completion(body: Any, *, turn: int, model: str) -> ChatReply:
    """The reply in a ``/chat/completions`` JSON body (the first choice).

    Args:
        body: the decoded JSON.
        turn: how many assistant messages the request held (for ids of tool calls that came without one).
        model: the model name to report when the body names none.

    Raises:
        ErrorReply: the body carries an error instead of a reply.
        NoChoice: the body is a chat completion without a choice (see the module docstring).
        UnreadableReply: the body is not a chat completion, or its message has a shape no known server sends.
    """
    choice = _first_choice(body)
    if not isinstance(choice, Mapping):
        raise UnreadableReply(f"choices[0] is {_kind(choice)}")
    message = choice.get("message")
    if not isinstance(message, Mapping):
        _raise_error(choice.get("error"))
        if message is None and "text" not in choice and isinstance(choice.get("finish_reason"), str):
            raise NoChoice(f"finish_reason {choice['finish_reason']!r} and no message")
        if "text" in choice:
            raise UnreadableReply("a text completion (choices[0] has 'text', no 'message')",
                                  "the server answered the /completions API; check --model-base-url")
        raise UnreadableReply(f"choices[0] has no message object ({_keys(choice)})")
    text, reasoning, part_calls = _content(message.get("content"))
    if text is None and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    text, inline = split_think(text)
    calls = [*_tool_calls(message), *part_calls]
    calls = [_with_id(call, turn, index) for index, call in enumerate(calls)]
    sources = [_text_of(message.get(field)) for field in REASONING_FIELDS]
    return ChatReply(
        content=text,
        tool_calls=calls,
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        usage=read_usage(body.get("usage")),
        model=body["model"] if isinstance(body.get("model"), str) and body["model"] else model,
        reasoning=_join_reasoning([*sources, *reasoning, inline]),
    )


def read_text_completion(body: Any, *, model: str) -> ChatReply:
    """The first choice of a ``/completions`` JSON body (the legacy completions API, which lm-eval's
    ``local-completions`` speaks), as a :class:`ChatReply`: its ``text``, finish reason and usage. The other
    choices (one per prompt of a batch) are the caller's to read.

    Raises:
        ErrorReply: the body carries an error instead of a completion.
        NoChoice: ``choices: []`` (with the provider's reason, as for a chat completion).
        UnreadableReply: the body is not a text completion (no ``choices``, a choice without ``text``).
    """
    choice = _first_choice(body)
    if not isinstance(choice, Mapping) or not isinstance(choice.get("text"), str):
        _raise_error(choice.get("error") if isinstance(choice, Mapping) else None)
        if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping):
            raise UnreadableReply("a chat completion (choices[0] has 'message', no 'text')",
                                  "the server answered the /chat/completions API; check --model-base-url")
        raise UnreadableReply(f"choices[0] has no text ({_keys(choice) if isinstance(choice, Mapping) else _kind(choice)})")
    return ChatReply(
        content=choice["text"],
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        usage=read_usage(body.get("usage")),
        model=body["model"] if isinstance(body.get("model"), str) and body["model"] else model,
    )


def read_usage(usage: Any) -> Usage:
    """Token counts from a ``usage`` object (OpenAI's or Anthropic's key names); unknown counts stay ``None``."""
    if not isinstance(usage, Mapping):
        return Usage()
    return Usage(input_tokens=_count(usage, "prompt_tokens", "input_tokens"),
                 output_tokens=_count(usage, "completion_tokens", "output_tokens"))


def served_models(body: Any) -> list[str] | None:
    """The model ids in a ``GET /models`` body (``{"data": [{"id": ...}, ...]}``), or ``None`` when it is JSON of
    another shape.

    Raises:
        ErrorReply: the body carries an error.
        UnreadableReply: the body is another API's error (FastAPI's ``{"detail": ...}``).
    """
    if not isinstance(body, Mapping):
        return None
    data = body.get("data")
    if isinstance(data, list):
        return [entry["id"] for entry in data if isinstance(entry, Mapping) and isinstance(entry.get("id"), str)]
    _raise_error(body.get("error"))
    if set(body) == {"detail"}:
        raise _foreign(body)
    return None


def split_think(text: str | None) -> tuple[str | None, str | None]:
    """``(answer, reasoning)``: ``text`` without its ``<think>`` blocks, and their text (``None`` when none).

    Also read: a ``</think>`` with no opening tag before it (the text before it is reasoning) and a ``<think>``
    never closed (the text after it is reasoning). Whitespace left at the start of the answer is dropped.
    """
    if not text:
        return text, None
    pieces = [match.strip() for match in _THINK_BLOCK.findall(text)]
    rest = _THINK_BLOCK.sub("", text)
    close = _THINK_CLOSE.search(rest)
    if close is not None:
        pieces.insert(0, rest[: close.start()].strip())
        rest = rest[close.end():]
    opening = _THINK_OPEN.search(rest)
    if opening is not None:
        pieces.append(rest[opening.end():].strip())
        rest = rest[: opening.start()]
    if len(rest) == len(text):
        return text, None
    return rest.lstrip(), "\n\n".join(piece for piece in pieces if piece) or None


def _content(content: Any) -> tuple[str | None, list[str | None], list[ToolCall]]:
    """``(answer text, reasoning texts, tool calls)`` of a message's ``content``."""
    if content is None or isinstance(content, str):
        return content, [], []
    if isinstance(content, Mapping) and content.get("type") in TEXT_PARTS | REASONING_PARTS | TOOL_PARTS:
        content = [content]
    if not isinstance(content, list):
        shown = f"a dict with keys {', '.join(map(str, content))}" if isinstance(content, Mapping) else _kind(content)
        raise UnreadableReply(f"content is {shown}")
    texts: list[str] = []
    reasoning: list[str | None] = []
    calls: list[ToolCall] = []
    for index, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise UnreadableReply(f"content part {index} is {_kind(part)}")
        kind = part.get("type")
        if kind in TEXT_PARTS or (kind is None and isinstance(part.get("text"), str)):
            texts.append(_text_of(part) or "")
        elif kind in REASONING_PARTS:
            reasoning.append(_text_of(part))
        elif kind in TOOL_PARTS:
            calls.append(_tool_call(part, index, "content part"))
        elif _text_of(part) is not None:
            raise UnreadableReply(f"content part {index} has type {kind!r} and text ({_keys(part)})",
                                  "a part of this type is neither the answer nor reasoning to this runner")
    text = "".join(texts) if texts else None
    return text, reasoning, calls


def _text_of(value: Any) -> str | None:
    """The text in a string, a list of parts or an object (under the first of :data:`TEXT_KEYS` that holds text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = [text for text in map(_text_of, value) if text is not None]
        return "".join(pieces) if pieces else None
    if isinstance(value, Mapping):
        for key in TEXT_KEYS:
            text = _text_of(value.get(key))
            if text is not None:
                return text
    return None


def _join_reasoning(sources: list[str | None]) -> str | None:
    """The reasoning texts joined by blank lines, each kept once (a text inside one already kept is dropped)."""
    kept: list[str] = []
    for source in sources:
        text = (source or "").strip()
        if text and not any(text in other for other in kept):
            kept = [other for other in kept if other not in text]
            kept.append(text)
    return "\n\n".join(kept) or None


def _tool_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    """The message's ``tool_calls`` (a list, or a single call object), else its legacy ``function_call``."""
    raw = message.get("tool_calls")
    if raw is None and isinstance(message.get("function_call"), Mapping):
        raw = [message["function_call"]]
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise UnreadableReply(f"tool_calls is {_kind(raw)}")
    return [_tool_call(call, index, "tool call") for index, call in enumerate(raw)]


def _tool_call(call: Any, index: int, what: str) -> ToolCall:
    """One call: the function under ``function`` or at the top level; arguments under ``arguments`` or ``input``.
    The id is left empty when the call has none (:func:`_with_id` fills it)."""
    if not isinstance(call, Mapping):
        raise UnreadableReply(f"{what} {index} is {_kind(call)}")
    function = call["function"] if isinstance(call.get("function"), Mapping) else call
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise UnreadableReply(f"{what} {index} has no function name ({_keys(call)})")
    arguments = function.get("arguments", function.get("input"))
    identifier = next((call[key] for key in ("id", "call_id") if isinstance(call.get(key), str) and call[key]), "")
    return ToolCall.parse(identifier, name, arguments)


def _with_id(call: ToolCall, turn: int, index: int) -> ToolCall:
    """``call``, with an id derived from the turn, its position and its content when it has none: 9 letters and
    digits (the only form Mistral's servers accept back), the same for the same reply at the same point."""
    if call.id:
        return call
    digest = hashlib.sha256(f"{turn}:{index}:{call.name}:{call.raw_arguments}".encode()).hexdigest()
    return call.model_copy(update={"id": digest[:9]})


def _count(usage: Mapping[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` that holds a non-negative whole number, as an ``int``; ``None`` when none does."""
    for key in keys:
        value = usage.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if value >= 0 and float(value).is_integer():
            return int(value)
    return None


def _first_choice(body: Any) -> Any:
    """The first choice of a completion's body, chat or text, after the checks both share.

    Raises:
        ErrorReply: the body carries an error instead of a completion.
        NoChoice: ``choices: []`` (with the provider's reason).
        UnreadableReply: the body is not an object, or has no list of choices.
    """
    if not isinstance(body, Mapping):
        raise UnreadableReply(f"JSON {_kind(body)}, not an object")
    choices = body.get("choices")
    if choices is None:
        _raise_error(body.get("error"))
        raise _foreign(body)
    if not isinstance(choices, list):
        raise UnreadableReply(f"'choices' is {_kind(choices)}")
    if not choices:
        raise _no_choice(body)
    return choices[0]


def _raise_error(error: Any) -> None:
    """Raise :class:`ErrorReply` for an ``error`` object or string; do nothing for ``None``."""
    if error is None:
        return
    if isinstance(error, Mapping):
        detail = error.get("message") if isinstance(error.get("message"), str) else str(dict(error))
        code = error.get("code", error.get("status"))
        raise ErrorReply(one_line(detail, 200), code if isinstance(code, int) and not isinstance(code, bool) else None)
    raise ErrorReply(one_line(error, 200))


def _no_choice(body: Mapping[str, Any]) -> NoChoice:
    """The error for a completion with ``choices: []``, with the provider's reason: an ``error`` object's message
    (and code), the categories Azure OpenAI's ``prompt_filter_results`` filtered, a ``prompt_feedback`` block reason
    (Gemini's, under either spelling)."""
    reasons: list[str] = []
    status = None
    error = body.get("error")
    if isinstance(error, Mapping):
        message = error.get("message") if isinstance(error.get("message"), str) else json.dumps(error, default=str)
        code = error.get("code", error.get("status"))
        if isinstance(code, int) and not isinstance(code, bool):
            status = code
        reasons.append(f"error{f' {code}' if code is not None else ''}: {message}")
    elif isinstance(error, str):
        reasons.append(f"error: {error}")
    filtered = [_filtered(result) for result in body.get("prompt_filter_results") or []
                if isinstance(result, Mapping)]
    if any(filtered):
        reasons.append(f"prompt_filter_results: {', '.join(part for part in filtered if part)}")
    feedback = body.get("prompt_feedback", body.get("promptFeedback"))
    if isinstance(feedback, Mapping):
        block = feedback.get("block_reason", feedback.get("blockReason"))
        if block:
            reasons.append(f"prompt_feedback: blocked ({block})")
    return NoChoice(one_line("; ".join(reasons), 200) if reasons else None, status)


def _filtered(result: Mapping[str, Any]) -> str:
    """The categories one entry of ``prompt_filter_results`` filtered (``hate filtered (high)``), or ``""``."""
    categories = result.get("content_filter_results")
    if not isinstance(categories, Mapping):
        return ""
    parts = []
    for name, verdict in categories.items():
        if isinstance(verdict, Mapping) and (verdict.get("filtered") or verdict.get("detected")):
            severity = verdict.get("severity")
            parts.append(f"{name} filtered{f' ({severity})' if isinstance(severity, str) else ''}")
    return ", ".join(parts)


def _foreign(body: Mapping[str, Any]) -> UnreadableReply:
    """The error for a JSON object without ``choices``: another API's reply when its keys say which."""
    shown = one_line(json.dumps(body, ensure_ascii=False, default=str), 120)
    for keys, words, hint in _FOREIGN:
        if keys <= set(body):
            return UnreadableReply(f"JSON without 'choices', {words}: {shown}", hint)
    return UnreadableReply(f"JSON without 'choices': {shown}")


def _kind(value: Any) -> str:
    """``a list``, ``a str``, ``null``...: a JSON value's type in words."""
    if value is None:
        return "null"
    name = {"dict": "object", "NoneType": "null"}.get(type(value).__name__, type(value).__name__)
    return f"a {name}" if name[0] not in "aeiou" else f"an {name}"


def _keys(value: Mapping[str, Any]) -> str:
    """``keys: a, b, c`` (at most 8 shown)."""
    keys = [str(key) for key in value]
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return f"keys: {shown}" if keys else "no keys"
