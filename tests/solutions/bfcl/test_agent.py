"""The ``bfcl`` solution, in prompting and native mode: with the offline ``mock`` model over a slice of every
category, and against a scripted OpenAI-compatible server where the requests it sends are checked."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator
from runner.benchmarks.bfcl import BFCLBenchmark
from runner.core.errors import ConfigError
from runner.models import MockReply, MockToolCall
from runner.registry import solution_spec
from runner.solutions.bfcl import BFCLAgent
from runner.solutions.bfcl.prompts import ADDITIONAL_FUNCTION_FC, MAXIMUM_STEP_LIMIT, convert_to_tool
from tests.support.model_server import ScriptedModelServer


def _task(bfcl_tasks, task_id):
    return copy.deepcopy(next(t for t in bfcl_tasks[task_id.rsplit("_", 1)[0]] if t.id == task_id))


@pytest.mark.parametrize("mode", ["prompting", "native"])
def test_the_mock_model_answers_every_category_and_scores_as_bfcl_scores(mode, bfcl_dir: Path, tmp_path: Path,
                                                                        bfcl_tasks, official_verdict) -> None:
    benchmark = BFCLBenchmark(data_dir=str(bfcl_dir), per_category=2)
    spec = solution_spec("bfcl", {"mode": mode}, model="mock", benchmark=benchmark)
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path / "run")),
                                 show=False, progress_bar=False)
    summary = asyncio.run(evaluator.run(spec))
    assert summary.completed == 34 and summary.errors == 0
    tasks = {task.id: task for tasks in bfcl_tasks.values() for task in tasks}
    for path in (tmp_path / "run" / "records").glob("*/0.json"):
        record = json.loads(path.read_text())
        task = tasks[record["task_id"]]
        output = record["output"]
        if "multi_turn" in task.id:
            assert len(output) == len(task.ground_truth)
            assert all(isinstance(step, list if mode == "native" else str) for turn in output for step in turn)
        else:
            assert isinstance(output, list if mode == "native" else str)
        expected = official_verdict(task, output)["valid"]
        assert record["metrics"][0]["result"] == float(expected), record["task_id"]


def test_native_multi_turn_sends_bfcls_tools_and_messages(bfcl_tasks) -> None:
    task = _task(bfcl_tasks, "multi_turn_miss_func_0")
    with ScriptedModelServer("bfcl") as server:
        agent = BFCLAgent("vllm:scripted", model_base_url=server.url, mode="native")
        output = asyncio.run(agent(task))
        requests = server.chat_requests
    turns = len(task.input["question"])
    # Each turn: a tool call, its result, then a reply without a call that ends the turn.
    assert [len(turn) for turn in output.output] == [2] * turns
    assert output.output[0][0][0]["name"] == task.input["functions"][0]["name"] and output.output[0][1] == []
    first, held_out = requests[0], requests[2 * 3]
    assert first.tools == convert_to_tool(task.input["functions"])
    assert [tool["function"]["name"] for tool in held_out.tools][-1] == "sort"
    assert held_out.messages[-1] == {"role": "user", "content": ADDITIONAL_FUNCTION_FC}
    tool_message = requests[1].messages[-1]
    called = requests[1].messages[-2]["tool_calls"][0]["id"]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == called
    assert task.metrics[0](output).result == 0.0


def _always_pwd(request):
    return MockReply(tool_calls=[MockToolCall(name="pwd", arguments={})])


def test_a_model_that_never_stops_calling_is_forced_to_stop_as_bfcl_does(bfcl_tasks, official_verdict) -> None:
    task = _task(bfcl_tasks, "multi_turn_base_0")
    with ScriptedModelServer(_always_pwd) as server:
        agent = BFCLAgent("vllm:scripted", model_base_url=server.url, mode="native")
        output = asyncio.run(agent(task))
    assert output.meta["forced_to_stop"] is True
    assert [len(turn) for turn in output.output] == [MAXIMUM_STEP_LIMIT + 1]
    result = task.metrics[0](output)
    assert result.result == 0.0 and result.metadata["error_type"] == "multi_turn:force_terminated"
    assert official_verdict(task, output.output)["error_type"] == "multi_turn:force_terminated"


def test_prompting_sends_bfcls_system_prompt_and_keeps_the_reply_text(bfcl_tasks, reference_scorer) -> None:
    task = _task(bfcl_tasks, "simple_python_0")
    reply = "```\n[calculate_triangle_area(base=10, height=5)]\n```"
    with ScriptedModelServer([reply]) as server:
        output = asyncio.run(BFCLAgent("vllm:scripted", model_base_url=server.url)(task))
        request = server.chat_requests[0]
    official = reference_scorer.model_handler_utils.system_prompt_pre_processing_chat_model(
        copy.deepcopy(task.input["question"][0]), copy.deepcopy(task.input["functions"]), task.id)
    assert request.messages == official and request.tools is None
    assert output.output == reply and task.metrics[0](output).result == 1.0


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="use -S mode=prompting or -S mode=native"):
        solution_spec("bfcl", {"mode": "tools"}, model="mock").check()
