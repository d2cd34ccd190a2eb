"""The CLI's model flags: ``--model``, ``--model-base-url``, ``AGENT_CHAT_MODEL_NAME`` and the preflight check.

Runs go to the scripted model server on loopback, which stands in for a model server (no model can run here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.storage.store import ResultStore
from tests.models.scripted import arithmetic
from tests.support.model_server import ScriptedModelServer


def _run(tmp_path: Path, *flags: str) -> int:
    return main(["-b", "toy", "-B", "n_tasks=3", "--sequential", "--storage", str(tmp_path / "run"), *flags])


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    return lines[0]


def test_an_unknown_provider_exits_2_before_anything_is_written(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, "-s", "chat", "--model", "nope:model") == 2
    assert "unknown model provider 'nope'" in _one_line_error(capsys)
    assert not (tmp_path / "run").exists()


def test_a_missing_api_key_exits_2_naming_the_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _run(tmp_path, "-s", "chat", "--model", "openai:gpt-4o") == 2
    assert "set OPENAI_API_KEY" in _one_line_error(capsys)


def test_a_refused_connection_exits_2_with_the_url_and_the_fix(tmp_path: Path, refused_url: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", refused_url) == 2
    line = _one_line_error(capsys)
    assert f"cannot connect to the model server at {refused_url}" in line
    assert "point --model-base-url at it" in line
    assert not (tmp_path / "run").exists()


def test_a_model_run_scores_and_sums_usage(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.set_policy(arithmetic)
    assert _run(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["score"] == 1.0
    assert summary["usage"]["vllm:scripted"]["calls"] == 3
    assert model_server.requests[0].path == "/v1/models"
    manifest = ResultStore(str(tmp_path / "run")).read_manifest()
    assert manifest is not None
    assert (manifest.config["model"], manifest.config["model_base_url"]) == ("vllm:scripted", model_server.url)


def test_a_run_resumes_on_another_server_url_but_not_with_another_model(
    tmp_path: Path, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    model_server.set_policy(arithmetic)
    assert _run(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url,
                "--limit", "2") == 0
    with ScriptedModelServer(arithmetic) as moved:
        assert _run(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", moved.url) == 0
        assert len(moved.chat_requests) == 1  # only the task the first run did not reach
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] == 3 and summary["score"] == 1.0
    capsys.readouterr()
    assert _run(tmp_path, "-s", "chat", "--model", "mock:echo") == 2
    assert "holds a run of another configuration" in _one_line_error(capsys)


def test_agent_chat_model_name_is_the_default_model_of_solutions_that_take_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CHAT_MODEL_NAME", "mock:echo")
    assert _run(tmp_path / "chat", "-s", "chat") == 0
    chat_manifest = ResultStore(str(tmp_path / "chat" / "run")).read_manifest()
    assert chat_manifest is not None and chat_manifest.config["model"] == "mock:echo"
    assert _run(tmp_path / "calc", "-s", "calculator") == 0
    calc_manifest = ResultStore(str(tmp_path / "calc" / "run")).read_manifest()
    assert calc_manifest is not None and calc_manifest.config["model"] is None


def test_a_base_url_for_a_solution_without_a_model_exits_2(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, "-s", "calculator", "--model-base-url", "http://localhost:8000/v1") == 2
    assert "does not take a model server URL; drop --model-base-url" in _one_line_error(capsys)


def test_list_shows_the_providers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "model providers" in out
    for text in ("dashscope", "mock", "ollama", "openai", "vllm", "http://localhost:11434/v1", "DASHSCOPE_API_KEY"):
        assert text in out
