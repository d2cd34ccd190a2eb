"""The ``mock`` provider: deterministic replies for tests and demos, with no server.

Like Inspect AI's ``mockllm`` (``inspect_ai/model/_providers/mockllm.py``), it answers from a reply policy; unlike it,
a reply depends only on the conversation it is asked about, never on the order of calls: a script's reply ``k``
answers a conversation that already holds ``k`` assistant turns. So each task gets the same replies whatever the
executor, the number of workers or the interleaving of concurrent tasks.

Names (``--model``):

- ``mock``: the default policy (:func:`default_policy`), or the ``mock_policy`` a benchmark's agent passes to
  :meth:`ChatModel.from_name`;
- ``mock:<name>``: a registered policy (:data:`MOCK_POLICIES`: ``default``, ``echo``, and those registered here),
  or one a benchmark or its agent declared (:data:`runner.core.plugin.MOCK_POLICIES`, e.g. ``mock:hotpotqa``);
- ``mock:<path or URL>``: a YAML or JSON script file (any fsspec path; on a cluster it must be readable by every
  worker, e.g. ``s3://...``);
- ``mock:<module>:<attribute>``: a policy, script or reply list importable in every worker.

A script (:class:`MockScript`) in YAML::

    rules:                      # checked first, in order; the first match answers
      - match: "Rate the answer"      # a regular expression, searched in the last message (scope: last, the
        scope: all                    # default) or in every message (scope: all)
        reply: '{"score": 1.0, "reason": "scripted"}'
    replies:                    # reply k answers a conversation with k assistant turns so far
      - tool_calls:
          - name: lookup
            arguments: {title: "Scott Derrickson"}
      - content: '{"answer": "yes"}'
    then: repeat_last           # past the last reply: repeat_last (default), default (the default policy) or error

A bare list is read as ``replies``; a bare string reply as its ``content``.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import fsspec
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.core import plugin
from runner.core.errors import ConfigError
from runner.models._base import ChatModel
from runner.models._json import schema_instance
from runner.models._model_errors import ModelError, one_line
from runner.models._replies import split_think
from runner.models._types import ChatReply, ChatRequest, ToolCall, Usage, content_text

if TYPE_CHECKING:
    from runner.models._model_options import ModelOptions
    from runner.models._providers import Provider

DEFAULT_REPLY = "Default reply from the mock model."


class MockToolCall(BaseModel):
    """A scripted tool call: ``name`` and ``arguments`` (a mapping, or a raw string to script malformed JSON);
    ``id`` defaults to ``call_<turn>_<index>``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class MockReply(BaseModel):
    """A scripted reply. A bare string stands for ``{"content": string}``.

    Args:
        content: the text.
        tool_calls: calls to make.
        finish_reason: default ``tool_calls`` when there are calls, else ``stop``.
        usage: tokens to report; default: words of the conversation in, words of the reply out.
    """

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tool_calls: list[MockToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return {"content": value} if isinstance(value, str) else value


class MockRule(BaseModel):
    """``reply`` when the regular expression ``match`` is found in the last message's text (``scope: last``) or in
    any message's text (``scope: all``)."""

    model_config = ConfigDict(extra="forbid")

    match: str
    scope: Literal["last", "all"] = "last"
    reply: MockReply

    @model_validator(mode="after")
    def _compiles(self) -> MockRule:
        try:
            re.compile(self.match)
        except re.error as exc:
            raise ValueError(f"match {self.match!r} is not a regular expression: {exc}") from None
        return self


class MockScript(BaseModel):
    """Scripted replies, chosen from the conversation alone (see the module docstring for the file format).

    Args:
        rules: checked first, in order.
        replies: reply ``k`` answers a conversation that already has ``k`` assistant turns.
        then: past the last reply: ``repeat_last``, ``default`` (the default policy) or ``error`` (a
            :class:`ModelError`, so the task becomes an error record).
    """

    model_config = ConfigDict(extra="forbid")

    rules: list[MockRule] = Field(default_factory=list)
    replies: list[MockReply] = Field(default_factory=list)
    then: Literal["repeat_last", "default", "error"] = "repeat_last"

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, value: Any) -> Any:
        return {"replies": value} if isinstance(value, list) else value

    def __call__(self, request: ChatRequest) -> MockReply | ChatReply:
        last = content_text(request.last_message() or {})
        everything = "\n".join(content_text(m) for m in request.messages)
        for rule in self.rules:
            if re.search(rule.match, last if rule.scope == "last" else everything, re.DOTALL):
                return rule.reply
        turn = request.count("assistant")
        if turn < len(self.replies):
            return self.replies[turn]
        if self.then == "repeat_last" and self.replies:
            return self.replies[-1]
        if self.then == "error":
            raise ModelError(f"mock script has no reply for assistant turn {turn + 1} "
                             f"(it has {len(self.replies)}); add replies or set then: repeat_last")
        return default_policy(request)


