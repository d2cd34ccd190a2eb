"""A run's report from its records: :func:`build_report` for a store, :func:`report_run` for a run's URI (what
``python -m runner report`` does, and the Python API's way to report a run again)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import structlog

from runner.core.benchmark import BenchmarkBase
from runner.core.errors import StorageError
from runner.report.extra import benchmark_files
from runner.report.files import results_csv, summary_json
from runner.report.html import write_html_report
from runner.report.status import rebuild_benchmark
from runner.report.summary import Summary, summarize
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


@dataclass
class RunReport:
    """A run reported again (:func:`report_run`).

    Args:
        summary: the run's :class:`Summary` (also written as ``summary.json`` and ``results.csv``).
        uri: the run's storage URI.
        page: where ``report.html`` was written, or ``None`` when it was not asked for.
    """

    summary: Summary
    uri: str
    page: str | None = None


def report_run(run: ResultStore | str, storage_options: dict[str, Any] | None = None, *,
               html: bool = False) -> RunReport:
    """Aggregate the run at ``run`` (a store, or a URI with the fsspec ``storage_options`` of its filesystem) again
    into ``summary.json`` and ``results.csv``, and with ``html`` ``report.html``: the benchmark is rebuilt from
    ``run.json`` for its headline score when it can be (else a warning ``report.no_headline_score`` says why).

    Raises:
        StorageError: no run at that URI (no ``run.json``), or it cannot be read or written.
    """
    store = run if isinstance(run, ResultStore) else ResultStore(run, storage_options or {})
    manifest = store.read_manifest()
    if manifest is None:
        raise StorageError(f"no run at {store.uri} (no run.json); check the URI")
    benchmark, problem = rebuild_benchmark(manifest)
    if problem is not None:
        structlog.get_logger("runner").warning("report.no_headline_score", reason=problem)
    summary = build_report(store, benchmark)
    page = write_html_report(store, summary) if html else None
    return RunReport(summary, store.uri, page)
