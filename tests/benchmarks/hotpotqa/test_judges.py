"""The judged metrics: robust score parsing, the BeeAI prompts and empty-input rules, judge failures as metric
errors (never a crash, never a silent 0), token usage of the judge in the record, and facts similarity by
embedding vectors. The judge is the scripted OpenAI-compatible server (no language model runs here)."""

from __future__ import annotations

import json

import pytest

from runner import FileEvaluatorStorage, GeneralEvaluator, SolutionOutput
from runner.benchmarks.hotpotqa import HotpotQABenchmark
from runner.benchmarks.hotpotqa.embeddings import cosine, facts_cosine
from runner.benchmarks.hotpotqa.judges import JudgeError, judged_score, parse_score
from runner.core.errors import BenchmarkError
from runner.core.metric import JudgeScoreOutOfRange
from runner.models import MockReply, MockRule, MockScript


@pytest.mark.parametrize(("reply", "score"), [
    ("0.8", 0.8),
    ("1", 1.0),
    (" 0.7.\n", 0.7),
    ("Score: 8/10", 0.8),
    ("7 out of 10", 0.7),
    ("I rate it 3 out of 4", 0.75),
    ("80%", 0.8),
    ("<think>Maybe 0.2, maybe 1.</think>\n0.9", 0.9),
    ("The answers match; both name 2 magazines. Rating: 0.6", 0.6),
    ("```\n0.25\n```", 0.25),
    # read as given, not clamped: judged_score decides what a score outside [0, 1] is
    ("Score: 2", 2.0),
    ('{"score": 1.3, "reason": "exceeds"}', 1.3),
    ("-0.5", -0.5),
    ("150%", 1.5),
    ("12/10", 1.2),
])
def test_judge_replies_are_parsed_tolerantly_and_as_given(reply, score):
    assert parse_score(reply) == pytest.approx(score)


@pytest.mark.parametrize("reply", ["", None, "The answer is correct.", "between 0 and 1 I would say 0.6",
                                   "<think>0.5</think>", "eight", "high", "0.8 or 0.9"])
def test_replies_without_a_clear_score_are_errors(reply):
    with pytest.raises(JudgeError):
        parse_score(reply)


@pytest.mark.parametrize(("reply", "score"), [
    ("Score: 2", 2.0), ("8", 8.0), ("-0.5", -0.5), ("Score: -1", -1.0), ("Rating: −0.5", -0.5), ("150%", 1.5),
    ('{"score": 1.3}', 1.3), ("12/10", 1.2),
    ("Rating: 7 out of 5", 1.4),
])
def test_a_score_outside_zero_to_one_is_refused_with_the_reply_or_clamped_on_request(reply, score):
    metadata = {"judge": "vllm:j", "reply": reply}
    with pytest.raises(JudgeScoreOutOfRange) as refused:
        judged_score(reply, dict(metadata))
    assert refused.value.code == "judge_score_out_of_range"
    assert refused.value.metadata == {**metadata, "score": pytest.approx(score), "range": [0.0, 1.0]}
    assert f"the judge's score {score:g} is outside the metric's range [0, 1]" in str(refused.value)
    clamped = dict(metadata)
    assert judged_score(reply, clamped, clamp_to_range=True) == (1.0 if score > 1 else 0.0)
    assert clamped["clamped_from"] == pytest.approx(score)


def test_an_unreadable_reply_keeps_the_reply_in_its_metadata():
    metadata = {"judge": "vllm:j", "reply": "eight"}
    with pytest.raises(JudgeError) as unreadable:
        judged_score("eight", metadata, clamp_to_range=True)
    assert unreadable.value.code == "judge_reply_unreadable" and unreadable.value.metadata == metadata


def _judge_script(answer_reply: str, facts_reply: str) -> MockScript:
    return MockScript(rules=[MockRule(match="Expected answer:", reply=MockReply(content=answer_reply)),
                             MockRule(match="Expected facts:", reply=MockReply(content=facts_reply))])


async def _run(benchmark, solve, tmp_path, limit=2):
    evaluator = GeneralEvaluator(benchmark=benchmark, storage=FileEvaluatorStorage(str(tmp_path)), limit=limit,
                                 show=False)
    summary = await evaluator.run(solve)
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("records/*/0.json"))]
    return summary, records


def _answer(task):
    gold = task.ground_truth
    return {"answer": gold["answer"].lower(), "supporting_sentences": gold["supporting_sentences"]}


