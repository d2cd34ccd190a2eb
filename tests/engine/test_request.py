"""One builder of a run: the same settings given as CLI flags, as a configuration file, or as ``GeneralEvaluator`` /
``RayEvaluator`` keyword arguments make one identical :class:`RunRequest`, judge defaults and replicas included."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from runner import GeneralEvaluator, RayEvaluator
from runner.cli import build_parser
from runner.cli.args import config_from_args
from runner.core.config import EMBEDDED_MODEL
from runner.engine.request import RunRequest


def _cli(*words: str) -> RunRequest:
    return RunRequest.from_config(config_from_args(build_parser().parse_args(["run", *words])))


def _shape(request: RunRequest) -> dict:
    """What a user would compare of two requests: every field, the objects by what they hold."""
    benchmark = request.benchmark
    tasks = list(benchmark)
    return {
        "benchmark": (type(benchmark), benchmark.name, [task.id for task in tasks],
                      sorted(metric.name for metric in tasks[0].metrics),
                      getattr(benchmark.judge, "name", None)),
        "solution": (request.solution.target, request.solution.kwargs, request.solution.display),
        "store": (request.store.uri, request.store.storage_options),
        "settings": request.settings,
        "fingerprint_fields": request.fingerprint_fields,
        "config": request.config,
        "executor": (type(request.executor), getattr(request.executor, "spec", None)),
        "replicas": request.replicas,
        "progress_bar": request.progress_bar,
        "weights": request.weights,
    }


@pytest.fixture
def judge_from_the_environment(monkeypatch):
    monkeypatch.setenv("EVAL_CHAT_MODEL_NAME", "mock:echo")
    monkeypatch.delenv("AGENT_CHAT_MODEL_NAME", raising=False)


@pytest.mark.parametrize("evaluator, executor_flags", [(GeneralEvaluator, ["--sequential"]), (RayEvaluator, [])],
                         ids=["GeneralEvaluator", "RayEvaluator"])
def test_flags_a_file_and_evaluator_keywords_build_one_identical_request(
        evaluator, executor_flags, distractor_file, tmp_path, judge_from_the_environment):
    storage = str(tmp_path / "run")
    words = ["-b", "hotpotqa", "--data-dir", distractor_file, "-B", "answer_only=false", "-s", "hotpotqa-agent",
             "-S", "max_turns=4", "--model", EMBEDDED_MODEL, "--storage", storage, "--limit", "5", "--repeats", "2",
             "--max-rpm", "120", "--model-startup-timeout", "90", *executor_flags]
    from_flags = _cli(*words)

    file = tmp_path / "run.yaml"
    file.write_text(yaml.safe_dump({
        "benchmark": "hotpotqa", "data_dir": distractor_file, "benchmark_args": {"answer_only": False},
        "solution": "hotpotqa-agent", "solution_args": {"max_turns": 4}, "model": EMBEDDED_MODEL,
        "storage": storage, "limit": 5, "repeats": 2, "max_rpm": 120, "model_startup_timeout": 90,
        **({"executor": "sequential"} if executor_flags else {})}))
    from_file = _cli("--config", str(file))

    from_keywords = evaluator(benchmark="hotpotqa", n_repeat=2, storage=storage, solution_func="hotpotqa-agent",
                              data_dir=distractor_file, benchmark_args={"answer_only": False},
                              solution_args={"max_turns": 4}, model=EMBEDDED_MODEL, limit=5, max_rpm=120,
                              model_startup_timeout=90).request()

    assert _shape(from_flags) == _shape(from_file) == _shape(from_keywords)
    # The judge default (EVAL_CHAT_MODEL_NAME) and the embedded model's replica, settled the same way each time.
    assert from_keywords.config["judge_model"] == "mock:echo" == from_keywords.benchmark.judge.name
    assert [replica.model for replica in from_keywords.replicas] == [EMBEDDED_MODEL]
    assert from_keywords.replicas[0].startup_timeout == 90
    # Items in flight that fill the replica's batch, as the CLI sets them when --concurrency is not given.
    assert from_keywords.settings.worker.max_concurrency == from_flags.settings.worker.max_concurrency > 1


def test_the_request_has_no_field_this_test_leaves_out():
    assert {f.name for f in dataclasses.fields(RunRequest)} == {
        "benchmark", "solution", "store", "settings", "fingerprint_fields", "config", "progress_bar", "executor",
        "replicas", "weights"}


def test_an_evaluator_with_objects_keeps_its_fingerprint_and_gets_the_same_concurrency_rule(tmp_path):
    from runner.benchmarks.toy import ToyBenchmark
    from runner.core.config import ServeSpec

    def solve(task):
        return "x"

    request = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=str(tmp_path / "run"),
                               serve=[ServeSpec(model="vllm:org/model")]).request()
    assert request.fingerprint_fields == {"benchmark": "runner.benchmarks.toy:ToyBenchmark[toy]",
                                          "solution": request.solution.display}
    assert [replica.model for replica in request.replicas] == ["vllm:org/model"]
    flags = _cli("-b", "toy", "-s", "chat", "--model", "vllm:org/model", "--serve", "--sequential")
    assert request.settings.worker.max_concurrency == flags.settings.worker.max_concurrency > 1


def test_a_change_of_the_configuration_is_validated_again(monkeypatch):
    from runner.core.errors import ConfigError

    # The judge default comes from the environment after the flags were validated; a judge served by the run and
    # also given a URL is refused then too (RunConfig's validator), not only when the flags say so.
    monkeypatch.setenv("EVAL_CHAT_MODEL_NAME", "vllm:judge")
    with pytest.raises(ConfigError, match="the judge vllm:judge is served by the run"):
        _cli("-b", "hotpotqa", "-s", "reference", "--serve", "vllm:judge", "--judge-base-url", "http://j:8000/v1")


@pytest.mark.parametrize("value, bar", [("on", True), ("off", False), ("auto", None)])
def test_the_progress_setting_decides_the_bar(value, bar):
    assert _cli("-b", "toy", "-s", "calculator", "--sequential", "--progress", value).progress_bar is bar
    assert GeneralEvaluator(benchmark="toy", solution_func="calculator", progress=value).request().progress_bar is bar
