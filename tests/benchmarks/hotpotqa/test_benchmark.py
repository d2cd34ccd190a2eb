"""HotpotQA through the engine: the three file shapes, the reference solution scoring 1.0 on every official metric of
the 103-record sample, corpus averages with failed predictions, BeeAI's metrics, and the pinned download."""

import functools
import hashlib
import http.server
import json
import threading

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator, SolutionOutput
from runner.benchmarks.hotpotqa import HotpotQABenchmark, load_records, tool_usage_score
from runner.benchmarks.hotpotqa import data as hotpot_data
from runner.core.errors import BenchmarkError
from runner.core.trajectory import tool_call_step
from runner.registry import solution_spec

OFFICIAL = ("em", "f1", "prec", "recall", "sp_em", "sp_f1", "sp_prec", "sp_recall",
            "joint_em", "joint_f1", "joint_prec", "joint_recall")


@pytest.fixture(scope="module")
def distractor(shared_data):
    return str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json")


def test_the_three_shapes_are_detected(shared_data, distractor):
    official = load_records(distractor)
    assert len(official) == 103 and official[0].supporting_facts == [("Scott Derrickson", 0), ("Ed Wood", 0)]
    assert official[0].type == "comparison" and official[0].level == "hard"
    simplified = load_records(str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_v1_simplified.json"))
    assert len(simplified) == 7405 and simplified[0].id == "00000" and simplified[0].supporting_facts is None
    beeai = load_records(str(shared_data / "hotpotqa_beeai" / "evaluation_dataset_50_clean.json"))
    assert len(beeai) == 50 and beeai[0].supporting_titles and beeai[0].context is None


async def test_reference_scores_one_on_every_official_metric(distractor, tmp_path):
    benchmark = HotpotQABenchmark(distractor)
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(solution_spec("reference", benchmark=benchmark))
    assert summary.completed == 103 and summary.errors == 0
    for name in OFFICIAL:
        metric = summary.metrics[name]
        assert (metric.mean, metric.min, metric.n) == (1.0, 1.0, 103), name
    assert summary.metrics["exact_match"].mean == 1.0 and summary.metrics["tool_usage"].mean == 1.0
    assert summary.score == 1.0 and summary.score_components["joint_f1"] == 1.0
    assert set(summary.by_category) == {"bridge", "comparison"}
    assert summary.by_category["comparison"]["em"]["n"] == 21


async def test_corpus_averages_count_failed_predictions_as_zero(distractor, tmp_path):
    benchmark = HotpotQABenchmark(distractor)
    first, second = list(benchmark)[:2]

    def solve(task):
        if task.id == second.id:
            raise RuntimeError("agent crashed")
        gold = task.ground_truth
        return {"answer": gold["answer"], "supporting_sentences": gold["supporting_sentences"]}

    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), limit=2,
                                 show=False)
    summary = await evaluator.run(solve)
    assert summary.errors == 1
    # supporting sentences are mapped back to (title, sentence id) through the context
    for name in ("em", "f1", "sp_em", "joint_f1"):
        assert summary.metrics[name].mean == 0.5 and summary.metrics[name].n == 2


def test_beeai_metrics_on_an_answer_string_and_a_trajectory(shared_data):
    benchmark = HotpotQABenchmark(str(shared_data / "hotpotqa_beeai" / "dataset.json"))
    task = next(iter(benchmark))
    metrics = {m.name: m for m in task.metrics}
    assert set(metrics) == {"em", "f1", "prec", "recall", "exact_match", "tool_usage"}
    lookups = [tool_call_step("context_lookup", {"title": t}) for t in task.ground_truth["supporting_titles"]]
    answer = SolutionOutput(output=json.dumps({"answer": " Arthur's Magazine "}), trajectory=lookups)
    assert metrics["exact_match"](answer).result == 1.0
    assert metrics["exact_match"](SolutionOutput(output="arthur's magazine")).result == 0.0   # case-sensitive
    assert metrics["tool_usage"](answer).result == 1.0
    one_lookup = SolutionOutput(output="x", trajectory=lookups[:1] + [tool_call_step("calculator", {})])
    # tools {context_lookup, calculator} vs expected {context_lookup: 2}: 0.75 * 1/2 + 0.25 * 0
    assert metrics["tool_usage"](one_lookup).result == pytest.approx(0.375)


def test_tool_usage_score_edge_cases():
    assert tool_usage_score({}, {}) == 1.0
    assert tool_usage_score({"a": 1}, {}) == pytest.approx(0.25)
    assert tool_usage_score({"a": 2}, {"a": 2}) == 1.0
    assert tool_usage_score({"a": 3}, {"a": 2}) == 0.75


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(BenchmarkError, match="not found"):
        HotpotQABenchmark(str(tmp_path / "missing.json")).prepare()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"title": "x"}]))
    with pytest.raises(BenchmarkError, match="unrecognised HotpotQA record"):
        HotpotQABenchmark(str(bad)).prepare()
    with pytest.raises(BenchmarkError, match="unknown HotpotQA format"):
        HotpotQABenchmark(str(bad), format="wiki")


@pytest.fixture
def file_server(shared_data):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(shared_data))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_is_pinned_cached_and_verified(file_server, shared_data, tmp_path, monkeypatch):
    """With no path the official file is downloaded once and checked; here a loopback server stands in for the
    HotpotQA site (no internet on this machine) and serves the 103-record sample under a pinned SHA-1."""
    sample = shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json"
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hotpot_data, "DEV_DISTRACTOR_URL",
                        f"{file_server}/hotpotqa_dev_sample/hotpot_dev_distractor_v1_100.json")
    monkeypatch.setattr(hotpot_data, "DEV_DISTRACTOR_SHA1", hashlib.sha1(sample.read_bytes()).hexdigest())
    monkeypatch.setattr(hotpot_data, "DEV_DISTRACTOR_BYTES", sample.stat().st_size)
    assert len(HotpotQABenchmark()) == 103
    cached = tmp_path / "cache" / "hotpotqa" / "hotpot_dev_distractor_v1.json"
    assert cached.read_bytes() == sample.read_bytes()

    monkeypatch.setattr(hotpot_data, "DEV_DISTRACTOR_URL", f"{file_server}/nowhere.json")
    assert len(HotpotQABenchmark()) == 103          # the verified cache is reused

    cached.write_bytes(b"[]")                        # a corrupt cache is downloaded again, and refused if wrong
    monkeypatch.setattr(hotpot_data, "DEV_DISTRACTOR_URL",
                        f"{file_server}/hotpotqa_beeai/dataset.json")
    with pytest.raises(BenchmarkError, match="does not match its pinned sha1"):
        HotpotQABenchmark().prepare()