async def test_judged_metrics_score_from_the_judge_and_record_its_tokens(model_server, beeai_file, tmp_path):
    model_server.set_policy(_judge_script("Score: 0.9", "0.75"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _answer, tmp_path)
    assert summary.metrics["answer_llm_judge"].mean == pytest.approx(0.9)
    assert summary.metrics["facts_similarity"].mean == pytest.approx(0.75)
    assert summary.metrics["exact_match"].mean == 0.0        # lower-cased answers: the judge sees past that
    first = records[0]
    assert first["status"] == "ok"
    assert first["usage"]["vllm:scripted"]["calls"] == 2 and first["usage"]["vllm:scripted"]["input_tokens"] > 0
    assert summary.usage["vllm:scripted"]["calls"] == 4
    prompts = [request.messages[-1]["content"] for request in model_server.chat_requests]
    assert "Question:\nWhich magazine was started first Arthur's Magazine or First for Women?" in prompts[0]
    assert "Model answer:\narthur's magazine\n\nExpected answer:\nArthur's Magazine" in prompts[0]
    assert prompts[1].startswith("You are an evaluator.\nCompare the two lists of supporting facts.")
    assert all(request.temperature == 0.0 for request in model_server.chat_requests)


async def test_an_unparseable_judge_reply_is_a_metric_error_not_a_zero(model_server, beeai_file, tmp_path):
    model_server.set_policy(_judge_script("I think the answer is right.", "0.5"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _answer, tmp_path)
    judged = {m["name"]: m for m in records[0]["metrics"]}
    assert judged["answer_llm_judge"]["result"] is None
    assert judged["answer_llm_judge"]["error"]["type"] == "JudgeError"
    assert "no score in the judge's reply" in judged["answer_llm_judge"]["error"]["message"]
    assert judged["facts_similarity"]["result"] == 0.5 and judged["f1"]["result"] == 1.0
    assert records[0]["status"] == "error" and records[0]["error"]["type"] == "MetricError"
    assert summary.metrics["answer_llm_judge"].n == 0 and summary.metrics["answer_llm_judge"].errors == 2


def _wrong(task):
    return {"answer": "Nobody", "supporting_sentences": ["The moon is made of cheese."]}


async def test_a_judge_on_another_scale_is_an_error_of_its_metric_never_full_marks(model_server, beeai_file,
                                                                                   tmp_path):
    """The judge answers "Score: 2" (2 of 10) for a wrong answer: before, clamped to 1.0 on every task while exact
    match and F1 were 0; now an error of the metric with the reply kept, counted per metric."""
    model_server.set_policy(_judge_script("Score: 2", "Score: 3"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _wrong, tmp_path)
    judge = summary.metrics["answer_llm_judge"]
    assert (judge.mean, judge.n, judge.errors) == (None, 0, 2)
    assert judge.unusable == {"error": 0, "non_finite": 0, "not_a_number": 0, "too_large": 0,
                              "judge_score_out_of_range": 2}
    assert summary.metrics["facts_similarity"].unusable["judge_score_out_of_range"] == 2
    assert summary.metrics["f1"].mean == 0.0 and summary.metrics["exact_match"].mean == 0.0
    assert "metric 'answer_llm_judge': 2 of 2 results could not be used and are left out of its mean (2 " \
           "judge_score_out_of_range)" in summary.notes
    judged = {m["name"]: m for m in records[0]["metrics"]}["answer_llm_judge"]
    assert judged["result"] is None
    assert judged["error"]["type"] == "JudgeScoreOutOfRange"
    assert judged["error"]["code"] == "judge_score_out_of_range"
    assert judged["metadata"] == {"judge": "vllm:scripted", "reply": "Score: 2", "score": 2.0, "range": [0.0, 1.0]}


async def test_a_signed_keyed_score_is_out_of_range_never_full_marks(model_server, beeai_file, tmp_path):
    """inspect_ai#4872's kind: ``Score: -1`` on a wrong answer was read as 1.0 (the separator pattern swallowed the
    minus); ``Score: −1`` (U+2212) is its neighbour."""
    model_server.set_policy(_judge_script("Score: -1", "Similarity: \u22121"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _wrong, tmp_path)
    for name in ("answer_llm_judge", "facts_similarity"):
        assert summary.metrics[name].mean is None
        assert summary.metrics[name].unusable["judge_score_out_of_range"] == 2
    judged = {m["name"]: m for m in records[0]["metrics"]}
    assert judged["answer_llm_judge"]["metadata"]["score"] == -1.0
    assert judged["facts_similarity"]["metadata"]["score"] == -1.0


async def test_the_last_of_several_keyed_scores_is_the_verdict_and_such_replies_are_counted(model_server, beeai_file,
                                                                                           tmp_path):
    """inspect_ai PR #3913's kind: the first of several scores won (1.0 for a wrong answer)."""
    rubric = "Score: 1 means equivalent, 0 means different. The answer is wrong. Score: 0"
    model_server.set_policy(_judge_script(rubric, "Rating: [[1]] for identical lists. These differ: Rating: [[0.2]]"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _wrong, tmp_path)
    answer, facts = summary.metrics["answer_llm_judge"], summary.metrics["facts_similarity"]
    assert (answer.mean, answer.n, answer.several_scores) == (0.0, 2, 2)
    assert (facts.mean, facts.several_scores) == (pytest.approx(0.2), 2)
    assert summary.metrics["f1"].several_scores == 0
    assert "metric 'answer_llm_judge': 2 judge repl(ies) gave several different scores; the last one was read as " \
           "the verdict (all of them are the result's metadata 'several_scores')" in summary.notes
    judged = {m["name"]: m for m in records[0]["metrics"]}["answer_llm_judge"]
    assert judged["result"] == 0.0 and judged["metadata"]["several_scores"] == ["Score: 1", "Score: 0"]
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["metrics"]["answer_llm_judge"]["several_scores"] == 2


async def test_beeai_s_clamp_only_on_request_and_every_clamp_counted(model_server, beeai_file, tmp_path):
    model_server.set_policy(_judge_script("Score: 2", "0.5"))
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url,
                                  judge_clamp=True)
    summary, records = await _run(benchmark, _wrong, tmp_path)
    judge = summary.metrics["answer_llm_judge"]
    assert (judge.mean, judge.n, judge.errors, judge.clamped) == (1.0, 2, 0, 2)
    assert summary.metrics["facts_similarity"].clamped == 0
    assert "metric 'answer_llm_judge': 2 result(s) were clamped into the metric's range (the value before is the " \
           "result's metadata 'clamped_from')" in summary.notes
    judged = {m["name"]: m for m in records[0]["metrics"]}["answer_llm_judge"]
    assert judged["result"] == 1.0 and judged["metadata"]["clamped_from"] == 2.0
    with pytest.raises(BenchmarkError, match="judge_clamp must be true or false, got 'yes'"):
        HotpotQABenchmark(beeai_file, judge_model="mock", judge_clamp="yes")


async def test_a_judge_server_that_keeps_failing_is_a_metric_error_after_retries(model_server, beeai_file, tmp_path,
                                                                                 no_retry_waits):
    model_server.set_policy(_judge_script("1", "1"))
    model_server.fail(500, times=5)
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    summary, records = await _run(benchmark, _answer, tmp_path, limit=1)
    judged = {m["name"]: m for m in records[0]["metrics"]}
    assert judged["answer_llm_judge"]["error"]["type"] == "ModelError"
    assert len(no_retry_waits) == 4                          # 5 attempts in all
    assert judged["facts_similarity"]["result"] == 1.0       # the server answers again afterwards
    assert summary.completed == 1


async def test_empty_inputs_are_decided_without_the_judge(model_server, beeai_file):
    benchmark = HotpotQABenchmark(beeai_file, judge_model="vllm:scripted", judge_base_url=model_server.url)
    task = next(iter(benchmark))
    metrics = {m.name: m for m in task.metrics}
    no_answer = SolutionOutput(output={"answer": "  ", "supporting_sentences": []})
    assert (await metrics["answer_llm_judge"](no_answer)).result == 0.0
    assert (await metrics["facts_similarity"](no_answer)).result == 0.0
    assert model_server.chat_requests == []


def test_judged_metrics_are_attached_only_with_a_judge(beeai_file, distractor_file, shared_data):
    names = {m.name for m in next(iter(HotpotQABenchmark(beeai_file))).metrics}
    assert "answer_llm_judge" not in names and "facts_similarity" not in names
    judged = {m.name for m in next(iter(HotpotQABenchmark(distractor_file, judge_model="mock"))).metrics}
    assert {"answer_llm_judge", "facts_similarity"} <= judged
    simplified = str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_v1_simplified.json")
    answers_only = {m.name for m in next(iter(HotpotQABenchmark(simplified, judge_model="mock"))).metrics}
    assert "answer_llm_judge" in answers_only and "facts_similarity" not in answers_only


def test_facts_cosine_is_a_greedy_matching_f1():
    assert cosine([1, 0], [0, 1]) == 0.0 and cosine([0, 0], [1, 1]) == 0.0
    same = [[1.0, 0.0], [0.0, 1.0]]
    assert facts_cosine(same, same) == pytest.approx(1.0)
    # one of two gold facts found exactly, none extra: precision 1, recall 0.5 -> F1 2/3
    assert facts_cosine([[1.0, 0.0]], same) == pytest.approx(2 / 3)
    # an extra, opposite fact: precision (1 + 1 + 0) / 3, recall 1 -> F1 0.8
    assert facts_cosine([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], same) == pytest.approx(0.8)
    assert facts_cosine([], same) == 0.0