MockPolicy = Callable[[ChatRequest], MockReply | ChatReply | str | Mapping[str, Any]]
"""A reply policy: the normalised request in, a reply out (a :class:`MockReply`, a :class:`ChatReply`, a string
for its content, or a mapping validated as a :class:`MockReply`). It must be deterministic and should be a
module-level function or a :class:`MockScript`, so that it pickles to Ray workers."""

MockPolicySource = str | MockPolicy | MockScript | Sequence[Any] | Mapping[str, Any]
"""What names a policy: a registered name, an import path ``module:attribute``, a script file path or URL, a
callable, a :class:`MockScript`, or a list of replies / a script mapping."""


def default_policy(request: ChatRequest) -> MockReply:
    """The policy of the bare name ``mock``: exercise a tool loop once, then answer.

    1. Tools offered, ``tool_choice`` not ``"none"``, and no tool result in the conversation yet: call the forced
       tool (``tool_choice`` naming one) or else the first tool, with the smallest arguments its parameter schema
       accepts (:func:`schema_instance`).
    2. Else, a ``json_schema`` response format: the smallest instance of that schema, as JSON.
    3. Else, a ``json_object`` response format: ``{}``.
    4. Else :data:`DEFAULT_REPLY`.
    """
    tools = request.tools or []
    if tools and request.tool_choice != "none" and request.count("tool") == 0:
        forced = request.tool_choice if isinstance(request.tool_choice, dict) else None
        name = forced["function"]["name"] if forced else tools[0]["function"]["name"]
        tool = next((t for t in tools if t["function"]["name"] == name), tools[0])
        arguments = schema_instance(tool["function"].get("parameters") or {})
        return MockReply(tool_calls=[MockToolCall(name=name, arguments=arguments if isinstance(arguments, dict) else {})])
    response_format = request.response_format or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        return MockReply(content=json.dumps(schema_instance(schema), ensure_ascii=False))
    if response_format.get("type") == "json_object":
        return MockReply(content="{}")
    return MockReply(content=DEFAULT_REPLY)


def echo_policy(request: ChatRequest) -> MockReply:
    """The policy ``mock:echo``: the text of the last user message."""
    return MockReply(content=content_text(request.last_message("user") or {}))


MOCK_POLICIES: dict[str, MockPolicySource] = {
    "default": default_policy,
    "echo": echo_policy,
}
"""Registered policies for ``mock:<name>``. A benchmark or its agent declares its own instead
(:func:`runner.core.plugin.declare`'s ``mock_policy``, an import path imported on first use, in every worker that
imported the plug-in)."""


def register_mock_policy(name: str, policy: MockPolicySource) -> None:
    """Make ``mock:<name>`` answer with ``policy`` in this process (registration in a module that every worker
    imports, or an import-path entry in :data:`MOCK_POLICIES`, reaches Ray workers too)."""
    MOCK_POLICIES[name] = policy


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or "://" in text or text.lower().endswith((".json", ".yaml", ".yml"))


def load_mock_script(path: str) -> MockScript:
    """Read a YAML or JSON script file (any fsspec path or URL).

    Raises:
        ConfigError: the file cannot be read, is not YAML/JSON, or is not a valid script (the first problem named).
    """
    try:
        with fsspec.open(path, "r", encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"mock script {path!r} cannot be read ({one_line(exc, 120)}); check the path after 'mock:'") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError(f"mock script {path!r} is not valid YAML or JSON; fix its syntax") from None
    try:
        return MockScript.model_validate(data if data is not None else [])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"mock script {path!r}: {where}: {first['msg']}") from None


def _import(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"mock policy {path!r} does not import ({one_line(exc, 120)}); check module:attribute") from None
    return target


