"""The data a chat call takes and returns: OpenAI-style messages and tools in, a typed :class:`ChatReply` out.

Messages are plain dicts in the OpenAI chat format (``{"role": "user", "content": "..."}``), the lingua franca of
every server this package talks to; the helpers below build them. Replies are pydantic models, so an agent can
store them in a trajectory as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from runner.core.storable import storable

ROLES = ("system", "developer", "user", "assistant", "tool")

Message = dict[str, Any]
"""One chat message in the OpenAI format: ``role`` (system, developer, user, assistant, tool) and ``content``;
an assistant message may carry ``tool_calls``, a tool message its ``tool_call_id``."""


def system_message(content: str) -> Message:
    """``{"role": "system", "content": content}``."""
    return {"role": "system", "content": content}


def user_message(content: str) -> Message:
    """``{"role": "user", "content": content}``."""
    return {"role": "user", "content": content}


def assistant_message(content: str | None, tool_calls: Sequence[ToolCall] = ()) -> Message:
    """An assistant turn, with its tool calls in the OpenAI wire format (arguments as the raw JSON string)."""
    message: Message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [call.to_openai() for call in tool_calls]
    return message


def tool_message(tool_call_id: str, content: Any, name: str | None = None) -> Message:
    """The result of one tool call, answering the assistant's call ``tool_call_id``.

    Args:
        tool_call_id: :attr:`ToolCall.id` of the call this answers.
        content: the result; anything but a string is sent as JSON (non-ASCII kept, unknown types via ``str``).
        name: the tool's name (optional; some servers use it in their chat template).
    """
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
    message: Message = {"role": "tool", "tool_call_id": tool_call_id, "content": text}
    if name is not None:
        message["name"] = name
    return message


class ToolCall(BaseModel):
    """One function call the model asked for.

    What is sent back to a server when the call is replayed in the conversation (:meth:`to_openai`) is the form
    that was read, :attr:`arguments` as a JSON object, never blank or broken arguments as the model wrote them:
    strict servers (vLLM, whose chat template decodes every earlier call's arguments) answer 400 to anything but
    a JSON object.

    Args:
        id: the call's id; answer it with ``tool_message(call.id, result)``.
        name: the function's name.
        arguments: the arguments parsed from :attr:`raw_arguments` (``{}`` when they are blank or do not parse to
            an object).
        raw_arguments: the arguments exactly as the model wrote them (a JSON string, if the model behaved), for
            the trajectory.
        parse_error: why :attr:`raw_arguments` is not a JSON object, or ``None`` when it is (blank arguments are
            ``{}``, no error). Agents should feed this back to the model rather than call the tool with ``{}``.
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str = "{}"
    parse_error: str | None = None

    @classmethod
    def parse(cls, id: str, name: str, raw_arguments: Any) -> ToolCall:
        """Build a call from the wire form of its arguments.

        A mapping is taken as already parsed; ``None``, ``""`` or only whitespace (``" "``, ``"\\n"``) as ``{}``;
        a JSON string that decodes to a string
        holding a JSON object (arguments encoded twice, as some servers send them) as that object; any other value
        (a list, a number) as that JSON value, which is not an object (:attr:`parse_error` says so). The
        arguments' text is well-formed (:func:`runner.core.storable.storable`: an escaped half of a surrogate pair
        becomes U+FFFD), so a tool can pass it on and the record can store it.
        """
        if isinstance(raw_arguments, Mapping):
            arguments = storable(dict(raw_arguments))
            return cls(id=id, name=name, arguments=arguments, raw_arguments=json.dumps(arguments, ensure_ascii=False))
        if raw_arguments is not None and not isinstance(raw_arguments, str):
            raw_arguments = json.dumps(raw_arguments, ensure_ascii=False)
        raw = raw_arguments or ""
        if not raw.strip():
            return cls(id=id, name=name, arguments={}, raw_arguments=raw or "{}")
        try:
            value = storable(json.loads(raw))
            if isinstance(value, str) and value.lstrip().startswith("{"):
                value = storable(json.loads(value))
        except ValueError as exc:
            return cls(id=id, name=name, raw_arguments=raw, parse_error=f"arguments are not valid JSON: {exc}")
        if not isinstance(value, dict):
            return cls(id=id, name=name, raw_arguments=raw,
                       parse_error=f"arguments are a JSON {type(value).__name__}, not an object")
        return cls(id=id, name=name, arguments=value, raw_arguments=raw)

    def sent_arguments(self) -> str:
        """The arguments as they are sent back to a server: :attr:`raw_arguments` when they are a JSON object as
        written (the model's own spelling, kept for servers' prefix caches), else the object that was read,
        :attr:`arguments`, as JSON: ``{}`` for blank, ``null`` or broken arguments, the decoded object for arguments
        encoded twice."""
        if self.parse_error is None:
            try:
                if isinstance(json.loads(self.raw_arguments), dict):
                    return self.raw_arguments
            except ValueError:
                pass
        return json.dumps(self.arguments, ensure_ascii=False)

    def to_openai(self) -> dict[str, Any]:
        """The call in the OpenAI wire format (for the assistant message that carries it), with
        :meth:`sent_arguments`."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.sent_arguments()}}


class Usage(BaseModel):
    """Tokens of one call: ``input_tokens`` (prompt) and ``output_tokens`` (completion); ``None`` when unknown (a
    reply without ``usage``), which is recorded as unknown, not as 0.

    ``counted_by`` says who counted them: ``"server"``, as its ``usage`` said; ``"runner"``, the server reported
    none and the model layer counted the prompt and the answer itself with the served model's own tokenizer
    (:mod:`runner.models._counting`; recorded in ``calls_counted_by_runner``)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    counted_by: Literal["server", "runner"] = "server"

    @property
    def total_tokens(self) -> int | None:
        """``input_tokens + output_tokens``, or ``None`` when either is unknown."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


class ChatReply(BaseModel):
    """A model's answer to one chat call.

    Args:
        content: the answer's text, never its reasoning (``None`` when the model only called tools).
        tool_calls: the function calls it asked for, in order.
        finish_reason: why generation stopped: ``stop``, ``length`` (hit ``max_tokens``), ``tool_calls``,
            ``content_filter``, or what the server said.
        usage: tokens of this call (``None`` counts when the server did not report them).
        model: the model name the server reported (it may be more specific than the one asked for).
        reasoning: the model's reasoning, however the server sent it (a ``reasoning_content`` or ``reasoning``
            field, thinking parts of the content, ``<think>`` blocks in the text), else ``None``.
    """

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    reasoning: str | None = None

    @property
    def text(self) -> str:
        """:attr:`content`, or ``""`` when there is none."""
        return self.content or ""

    def to_message(self, *, reasoning: bool = False) -> Message:
        """This reply as the assistant message to append to the conversation before answering its tool calls.

        Args:
            reasoning: also keep :attr:`reasoning` under ``"reasoning"`` when there is some, for a trajectory.
                Leave it off for messages sent back to a server: some refuse reasoning in the input (DeepSeek's
                API answers 400).
        """
        message = assistant_message(self.content, self.tool_calls)
        if reasoning and self.reasoning:
            message["reasoning"] = self.reasoning
        return message


ToolChoice = Literal["auto", "none", "required"] | str | dict[str, Any]
"""``"auto"``, ``"none"``, ``"required"``, a function name (force that function), or an OpenAI tool-choice dict."""


class ChatRequest(BaseModel):
    """One chat call, normalised: what a provider sends and what a mock reply policy receives.

    Args:
        model: the model name sent to the server (without the provider prefix).
        messages: OpenAI-format messages.
        tools: OpenAI tool definitions (``{"type": "function", "function": {...}}``), or ``None``.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or an OpenAI tool-choice dict, or ``None``.
        temperature, max_tokens, seed, stop: sampling settings, ``None`` for the server's default.
        response_format: an OpenAI response format (``{"type": "json_object"}`` or ``{"type": "json_schema", ...}``),
            or ``None`` for free text.
        extra_body: fields passed through to the server as they are (e.g. vLLM's ``top_k``).

    The text of the messages and tools is made well-formed (:func:`runner.core.storable.storable`), so that
    whatever a tool or a benchmark put in them can be encoded and sent.
    """

    model: str
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None
    extra_body: dict[str, Any] | None = None

    @field_validator("messages", "tools")
    @classmethod
    def _well_formed(cls, value: Any) -> Any:
        # Text that UTF-8 cannot encode (half of a surrogate pair, from a tool's JSON or a benchmark's data) would
        # fail the request as it is sent, and the cache key: the one rule of runner.core.storable makes it U+FFFD.
        return storable(value)

    def to_openai_kwargs(self, max_tokens_param: str = "max_tokens") -> dict[str, Any]:
        """Keyword arguments for ``client.chat.completions.create`` (settings left at ``None`` are omitted).

        Args:
            max_tokens_param: the name the server wants for the output limit (OpenAI's newer models accept only
                ``max_completion_tokens``; most compatible servers want ``max_tokens``).
        """
        kwargs: dict[str, Any] = {"model": self.model, "messages": self.messages}
        for field in ("tools", "tool_choice", "temperature", "seed", "stop", "response_format", "extra_body"):
            value = getattr(self, field)
            if value is not None:
                kwargs[field] = value
        if self.max_tokens is not None:
            kwargs[max_tokens_param] = self.max_tokens
        return kwargs

    @classmethod
    def from_openai_body(cls, body: Mapping[str, Any]) -> ChatRequest:
        """The request a server received as a ``/chat/completions`` JSON body (fields it does not know go to
        ``extra_body``)."""
        known = set(cls.model_fields) - {"max_tokens", "extra_body"}
        data = {k: v for k, v in body.items() if k in known}
        data["max_tokens"] = body.get("max_completion_tokens", body.get("max_tokens"))
        extra = {k: v for k, v in body.items() if k not in known | {"max_tokens", "max_completion_tokens", "stream"}}
        data["extra_body"] = extra or None
        return cls.model_validate(data)

    def last_message(self, *roles: str) -> Message | None:
        """The latest message whose role is one of ``roles`` (any role when none are given), or ``None``."""
        for message in reversed(self.messages):
            if not roles or message.get("role") in roles:
                return message
        return None

    def count(self, role: str) -> int:
        """How many messages have this role (e.g. assistant turns so far)."""
        return sum(1 for message in self.messages if message.get("role") == role)

    def tool_names(self) -> list[str]:
        """Names of the offered tools, in order."""
        return [tool["function"]["name"] for tool in self.tools or []]


def content_text(message: Mapping[str, Any]) -> str:
    """A message's text: its string content, or the text parts of a multi-part content list joined by newlines."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


def normalize_messages(messages: str | Sequence[Message | ChatReply | BaseModel | str]) -> list[Message]:
    """Messages as OpenAI-format dicts.

    Accepts a plain string (one user message), or a sequence of dicts, strings (user messages),
    :class:`ChatReply` objects (their assistant message) and other pydantic models (dumped). The tool calls of an
    assistant message are sent with their arguments as a JSON object (:meth:`ToolCall.sent_arguments`: ``{}`` for
    blank, ``null`` or broken ones), however the history was built; the caller's messages are not changed.

    Raises:
        TypeError: a message of another type.
        ValueError: an empty list, or a message without a known ``role`` (system, developer, user, assistant,
            tool), or a tool message without ``tool_call_id``.
    """
    if isinstance(messages, str):
        return [user_message(messages)]
    out: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, str):
            item = user_message(message)
        elif isinstance(message, ChatReply):
            item = message.to_message()
        elif isinstance(message, BaseModel):
            item = message.model_dump(exclude_none=True)
        elif isinstance(message, Mapping):
            item = dict(message)
        else:
            raise TypeError(f"message {index} is a {type(message).__name__}; expected a dict like "
                             "{'role': 'user', 'content': '...'}")
        role = item.get("role")
        if role not in ROLES:
            raise ValueError(f"message {index} has role {role!r}; expected one of {', '.join(ROLES)}")
        if role == "tool" and not item.get("tool_call_id"):
            raise ValueError(f"message {index} is a tool result without 'tool_call_id'; build it with tool_message()")
        if role == "assistant" and isinstance(item.get("tool_calls"), list):
            item["tool_calls"] = [_sendable(call) for call in item["tool_calls"]]
        out.append(item)
    if not out:
        raise ValueError("no messages: a chat call needs at least one")
    return out


