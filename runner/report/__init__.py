"""Reports: aggregate a run's records into ``summary.json``, ``results.csv``, a terminal table and ``report.html``;
compare runs item by item (``compare.json``, ``compare.html``).

May import ``runner.core``, ``runner.storage`` and ``runner.registry`` (to rebuild a run's benchmark for
``status``); never the engine.
"""

from __future__ import annotations

from runner.report.build import RunReport, build_report, report_run
from runner.report.compare import Comparison, compare_runs
from runner.report.files import results_csv, summary_json, write_comparison
from runner.report.html import comparison_html, html_report, write_html_report
from runner.report.matrix import MatrixReport, render_matrix, report_matrix
from runner.report.scope import PlanScope, StoredCount, count_stored
from runner.report.summary import MetricSummary, Summary, scope_notes, summarize
from runner.report.table import render, render_comparison


__all__ = [
    "Comparison",
    "MatrixReport",
    "MetricSummary",
    "PlanScope",
    "RunReport",
    "StoredCount",
    "Summary",
    "build_report",
    "compare_runs",
    "comparison_html",
    "count_stored",
    "html_report",
    "render",
    "render_comparison",
    "render_matrix",
    "report_matrix",
    "report_run",
    "results_csv",
    "scope_notes",
    "summarize",
    "summary_json",
    "write_comparison",
    "write_html_report",
]
