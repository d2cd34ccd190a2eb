"""The matrix report: ``matrix.json``'s headlines, ``matrix.csv``, ``matrix.html`` and the terminal's table, built
from the cells' records alone (:func:`report_matrix`, what ``python -m runner report <matrix-uri>`` does).

Each cell is an ordinary run, reported as one (``summary.json``, ``results.csv``, ``report.html``). The matrix adds:

- ``matrix.csv``, long form, one row per cell, metric and category (all items first): ``model, step, benchmark,
  category, metric, n, mean, stderr, ci_low, ci_high, delta, delta_ci_low, delta_ci_high, p, p_holm, status``.
  ``mean`` and ``stderr`` are the cell's ``summary.json`` values (each task weighs the same; the standard error
  clustered by task) and the interval ``mean ± 1.96 stderr``. ``delta`` is the cell's mean minus the baseline's cell
  of the same benchmark on the items both have, with its 95 % paired, task-clustered bootstrap interval and ``p`` from
  the paired test :func:`~runner.report.compare.compare_runs` uses (exact McNemar for 0/1 scores, Wilcoxon signed-rank
  of the per-task differences otherwise): the numbers ``compare`` prints for that pair. ``p_holm`` is Holm's step-down
  correction across every comparison of the matrix (S. Holm, "A simple sequentially rejective multiple test
  procedure", Scandinavian Journal of Statistics 6, 1979). ``status`` is the cell's (``done``, ``failed``...).
- A cell with records of which none succeeded is no score: it is ``failed`` (its reason in ``matrix.json``), its
  headline is empty, its rows carry ``n`` and no mean, and it is in no comparison (nor in Holm's correction). A pair
  that cannot be compared (other items or scoring) says why in its headline (``not_compared``) and on the page.
- ``matrix.html``, self-contained: a heatmap of models (rows) x benchmarks (columns), each cell its headline with
  its interval and a link to its own ``report.html``, coloured only where its headline metric differs from the
  baseline's after Holm's correction (green above, red below; never by its raw value); and, when the models are
  checkpoints, each benchmark's headline against the step with its 95 % band and the baseline's value as a line.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import structlog

from runner.core.errors import StorageError
from runner.core.metric import MetricType
from runner.report import paired
from runner.report.build import build_report
from runner.report.compare import compare_runs
from runner.report.html import _environment, _markup, _now, write_html_report
from runner.report.status import rebuild_benchmark
from runner.report.summary import Summary
from runner.storage.matrix_manifest import MatrixManifest, read_matrix, write_matrix
from runner.storage.store import ResultStore

CSV_COLUMNS = ("model", "step", "benchmark", "category", "metric", "n", "mean", "stderr", "ci_low", "ci_high",
               "delta", "delta_ci_low", "delta_ci_high", "p", "p_holm", "status")
"""The columns of ``matrix.csv``."""

Z95 = 1.959964
"""The normal quantile of a two-sided 95 % interval."""


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (S. Holm, 1979), in the order given (``None`` stays ``None``): sorted
    ascending, the i-th of m is ``max over j <= i of min(1, (m - j + 1) p_j)``."""
    indexed = sorted((p, index) for index, p in enumerate(p_values) if p is not None)
    m, adjusted, running = len(indexed), [None] * len(p_values), 0.0
    for rank, (p, index) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted  # type: ignore[return-value]


@dataclass
class CellReport:
    """One cell as the matrix report sees it: its manifest entry, its summary (``None``: no run or no record yet)
    and its headline (``metric``, ``value``, ``ci``, and ``delta``, ``p_holm``, ``significant`` against the
    baseline; ``failed``: why it is no score; ``not_compared``: why it has no delta)."""

    model: str
    model_key: str
    step: int | None
    benchmark_key: str
    path: str
    status: str
    summary: Summary | None = None
    headline: dict[str, Any] = field(default_factory=dict)
    page: str | None = None
    error: str | None = None
    not_compared: str | None = None

    @property
    def scored(self) -> bool:
        """Whether the cell is a score: it has records and some succeeded (a cell whose every record is an error
        says nothing of its model)."""
        return self.summary is not None and no_answer(self.summary) is None