def _sendable(call: Any) -> Any:
    """An assistant message's tool call with the arguments a strict server accepts (:meth:`ToolCall.sent_arguments`);
    a call of another shape as it is."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return call
    read = ToolCall.parse(str(call.get("id") or ""), str(function.get("name") or ""), function.get("arguments"))
    sent = read.sent_arguments()
    if sent == function.get("arguments"):
        return call
    return {**call, "function": {**function, "arguments": sent}}


def normalize_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool definitions in the OpenAI format.

    Each tool is either ``{"type": "function", "function": {"name", "description", "parameters"}}`` or the short
    form ``{"name", "description", "parameters"}`` (``parameters``: a JSON schema of an object; default: no
    parameters).

    Raises:
        ValueError: a tool without a name, or two tools with one name.
    """
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        function = dict(tool["function"]) if "function" in tool else dict(tool)
        function.pop("type", None)
        if not function.get("name"):
            raise ValueError(f"tool {index} has no name")
        function.setdefault("parameters", {"type": "object", "properties": {}})
        out.append({"type": "function", "function": function})
    names = [tool["function"]["name"] for tool in out]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tools with the same name: {', '.join(duplicates)}")
    return out


def normalize_tool_choice(tool_choice: ToolChoice | None) -> str | dict[str, Any] | None:
    """``"auto"``/``"none"``/``"required"`` and dicts as they are; any other string names the function to force."""
    if tool_choice is None or isinstance(tool_choice, dict) or tool_choice in ("auto", "none", "required"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}


def normalize_response_format(response_format: str | dict[str, Any] | type[BaseModel] | None) -> dict[str, Any] | None:
    """An OpenAI response format.

    ``"json"`` (or ``"json_object"``) asks for any JSON object; a pydantic model class asks for JSON matching its
    schema (``json_schema``, not strict, so any pydantic model is accepted); ``"text"`` or ``None`` for free text;
    a dict is passed as it is.

    Raises:
        ValueError: another string.
    """
    if response_format is None or response_format == "text":
        return None
    if isinstance(response_format, dict):
        return response_format
    if response_format in ("json", "json_object"):
        return {"type": "json_object"}
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        return {
            "type": "json_schema",
            "json_schema": {
                "name": response_format.__name__,
                "schema": response_format.model_json_schema(),
                "strict": False,
            },
        }
    raise ValueError(f"response_format {response_format!r}: use 'json', 'text', a pydantic model class or a dict")
