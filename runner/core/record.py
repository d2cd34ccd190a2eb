"""The record of one (task, repeat): the unit of storage, resume and reporting.

Its JSON form is the log format: ``records/<task-key>/<repeat>.json`` holds exactly one ``TaskRecord``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from runner.core.metric import MetricType

RECORD_SCHEMA_VERSION = 1

Status = Literal["ok", "error", "timeout"]


class ErrorInfo(BaseModel):
    """An exception, as text: ``type`` (class name), ``message`` and the formatted ``traceback``."""

    type: str
    message: str
    traceback: str | None = None


class MetricRecord(BaseModel):
    """One metric's outcome: a ``result`` or an ``error`` (never both)."""

    name: str
    type: MetricType = MetricType.NUMERICAL
    result: bool | int | float | str | None = None
    message: str | None = None
    metadata: dict[str, Any] | None = None
    error: ErrorInfo | None = None


class Timings(BaseModel):
    """Seconds spent: ``solution_s`` in the solution, ``metrics_s`` in the metrics, ``total_s`` end to end."""

    solution_s: float = 0.0
    metrics_s: float = 0.0
    total_s: float = 0.0


class TokenUsage(BaseModel):
    """Tokens one model spent on one item (as reported by the model server) and the number of calls.

    ``calls_without_usage`` counts the calls whose server did not report a count (their known counts, if any, are
    in the sums; their unknown ones are not). It is left out of the JSON while it is 0, so records and summaries of
    servers that always report usage keep their shape.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    calls_without_usage: int = 0

    @model_serializer(mode="wrap")
    def _omit_zero_unknown(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("calls_without_usage"):
            data.pop("calls_without_usage", None)
        return data


class TaskRecord(BaseModel):
    """Everything known about one (task, repeat) once it finished.

    Args:
        run_id: the run it belongs to.
        task_id: the task's id (the storage key is derived from it).
        repeat: 0-based repeat index.
        task_index: the task's 0-based position in the benchmark's iteration, so a report can leave out the tasks
            past a ``limit`` lowered since (``None`` in records written before runner kept it: always counted).
        attempt: 1 for the first execution; more when a worker died and the item was retried.
        status: ``ok``; ``error`` (the solution raised or left any other way, such as ``sys.exit()``, reported
            ``success=False``, returned something unserialisable, a metric raised, its worker kept dying or went over
            the memory limit); ``timeout`` (the solution ran past the per-task timeout, a metric past its time limit,
            or either blocked its event loop past it).
        tags: the task's tags, so reports need nothing but records.
        output, trajectory, solution_meta: the solution's output, JSON-serialisable.
        metrics: one entry per metric of the task.
        error: what went wrong, for ``error`` and ``timeout``.
        started_at, finished_at: ISO-8601 UTC.
        timings: seconds.
        usage: model name -> tokens.
        worker: host, pid and, on Ray, node and actor ids.
    """

    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    task_id: str
    repeat: int
    task_index: int | None = None
    attempt: int = 1
    status: Status
    tags: dict[str, str] = Field(default_factory=dict)
    output: Any = None
    trajectory: list[Any] = Field(default_factory=list)
    solution_meta: dict[str, Any] | None = None
    metrics: list[MetricRecord] = Field(default_factory=list)
    error: ErrorInfo | None = None
    started_at: str
    finished_at: str
    timings: Timings = Field(default_factory=Timings)
    usage: dict[str, TokenUsage] = Field(default_factory=dict)
    worker: dict[str, Any] = Field(default_factory=dict)
