"""The items of a run as the HTML report shows them: a compact row per item, full detail for a bounded few.

Every item of the current plan (:mod:`runner.report.scope`) gets one row: task id, repeat, status, category, solution
seconds, metric values and error type (about 50 bytes of JSON). Detail (input, output, trajectory, metric results,
error and traceback) is kept for at most ``failing + slowest + sample`` items, chosen in one pass over the streamed
records: a uniform sample of the failing items (status not ``ok``, or a numerical metric that scored 0) (reservoir
sampling, J. S. Vitter, "Random Sampling with a
Reservoir", ACM TOMS 11(1), 1985), the slowest by solution seconds, and a uniform sample of all items; each text
field is cut at ``field_chars`` characters. So the page stays small however large the run: only the detail of the
chosen items is ever held, never whole records of the others.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runner.core.metric import MetricType
from runner.core.record import TaskRecord
from runner.core.storable import too_large
from runner.report.scope import PlanScope

FAILING = 100
SLOWEST = 20
SAMPLE = 60
FIELD_CHARS = 4000
SHORT_CHARS = 600


@dataclass
class ItemTable:
    """The rows and the detail of a run's items (see the module docstring).

    Attributes:
        metrics: metric names, the order of each row's values.
        statuses, categories: the values a row's status and category indices point into.
        rows: ``[task_id, repeat, status index, category index or -1, solution seconds (3 significant digits),
            [metric values], error type or None, detail index or -1]``, sorted by task id (numbers inside it by
            value) and repeat.
        details: the detail dicts the rows point to.
        failing, total: failing items (status not ``ok``, or a numerical metric that scored 0), and all items.
        unfinished: the failing items whose status is not ``ok`` (an error or a timeout); the others scored 0.
    """

    metrics: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    failing: int = 0
    unfinished: int = 0
    total: int = 0

    def as_json(self) -> dict[str, Any]:
        """The table for the page's script: metrics, statuses, categories and rows."""
        return {"metrics": self.metrics, "statuses": self.statuses, "categories": self.categories, "rows": self.rows}


def _text(value: Any, limit: int) -> str | None:
    """``value`` as text for a reader (strings as they are, anything else as indented JSON), cut at ``limit``."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    if len(text) > limit:
        text = f"{text[:limit]}\n… ({len(text) - limit} more characters in the record)"
    return text


def detail(record: TaskRecord, field_chars: int = FIELD_CHARS) -> dict[str, Any]:
    """What an expanded row shows of ``record``: input, output, trajectory, metric results, error, timings, usage."""
    error = record.error
    return {
        "input": _text(record.input, field_chars),
        "output": _text(record.output, field_chars),
        "trajectory": _text(record.trajectory, field_chars) if record.trajectory else None,
        "metrics": [
            {"name": m.name, "result": _value(m.result), "message": _text(m.message, SHORT_CHARS),
             "error": f"{m.error.type}: {_text(m.error.message, SHORT_CHARS)}" if m.error else None}
            for m in record.metrics
        ],
        "error": f"{error.type}: {_text(error.message, SHORT_CHARS)}" if error else None,
        "traceback": _text(error.traceback, field_chars) if error and error.traceback else None,
        "timings": record.timings.model_dump(),
        "usage": {model: usage.model_dump() for model, usage in record.usage.items()},
        "attempt": record.attempt,
    }


def _natural(text: str) -> list[Any]:
    """A sort key that orders the numbers inside ids by value: ``task_2`` before ``task_10``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def _value(result: Any) -> Any:
    """A metric result for the page's JSON: booleans as 0/1, floats to 4 places, NaN and infinities as ``None``, an
    integer no float can hold as the text of its digits (a browser would read the number as ``Infinity``)."""
    if isinstance(result, bool):
        return int(result)
    if isinstance(result, float):
        return round(result, 4) if math.isfinite(result) else None
    if too_large(result):
        return str(result)
    return result


def failed(record: TaskRecord) -> bool:
    """Whether an item failed: its status is not ``ok``, or a numerical metric scored 0 (``False``)."""
    return record.status != "ok" or any(
        m.type is MetricType.NUMERICAL and m.error is None and isinstance(m.result, (bool, int, float))
        and m.result == 0 for m in record.metrics)