def no_answer(summary: Summary) -> str | None:
    """Why a cell with records is no score: every record is an error (the line names the commonest error); ``None``
    when some item succeeded, or there is no record."""
    if not summary.completed or summary.errors < summary.completed:
        return None
    kinds = Counter(summary.error_types or {})
    kind = f" ({summary.errors} {kinds.most_common(1)[0][0]})" if kinds else ""
    return (f"no item succeeded: all {summary.completed} records are errors{kind}; fix their cause, then run the "
            "same command with --rerun-failed")


@dataclass
class MatrixReport:
    """What :func:`report_matrix` made: the cells, the csv rows, where the files are."""

    manifest: MatrixManifest
    cells: list[CellReport]
    rows: list[dict[str, Any]]
    uri: str
    page: str | None = None


def _headline_metric(summary: Summary, headline: tuple[str, ...]) -> str | None:
    """The per-item metric that stands for a cell's headline: the benchmark's first headline metric that has a
    mean, else the first numerical metric."""
    numeric = [name for name, metric in summary.metrics.items() if metric.type is MetricType.NUMERICAL
               and metric.mean is not None]
    return next((name for name in headline if name in numeric), numeric[0] if numeric else None)


def _interval(mean: float | None, stderr: float | None) -> tuple[float | None, float | None]:
    if mean is None or stderr is None or not math.isfinite(mean) or not math.isfinite(stderr):
        return None, None
    return mean - Z95 * stderr, mean + Z95 * stderr


def _rows(cell: CellReport) -> list[dict[str, Any]]:
    """The csv rows of one cell (means only; deltas are filled in by :func:`_deltas`). A cell that is no score
    (:attr:`CellReport.scored`) has its rows with ``n`` and its status, and no mean."""
    summary = cell.summary
    if summary is None:
        return []
    scored = cell.scored

    def row(category: str, name: str, n: Any, mean: Any, stderr: Any) -> dict[str, Any]:
        low, high = _interval(mean, stderr) if scored else (None, None)
        return {"model": cell.model_key, "step": cell.step, "benchmark": cell.benchmark_key, "category": category,
                "metric": name, "n": n, "mean": mean if scored else None, "stderr": stderr if scored else None,
                "ci_low": low, "ci_high": high, "delta": None, "delta_ci_low": None, "delta_ci_high": None, "p": None,
                "p_holm": None, "status": cell.status}

    rows = []
    for name, metric in summary.metrics.items():
        if metric.type is not MetricType.NUMERICAL:
            continue
        rows.append(row("", name, metric.n, metric.mean, metric.stderr))
        for category, values in (summary.by_category or {}).items():
            entry = values.get(name) if isinstance(values, dict) else None
            if not isinstance(entry, dict) or entry.get("mean") is None:
                continue
            rows.append(row(category, name, entry.get("n"), entry.get("mean"), entry.get("stderr")))
    return rows