def resolve_mock_policy(source: MockPolicySource) -> MockPolicy:
    """The policy callable ``source`` names (see :data:`MockPolicySource`).

    Raises:
        ConfigError: an unknown name (the message lists the registered ones), a script that cannot be read or is
            invalid, or an import path that does not import.
    """
    if isinstance(source, str):
        registered = MOCK_POLICIES.get(source) or plugin.MOCK_POLICIES.get(source)
        if registered is not None:
            return resolve_mock_policy(_import(registered) if isinstance(registered, str) else registered)
        if _looks_like_path(source):
            return load_mock_script(source)
        if ":" in source:
            return resolve_mock_policy(_import(source))
        known = ", ".join(sorted({*MOCK_POLICIES, *plugin.MOCK_POLICIES}))
        raise ConfigError(f"unknown mock policy {source!r}; use mock:<one of {known}>, mock:<script.yaml> "
                          "or mock:<module>:<attribute>")
    if isinstance(source, MockScript) or callable(source):
        return source  # type: ignore[return-value]
    try:
        return MockScript.model_validate(source)
    except ValidationError as err:
        raise ConfigError(f"invalid mock script: {one_line(err, 200)}") from None


def _words(text: str) -> int:
    return len(text.split())


class MockModel(ChatModel):
    """A chat model that answers from a reply policy, with no server.

    As with a server's replies, a ``<think>...</think>`` block in a scripted reply's text becomes the reply's
    :attr:`~ChatReply.reasoning` (:meth:`reply_to` keeps the text as scripted, for the scripted test server).

    Args:
        policy: a :data:`MockPolicySource` (default: :func:`default_policy`).
        label: the model part of the name (``mock:<label>``; ``None``: plain ``mock``).
        temperature, max_tokens, seed: accepted for interface parity; they do not change the replies.

    Raises:
        ConfigError: a policy that cannot be resolved.
    """

    def __init__(
        self,
        policy: MockPolicySource | None = None,
        *,
        label: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__("mock", label or "", temperature=temperature, max_tokens=max_tokens, seed=seed)
        self.policy = resolve_mock_policy(policy) if policy is not None else default_policy

    @classmethod
    def for_provider(cls, provider: Provider, model: str, options: ModelOptions) -> MockModel:
        """The model for ``mock`` (``model`` empty) or ``mock:<policy or script>`` (:func:`model_from_name
        <runner.models.model_from_name>`); ``options.mock_policy`` replaces the default policy of bare ``mock``.
        The HTTP options (``api_key``, ``timeout``, ``retry``) do not apply.

        Raises:
            ConfigError: a base URL (the mock has no server) or a policy that cannot be resolved.
        """
        if options.base_url:
            raise ConfigError("the mock provider has no server; drop --model-base-url or use vllm:<model>")
        if not model:
            return cls(options.mock_policy, **options.call_defaults)
        return cls(model, label=model, **options.call_defaults)

    def reply_to(self, request: ChatRequest) -> ChatReply:
        """The policy's reply to ``request`` as a :class:`ChatReply` (no usage recorded; :meth:`chat` does that).

        Raises:
            ModelError: the policy raised it (e.g. a script with ``then: error`` ran out of replies).
            TypeError: the policy returned something that is not a reply.
        """
        result = self.policy(request)
        if isinstance(result, ChatReply):
            return result
        if isinstance(result, str | Mapping):
            result = MockReply.model_validate(result)
        if not isinstance(result, MockReply):
            raise TypeError(f"mock policy returned a {type(result).__name__}; expected a MockReply, ChatReply or str")
        turn = request.count("assistant")
        calls = [
            ToolCall.parse(call.id or f"call_{turn}_{index}", call.name, call.arguments)
            for index, call in enumerate(result.tool_calls)
        ]
        usage = result.usage or Usage(
            input_tokens=sum(_words(content_text(m)) for m in request.messages),
            output_tokens=_words(result.content or "") + sum(_words(c.raw_arguments) for c in calls),
        )
        return ChatReply(
            content=result.content,
            tool_calls=calls,
            finish_reason=result.finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage,
            model=self.name,
        )

    async def _generate(self, request: ChatRequest) -> ChatReply:
        reply = self.reply_to(request)
        text, thinking = split_think(reply.content)
        if thinking is None:
            return reply
        reasoning = "\n\n".join(part for part in (reply.reasoning, thinking) if part)
        return reply.model_copy(update={"content": text, "reasoning": reasoning})
