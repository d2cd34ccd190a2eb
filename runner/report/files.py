"""The report's files: ``summary.json``, ``results.csv``, and a comparison's ``compare.json`` and ``compare.html``."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence

from typing import Any

import fsspec

from runner.core.errors import StorageError
from runner.core.results import ResultRow
from runner.report.compare import Comparison
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


def write_comparison(comparison: Comparison, out: str, storage_options: dict[str, Any] | None = None,
                     html: bool = False) -> list[str]:
    """Write ``compare.json`` (and, with ``html``, ``compare.html``) into the folder ``out`` (a path or any fsspec
    URL, created if missing) and return the paths written.

    Raises:
        StorageError: the folder cannot be written.
    """
    files = {"compare.json": (json.dumps(comparison.model_dump(mode="json"), indent=2) + "\n").encode()}
    if html:
        from runner.report.html import comparison_html

        files["compare.html"] = comparison_html(comparison).encode()
    written = []
    try:
        fs, root = fsspec.url_to_fs(out, **(storage_options or {}))
        fs.makedirs(root, exist_ok=True)
        for name, data in files.items():
            path = f"{root.rstrip('/')}/{name}"
            fs.pipe_file(path, data)
            written.append(f"{out.rstrip('/')}/{name}" if "://" in out else path)
    except (OSError, ValueError, ImportError) as exc:
        raise StorageError(f"cannot write the comparison to {out} ({type(exc).__name__}: {exc}); pass --out a "
                           "writable folder") from None
    return written
