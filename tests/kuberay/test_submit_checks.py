"""``submit`` makes every check of a local run before it prints or sends anything: each bad input of the table is
refused by ``run`` (nothing written) and by ``submit --dry-run`` with the same one line and exit status 2; where
a schema can say it, the chart's ``values.schema.json`` refuses the same input in Helm's engine."""

from __future__ import annotations

import re

import helm_python
import pytest

from runner.core.errors import ConfigError
from runner.kuberay.job_rules import model_name_pattern
from runner.models import parse_model_name

# (id, the run's flags, words of the one error line, the chart's job values when its schema refuses them too).
BAD_INPUTS = [
    ("unknown-benchmark", ["-b", "nope", "-s", "calculator"], "unknown benchmark 'nope'", None),
    ("unknown-solution", ["-b", "toy", "-s", "nope"], "unknown solution 'nope'", None),
    ("solution-that-does-not-import", ["-b", "toy", "-s", "no_such_module:solve"], "does not import", None),
    ("benchmark-argument-typo", ["-b", "toy", "-B", "n_task=5", "-s", "calculator"],
     "benchmark 'toy' does not accept argument n_task", {"benchmark": "toy", "benchmark_args": {"n_task": 5},
                                                         "solution": "calculator"}),
    ("benchmark-argument-value", ["-b", "toy", "-B", "n_tasks=0", "-s", "calculator"],
     "benchmark 'toy' rejected its arguments: n_tasks must be at least 1", None),
    ("data-dir-for-toy", ["-b", "toy", "--data-dir", "s3://bucket/data", "-s", "calculator"],
     "does not accept --data-dir", {"benchmark": "toy", "data_dir": "s3://bucket/data", "solution": "calculator"}),
    ("judge-clamp-not-a-boolean", ["-b", "hotpotqa", "-B", "judge_clamp=yes", "-s", "reference"],
     "judge_clamp must be true or false, got 'yes'", None),
    ("solution-argument-typo", ["-b", "toy", "-s", "chat", "--model", "mock", "-S", "temprature=0"],
     "temprature", {"benchmark": "toy", "solution": "chat", "model": "mock", "solution_args": {"temprature": 0}}),
    ("solution-argument-type", ["-b", "toy", "-s", "chat", "--model", "mock", "-S", "temperature=hot"],
     "argument temperature='hot' is not a valid float", None),
    ("arguments-to-a-plain-function", ["-b", "toy", "-s", "calculator", "-S", "digits=3"],
     "is a plain function and takes no arguments", {"benchmark": "toy", "solution": "calculator",
                                                    "solution_args": {"digits": 3}}),
    ("model-for-a-solution-without-one", ["-b", "toy", "-s", "calculator", "--model", "mock"],
     "takes no arguments (model)", {"benchmark": "toy", "solution": "calculator", "model": "mock"}),
    ("no-model", ["-b", "toy", "-s", "chat"], "solution 'chat' needs --model", None),
    ("unknown-model-provider", ["-b", "toy", "-s", "chat", "--model", "nope:x"], "unknown model provider 'nope'",
     {"benchmark": "toy", "solution": "chat", "model": "nope:x"}),
    ("model-name-without-a-model", ["-b", "toy", "-s", "chat", "--model", "vllm:"], "names no model",
     {"benchmark": "toy", "solution": "chat", "model": "vllm:"}),
    ("missing-api-key", ["-b", "toy", "-s", "chat", "--model", "openai:gpt-4o"], "set OPENAI_API_KEY", None),
    ("missing-api-key-of-the-judge", ["-b", "hotpotqa", "-s", "reference", "--judge-model", "dashscope:qwen-plus"],
     "set DASHSCOPE_API_KEY", None),
    ("judge-for-a-benchmark-without-one", ["-b", "toy", "-s", "calculator", "--judge-model", "mock"],
     "has no LLM-judged metrics", {"benchmark": "toy", "solution": "calculator", "judge_model": "mock"}),
    ("unknown-executor", ["-b", "toy", "-s", "calculator", "--executor", "nope"], "executor 'nope'", None),
    ("repeats-zero", ["-b", "toy", "-s", "calculator", "--repeats", "0"], "--repeats: Input should be greater",
     {"benchmark": "toy", "solution": "calculator", "repeats": 0}),
    ("memory-without-a-number", ["-b", "toy", "-s", "calculator", "--memory", "lots"], "--memory:",
     {"benchmark": "toy", "solution": "calculator", "worker": {"memory": "lots"}}),
]
IDS = [case[0] for case in BAD_INPUTS]
NO_KEYS = {"OPENAI_API_KEY": "", "DASHSCOPE_API_KEY": "", "AGENT_CHAT_MODEL_NAME": "", "EVAL_CHAT_MODEL_NAME": ""}
"""The environment of both commands: no API key, no model named by the environment."""


