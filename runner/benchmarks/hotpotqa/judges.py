"""BeeAI's model-judged HotpotQA metrics: ``answer_llm_judge`` and ``facts_similarity``.

Both follow the custom metrics of BeeAI's evaluation example (beeai-framework, ``python/examples/evaluation/
deepeval/answer_llm_judge_metric.py`` and ``facts_similarity_metric.py``, commit 28150efd): the same prompts, the
same empty-input rules, the judge asked at temperature 0 for a number between 0 and 1. Three deliberate
differences:

- a score outside [0, 1] (``Score: 2``, meaning 2 of 10) is an error of the metric, code
  ``judge_score_out_of_range``, with the reply in the metric's metadata; BeeAI clamps it
  (``max(0.0, min(1.0, score))``), which turns a judge on another scale into full marks. Its clamp is kept behind an
  explicit option (``-B judge_clamp=true``); each clamped result keeps the judge's number in its metadata
  (``clamped_from``) and the report counts them per metric (``clamped``);
- a reply with no score in it is an error of the metric (code ``judge_reply_unreadable``; BeeAI scores it 0,
  which would hide a broken judge behind a bad agent);
- the reply is read by :mod:`runner.benchmarks.judge_scores` (a ``<think>`` block removed; JSON, else the last keyed
  score such as ``Score: 0.8``, else the only number; ``8/10``, ``80%``, ``−1``, ``0,8``, ``5e-1`` each read as the
  number they write, or refused) rather than with ``float(text)``; a reply whose keyed scores disagree is read as its
  last, the others kept in the metadata (``several_scores``) and counted by the report.

``facts_similarity`` can instead compare sentence embeddings of a local model (see
:mod:`runner.benchmarks.hotpotqa.embeddings`), with no judge call.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from runner.benchmarks.hotpotqa.data import HotpotRecord
from runner.benchmarks.hotpotqa.metrics import parse_prediction
from runner.benchmarks.judge_scores import JudgeError, read_score
from runner.core.metric import CLAMPED_FROM, SEVERAL_SCORES, JudgeScoreOutOfRange, MetricBase, MetricResult, MetricType
from runner.core.solution import SolutionOutput
from runner.models import ChatModel, user_message

if TYPE_CHECKING:
    from runner.benchmarks.hotpotqa.embeddings import SentenceEmbedder

ANSWER_PROMPT = (
    "You are an evaluator.\n"
    "Compare the model's answer to the expected answer.\n\n"
    "Question:\n{question}\n\n"
    "Model answer:\n{actual}\n\n"
    "Expected answer:\n{expected}\n\n"
    "Return ONLY a number between 0 and 1 (no text), where:\n"
    "0 = completely incorrect or unrelated,\n"
    "1 = fully correct and equivalent in meaning.\n"
)
"""BeeAI's ``AnswerLLMJudgeMetric`` prompt, word for word."""

FACTS_PROMPT = (
    "You are an evaluator.\n"
    "Compare the two lists of supporting facts.\n\n"
    "Actual facts:\n{actual}\n\n"
    "Expected facts:\n{expected}\n\n"
    "Return ONLY a number between 0 and 1 (no text), where:\n"
    "0 = completely different, 1 = identical in meaning.\n"
)
"""BeeAI's ``FactsSimilarityMetric`` prompt (DeepEval variant), word for word; the lists are shown as Python lists,
as there."""

REPLY_PREVIEW_CHARS = 300
SCORE_RANGE = (0.0, 1.0)
"""The range both prompts ask for (inclusive)."""


def clamp(score: float) -> float:
    """``score`` limited to [0, 1], as BeeAI's metrics do (``max(0.0, min(1.0, score))``)."""
    return max(0.0, min(1.0, score))


def parse_score(text: str | None) -> float:
    """The score a judge's reply gives, as given (not checked against a range: see :func:`judged_score`): the
    verdict of :func:`runner.benchmarks.judge_scores.read_score` (JSON, else the last keyed score, else the only
    number; every way of writing a number gives that number or an error).

    Raises:
        JudgeError: an empty reply, no number, a number whose value cannot be told, or several different numbers
            with none marked as the score.
    """
    return read_score(text).value


def judged_score(text: str | None, metadata: dict[str, Any], clamp_to_range: bool = False) -> float:
    """The score of a judge's reply (:func:`parse_score`) checked against :data:`SCORE_RANGE`.

    Args:
        text: the reply's content.
        metadata: the result's metadata (the judge and its reply); kept by the errors, and given ``clamped_from``
            when a score is clamped and ``several_scores`` (the reply's keyed scores) when the reply held several
            that disagree (the last is the verdict).
        clamp_to_range: BeeAI's rule: a score outside the range is clamped into it instead of refused.

    Raises:
        JudgeError: no usable score in the reply.
        JudgeScoreOutOfRange: a score outside the range, without ``clamp_to_range``.
    """
    try:
        reading = read_score(text)
    except JudgeError as exc:
        exc.metadata = metadata
        raise
    score = reading.value
    if reading.several:
        metadata[SEVERAL_SCORES] = reading.several
    low, high = SCORE_RANGE
    if low <= score <= high:
        return score
    if not clamp_to_range:
        raise JudgeScoreOutOfRange(score, low, high, metadata)
    metadata[CLAMPED_FROM] = score
    return clamp(score)