def _deltas(root: ResultStore, cells: list[CellReport], rows: list[dict[str, Any]],
            baseline_key: str | None, seed: int) -> None:
    """Fill each non-baseline cell's rows with its paired difference from the baseline's cell of its benchmark
    (:func:`compare_runs`: the same numbers as ``compare BASELINE CELL``), then Holm's correction across them."""
    if baseline_key is None:
        return
    base = {cell.benchmark_key: cell for cell in cells if cell.model_key == baseline_key and cell.summary}
    index = {(row["model"], row["benchmark"], row["metric"], row["category"]): row for row in rows}
    for cell in cells:
        reference = base.get(cell.benchmark_key)
        if not cell.scored or reference is None or cell is reference:
            continue
        if not reference.scored:
            cell.not_compared = f"the baseline's cell {reference.path} is no score ({reference.error or 'failed'})"
            continue
        try:
            comparison = compare_runs([root.child(reference.path), root.child(cell.path)], seed=seed)
        except Exception as exc:  # noqa: BLE001 - one pair that cannot be compared leaves its deltas empty
            cell.not_compared = str(exc)[:300]
            structlog.get_logger("runner").warning("matrix.not_compared", cell=cell.path, error=cell.not_compared)
            continue
        for compared in comparison.rows:
            row = index.get((cell.model_key, cell.benchmark_key, compared.metric, compared.category or ""))
            difference = compared.differences[0] if compared.differences else None
            if row is None or difference is None or difference.diff is None:
                continue
            row["delta"], row["p"] = difference.diff, difference.p_value
            if difference.ci is not None:
                row["delta_ci_low"], row["delta_ci_high"] = difference.ci
    for row, adjusted in zip(rows, holm([row["p"] for row in rows])):
        row["p_holm"] = adjusted


