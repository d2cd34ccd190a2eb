"""Providers: where a ``provider:model`` name is served, how to authenticate there, and which class talks to it;
:func:`model_from_name` builds a model from its name.

Every provider but ``mock`` is an OpenAI-compatible HTTP API reached through the official ``openai`` client; a
provider only fixes the default base URL, the environment variables read, and whether an API key is required. A
provider names its class by import path (as :mod:`runner.registry` does), so this module imports no model class and
``openai`` is loaded only when an HTTP model is built.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from runner.core.engines import ENGINE_FACTS
from runner.core.errors import ConfigError
from runner.models._model_options import ModelOptions

if TYPE_CHECKING:
    from runner.models._base import ChatModel

_HTTP = "runner.models._openai:OpenAICompatibleModel"


@dataclass(frozen=True)
class Provider:
    """One provider.

    Args:
        name: the prefix in ``provider:model``.
        description: one line for ``python -m runner list``.
        default_base_url: the API root when neither an override nor ``base_url_env`` is set (``None``: no server).
        base_url_env: environment variable that overrides the default base URL.
        api_key_env: environment variable holding the API key.
        api_key_required: whether a missing key is an error (otherwise ``placeholder_api_key`` is sent, for servers
            that ignore it but whose clients insist on one).
        placeholder_api_key: the key sent when none is required and none is set.
        max_tokens_param: the request field for the output-token limit (``max_completion_tokens`` for OpenAI,
            whose reasoning models refuse ``max_tokens``).
        lists_served_models: the server's ``/models`` lists exactly what it serves (vLLM, Ollama), so the
            preflight check can refuse an unknown model name; elsewhere an unlisted name is only a warning.
        structured_mode: how ``chat_structured`` asks for JSON by default (``json_schema``, ``json_object``, or
            ``prompt`` for servers that ignore response formats).
        dropped_params: request fields the server rejects or silently ignores, left out of every request (also from
            ``extra_body``); a dropped ``response_format`` or ``tool_choice`` is logged once per model.
        implementation: ``module:Class`` of the :class:`ChatModel` that talks to it; the class's ``for_provider``
            classmethod builds one (see :func:`model_from_name`).
    """

    name: str
    description: str
    default_base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    api_key_required: bool = False
    placeholder_api_key: str = "EMPTY"
    max_tokens_param: str = "max_tokens"
    lists_served_models: bool = False
    structured_mode: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    dropped_params: frozenset[str] = frozenset()
    implementation: str = _HTTP

    def base_url(self, override: str | None = None) -> str | None:
        """The API root: ``override``, else ``$base_url_env``, else the default."""
        env = os.environ.get(self.base_url_env) if self.base_url_env else None
        return override or env or self.default_base_url

    def api_key(self, override: str | None = None) -> str:
        """The API key: ``override``, else ``$api_key_env``, else the placeholder.

        Raises:
            ConfigError: a required key is missing (the message names the variable).
        """
        key = override or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if key:
            return key
        if self.api_key_required:
            raise ConfigError(
                f"model provider {self.name!r} needs an API key: set {self.api_key_env} in the environment "
                "(on Ray and Kubernetes, in every worker's environment too)"
            )
        return self.placeholder_api_key


def _engine(name: str) -> dict[str, Any]:
    """The provider fields of an engine the run can serve, from its facts (:data:`runner.core.engines.ENGINE_FACTS`)."""
    facts = ENGINE_FACTS[name]
    return {"lists_served_models": facts.lists_served_name, "structured_mode": facts.structured_mode,
            "dropped_params": facts.dropped_params}


PROVIDERS: dict[str, Provider] = {
    provider.name: provider
    for provider in (
        Provider(
            name="openai",
            description="OpenAI's API, e.g. openai:gpt-4o",
            default_base_url="https://api.openai.com/v1",
            base_url_env="OPENAI_BASE_URL",
            api_key_env="OPENAI_API_KEY",
            api_key_required=True,
            max_tokens_param="max_completion_tokens",
        ),
        Provider(
            name="vllm",
            description="vLLM ('vllm serve') or any keyless OpenAI-compatible server",
            default_base_url="http://localhost:8000/v1",
            base_url_env="VLLM_BASE_URL",
            api_key_env="VLLM_API_KEY",
            **_engine("vllm"),
        ),
        Provider(
            name="sglang",
            description="SGLang (python -m sglang.launch_server), or served by the run with --serve",
            default_base_url="http://localhost:30000/v1",
            base_url_env="SGLANG_BASE_URL",
            api_key_env="SGLANG_API_KEY",
            **_engine("sglang"),
        ),
        Provider(
            name="transformers",
            description="'transformers serve' (e.g. transformers:smollm2-135m-instruct, the embedded model, served "
                        "by the run)",
            default_base_url="http://localhost:8000/v1",
            base_url_env="TRANSFORMERS_BASE_URL",
            # Its /v1/models lists the Hugging Face cache, not the model it serves; it ignores response_format, n,
            # logprobs and max_completion_tokens (runner.core.engines). stream_options is sent: 5.17 ignores it (a
            # warning) and ends every stream with its usage, 5.25 sends the usage only when it is asked for.
            **_engine("transformers"),
        ),
        Provider(
            name="ollama",
            description="Ollama ('ollama serve'), e.g. ollama:llama3.1:8b",
            default_base_url="http://localhost:11434/v1",
            base_url_env="OLLAMA_BASE_URL",
            placeholder_api_key="ollama",
            lists_served_models=True,
        ),
        Provider(
            name="dashscope",
            description="Alibaba Cloud DashScope, OpenAI-compatible mode, e.g. dashscope:qwen-plus",
            default_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
            base_url_env="DASHSCOPE_BASE_URL",
            api_key_env="DASHSCOPE_API_KEY",
            api_key_required=True,
            # json_schema works for a few Qwen models only; json_object for most (Model Studio, "Structured output").
            structured_mode="json_object",
        ),
        Provider(
            name="mock",
            description="scripted replies, no server: mock, mock:<policy>, mock:<script.yaml>",
            implementation="runner.models._mock:MockModel",
        ),
    )
}


def parse_model_name(name: str) -> tuple[Provider, str]:
    """Split ``provider:model`` or ``provider/model`` into the provider and the model name.

    The first ``:`` or ``/`` separates them, so the model part may hold more of either: ``ollama:llama3.1:8b``,
    ``vllm:Qwen/Qwen2.5-7B-Instruct``, ``vllm/Qwen/Qwen2.5-7B-Instruct``. ``mock`` alone is allowed (its default
    policy); every other provider needs a model.

    Raises:
        ConfigError: an empty name, an unknown provider (the message lists the known ones), or no model part.
    """
    text = (name or "").strip()
    if not text:
        raise ConfigError("empty model name; use provider:model, e.g. openai:gpt-4o or vllm:Qwen/Qwen2.5-7B-Instruct")
    cut = min((i for i in (text.find(":"), text.find("/")) if i >= 0), default=len(text))
    prefix, model = text[:cut].lower(), text[cut + 1 :].strip()
    provider = PROVIDERS.get(prefix)
    if provider is None:
        known = ", ".join(sorted(PROVIDERS))
        hint = f" (did you mean openai:{text}?)" if cut == len(text) else ""
        raise ConfigError(f"unknown model provider {prefix!r} in model name {name!r}{hint}; "
                          f"use provider:model with one of: {known}")
    if not model and provider.name != "mock":
        raise ConfigError(f"model name {name!r} names no model; write {provider.name}:<model>")
    return provider, model


def model_from_name(name: str, **options: Any) -> ChatModel:
    """The model ``provider:model`` (or ``provider/model``); also ``ChatModel.from_name``.

    Args:
        name: e.g. ``openai:gpt-4o``, ``vllm:Qwen/Qwen2.5-7B-Instruct``, ``ollama:llama3.1:8b``,
            ``dashscope:qwen-plus``, ``transformers:smollm2-135m-instruct``, ``mock``, ``mock:echo``,
            ``mock:path/to/script.yaml``.
        **options: the fields of :class:`~runner.models.ModelOptions` (``base_url``, ``api_key``, ``timeout``,
            ``retry``, ``temperature``, ``max_tokens``, ``seed``, ``mock_policy``), their one definition.

    Raises:
        ConfigError: an unknown provider, a name without a model, an unknown option, a required API key not set, a
            mock policy or script that cannot be found or read, or a base URL given to ``mock``.
    """
    provider, model = parse_model_name(name)
    chosen = ModelOptions.of(options)
    module, _, attribute = provider.implementation.partition(":")
    implementation = getattr(importlib.import_module(module), attribute)
    return implementation.for_provider(provider, model, chosen)
