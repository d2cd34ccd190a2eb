"""``python -m runner --benchmark acebench --model ...``: the default agent, ``--user-model``, token usage in
``summary.json``, model servers that refuse connections, and the offline ``mock:acebench`` run.

Models are scripted OpenAI-compatible servers on loopback (``tests/support/model_server.py``), standing in for
model servers because no language model can run here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import registry
from runner.core.trajectory import tool_call_step
from runner.models import MockReply, MockScript, _retry
from runner.storage.store import ResultStore
from tests.support.cli import CliResult
from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def run(cli, acebench_dir: Path):
    """``run(storage, *flags)``: an ACEBench run in this process, sequential, with JSON logs."""

    def ace(storage: Path, *flags: str) -> CliResult:
        return cli("--benchmark", "acebench", "--data-dir", str(acebench_dir), "--sequential", "--storage",
                   str(storage), "--log-format", "json", *flags)

    return ace


def with_usage(reply: str | dict, input_tokens: int, output_tokens: int) -> MockReply:
    body = {"content": reply} if isinstance(reply, str) else dict(reply)
    return MockReply.model_validate({**body, "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})


def test_model_and_user_model_flags_run_a_multi_turn_task_and_sum_usage(
    run, tmp_path: Path, model_server: ScriptedModelServer, user_server: ScriptedModelServer,
    ) -> None:
    milestones = ["[turn_on_wifi()]", "[get_earliest_message_id()]", "[delete_message(message_id=3)]",
                  ("[send_message(sender_name='Grace', receiver_name='Frank', "
                   "message='Are you free tomorrow to have lunch with me?')]")]
    model_server.set_policy(MockScript(replies=[with_usage(r, 100, 10) for r in [*milestones, "Sent."]]))
    user_server.set_policy(MockScript(replies=[
        with_usage("Please text Frank from Grace: 'Are you free tomorrow to have lunch with me?'", 50, 5),
        with_usage("finish conversation", 60, 2),
    ]))
    flags = ["-B", "categories=agent_multi_turn", "--limit", "1", "--model", "vllm:scripted", "--model-base-url",
             model_server.url, "--user-model", "vllm:user", "--user-model-base-url", user_server.url]

    assert run(tmp_path / "run", *flags).returncode == 0

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["by_category"]["agent_multi_turn"]["accuracy"]["mean"] == 1.0
    assert summary["usage"] == {"vllm:scripted": {"input_tokens": 500, "output_tokens": 50, "calls": 5},
                                "vllm:user": {"input_tokens": 110, "output_tokens": 7, "calls": 2}}
    assert model_server.requests[0].path == user_server.requests[0].path == "/v1/models"  # both preflighted
    manifest = ResultStore(str(tmp_path / "run")).read_manifest()
    assert manifest is not None and manifest.config["user_model"] == "vllm:user"
    # The simulated user's model changes the results: resuming with another one is refused.
    run(tmp_path / "run", *flags[:-4], "--user-model", "mock").error_line("another configuration")


@pytest.mark.parametrize("which", ["model", "user model"])
def test_a_model_server_refusing_connections_at_start_exits_2(
    which: str, run, tmp_path: Path, model_server: ScriptedModelServer, refused_url: str,
    ) -> None:
    flags = ["--model", "vllm:scripted", "--model-base-url", refused_url if which == "model" else model_server.url]
    if which == "user model":
        flags += ["--user-model", "vllm:user", "--user-model-base-url", refused_url]
    run(tmp_path / "run", "-B", "categories=agent_multi_turn", *flags).error_line(
        f"cannot connect to the model server at {refused_url}")
    assert not (tmp_path / "run").exists()


def test_a_model_server_lost_mid_run_gives_an_error_record_per_task(
    run, tmp_path: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = registry.check_models

    def check_then_lose_the_server(**models: str | None) -> None:
        checked(**models)
        model_server.stop()

    async def no_wait(seconds: float) -> None:
        """Retries go on at once (the delays themselves are tested with the model layer)."""

    monkeypatch.setattr(registry, "check_models", check_then_lose_the_server)
    monkeypatch.setattr(_retry, "_sleep", no_wait)
    assert run(tmp_path / "run", "-B", "categories=special_irrelevant", "--limit", "3",
               "--model", "vllm:scripted", "--model-base-url", model_server.url).returncode == 0

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] == 3 and summary["errors"] == 3
    records = [json.loads(path.read_text()) for path in (tmp_path / "run" / "records").glob("*/0.json")]
    assert {(r["status"], r["error"]["type"]) for r in records} == {("error", "ModelError")}
    assert "cannot connect" in records[0]["error"]["message"]


def test_mock_plays_acebench_offline(run, tmp_path: Path) -> None:
    assert run(tmp_path / "text", "-B", "categories=special_irrelevant,agent", "--limit", "53",
               "--model", "mock").returncode == 0
    summary = json.loads((tmp_path / "text" / "summary.json").read_text())
    assert summary["errors"] == 0 and summary["completed"] == 53
    assert summary["by_category"]["special_irrelevant"]["accuracy"]["mean"] == 1.0
    records = [json.loads(p.read_text()) for p in (tmp_path / "text" / "records").glob("*agent*/0.json")]
    assert {r["solution_meta"]["stopped"] for r in records} == {"user_finished"}
    assert all(r["output"]["calls"] == ["[turn_on_wifi()]"] for r in records)

    assert run(tmp_path / "native", "-B", "categories=agent_multi_step", "--limit", "2",
               "--model", "mock", "-S", "tool_calling=native").returncode == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "native" / "records").glob("*/0.json")]
    assert [r["solution_meta"]["stopped"] for r in records] == ["finished", "finished"]
    assert all(r["trajectory"][3] == tool_call_step("turn_on_wifi", {}, r["trajectory"][3]["result"]) for r in records)


def test_a_user_model_for_a_solution_without_one_exits_2(cli, tmp_path: Path) -> None:
    cli("-b", "toy", "-s", "chat", "--model", "mock", "--user-model", "mock", "--sequential",
        "--storage", str(tmp_path / "run")).error_line("solution 'chat' does not take a user model; drop --user-model")


@pytest.mark.parametrize(("argument", "message"), [
    ("tool_calling=json", "acebench: tool_calling='json'; use -S tool_calling=text or native"),
    ("max_turns=0", "acebench: max_turns=0; use -S max_turns=N with a whole N of at least 1"),
])
def test_a_bad_agent_argument_exits_2_before_anything_is_written(
    argument: str, message: str, run, tmp_path: Path
) -> None:
    assert run(tmp_path / "run", "--model", "mock", "-S", argument).error_line() == f"error: {message}"
    assert not (tmp_path / "run").exists()
