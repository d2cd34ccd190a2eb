"""Model names (``provider:model``), providers, API keys and base URLs."""

from __future__ import annotations

import pytest

from runner.core.errors import ConfigError, RunnerError
from runner.models import ChatModel, MockModel, ModelError, OpenAICompatibleModel, parse_model_name


@pytest.mark.parametrize(
    ("name", "provider", "model"),
    [
        ("openai:gpt-4o", "openai", "gpt-4o"),
        ("openai/gpt-4o", "openai", "gpt-4o"),
        ("ollama:llama3.1:8b", "ollama", "llama3.1:8b"),
        ("vllm:Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct"),
        ("vllm/Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct"),
        ("DashScope:qwen-plus", "dashscope", "qwen-plus"),
        ("mock", "mock", ""),
        ("mock:scripts/agent.yaml", "mock", "scripts/agent.yaml"),
    ],
)
def test_the_first_colon_or_slash_separates_provider_and_model(name: str, provider: str, model: str) -> None:
    parsed_provider, parsed_model = parse_model_name(name)
    assert (parsed_provider.name, parsed_model) == (provider, model)


def test_an_unknown_provider_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        ChatModel.from_name("anthropic:claude")
    message = str(err.value)
    assert "unknown model provider 'anthropic'" in message
    assert "dashscope, mock, ollama, openai, sglang, transformers, vllm" in message
    assert "\n" not in message


def test_a_bare_model_name_suggests_the_provider_form() -> None:
    with pytest.raises(ConfigError, match=r"did you mean openai:gpt-4o\?"):
        parse_model_name("gpt-4o")


@pytest.mark.parametrize("name", ["", "  ", "openai", "vllm:"])
def test_a_name_without_a_model_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_name(name)


@pytest.mark.parametrize(("name", "variable"), [("openai:gpt-4o", "OPENAI_API_KEY"),
                                                 ("dashscope:qwen-plus", "DASHSCOPE_API_KEY")])
def test_a_missing_api_key_names_its_variable(name: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match=f"set {variable}"):
        ChatModel.from_name(name)


def test_keys_come_from_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "from-env")
    assert ChatModel.from_name("dashscope:qwen-plus")._api_key == "from-env"  # type: ignore[attr-defined]
    assert ChatModel.from_name("dashscope:qwen-plus", api_key="given")._api_key == "given"  # type: ignore[attr-defined]
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert ChatModel.from_name("vllm:m")._api_key == "EMPTY"  # type: ignore[attr-defined]


def test_base_url_precedence_is_argument_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    monkeypatch.delenv("DASHSCOPE_BASE_URL", raising=False)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "k")
    ollama = ChatModel.from_name("ollama:llama3.1:8b")
    assert isinstance(ollama, OpenAICompatibleModel)
    assert ollama.base_url == "http://localhost:11434/v1"
    assert ollama.model == "llama3.1:8b" and ollama.name == "ollama:llama3.1:8b"
    assert ChatModel.from_name("vllm:m").base_url == "http://localhost:8000/v1"  # type: ignore[attr-defined]
    assert (ChatModel.from_name("dashscope:qwen-plus").base_url  # type: ignore[attr-defined]
            == "https://dashscope.aliyuncs.com/compatible-mode/v1")
    monkeypatch.setenv("VLLM_BASE_URL", "http://vllm.internal:8000/v1/")
    assert ChatModel.from_name("vllm:m").base_url == "http://vllm.internal:8000/v1"  # type: ignore[attr-defined]
    given = ChatModel.from_name("vllm:m", base_url="http://10.0.0.5:9000/v1")
    assert given.base_url == "http://10.0.0.5:9000/v1"  # type: ignore[attr-defined]


def test_mock_names_build_mock_models_and_refuse_a_base_url() -> None:
    assert isinstance(ChatModel.from_name("mock"), MockModel)
    assert ChatModel.from_name("mock").name == "mock"
    assert ChatModel.from_name("mock:echo").name == "mock:echo"
    with pytest.raises(ConfigError, match="no server"):
        ChatModel.from_name("mock", base_url="http://localhost:8000/v1")


def test_model_errors_are_runner_errors() -> None:
    assert issubclass(ModelError, RunnerError)