def _cell_headline(cell: CellReport, headline_metrics: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """The cell's headline for the table and the page: the benchmark's score with its interval where the benchmark
    gives its standard error (else its headline metric's mean and interval), and its headline metric's difference
    from the baseline after Holm; empty, with the reason, for a cell that is no score."""
    summary = cell.summary
    if summary is None:
        return
    name = _headline_metric(summary, headline_metrics)
    if not cell.scored:
        reason = (cell.error or "").removeprefix("failed: ").removeprefix("load_failed: ") or cell.status
        cell.headline = {"metric": "score" if summary.score is not None else name, "value": None, "ci": None,
                         "failed": reason, "completed": summary.completed, "expected": summary.expected}
        return
    row = next((row for row in rows if row["model"] == cell.model_key and row["benchmark"] == cell.benchmark_key
                and row["metric"] == name and row["category"] == ""), None)
    if summary.score is not None:
        value, (low, high) = summary.score, _interval(summary.score, summary.score_stderr)
    else:
        value, low, high = (row or {}).get("mean"), (row or {}).get("ci_low"), (row or {}).get("ci_high")
    cell.headline = {"metric": "score" if summary.score is not None else name, "value": value,
                     "ci": [low, high] if low is not None and high is not None else None, "delta_metric": name,
                     "delta": (row or {}).get("delta"), "p_holm": (row or {}).get("p_holm"),
                     "significant": bool(row and row["p_holm"] is not None and row["p_holm"] < 1 - paired.CONFIDENCE),
                     "completed": summary.completed, "expected": summary.expected}
    if cell.not_compared:
        cell.headline["not_compared"] = cell.not_compared


def report_matrix(root: ResultStore | str, storage_options: dict[str, Any] | None = None, *, html: bool = True,
                  cell_pages: bool = True, seed: int = 0) -> MatrixReport:
    """Report the matrix at ``root`` again from its cells' records: each cell's ``summary.json`` and
    ``results.csv`` (and ``report.html`` with ``cell_pages``), then ``matrix.csv``, ``matrix.json``'s headlines and
    (with ``html``) ``matrix.html``.

    Raises:
        StorageError: no matrix at ``root`` (no ``matrix.json``), or it cannot be read or written.
    """
    store = root if isinstance(root, ResultStore) else ResultStore(root, storage_options or {})
    manifest = read_matrix(store)
    if manifest is None:
        raise StorageError(f"no matrix at {store.uri} (no matrix.json); check the URI (a run's report: python -m "
                           "runner report RUN_URI)")
    keys = {model.key: model for model in manifest.models}
    baseline_key = next((model.key for model in manifest.models if model.model == manifest.baseline
                         and model.status != "stale"), None)
    cells, headline_metrics = [], {}
    for entry in manifest.cells:
        model = keys.get(entry.model_key)
        cell = CellReport(entry.model, entry.model_key, model.step if model else None, entry.benchmark_key,
                          entry.path, entry.status)
        cell.error = entry.error
        cell_store = store.child(entry.path)
        manifest_of_cell = cell_store.read_manifest()
        if manifest_of_cell is not None:
            benchmark, _ = rebuild_benchmark(manifest_of_cell)
            cell.summary = build_report(cell_store, benchmark)
            headline_metrics[entry.path] = tuple(getattr(benchmark, "headline_metrics", ()) or ())
            if cell_pages:
                cell.page = write_html_report(cell_store, cell.summary)
            reason = no_answer(cell.summary)
            if reason is not None and cell.status != "stale":
                # Failed whatever the driver saw: its records are all errors (a server that failed every call
                # another way than those that stop a cell, a solution that always raises).
                cell.status, cell.error = "failed", entry.error if entry.status == "failed" and entry.error else reason
        cells.append(cell)
    rows = [row for cell in cells if cell.status != "stale" for row in _rows(cell)]
    _deltas(store, [cell for cell in cells if cell.status != "stale"], rows, baseline_key, seed)
    for cell in cells:
        _cell_headline(cell, headline_metrics.get(cell.path, ()), rows)
        entry = manifest.cell(cell.path)
        if entry is not None and cell.summary is not None:
            entry.headline = cell.headline
            entry.status, entry.error = cell.status, cell.error  # type: ignore[assignment]
            # From the records, every invocation's (the driver's counts are its own invocation's errors).
            entry.counts = {"done": cell.summary.completed, "total": entry.counts.get("total", cell.summary.expected),
                            "errors": cell.summary.errors}
    store.write_file("matrix.csv", matrix_csv(rows))
    write_matrix(store, manifest)
    done = MatrixReport(manifest, cells, rows, store.uri)
    if html:
        store.write_file("matrix.html", matrix_html(done, baseline_key).encode())
        done.page = f"{store.uri}/matrix.html"
    return done


def matrix_csv(rows: list[dict[str, Any]]) -> bytes:
    """``matrix.csv``'s bytes (:data:`CSV_COLUMNS`; empty fields for no value)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row.get(key) is None else row[key] for key in CSV_COLUMNS})
    return buffer.getvalue().encode()


def _grid(report: MatrixReport) -> tuple[list[str], list[dict[str, Any]]]:
    """The heatmap's columns (benchmark keys) and rows (models, with their cells by benchmark)."""
    current = [cell for cell in report.cells if cell.status != "stale"]
    benchmarks = list(dict.fromkeys(cell.benchmark_key for cell in current))
    models: dict[str, dict[str, Any]] = {}
    for cell in current:
        row = models.setdefault(cell.model_key, {"key": cell.model_key, "model": cell.model, "step": cell.step,
                                                 "cells": {}})
        row["cells"][cell.benchmark_key] = cell
    return benchmarks, list(models.values())


SHADES = {"above": "#d3f2dc", "below": "#fbdad7", "none": "#ffffff", "no_score": "#eeeeee"}
"""A heatmap cell's background: its headline metric above or below the baseline's after Holm's correction, not
shown to differ (or the baseline itself), no score. Colour says that one thing, never the raw value."""


def _shade(headline: dict[str, Any]) -> str:
    """A cell's background (:data:`SHADES`)."""
    if headline.get("value") is None:
        return SHADES["no_score"]
    delta = headline.get("delta")
    if headline.get("significant") and isinstance(delta, (int, float)) and delta != 0:
        return SHADES["above" if delta > 0 else "below"]
    return SHADES["none"]


def matrix_html(report: MatrixReport, baseline_key: str | None) -> str:
    """The text of ``matrix.html`` (see the module's docstring)."""
    from runner.report import plots

    benchmarks, models = _grid(report)
    for row in models:
        for cell in row["cells"].values():
            cell.headline["shade"] = _shade(cell.headline)
            cell.headline["link"] = f"{cell.path}/report.html" if cell.page else None
    charts = []
    stepped = [row for row in models if row["step"] is not None]
    base_row = next((row for row in models if row["key"] == baseline_key), None)
    if len(stepped) >= 2:
        for benchmark in benchmarks:
            points = sorted((row["step"], row["cells"][benchmark].headline) for row in stepped
                            if benchmark in row["cells"] and row["cells"][benchmark].headline.get("value") is not None)
            base = base_row["cells"].get(benchmark) if base_row is not None else None
            base_value = base.headline.get("value") if base is not None else None
            if points:
                charts.append(_markup(plots.step_chart(
                    benchmark, [(step, h["value"], h.get("ci")) for step, h in points], f"step-{len(charts)}",
                    baseline=(baseline_key, base_value) if base_value is not None else None)))
    data = report.manifest.model_dump(mode="json")
    return _environment().get_template("matrix.html.j2").render(
        m=report.manifest, benchmarks=benchmarks, models=models, baseline=baseline_key, charts=charts,
        generated_at=_now(), data_text=json.dumps(data, indent=2, ensure_ascii=False),
        loads=_loads(report.manifest), shades=SHADES)


def _loads(manifest: MatrixManifest) -> list[dict[str, Any]]:
    """The model loads per (model, worker, invocation): replica starts, swaps, in-process builds, seconds."""
    table: dict[tuple[Any, ...], dict[str, Any]] = {}
    for load in manifest.loads:
        key = (load.get("model"), load.get("invocation"), load.get("worker"))
        entry = table.setdefault(key, {"model": load.get("model"), "invocation": load.get("invocation"),
                                       "worker": load.get("worker"), "replica_starts": 0, "swaps": 0, "builds": 0,
                                       "seconds": 0.0, "errors": 0})
        for name in ("replica_starts", "swaps", "builds"):
            entry[name] += int(load.get(name) or 0)
        entry["seconds"] += float(load.get("seconds") or 0.0)
        entry["errors"] += 1 if load.get("error") else 0
    return list(table.values())


def table_lines(report: MatrixReport) -> list[list[str]]:
    """The terminal's models x benchmarks table of headlines: a header row, then one row per model (``value
    [low, high]``, ``*`` where it differs from the baseline after Holm, the cell's status beside a value of a cell
    that could not finish, the status alone where a cell has no value)."""
    benchmarks, models = _grid(report)
    lines = [["model", *benchmarks]]
    for row in models:
        line = [row["key"]]
        for benchmark in benchmarks:
            cell = row["cells"].get(benchmark)
            headline = cell.headline if cell is not None else {}
            value = headline.get("value")
            if value is None:
                line.append(cell.status if cell is not None else "–")
                continue
            ci = headline.get("ci")
            text = f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
            # A value of a cell that could not finish covers the items it has: its status says so beside it.
            status = f" ({cell.status})" if cell is not None and cell.status != "done" else ""
            line.append(text + (" *" if headline.get("significant") else "") + status)
        lines.append(line)
    return lines


def render_matrix(report: MatrixReport, console: Any = None) -> None:
    """Print the models x benchmarks table of headlines (:func:`table_lines`) and the cells that are not done."""
    from rich.table import Table

    from runner.report.table import default_console

    console = console or default_console()
    lines = table_lines(report)
    table = Table(title=f"matrix {report.uri}", title_justify="left")
    for index, name in enumerate(lines[0]):
        table.add_column(name, justify="left" if index == 0 else "right")
    for line in lines[1:]:
        table.add_row(*line)
    console.print(table)
    waiting = [cell for cell in report.cells if cell.status not in ("done", "stale")]
    for cell in waiting:
        console.print(f"cell {cell.path}: {cell.status}", markup=False, soft_wrap=True)
    if any(cell.headline.get("significant") for cell in report.cells):
        console.print("*: differs from the baseline on the same items after Holm's correction", markup=False)
