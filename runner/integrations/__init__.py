"""Metrics of other evaluation libraries run as ours: DeepEval and Ragas adapters.

Wrap any DeepEval metric (:class:`DeepEvalMetric`, ``pip install 'ray-bench-runner[deepeval]'``) or any Ragas
metric (:class:`RagasMetric`, ``pip install 'ray-bench-runner[ragas]'``) and put it in a task's ``metrics``: it is
scored once per (task, repeat) like any metric of ours, stored in the record, resumed, and run on Ray workers; an
LLM-judged one asks its judge through :mod:`runner.models` (:class:`DeepEvalJudge`, :class:`RagasJudge`; BeeAI's
names ``DeepEvalLLM`` and ``InstructorRagasLLM`` are the same classes), so its tokens land in the record. The task
side of a test case (question, reference answer, contexts, expected tool calls) is an :class:`EvalSample`; the
solution side is read from the solution's output and trajectory.

The adapters are imported on first use, so this package costs nothing when neither library is installed.
"""

from runner._lazy import lazy_exports

from runner.integrations.sample import EvalSample, SampleReader, read_solution

__all__ = [
    "DeepEvalJudge",
    "DeepEvalLLM",
    "DeepEvalMetric",
    "EvalSample",
    "InstructorRagasLLM",
    "RagasJudge",
    "RagasLegacyJudge",
    "RagasMetric",
    "SampleReader",
    "read_solution",
]

_LAZY = {
    "DeepEvalJudge": "runner.integrations.deepeval_adapter",
    "DeepEvalLLM": "runner.integrations.deepeval_adapter",
    "InstructorRagasLLM": "runner.integrations.ragas_adapter",
    "DeepEvalMetric": "runner.integrations.deepeval_adapter",
    "RagasJudge": "runner.integrations.ragas_adapter",
    "RagasLegacyJudge": "runner.integrations.ragas_adapter",
    "RagasMetric": "runner.integrations.ragas_adapter",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
