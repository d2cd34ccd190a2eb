"""Chat models: one interface over OpenAI, vLLM, Ollama, DashScope and a scripted ``mock``.

Build a model from its name and call it::

    from runner.models import ChatModel, tool_message

    model = ChatModel.from_name("vllm:Qwen/Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1")
    reply = await model.chat([{"role": "user", "content": "What is 2 + 2?"}], tools=[...])
    for call in reply.tool_calls:          # ToolCall(id, name, arguments, raw_arguments, parse_error)
        ...

Every call's tokens are recorded for the current work item (``record.usage``, summed in ``summary.json``).
``docs/models.md`` describes providers, environment variables, retries and mock scripts.

The ``openai`` package (about a second to import) is loaded only when an HTTP model is built or
``OpenAICompatibleModel`` (or ``post_json``, a raw request for a harness's own model class) is asked for, so commands
that use no model start fast.
"""

from runner._lazy import lazy_exports

from runner.models._base import ChatModel, StructuredMode
from runner.models._model_errors import ModelError, ModelProtocolError, StructuredOutputError
from runner.models._json import parse_json, schema_instance
from runner.models._model_options import ModelOptions
from runner.models._preflight import check_model_names, preflight, preflight_models
from runner.models._mock import (
    DEFAULT_REPLY,
    MOCK_POLICIES,
    MockModel,
    MockPolicy,
    MockPolicySource,
    MockReply,
    MockRule,
    MockScript,
    MockToolCall,
    default_policy,
    echo_policy,
    load_mock_script,
    register_mock_policy,
    resolve_mock_policy,
)
from runner.models._providers import PROVIDERS, Provider, model_from_name, parse_model_name
from runner.models._retry import RetryPolicy
from runner.models._types import (
    ChatReply,
    ChatRequest,
    Message,
    ToolCall,
    Usage,
    assistant_message,
    content_text,
    system_message,
    tool_message,
    user_message,
)

__all__ = [
    "DEFAULT_REPLY",
    "MOCK_POLICIES",
    "PROVIDERS",
    "ChatModel",
    "ChatReply",
    "ChatRequest",
    "Message",
    "MockModel",
    "MockPolicy",
    "MockPolicySource",
    "MockReply",
    "MockRule",
    "MockScript",
    "MockToolCall",
    "ModelError",
    "ModelOptions",
    "ModelProtocolError",
    "OpenAICompatibleModel",
    "Posted",
    "Provider",
    "RetryPolicy",
    "StructuredMode",
    "StructuredOutputError",
    "ToolCall",
    "Usage",
    "assistant_message",
    "check_model_names",
    "content_text",
    "default_policy",
    "echo_policy",
    "load_mock_script",
    "model_from_name",
    "parse_json",
    "parse_model_name",
    "post_json",
    "preflight",
    "preflight_models",
    "register_mock_policy",
    "resolve_mock_policy",
    "schema_instance",
    "system_message",
    "tool_message",
    "user_message",
]


_LAZY = {"OpenAICompatibleModel": "runner.models._openai", "post_json": "runner.models._completions",
         "Posted": "runner.models._completions"}
"""Loaded on first use: the OpenAI client (``openai``, ``httpx``) is imported by the first model call, not by
``import runner.models``."""

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
