"""The CLI's model flags: ``--model``, ``--model-base-url``, ``AGENT_CHAT_MODEL_NAME``, the preflight check, and
runs against servers that speak another dialect or are not the OpenAI API at all.

Runs go to the scripted model server on loopback, which stands in for a model server (no model can run here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.storage.store import ResultStore
from tests.models.scripted import arithmetic
from tests.support.cli import CliResult
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def toy(cli):
    """``toy(folder, *flags)``: a 3-task toy run in this process, sequential, stored under ``folder/run``."""

    def run(folder: Path, *flags: str) -> CliResult:
        return cli("-b", "toy", "-B", "n_tasks=3", "--sequential", "--storage", str(folder / "run"), *flags)

    return run


def test_an_unknown_provider_exits_2_before_anything_is_written(toy, tmp_path: Path) -> None:
    toy(tmp_path, "-s", "chat", "--model", "nope:model").error_line("unknown model provider 'nope'")
    assert not (tmp_path / "run").exists()


def test_a_missing_api_key_exits_2_naming_the_variable(toy, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    toy(tmp_path, "-s", "chat", "--model", "openai:gpt-4o").error_line("set OPENAI_API_KEY")


def test_a_refused_connection_exits_2_with_the_url_and_the_fix(toy, tmp_path: Path, refused_url: str) -> None:
    line = toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", refused_url).error_line()
    assert f"cannot connect to the model server at {refused_url}" in line
    assert "point --model-base-url at it" in line
    assert not (tmp_path / "run").exists()


def test_a_model_run_scores_and_sums_usage(toy, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.set_policy(arithmetic)
    assert toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url).returncode == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["score"] == 1.0
    assert summary["usage"]["vllm:scripted"]["calls"] == 3
    assert model_server.requests[0].path == "/v1/models"
    manifest = ResultStore(str(tmp_path / "run")).read_manifest()
    assert manifest is not None
    assert (manifest.config["model"], manifest.config["model_base_url"]) == ("vllm:scripted", model_server.url)


def test_a_run_resumes_on_another_server_url_but_not_with_another_model(toy, 
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.set_policy(arithmetic)
    assert toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url,
                "--limit", "2").returncode == 0
    with ScriptedModelServer(arithmetic) as moved:
        assert toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", moved.url).returncode == 0
        assert len(moved.chat_requests) == 1  # only the task the first run did not reach
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] == 3 and summary["score"] == 1.0
    toy(tmp_path, "-s", "chat", "--model", "mock:echo").error_line("holds a run of another configuration")


def test_agent_chat_model_name_is_the_default_model_of_solutions_that_take_one(toy, 
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CHAT_MODEL_NAME", "mock:echo")
    assert toy(tmp_path / "chat", "-s", "chat").returncode == 0
    chat_manifest = ResultStore(str(tmp_path / "chat" / "run")).read_manifest()
    assert chat_manifest is not None and chat_manifest.config["model"] == "mock:echo"
    assert toy(tmp_path / "calc", "-s", "calculator").returncode == 0
    calc_manifest = ResultStore(str(tmp_path / "calc" / "run")).read_manifest()
    assert calc_manifest is not None and calc_manifest.config["model"] is None


def test_a_base_url_for_a_solution_without_a_model_exits_2(toy, tmp_path: Path) -> None:
    toy(tmp_path, "-s", "calculator", "--model-base-url", "http://localhost:8000/v1").error_line("does not take a model server URL; drop --model-base-url")


def test_list_shows_the_providers(cli) -> None:
    listing = cli("list")
    assert listing.returncode == 0
    out = listing.stdout
    assert "model providers" in out
    for text in ("dashscope", "mock", "ollama", "openai", "vllm", "http://localhost:11434/v1", "DASHSCOPE_API_KEY"):
        assert text in out


PAGE = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>It works.</body></html>"


def test_a_web_page_as_the_model_server_exits_2_with_one_line_and_writes_nothing(
    toy, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    root = model_server.url.removesuffix("/v1")
    model_server.answer(PAGE, endpoint="models", content_type="text/html", times=None)
    model_server.answer(PAGE, content_type="text/html", times=None)
    result = toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", root)
    assert result.stderr.splitlines() == [result.error_line()] == [
        f"error: vllm:scripted at {root}: GET /models answered text/html: an HTML page titled 'Welcome to nginx!', "
        f"not the OpenAI API; is the URL missing /v1? (e.g. --model-base-url {root}/v1)"
    ]
    assert not (tmp_path / "run").exists()
    assert model_server.chat_requests == []


@pytest.mark.parametrize("body, content_type, shape", [
    ("OK", "text/plain", "text/plain: text that is not JSON, 'OK'"),
    ("", "application/json", "an empty body (application/json)"),
    ({"detail": "Not Found"}, "application/json", "JSON without 'choices', a web framework's error"),
], ids=["text-plain", "empty-body", "fastapi-error"])
def test_preflight_refuses_other_answers_in_one_line(toy, tmp_path: Path, model_server: ScriptedModelServer, body: object,
                                                     content_type: str, shape: str) -> None:
    model_server.answer(body, endpoint="models", content_type=content_type)
    line = toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url).error_line()
    assert f"GET /models answered {shape}" in line and "not the OpenAI API" in line
    assert not (tmp_path / "run").exists()


XINFERENCE_500 = {"detail": "[address=0.0.0.0:37421, pid=4242] The decoder prompt (length 9000) is longer than the "
                             "maximum model length of 8192. Make sure that `max_model_len` is no smaller than the "
                             "number of text tokens."}
"""vLLM's refusal as Xinference sends it: HTTP 500 with FastAPI's ``detail`` (xorbitsai/inference#3785)."""


def test_a_500_that_refuses_a_conversation_over_the_context_is_each_items_answer_sent_once(
        toy, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """The run finishes: every item is answered with the empty ``context_length_exceeded`` reply (no error record),
    one request each, where it used to take five attempts per item and end as an error."""
    model_server.answer(XINFERENCE_500, status=500, times=None)
    result = toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url,
                 "--log-format", "json")
    assert result.returncode == 0, result.stderr
    records = list(ResultStore(str(tmp_path / "run")).iter_records())
    assert len(records) == 3 and all(record.status != "error" for record in records)
    assert len(model_server.chat_requests) == 3
    assert not [event for event in result.events() if event["event"] == "model.retry"]
    refused = [event for event in result.events() if event["event"] == "model.context_length_exceeded"]
    assert len(refused) == 3 and "HTTP 500: [address=0.0.0.0:37421, pid=4242] The decoder prompt" in refused[0]["detail"]


SIGN_IN = "<html><head><title>Sign in</title></head></html>"


def test_a_chat_endpoint_answering_html_stops_the_run_after_three_items_exit_3(
        cli_process, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """/models answers, /chat/completions is a proxy's login page: the pre-flight passes, the first three items are
    protocol-error records, then the run stops with one line (a real process: the exit path of status 3). Pointed
    at the right server, the same command with --rerun-failed finishes the run."""
    model_server.answer(SIGN_IN, content_type="text/html", times=None)
    storage = tmp_path / "run"
    command = ["-b", "toy", "-B", "n_tasks=10", "--sequential", "--storage", str(storage), "-s", "chat", "--model",
               "vllm:scripted", "--model-base-url"]
    done = cli_process(*command, model_server.url)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert lines == [
        "error: the model server speaks another protocol: 3 items in a row failed with ModelProtocolError "
        f"(vllm:scripted at {model_server.url}: POST /chat/completions answered text/html: an HTML page titled "
        "'Sign in', not the OpenAI API; check that --model-base-url is the root of an OpenAI-compatible API); the "
        "run stopped, its records are kept: fix the server's URL (--model-base-url, --judge-base-url...), then run "
        "the same command with --rerun-failed"]
    assert "Traceback" not in done.stderr
    records = list(ResultStore(str(storage)).iter_records())
    assert len(records) == 3 and len(model_server.chat_requests) == 3  # not retried, not run past the third
    for record in records:
        assert record.status == "error" and record.error is not None
        assert (record.error.type, record.error.code) == ("ModelProtocolError", "protocol_error")

    with ScriptedModelServer(arithmetic) as right:
        fixed = cli_process(*command, right.url, "--rerun-failed")
    assert fixed.returncode == 0, fixed.stderr
    summary = json.loads((storage / "summary.json").read_text())
    assert (summary["completed"], summary["errors"], summary["score"]) == (10, 0, 1.0)


def test_a_chat_route_answering_a_not_found_page_stops_the_run_too(cli, tmp_path: Path,
                                                                   model_server: ScriptedModelServer) -> None:
    """/models answers JSON, POST /chat/completions a web server's 404 page (a URL that reaches some other app):
    three protocol-error records, each from one request, then one line and exit 3; never 100 error records."""
    model_server.answer("<html><head><title>Not Found</title></head></html>", status=404, content_type="text/html",
                        times=None)
    line = cli("-b", "toy", "--sequential", "--storage", str(tmp_path / "run"), "-s", "chat", "--model",
               "vllm:scripted", "--model-base-url", model_server.url).error_line(status=3)
    assert ("3 items in a row failed with ModelProtocolError (vllm:scripted at "
            f"{model_server.url}: POST /chat/completions answered HTTP 404 text/html: an HTML page titled 'Not Found', "
            "not the OpenAI API") in line
    assert len(list(ResultStore(str(tmp_path / "run")).iter_records())) == 3
    assert len(model_server.chat_requests) == 3


def test_a_judge_that_speaks_another_protocol_stops_the_run_too(cli, tmp_path: Path,
                                                                model_server: ScriptedModelServer,
                                                                beeai_file: str) -> None:
    model_server.answer(SIGN_IN, content_type="text/html", times=None)
    line = cli("-b", "hotpotqa", "--data-dir", beeai_file, "-s", "reference", "--repeats", "3", "--sequential",
               "--storage", str(tmp_path / "run"), "--judge-model", "vllm:scripted", "--judge-base-url",
               model_server.url, "--log-format", "json").error_line(status=3)
    assert f"failed with ModelProtocolError (vllm:scripted at {model_server.url}: POST /chat/completions answered " \
           "text/html: an HTML page titled 'Sign in'" in line
    records = list(ResultStore(str(tmp_path / "run")).iter_records())
    assert len(records) == 3
    judged = {m.name: m for m in records[0].metrics}["answer_llm_judge"]
    assert (judged.error.type, judged.error.code) == ("ModelProtocolError", "protocol_error")


def _reasoning_dialect(body: dict) -> dict:
    """The scripted answer as a reasoning model behind a gateway sends it: thinking parts, a ``<think>`` block left
    in the text, the reasoning also in ``reasoning_content``, and no usage."""
    message = body["choices"][0]["message"]
    answer = message["content"]
    message["content"] = [{"type": "thinking", "thinking": f"The sum is {answer}.", "signature": "c2ln"},
                          {"type": "text", "text": f"<think>double-check {answer}</think>\n{answer}"}]
    message["reasoning_content"] = f"The sum is {answer}."
    del body["usage"]
    return body


def test_a_reasoning_model_scores_with_its_reasoning_kept_apart_and_its_usage_unknown(toy, 
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.set_policy(arithmetic)
    model_server.reshape = _reasoning_dialect
    assert toy(tmp_path, "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url).returncode == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["score"] == 1.0 and summary["errors"] == 0
    assert summary["usage"]["vllm:scripted"] == {"input_tokens": 0, "output_tokens": 0, "calls": 3,
                                                 "calls_without_usage": 3}
    for record in ResultStore(str(tmp_path / "run")).iter_records():
        step = record.trajectory[-1]
        assert step["content"] == record.output
        assert step["reasoning"] == f"The sum is {record.output}.\n\ndouble-check {record.output}"


def test_on_ray_a_server_that_speaks_another_protocol_stops_the_run_too(tmp_path: Path, cli: Any, ray_session: Any,
                                                                         model_server: ScriptedModelServer) -> None:
    """The Ray workers' acknowledgements carry the error: the driver stops the pool long before 60 records."""
    model_server.answer(SIGN_IN, content_type="text/html", times=None)
    storage = tmp_path / "run"
    result = cli("-b", "toy", "-B", "n_tasks=60", "-s", "chat", "--model", "vllm:scripted", "--model-base-url",
                 model_server.url, "--workers", "2", "--storage", str(storage), env={"RAY_ADDRESS": ""})
    assert result.returncode == 3, result.stderr
    assert result.lines()[-1].startswith("error: the model server speaks another protocol: 3 items in a row failed "
                                         f"with ModelProtocolError (vllm:scripted at {model_server.url}: POST")
    records = list(ResultStore(str(storage)).iter_records())
    assert 3 <= len(records) < 60
    assert all(record.error is not None and record.error.code == "protocol_error" for record in records)


@pytest.mark.parametrize("executor", ["--sequential", "ray"])
def test_a_request_abandoned_at_the_model_timeout_is_counted_where_a_user_looks(
        cli, tmp_path: Path, model_server: ScriptedModelServer, request: pytest.FixtureRequest, executor: str) -> None:
    """Issue 27: a timed-out request is retried and counted: the record's usage and summary.json say ``timeouts``,
    the run's last lines say ``1 timed out``; the server saw the abandoned request's connection close."""
    flags = ["--sequential"] if executor == "--sequential" else ["--workers", "1"]
    if executor == "ray":
        request.getfixturevalue("ray_session")
    model_server.set_policy(arithmetic)
    model_server.stall(30)
    storage = tmp_path / "run"
    result = cli("-b", "toy", "-B", "n_tasks=2", "-s", "tests.models.scripted:impatient_chat", "-S", "timeout=1",
                 "--model", "vllm:scripted", "--model-base-url", model_server.url, "--concurrency", "1",
                 "--storage", str(storage), *flags, env={"RAY_ADDRESS": ""})
    assert result.returncode == 0, result.stderr
    records = sorted(ResultStore(str(storage)).iter_records(), key=lambda record: record.task_id)
    assert [record.status for record in records] == ["ok", "ok"]
    assert sorted(record.usage["vllm:scripted"].timeouts for record in records) == [0, 1]
    summary = json.loads((storage / "summary.json").read_text())
    assert summary["usage"]["vllm:scripted"]["timeouts"] == 1 and summary["usage"]["vllm:scripted"]["calls"] == 2
    assert "tokens vllm:scripted: " in result.stdout and ", 2 calls, 1 timed out; per item" in result.stdout
    assert model_server.wait_for_disconnects(1)
