"""runner: a distributed benchmark runner for LLM and agent evaluations.

The public API keeps the names AgentScope's evaluation module uses, so its examples run with only the import
changed::

    from runner import BenchmarkBase, Task, MetricBase, MetricResult, MetricType, SolutionOutput
    from runner import GeneralEvaluator, RayEvaluator, FileEvaluatorStorage
"""

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
from runner.evaluators import GeneralEvaluator, RayEvaluator
from runner.report import Summary
from runner.storage import FileEvaluatorStorage, ResultStore

__all__ = [
    "BenchmarkBase",
    "BudgetExhausted",
    "FileEvaluatorStorage",
    "GeneralEvaluator",
    "Headline",
    "JudgeScoreOutOfRange",
    "MetricBase",
    "MetricError",
    "MetricResult",
    "MetricType",
    "RayEvaluator",
    "ResultStore",
    "RunConfig",
    "RunResults",
    "RunSettings",
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
    "solution_factory",
]
