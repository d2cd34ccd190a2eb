"""``summary.json`` and ``results.csv``."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from runner.core.results import ResultRow
from runner.report.summary import Summary

FIXED_COLUMNS = ("task_id", "repeat", "status", "tries")


def summary_json(summary: Summary) -> bytes:
    """The summary as indented JSON (UTF-8); a mean or bound that is infinite is written ``"Infinity"`` (valid
    JSON, as in the records)."""
    return (summary.model_dump_json(indent=2) + "\n").encode()


def results_csv(rows: Sequence[ResultRow], metric_names: Sequence[str]) -> bytes:
    """One CSV row per (task, repeat).

    Columns, in this order: ``task_id``, ``repeat``, ``status``, ``tries`` (solution tries; more than 1 after
    solution retries), one ``tag.<name>`` column per tag (sorted), one column per metric (sorted by name; empty
    where the metric raised or returned ``None``; booleans as 0/1; a number that is not finite as ``NaN``,
    ``Infinity`` or ``-Infinity``, as in the records, which pandas' ``read_csv`` reads back as floats). Rows are
    sorted by task id, then repeat.
    """
    tags = sorted({name for row in rows for name in row.tags})
    header = [*FIXED_COLUMNS, *(f"tag.{t}" for t in tags), *sorted(metric_names)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(
            [
                row.task_id,
                row.repeat,
                row.status,
                row.tries,
                *(row.tags.get(t, "") for t in tags),
                *(_cell(row.scores.get(m)) for m in sorted(metric_names)),
            ]
        )
    return buffer.getvalue().encode()


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
