"""Pure data and interfaces: tasks, metrics, solutions and their recipes, benchmarks, records and the run
configuration.

Nothing here imports execution, storage, models or Ray; plug-ins (benchmarks, solutions) import this package.
"""

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig, RunSettings, WorkerSpec
from runner.core.errors import (
    BenchmarkError,
    ConfigError,
    FingerprintMismatch,
    PluginError,
    RunInterrupted,
    RunnerError,
    StorageError,
)
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings, TokenUsage
from runner.core.results import Headline, ResultRow, RunResults
from runner.core.solution import SolutionContext, SolutionOutput, SolutionSpec, solution_factory
from runner.core.task import Task
from runner.core.usage import record_usage, usage_scope

__all__ = [
    "BenchmarkBase",
    "BenchmarkError",
    "ConfigError",
    "ErrorInfo",
    "FingerprintMismatch",
    "Headline",
    "MetricBase",
    "MetricRecord",
    "MetricResult",
    "MetricType",
    "PluginError",
    "ResultRow",
    "RunConfig",
    "RunInterrupted",
    "RunResults",
    "RunSettings",
    "RunnerError",
    "SolutionContext",
    "SolutionOutput",
    "SolutionSpec",
    "StorageError",
    "Task",
    "TaskRecord",
    "Timings",
    "TokenUsage",
    "WorkerSpec",
    "record_usage",
    "solution_factory",
    "usage_scope",
]