@pytest.mark.parametrize("flags, words, chart_job", [case[1:] for case in BAD_INPUTS], ids=IDS)
def test_what_a_local_run_refuses_submit_refuses_too(cli, tmp_path, flags, words, chart_job):
    local = cli(*flags, "--storage", str(tmp_path / "run"), env={**NO_KEYS, "RAY_ADDRESS": ""})
    line = local.error_line(words)
    assert not (tmp_path / "run").exists()
    submitted = cli("submit", "--dry-run", *flags, "--storage", "s3://bucket/runs/x", env=NO_KEYS)
    assert submitted.stdout == ""
    # The same line, but for an executor: submit says that a RayJob runs on Ray whatever executor is named.
    submitted_line = submitted.error_line(words)
    assert submitted_line == line or "does not run on the RayJob's Ray cluster" in submitted_line


@pytest.mark.parametrize("job", [case[3] for case in BAD_INPUTS if case[3]],
                         ids=[case[0] for case in BAD_INPUTS if case[3]])
def test_the_chart_schema_refuses_what_a_schema_can(chart, job):
    with pytest.raises(helm_python.HelmValuesError):
        chart.render({"job": {**job, "storage": "s3://bucket/runs/x"}}, name="toy")


@pytest.mark.parametrize("job", [
    {"benchmark": "toy", "benchmark_args": {"n_tasks": 5}, "solution": "calculator"},
    {"benchmark": "hotpotqa", "benchmark_args": {"judge_clamp": True}, "solution": "chat", "model": "vllm:Qwen/Q",
     "model_base_url": "http://vllm:8000/v1", "judge_model": "OpenAI:gpt-4o", "data_dir": "s3://bucket/hotpot.json"},
    {"benchmark": "my_pkg.bench:Custom", "benchmark_args": {"anything": 1}, "solution": "my_pkg.agent:Agent",
     "solution_args": {"anything": 1}, "model": "mock"},
    {"benchmark": "installed-plugin", "solution": "acebench", "model": "ollama:llama3.1:8b",
     "user_model": "mock:echo"},
], ids=["toy", "hotpotqa-with-a-judge", "import-paths", "entry-point-name"])
def test_the_chart_schema_accepts_good_jobs(chart, job):
    chart.render({"job": {**job, "storage": "s3://bucket/runs/x"}}, name="toy")


@pytest.mark.parametrize("name", ["mock", "mock:echo", "MOCK/x.yaml", "openai:gpt-4o", " vllm/Qwen/Qwen2.5-7B ",
                                  "ollama:llama3.1:8b", "Dashscope:qwen-plus", "nope:x", "vllm:", "vllm", "gpt-4o",
                                  "openai: ", "vllm :x", ""])
def test_the_schema_s_model_name_pattern_agrees_with_the_parser(name):
    try:
        parse_model_name(name)
        parsed = True
    except ConfigError:
        parsed = False
    assert (re.match(model_name_pattern(), name) is not None) == parsed
