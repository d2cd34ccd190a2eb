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


class Digits(MetricBase):
    """A ``CORPUS`` metric's per-item pair ``[int(answer), gold]`` for an answer of ``digits`` nines."""

    def __init__(self, digits: int) -> None:
        super().__init__(name="answer_and_gold", metric_type=MetricType.CORPUS)
        self.value = [10**digits - 1, 1]

    def __call__(self, solution):
        return self.value


class Answers(BenchmarkBase):
    """Three answers of 1, 400 and 4,301 nines; the headline is the total of the answers read back as integers (the
    last one is its digits' text), which no float holds."""

    def __init__(self) -> None:
        super().__init__(name="answers")

    def __iter__(self):
        for index, digits in enumerate((1, 400, 4301)):
            yield Task(id=f"t{index}", input="text", metrics=[Digits(digits)])

    def score(self, results: RunResults) -> Headline:
        answers = [row.scores["answer_and_gold"][0] for row in results.rows]
        return Headline(score=sum(answer for answer in answers if isinstance(answer, int)),
                        components={"items": float(len(answers))})


async def test_integers_in_a_corpus_value_are_kept_exactly_and_a_headline_no_float_holds_is_a_note(tmp_path):
    """The 400 nines of issue 27 inside a corpus metric's pair reach the benchmark's aggregate exactly (4,301 nines
    as their digits' text: JSON readers take 4,300 at most); a headline no float can hold is left out with a note."""
    evaluator = GeneralEvaluator(benchmark=Answers(), storage=FileEvaluatorStorage(str(tmp_path)), show=False,
                                 shards="on")
    summary = await evaluator.run(lambda task: "done")
    assert (summary.score, summary.score_components) == (None, {"items": 3.0})
    assert "the benchmark's headline score is an integer no float can hold: not reported (the records keep every " \
           "metric result exactly)" in summary.notes
    assert summary.metrics["answer_and_gold"].n == 3 and sum(summary.metrics["answer_and_gold"].unusable.values()) == 0
    records = {record.task_id: record.metrics[0].result for record in evaluator.storage.iter_records()}
    assert records == {"t0": [9, 1], "t1": [int("9" * 400), 1], "t2": ["9" * 4301, 1]}
    (shard,) = (tmp_path / "shards").glob("*.parquet")
    labels = {row["task_id"]: row["metrics"][0]["label"] for row in pq.read_table(shard).to_pylist()}
    assert labels["t1"] == f"[{'9' * 400}, 1]"
    assert json.loads((tmp_path / "summary.json").read_text())["score"] is None
