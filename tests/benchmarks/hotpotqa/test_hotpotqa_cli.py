"""HotpotQA from the command line: the agent with ``--model mock`` end to end, and where the judge model comes from
(``--judge-model``, then ``EVAL_CHAT_MODEL_NAME``, then ``--model``), what it changes in the run's fingerprint, and
its preflight check."""

from __future__ import annotations

import json
from pathlib import Path

from runner.cli import build_parser, main
from runner.cli.args import config_from_args
from runner.engine.request import RunRequest


def _evaluator(*flags: str):
    args = build_parser().parse_args(["run", *flags])
    return RunRequest.from_config(config_from_args(args))


def test_the_agent_runs_end_to_end_with_the_mock_model(cli, distractor_file, tmp_path):
    run = tmp_path / "run"
    result = cli("--benchmark", "hotpotqa", "--data-dir", distractor_file, "--solution", "hotpotqa-agent",
                 "--model", "mock", "--sequential", "--limit", "5", "--storage", str(run),
                 env={"EVAL_CHAT_MODEL_NAME": ""})
    assert result.returncode == 0, result.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["completed"] == 5 and summary["errors"] == 0
    assert summary["metrics"]["tool_usage"]["mean"] == 0.75          # 3 lookups where 2 were expected
    assert summary["metrics"]["answer_llm_judge"]["n"] == 5           # the mock judge (the agent's model)
    assert summary["metrics"]["facts_similarity"]["n"] == 5
    record = json.loads(next(run.glob("records/*/0.json")).read_text())
    calls = [step for step in record["trajectory"] if step["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["context_lookup"] * 3 and calls[1]["result"]["sentences"]
    assert set(record["output"]) >= {"answer", "tool_used", "supporting_titles", "supporting_sentences",
                                     "reasoning_explanation"}
    assert json.loads((run / "run.json").read_text())["fingerprint_fields"]["judge_model"] == "mock"


def test_judge_model_precedence(distractor_file, monkeypatch):
    base = ("-b", "hotpotqa", "--data-dir", distractor_file, "--sequential")
    monkeypatch.setenv("EVAL_CHAT_MODEL_NAME", "mock:echo")
    explicit = _evaluator(*base, "-s", "hotpotqa-agent", "--model", "mock", "--judge-model", "mock:default")
    assert explicit.config["judge_model"] == "mock:default" and explicit.benchmark.judge.name == "mock:default"
    from_env = _evaluator(*base, "-s", "hotpotqa-agent", "--model", "mock")
    assert from_env.config["judge_model"] == "mock:echo"
    assert from_env.fingerprint_fields["judge_model"] == "mock:echo"
    monkeypatch.delenv("EVAL_CHAT_MODEL_NAME")
    from_agent = _evaluator(*base, "-s", "hotpotqa-agent", "--model", "mock")
    assert from_agent.config["judge_model"] == "mock"
    no_judge = _evaluator(*base, "-s", "reference")
    assert no_judge.config["judge_model"] is None and "judge_model" not in no_judge.fingerprint_fields
    names = {m.name for m in next(iter(no_judge.benchmark)).metrics}
    assert "answer_llm_judge" not in names and "tool_usage" in names


def test_the_judge_follows_the_agents_server_only_when_it_is_the_agents_model(distractor_file, monkeypatch):
    monkeypatch.delenv("EVAL_CHAT_MODEL_NAME", raising=False)
    base = ("-b", "hotpotqa", "--data-dir", distractor_file, "--sequential", "-s", "hotpotqa-agent",
            "--model", "vllm:agent", "--model-base-url", "http://127.0.0.1:9/v1")
    same = _evaluator(*base)
    assert same.config["judge_base_url"] == "http://127.0.0.1:9/v1"
    other = _evaluator(*base, "--judge-model", "vllm:judge")
    assert other.config["judge_base_url"] is None


def test_judge_flags_for_a_benchmark_without_judged_metrics_are_refused(tmp_path, capsys):
    assert main(["-b", "toy", "-s", "calculator", "--judge-model", "mock", "--sequential",
                 "--storage", str(tmp_path / "run")]) == 2
    assert "has no LLM-judged metrics; drop --judge-model" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_unreachable_judge_fails_the_preflight(distractor_file, tmp_path, refused_url, capsys):
    code = main(["-b", "hotpotqa", "--data-dir", distractor_file, "-s", "reference", "--sequential",
                 "--judge-model", "vllm:judge", "--judge-base-url", refused_url, "--storage", str(tmp_path / "run")])
    assert code == 2
    assert "cannot connect to the model server" in capsys.readouterr().err
    assert not Path(tmp_path / "run" / "records").exists()


def test_another_data_file_in_the_same_run_directory_is_refused(cli, distractor_file, beeai_file, tmp_path):
    run = tmp_path / "run"
    first = cli("-b", "hotpotqa", "--data-dir", distractor_file, "-s", "reference", "--sequential",
                "--limit", "3", "--storage", str(run))
    assert first.returncode == 0, first.stderr
    records = sorted(p.name for p in run.glob("records/*/*.json"))
    other = cli("-b", "hotpotqa", "--data-dir", beeai_file, "-s", "reference", "--sequential",
                "--limit", "3", "--storage", str(run))
    assert other.returncode == 2
    assert "another configuration (data_dir:" in other.stderr and "--force" in other.stderr
    assert sorted(p.name for p in run.glob("records/*/*.json")) == records
    assert json.loads((run / "run.json").read_text())["config"]["data_dir"] == distractor_file