class _Chooser:
    """Picks the items that keep their detail, in one pass (see the module docstring)."""

    def __init__(self, failing: int, slowest: int, sample: int, seed: int) -> None:
        self.limits = {"failing": failing, "sample": sample}
        self.random = random.Random(seed)
        self.seen = {"failing": 0, "sample": 0}
        self.reservoirs: dict[str, list[tuple[tuple[str, int], dict[str, Any]]]] = {"failing": [], "sample": []}
        self.slowest = slowest
        self.heap: list[tuple[float, tuple[str, int], dict[str, Any]]] = []

    def offer(self, record: TaskRecord, field_chars: int) -> None:
        key = (record.task_id, record.repeat)
        made: dict[str, Any] | None = None

        def made_detail() -> dict[str, Any]:
            nonlocal made
            if made is None:
                made = detail(record, field_chars)
            return made

        for name in ("failing", "sample") if failed(record) else ("sample",):
            self.seen[name] += 1
            reservoir, limit = self.reservoirs[name], self.limits[name]
            if len(reservoir) < limit:
                reservoir.append((key, made_detail()))
            elif limit and (slot := self.random.randrange(self.seen[name])) < limit:
                reservoir[slot] = (key, made_detail())
        seconds = record.timings.solution_s
        if self.slowest and (len(self.heap) < self.slowest or seconds > self.heap[0][0]):
            entry = (seconds, key, made_detail())
            if len(self.heap) < self.slowest:
                heapq.heappush(self.heap, entry)
            else:
                heapq.heapreplace(self.heap, entry)

    def chosen(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Item -> its detail, with ``why``: the reasons it was chosen (``failing``, ``slowest``, ``sample``)."""
        out: dict[tuple[str, int], dict[str, Any]] = {}
        groups = [("failing", self.reservoirs["failing"]), ("slowest", [(k, d) for _, k, d in self.heap]),
                  ("sample", self.reservoirs["sample"])]
        for why, entries in groups:
            for key, item_detail in entries:
                out.setdefault(key, {**item_detail, "why": []})["why"].append(why)
        return out


def item_table(
    records: Iterable[TaskRecord],
    scope: PlanScope,
    *,
    failing: int = FAILING,
    slowest: int = SLOWEST,
    sample: int = SAMPLE,
    field_chars: int = FIELD_CHARS,
    seed: int = 0,
) -> ItemTable:
    """The :class:`ItemTable` of ``records`` (streamed; those outside ``scope`` are left out).

    Args:
        failing, slowest, sample: how many items of each kind keep their detail (an item may be of several).
        field_chars: characters kept of each detail text (input, output, trajectory, traceback).
        seed: seeds the samples, so the same run gives the same page.
    """
    table = ItemTable()
    chooser = _Chooser(failing, slowest, sample, seed)
    statuses: dict[str, int] = {}
    categories: dict[str, int] = {}
    metric_index: dict[str, int] = {}
    for record in records:
        if scope.outside(record.repeat, record.task_index) is not None:
            continue
        values: dict[int, Any] = {}
        for metric in record.metrics:
            index = metric_index.setdefault(metric.name, len(metric_index))
            if metric.error is None:
                values[index] = _value(metric.result)
        category = record.tags.get("category")
        table.rows.append([
            record.task_id, record.repeat, statuses.setdefault(record.status, len(statuses)),
            categories.setdefault(category, len(categories)) if category is not None else -1,
            float(f"{record.timings.solution_s:.3g}"), values, record.error.type if record.error else None, -1,
        ])
        table.total += 1
        table.failing += failed(record)
        table.unfinished += record.status != "ok"
        chooser.offer(record, field_chars)
    table.metrics, table.statuses, table.categories = list(metric_index), list(statuses), list(categories)
    chosen = chooser.chosen()
    table.rows.sort(key=lambda row: (_natural(row[0]), row[1]))
    for row in table.rows:
        row[5] = [row[5].get(i) for i in range(len(table.metrics))]
        item_detail = chosen.get((row[0], row[1]))
        if item_detail is not None:
            row[7] = len(table.details)
            table.details.append(item_detail)
    return table
