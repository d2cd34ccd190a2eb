"""Reports: aggregate a run's records into ``summary.json``, ``results.csv``, a terminal table and ``report.html``;
compare runs item by item (``compare.json``, ``compare.html``).

May import ``runner.core``, ``runner.storage`` and ``runner.registry`` (to rebuild a run's benchmark for
``status``); never the engine.
"""

from __future__ import annotations

import json

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import StorageError
from runner.report.compare import Comparison, compare_runs
from runner.report.extra import benchmark_files
from runner.report.files import results_csv, summary_json, write_comparison
from runner.report.html import comparison_html, html_report, write_html_report
from runner.report.scope import PlanScope, StoredCount, count_stored
from runner.report.summary import MetricSummary, Summary, scope_notes, summarize
from runner.report.table import render, render_comparison
from runner.storage.store import LIMITS_FILE, ResultStore, UnusableFiles


def build_report(store: ResultStore, benchmark: BenchmarkBase | None = None, write: bool = True) -> Summary:
    """Aggregate the records of the run at ``store`` that belong to its current plan (see
    :mod:`runner.report.scope`) and (with ``write``) store ``summary.json`` and ``results.csv`` beside them.

    ``summary.json`` also carries the model traffic of the run's latest invocation (``limits.json``: rates, 429s,
    pauses, budget), when there is one. With ``write``, the files the benchmark makes from the records
    (:meth:`~runner.core.benchmark.BenchmarkBase.report_files`, e.g. GAIA's ``submission.jsonl``) are written beside
    it, each with a note in the summary saying where it is.

    Works on a partial run too: missing items are counted in ``missing`` (and a note says what the score covers);
    records outside the plan (a lowered ``repeats`` or ``limit``, a task id ``benchmark`` does not have) in
    ``outside_plan``, and they stay on disk; files under ``records/`` that are not records, or not their path's,
    in ``unreadable_records`` and ``misplaced_records``, and files under ``shards/`` that are not shards in
    ``unreadable_shards``, with a note each. Large records are read as their shard rows hold them (``full=False``):
    the summary needs none of their outputs.

    Raises:
        StorageError: no run at that URI, or it cannot be read or written.
    """
    manifest = store.read_manifest()
    if manifest is None:
        raise StorageError(f"no run at {store.uri} (no run.json); check the URI")
    left_out = UnusableFiles()
    summary, rows = summarize(store.iter_records(left_out, full=False), manifest, benchmark, left_out)
    limits = store.read_file(LIMITS_FILE)
    if limits is not None:
        summary.limits = json.loads(limits)
    if write:
        for extra in benchmark_files(store, manifest, benchmark):
            store.write_file(extra.name, extra.data)
            summary.notes.append(f"{store.uri.rstrip('/')}/{extra.name}: {extra.note}")
        store.write_file("summary.json", summary_json(summary))
        store.write_file("results.csv", results_csv(rows, list(summary.metrics)))
    return summary


__all__ = [
    "Comparison",
    "MetricSummary",
    "PlanScope",
    "StoredCount",
    "Summary",
    "build_report",
    "compare_runs",
    "comparison_html",
    "count_stored",
    "html_report",
    "render",
    "render_comparison",
    "results_csv",
    "scope_notes",
    "summarize",
    "summary_json",
    "write_comparison",
    "write_html_report",
]
