"""The built-in HotpotQA agent against the scripted OpenAI-compatible server (it stands in for a model server, since
no language model runs here): tool calls, their trajectory, the official metrics and tool usage of its answer,
malformed arguments fed back, the turn limit, and its tools."""

from __future__ import annotations

import json
import pickle

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator
from runner.solutions.hotpotqa import answer_question
from runner.solutions.tools import ContextLookup, ToolError, calculator
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.cli import main
from runner.core.errors import ConfigError
from runner.registry import solution_spec
from runner.models import ChatModel, MockReply, MockRule, MockScript, MockToolCall

DERRICKSON = [
    {"tool_calls": [{"name": "context_lookup", "arguments": {"title": "Scott Derrickson"}}]},
    {"tool_calls": [{"name": "context_lookup", "arguments": {"title": "ed wood"}}]},
    {"content": "Both are American.\n```json\n" + json.dumps({
        "answer": "yes",
        "supporting_titles": ["Scott Derrickson", "Ed Wood"],
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
        "reasoning_explanation": [{"step": 1, "logic": "both are American"}],
    }) + "\n```"},
]


async def _run(benchmark, spec, tmp_path, limit=1):
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), limit=limit,
                                 show=False)
    summary = await evaluator.run(spec)
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("records/*/0.json"))]
    return summary, records


