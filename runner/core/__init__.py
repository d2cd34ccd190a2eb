"""Pure data and interfaces: tasks, metrics, solutions and their recipes, benchmarks, records and the run
configuration.

Nothing here imports execution, storage, models or Ray; plug-ins (benchmarks, solutions) import this package.
"""

from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig, RunSettings, WorkerSpec
from runner.core.errors import (
    BenchmarkError,
    BudgetExhausted,
    ConfigError,
    FingerprintMismatch,
    PluginError,
    ProtocolStop,
    RefusalStop,
    RunStopped,
    RunnerError,
    ServerStop,
    StorageError,
)
from runner.core.limits import EndpointLimits, ModelPrice
from runner.core.metric import JudgeScoreOutOfRange, MetricBase, MetricError, MetricResult, MetricType
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings, TokenUsage
from runner.core.results import Headline, ResultRow, RunResults
from runner.core.solution import SolutionContext, SolutionOutput, SolutionSpec, solution_factory
from runner.core.task import Task
from runner.core.usage import record_usage, usage_scope

__all__ = [
    "BenchmarkBase",
    "BenchmarkError",
    "BudgetExhausted",
    "ConfigError",
    "EndpointLimits",
    "ErrorInfo",
    "FingerprintMismatch",
    "Headline",
    "JudgeScoreOutOfRange",
    "MetricBase",
    "MetricError",
    "MetricRecord",
    "MetricResult",
    "MetricType",
    "ModelPrice",
    "PluginError",
    "ResultRow",
    "RunConfig",
    "ProtocolStop",
    "RefusalStop",
    "RunStopped",
    "RunResults",
    "RunSettings",
    "RunnerError",
    "ServerStop",
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
