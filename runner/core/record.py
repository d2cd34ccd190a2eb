"""The record of one (task, repeat): the unit of storage, resume and reporting.

Its JSON form is the log format: ``records/<task-key>/<repeat>.json`` holds exactly one ``TaskRecord``. Records stay
valid JSON, which every reader takes, whatever a solution, a model, a tool or a metric returned:

- a number that is not finite is written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (the
  spellings of JavaScript and of Python's ``json`` module), and a ``NUMERICAL`` metric's result in one of those
  spellings reads back as that float;
- text is made well-formed as the record is built (:func:`runner.core.storable.well_formed`): a surrogate pair is
  joined, and each unpaired surrogate, which UTF-8 cannot encode, becomes U+FFFD;
- an integer is kept exactly, however large (one no float can hold is counted by the report as ``too_large``); one
  of more than 4,300 digits, which JSON readers refuse, as the text of its digits
  (:func:`runner.core.storable.storable`).

These rules apply to every field whose content came from user code (input, output, trajectory, solution metadata,
tags, the worker's identity, metric names, results, messages and metadata, errors) when a record is built in Python;
a record read from JSON holds nothing else, so reading leaves it as stored.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationInfo, field_validator,
                      model_serializer, model_validator)

from runner.core.metric import MetricType
from runner.core.storable import storable

RECORD_SCHEMA_VERSION = 1

Status = Literal["ok", "error", "timeout"]


NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How a record spells a number that is not finite (pydantic's ``ser_json_inf_nan="strings"``) -> the float."""


def _storable_when_built(value: Any, info: ValidationInfo) -> Any:
    """A field's value as a record stores it (:func:`runner.core.storable.storable`), when the record is built from
    Python objects; JSON already read is left as it is (it cannot hold such values)."""
    return storable(value) if info.mode == "python" else value


class ErrorInfo(BaseModel):
    """An exception, as text: ``type`` (class name), ``message``, the formatted ``traceback``, and ``code``: a
    stable reason for programs when the exception names one (``judge_score_out_of_range``: a metric's
    :class:`~runner.core.metric.MetricError`; ``protocol_error``: a model server that speaks another protocol),
    else ``None``."""

    type: str
    message: str
    traceback: str | None = None
    code: str | None = None

    _storable = field_validator("type", "message", "traceback", "code")(_storable_when_built)


class MetricRecord(BaseModel):
    """One metric's outcome: a ``result`` or an ``error`` (never both; ``metadata`` may come with either, e.g. the
    judge's reply of a score out of range). A ``CORPUS`` metric's result may be any JSON value (a list, an object);
    the others' are a number, a boolean, a label or ``None``.

    ``allows_infinite`` repeats the metric's declaration (:class:`~runner.core.metric.MetricBase`) so that the
    report, which reads records only, knows that an infinite result is usable; it is left out of the JSON while
    ``False``.
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    name: str
    type: MetricType = MetricType.NUMERICAL
    result: bool | int | float | str | list[Any] | dict[str, Any] | None = None
    message: str | None = None
    metadata: dict[str, Any] | None = None
    error: ErrorInfo | None = None
    allows_infinite: bool = False

    _storable = field_validator("name", "result", "message", "metadata")(_storable_when_built)

    @model_validator(mode="after")
    def _read_non_finite(self) -> MetricRecord:
        if self.type is MetricType.NUMERICAL and isinstance(self.result, str) and self.result in NON_FINITE:
            self.result = NON_FINITE[self.result]
        return self

    @model_serializer(mode="wrap")
    def _omit_finite_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("allows_infinite"):
            data.pop("allows_infinite", None)
        return data


class Timings(BaseModel):
    """Seconds spent: ``solution_s`` in the solution, ``metrics_s`` in the metrics, ``total_s`` end to end."""

    solution_s: float = 0.0
    metrics_s: float = 0.0
    total_s: float = 0.0


class TokenUsage(BaseModel):
    """Tokens one model spent on one item (as reported by the model server) and the number of calls.

    ``calls`` counts the calls that reached the server. ``calls_without_usage`` counts those whose server did not
    report a count and whose tokens the runner could not count either (their known counts, if any, are in the sums;
    their unknown ones are not). ``calls_counted_by_runner`` counts those whose server reported no count and whose
    prompt and answer the runner counted itself with the served model's own tokenizer (a replica of ``transformers
    serve``: :mod:`runner.models`); their counts are in the sums. With a response cache (``--cache``),
    ``cached_calls`` counts the calls answered from it (no call made, no tokens spent: they are not in ``calls``)
    and ``cache_misses`` the cacheable calls it did not hold (they are in ``calls``). ``timeouts`` counts the
    requests abandoned at the model timeout (each cancelled, and retried as the retry policy says; a request to a
    replica the run serves is retried once). Each of these five is left out of the JSON while it is 0, so records
    and summaries without them keep their shape.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    calls_without_usage: int = 0
    calls_counted_by_runner: int = 0
    cached_calls: int = 0
    cache_misses: int = 0
    timeouts: int = 0

    @model_serializer(mode="wrap")
    def _omit_zero_counts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("calls_without_usage", "calls_counted_by_runner", "cached_calls", "cache_misses", "timeouts"):
            if not data.get(name):
                data.pop(name, None)
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
        tries: solution tries within this attempt: 1, plus the solution retries it took (``solution_retries``).
        try_errors: the error of each try before the last (``tries - 1`` of them, oldest first; type and message,
            no traceback); the last try's error, if any, is ``error``.
        status: ``ok``; ``error`` (the solution raised or left any other way, such as ``sys.exit()``, reported
            ``success=False``, returned something unserialisable, a metric raised, its worker kept dying or went over
            the memory limit); ``timeout`` (the solution ran past the per-task timeout, a metric past its time limit,
            or either blocked its event loop past it).
        tags: the task's tags, so reports need nothing but records.
        input: the task's input as JSON (what the solution was given), so a report can show it beside the output
            (``None`` in records written before runner kept it; an object JSON cannot hold is kept as its ``repr``).
        output, trajectory, solution_meta: the solution's output, JSON-serialisable.
        metrics: one entry per metric of the task.
        error: what went wrong, for ``error`` and ``timeout``.
        started_at, finished_at: ISO-8601 UTC.
        timings: seconds.
        usage: model name -> tokens and calls (cached calls marked, see :class:`TokenUsage`).
        worker: host, pid and, on Ray, node and actor ids.
        write_id: drawn afresh for each write of a record (:meth:`ResultStore.write_record`): a write whose
            response was lost, and whose retry was refused because the store had taken the first, recognises its
            own record by it (``None`` in records written before runner kept it).
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    task_id: str
    repeat: int
    task_index: int | None = None
    attempt: int = 1
    tries: int = 1
    try_errors: list[ErrorInfo] = Field(default_factory=list)
    status: Status
    tags: dict[str, str] = Field(default_factory=dict)
    input: Any = None
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
    write_id: str | None = None

    # Not the task id: it names the record's storage key, which the benchmark gave and the plan looks up as it is.
    _storable = field_validator("tags", "input", "output", "trajectory", "solution_meta", "worker")(
        _storable_when_built)
