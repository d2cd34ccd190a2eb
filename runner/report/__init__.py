"""Reports: aggregate a run's records into ``summary.json``, ``results.csv`` and a terminal table."""

from __future__ import annotations

import json

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import StorageError
from runner.report.files import results_csv, summary_json
from runner.report.scope import PlanScope, StoredCount, count_stored
from runner.report.summary import MetricSummary, Summary, scope_notes, summarize
from runner.report.table import render
from runner.storage.store import LIMITS_FILE, ResultStore


def build_report(store: ResultStore, benchmark: BenchmarkBase | None = None, write: bool = True) -> Summary:
    """Aggregate the records of the run at ``store`` that belong to its current plan (see
    :mod:`runner.report.scope`) and (with ``write``) store ``summary.json`` and ``results.csv`` beside them.

    ``summary.json`` also carries the model traffic of the run's latest invocation (``limits.json``: rates, 429s,
    pauses, budget), when there is one.

    Works on a partial run too: missing items are counted in ``missing``; records outside the plan (a lowered
    ``repeats`` or ``limit``) in ``outside_plan``, and they stay on disk.

    Raises:
        StorageError: no run at that URI, or it cannot be read or written.
    """
    manifest = store.read_manifest()
    if manifest is None:
        raise StorageError(f"no run at {store.uri} (no run.json); check the URI")
    summary, rows = summarize(store.iter_records(), manifest, benchmark)
    limits = store.read_file(LIMITS_FILE)
    if limits is not None:
        summary.limits = json.loads(limits)
    if write:
        store.write_file("summary.json", summary_json(summary))
        store.write_file("results.csv", results_csv(rows, list(summary.metrics)))
    return summary


__all__ = [
    "MetricSummary",
    "PlanScope",
    "StoredCount",
    "Summary",
    "build_report",
    "count_stored",
    "render",
    "results_csv",
    "scope_notes",
    "summarize",
    "summary_json",
]