async def test_two_lookups_and_an_answer_score_one_on_the_official_metrics_and_tool_usage(
        model_server, distractor_file, tmp_path):
    model_server.set_policy(DERRICKSON)
    benchmark = HotpotQABenchmark(distractor_file)
    spec = solution_spec("hotpotqa-agent", model="vllm:scripted", model_base_url=model_server.url,
                         benchmark=benchmark)
    summary, records = await _run(benchmark, spec, tmp_path)
    for name in ("em", "f1", "sp_em", "sp_f1", "joint_em", "joint_f1", "exact_match", "tool_usage"):
        assert summary.metrics[name].mean == 1.0, name
    record = records[0]
    calls = [step for step in record["trajectory"] if step.get("type") == "tool_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("context_lookup", {"title": "Scott Derrickson"}), ("context_lookup", {"title": "ed wood"})]
    assert calls[1]["result"]["title"] == "Ed Wood" and calls[1]["error"] is None
    assert calls[0]["result"]["sentences"][0]["text"].startswith("Scott Derrickson (born July 16, 1966) is an American")
    output = record["output"]
    assert output["tool_used"] == [{"tool": "context_lookup", "times_used": 2}]
    assert output["supporting_sentences"][1].startswith("Edward Davis Wood Jr.")
    assert output["reasoning_explanation"] == [{"step": 1, "logic": "both are American"}]
    assert record["solution_meta"]["turns"] == 3 and record["solution_meta"]["stopped"] == "answer"
    assert record["usage"]["vllm:scripted"]["calls"] == 3
    first = model_server.chat_requests[0]
    assert first.tool_names() == ["context_lookup", "calculator"] and first.temperature == 0.0
    second = model_server.chat_requests[1].messages
    assert second[-1]["role"] == "tool" and "Scott Derrickson" in second[-1]["content"]


async def test_malformed_arguments_and_unknown_tools_are_fed_back(model_server, distractor_file, tmp_path):
    model_server.set_policy([
        {"tool_calls": [{"name": "context_lookup", "arguments": '{"title": "Ed Wood"'},
                        {"name": "wikipedia", "arguments": {"query": "Ed Wood"}},
                        {"name": "calculator", "arguments": {"expression": "2 * (1966 - 1924)"}}]},
        '{"answer": "no"}',
    ])
    benchmark = HotpotQABenchmark(distractor_file)
    spec = solution_spec("hotpotqa-agent", model="vllm:scripted", model_base_url=model_server.url,
                         benchmark=benchmark)
    summary, records = await _run(benchmark, spec, tmp_path)
    calls = [step for step in records[0]["trajectory"] if step.get("type") == "tool_call"]
    assert calls[0]["arguments"] == {"raw_arguments": '{"title": "Ed Wood"'}
    assert "not valid JSON" in calls[0]["error"] and calls[0]["result"] is None
    assert "there is no tool 'wikipedia'" in calls[1]["error"]
    assert calls[2]["result"] == {"result": 84} and calls[2]["error"] is None
    fed_back = [m for m in model_server.chat_requests[1].messages if m["role"] == "tool"]
    assert "not valid JSON" in json.loads(fed_back[0]["content"])["error"]
    assert summary.metrics["em"].mean == 0.0 and records[0]["status"] == "ok"


async def test_the_turn_limit_ends_with_one_call_that_must_answer(model_server, distractor_file):
    model_server.set_policy(MockScript(
        rules=[MockRule(match="You have used all your tool calls", reply=MockReply(content='{"answer": "yes"}'))],
        replies=[MockReply(tool_calls=[MockToolCall(name="context_lookup", arguments={"title": "Ed Wood"})])],
    ))
    task = next(iter(HotpotQABenchmark(distractor_file)))
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    result = await answer_question(model, task, max_turns=2)
    assert result.output["answer"] == "yes"
    assert result.meta == {"turns": 3, "stopped": "max_turns", "model": "scripted"}
    assert result.output["tool_used"] == [{"tool": "context_lookup", "times_used": 2}]
    assert model_server.chat_requests[-1].tools is None


async def test_a_reply_without_json_is_asked_again(model_server, distractor_file):
    model_server.set_policy(["They are both American, so yes.", '{"answer": "yes"}'])
    task = next(iter(HotpotQABenchmark(distractor_file)))
    result = await answer_question(ChatModel.from_name("vllm:scripted", base_url=model_server.url), task)
    assert result.output["answer"] == "yes" and result.meta["turns"] == 2
    assert "Reply now with only the JSON object" in model_server.chat_requests[1].messages[-1]["content"]


def test_context_lookup_reads_by_title_and_ranks_titles_otherwise(distractor_file, beeai_file):
    task = next(iter(HotpotQABenchmark(distractor_file)))
    lookup = ContextLookup(task.metadata["context"])
    found = lookup({"title": "  ED   wood "})
    assert found["title"] == "Ed Wood" and found["sentences"][0]["id"] == 0
    missing = lookup({"title": "Were Scott Derrickson and Ed Wood American?"})
    assert "no article titled" in missing["error"] and len(missing["titles"]) == 10
    assert set(missing["titles"][:2]) == {"Scott Derrickson", "Ed Wood"}
    with pytest.raises(ToolError, match="non-empty string 'title'"):
        lookup({"query": "Ed Wood"})
    # BeeAI records have no context: their supporting sentences, grouped by title, stand in for it
    beeai = ContextLookup(next(iter(HotpotQABenchmark(beeai_file))).metadata["context"])
    assert beeai({"title": "First for Women"})["sentences"] == [
        {"id": 0, "text": "First for Women is a woman's magazine published by Bauer Media Group in the USA."}]
    with pytest.raises(ToolError, match="no documents"):
        ContextLookup(None)({"title": "x"})


def test_calculator_tool_refuses_code():
    assert calculator({"expression": "(1846 - 1844) * 12"}) == {"result": 24}
    with pytest.raises(ToolError, match="not allowed"):
        calculator({"expression": "__import__('os')"})


def test_the_agent_and_its_tasks_pickle_for_ray_workers(distractor_file):
    benchmark = HotpotQABenchmark(distractor_file, judge_model="mock", extra_metrics="deepeval:ExactMatchMetric")
    spec = solution_spec("hotpotqa-agent", model="mock", benchmark=benchmark)
    spec_copy = pickle.loads(pickle.dumps(spec))
    assert callable(spec_copy.build(benchmark))
    task = next(iter(benchmark))
    copy = pickle.loads(pickle.dumps(task))
    assert [m.name for m in copy.metrics] == [m.name for m in task.metrics]
    assert "deepeval_exact_match" in {m.name for m in copy.metrics}
    assert len(pickle.loads(pickle.dumps(benchmark))) == 103


def test_a_bad_max_turns_is_refused_before_the_run(distractor_file, tmp_path, capsys):
    with pytest.raises(ConfigError, match="max_turns must be an integer of at least 1"):
        solution_spec("hotpotqa-agent", {"max_turns": 0}, model="mock").check()
    assert main(["-b", "hotpotqa", "--data-dir", distractor_file, "--model", "mock", "-S", "max_turns=two",
                 "--sequential", "--storage", str(tmp_path / "run")]) == 2
    assert "max_turns must be an integer of at least 1, got 'two'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
