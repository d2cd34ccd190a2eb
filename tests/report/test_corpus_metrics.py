"""A ``CORPUS`` metric's per-item value (a pair for corpus BLEU, a log-likelihood and a length for a perplexity) is
stored as the JSON it is, counted, and never averaged: the report has no mean of it, the benchmark's headline gives
the aggregate. End to end through the evaluator, in records, shards, the CSV and the summary."""

from __future__ import annotations

import json
import math

from runner import BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, MetricBase, MetricResult, MetricType, Task
from runner.core.results import Headline, RunResults
import pyarrow.parquet as pq


class LogLikelihoodAndWords(MetricBase):
    """A word perplexity's per-item inputs, as lm-evaluation-harness's ``word_perplexity``: (log-likelihood, words)."""

    def __init__(self, loglikelihood: float, words: int) -> None:
        super().__init__(name="word_perplexity", metric_type=MetricType.CORPUS)
        self.value = (loglikelihood, words)

    def __call__(self, solution):
        return MetricResult(name=self.name, result=self.value)


class Texts(BenchmarkBase):
    """Three texts; the headline is the corpus word perplexity exp(-sum(ll) / sum(words))."""

    ITEMS = [(-10.0, 4), (-30.0, 6), (-5.0, 5)]

    def __init__(self) -> None:
        super().__init__(name="texts")

    def __iter__(self):
        for index, (ll, words) in enumerate(self.ITEMS):
            yield Task(id=f"t{index}", input="text", metrics=[LogLikelihoodAndWords(ll, words)],
                       tags={"category": "wiki"})

    def score(self, results: RunResults) -> Headline:
        pairs = [row.scores["word_perplexity"] for row in results.rows]
        value = math.exp(-sum(ll for ll, _ in pairs) / sum(words for _, words in pairs))
        return Headline(score=value, by_category={"wiki": {"word_perplexity": {"mean": value, "n": len(pairs)}}})


async def test_a_corpus_metric_is_kept_whole_and_aggregated_by_the_benchmark_only(tmp_path):
    evaluator = GeneralEvaluator(benchmark=Texts(), storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: "done")
    expected = math.exp(45 / 15)
    metric = summary.metrics["word_perplexity"]
    assert (metric.type, metric.mean, metric.stderr, metric.n, metric.n_tasks) == (MetricType.CORPUS, None, None, 3, 3)
    assert sum(metric.unusable.values()) == 0
    assert summary.score == expected
    assert summary.by_category["wiki"]["word_perplexity"] == {"mean": expected, "n": 3, "stderr": None}
    assert "metric 'word_perplexity': aggregated over the corpus by the benchmark, not averaged: see " \
           "score_components and by_category" in summary.notes
    record = json.loads((tmp_path / "records" / "t1" / "0.json").read_text())
    assert record["metrics"][0] == {**record["metrics"][0], "type": "corpus", "result": [-30.0, 6]}
    assert "[-30.0, 6]" in (tmp_path / "results.csv").read_text()


async def test_a_corpus_value_survives_the_result_shards(tmp_path):
    evaluator = GeneralEvaluator(benchmark=Texts(), storage=FileEvaluatorStorage(str(tmp_path)), show=False,
                                 shards="on")
    summary = await evaluator.run(lambda task: "done")
    assert summary.score == math.exp(3.0)
    (shard,) = (tmp_path / "shards").glob("*.parquet")
    rows = pq.read_table(shard).to_pylist()
    assert sorted(json.loads(row["metrics"][0]["label"])[0] for row in rows) == [-30.0, -10.0, -5.0]
    assert sorted(json.loads(row["record"])["metrics"][0]["result"][1] for row in rows) == [4, 5, 6]