async def ask_judge(judge: ChatModel, prompt: str, clamp_to_range: bool = False) -> tuple[float, dict[str, Any]]:
    """One judge call at temperature 0 (as BeeAI's ``DeepEvalLLM`` does): the score (:func:`judged_score`) and the
    result's metadata (``judge``, the start of its ``reply``, ``clamped_from`` when it was clamped,
    ``several_scores`` when the reply's keyed scores disagree).

    Its tokens are recorded for the current item under the judge's name (the model layer does that).

    Raises:
        JudgeError: a reply without a usable score.
        JudgeScoreOutOfRange: a score outside [0, 1], without ``clamp_to_range``.
        ModelError: the call failed for good after the model layer's retries.
    """
    reply = await judge.chat([user_message(prompt)], temperature=0.0)
    metadata: dict[str, Any] = {"judge": judge.name, "reply": _preview(reply.text)}
    return judged_score(reply.content, metadata, clamp_to_range), metadata


def _preview(text: str) -> str:
    return text if len(text) <= REPLY_PREVIEW_CHARS else text[:REPLY_PREVIEW_CHARS] + "..."


class AnswerLLMJudge(MetricBase):
    """``answer_llm_judge``: the judge model's 0-1 rating of the answer against the gold answer (BeeAI's
    ``AnswerLLMJudgeMetric``).

    Rules: an empty gold answer scores 1.0 when the answer is empty too, else 0.0 (BeeAI's rule); an empty or
    missing answer scores 0.0 without asking the judge; otherwise the judge's number in [0, 1].

    Args:
        record: the HotpotQA record (question and gold answer).
        judge: the judge model.
        clamp: clamp a score outside [0, 1] into it, as BeeAI does, instead of refusing it.

    Raises (when called, so that the engine records a metric error):
        JudgeError: the judge's reply has no score.
        JudgeScoreOutOfRange: the judge's score is outside [0, 1] (and ``clamp`` is off).
        ModelError: the judge could not be reached after retries.
    """

    def __init__(self, record: HotpotRecord, judge: ChatModel, clamp: bool = False) -> None:
        super().__init__(name="answer_llm_judge", metric_type=MetricType.NUMERICAL,
                         description="LLM judge: the answer's meaning against the gold answer, 0 to 1 (BeeAI)")
        self.record = record
        self.judge = judge
        self.clamp = clamp

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        actual = (parse_prediction(solution.output, self.record).answer or "").strip()
        expected = self.record.answer.strip()
        if not expected or not actual:
            score = 1.0 if not expected and not actual else 0.0
            return MetricResult(name=self.name, result=score, message="decided without the judge (an empty answer)")
        prompt = ANSWER_PROMPT.format(question=self.record.question, actual=actual, expected=expected)
        score, metadata = await ask_judge(self.judge, prompt, self.clamp)
        return MetricResult(name=self.name, result=score, metadata=metadata)


def predicted_sentences(output: Any, record: HotpotRecord) -> list[str]:
    """The supporting sentences a solution claimed: its ``supporting_sentences``, or else the sentences its
    ``supporting_facts`` ``[title, sentence id]`` point to in the record's context; empty strings dropped."""
    prediction = parse_prediction(output, record)
    sentences = [s for s in prediction.supporting_sentences if s.strip()]
    if sentences or not prediction.supporting_facts:
        return sentences
    paragraphs = dict(record.lookup_context)
    found = []
    for title, sent_id in prediction.supporting_facts:
        paragraph = paragraphs.get(title, [])
        if isinstance(sent_id, int) and 0 <= sent_id < len(paragraph):
            found.append(paragraph[sent_id])
    return found


class FactsSimilarity(MetricBase):
    """``facts_similarity``: how close the solution's supporting sentences are to the gold ones, 0 to 1 (BeeAI's
    ``FactsSimilarityMetric``).

    Rules (BeeAI's): no gold sentences scores 1.0 when the solution gives none either, else 0.0; no sentences from
    the solution scores 0.0. Otherwise, with an ``embedder``, the embedding score of
    :func:`runner.benchmarks.hotpotqa.embeddings.facts_cosine`; else the judge model's number in [0, 1].

    Args:
        record: the HotpotQA record (gold supporting sentences).
        judge: the judge model (used when there is no embedder).
        embedder: a local sentence-embedding model, or ``None``.
        clamp: clamp a judge's score outside [0, 1] into it, as BeeAI does, instead of refusing it.

    Raises:
        ValueError: neither a judge nor an embedder.
        JudgeError, JudgeScoreOutOfRange, ModelError: when called, as for :class:`AnswerLLMJudge`.
    """

    def __init__(self, record: HotpotRecord, judge: ChatModel | None = None,
                 embedder: SentenceEmbedder | None = None, clamp: bool = False) -> None:
        if judge is None and embedder is None:
            raise ValueError("facts_similarity needs a judge model or an embedding model")
        method = f"cosine similarity of {embedder.name} embeddings" if embedder else "LLM judge"
        super().__init__(name="facts_similarity", metric_type=MetricType.NUMERICAL,
                         description=f"supporting sentences against the gold ones, 0 to 1, by {method} (BeeAI)")
        self.record = record
        self.judge = judge
        self.embedder = embedder
        self.clamp = clamp

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        actual = predicted_sentences(solution.output, self.record)
        expected = [s for s in self.record.supporting_sentences if s.strip()]
        if not expected or not actual:
            score = 1.0 if not expected and not actual else 0.0
            return MetricResult(name=self.name, result=score, message="decided without a model (an empty list)")
        if self.embedder is not None:
            from runner.benchmarks.hotpotqa.embeddings import facts_cosine

            vectors = await asyncio.to_thread(self.embedder.encode, actual + expected)
            score = facts_cosine(vectors[: len(actual)], vectors[len(actual):])
            return MetricResult(name=self.name, result=score, metadata={"embedding_model": self.embedder.name})
        assert self.judge is not None
        prompt = FACTS_PROMPT.format(actual=actual, expected=expected)
        score, metadata = await ask_judge(self.judge, prompt, self.clamp)
        return MetricResult(name=self.name, result=score, metadata=metadata)
