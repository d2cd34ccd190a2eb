"""runner: a distributed benchmark runner for LLM and agent evaluations.

The public API keeps the names AgentScope's evaluation module uses, so its examples run with only the import
changed::

    from runner import BenchmarkBase, Task, MetricBase, MetricResult, MetricType, SolutionOutput
    from runner import GeneralEvaluator, RayEvaluator, FileEvaluatorStorage, ACEBenchmark

``ACEBenchmark`` (imported on first use), ``run_status`` (how far a run is, as ``python -m runner status`` says) and
``MatrixEvaluator`` (models or checkpoints x benchmarks in one job, as ``python -m runner matrix``) are here too.
"""

from runner._lazy import lazy_exports


from runner._version import __version__
from runner.core import (
    BenchmarkBase,
    BudgetExhausted,
    Headline,
    JudgeScoreOutOfRange,
    MetricBase,
    MetricError,
    MetricResult,
    MetricType,
    RunConfig,
    RunnerError,
    RunResults,
    RunSettings,
    SolutionContext,
    SolutionOutput,
    SolutionSpec,
    Task,
    TaskRecord,
    WorkerSpec,
    record_usage,
    solution_factory,
)
from runner.evaluators import GeneralEvaluator, MatrixEvaluator, RayEvaluator
from runner.report import Summary
from runner.report.status import RunStatus, run_status
from runner.storage import FileEvaluatorStorage, ResultStore

__all__ = [
    "ACEBenchmark",
    "BenchmarkBase",
    "BudgetExhausted",
    "FileEvaluatorStorage",
    "GeneralEvaluator",
    "Headline",
    "JudgeScoreOutOfRange",
    "MatrixEvaluator",
    "MetricBase",
    "MetricError",
    "MetricResult",
    "MetricType",
    "RayEvaluator",
    "ResultStore",
    "RunConfig",
    "RunResults",
    "RunSettings",
    "RunStatus",
    "RunnerError",
    "SolutionContext",
    "SolutionOutput",
    "SolutionSpec",
    "Summary",
    "Task",
    "TaskRecord",
    "WorkerSpec",
    "__version__",
    "record_usage",
    "run_status",
    "solution_factory",
]


_LAZY = {"ACEBenchmark": "runner.benchmarks.acebench"}
"""A plug-in, imported when asked for, as ``agentscope.evaluate`` exports it."""

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
