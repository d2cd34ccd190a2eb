"""Self-contained HTML pages: ``report.html`` of a run, ``compare.html`` of a comparison.

A page is one file: styles, script and charts (inline SVG, :mod:`runner.report.plots`) are inside it, and its
Content-Security-Policy forbids every request, so opening it touches no network and needs no server. Templates are
Jinja2 with autoescaping (``templates/*.j2``, package data); data for the page's script goes into
``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e`` and
``\\u0026``, and the script writes text with ``textContent`` only, so no task's text can run script in the page.

Every aggregate number of ``report.html`` is one of ``summary.json`` (which the page also embeds): intervals are
``mean ± 1.96 stderr`` of its clustered standard errors. The records are read once more, streamed, for the item table
(:mod:`runner.report.items`): a compact row per item and detail for a bounded few.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
from typing import Any

from runner._version import __version__
from runner.core.errors import StorageError
from runner.core.metric import MetricType, mean_interval
from runner.report import plots
from runner.report.compare import Comparison
from runner.report.items import ItemTable, item_table
from runner.report.scope import PlanScope
from runner.report.summary import Summary, score_left_out_line
from runner.report.table import format_seconds, tokens_unknown, usage_caveat
from runner.storage.manifest import RunManifest
from runner.storage.store import ResultStore

CATEGORY_CHARTS = 4  # numerical metrics charted by category (the others are in the table)
CHART_CATEGORIES = 40  # categories in one chart (the largest); all are in the table


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2
    from markupsafe import Markup

    def json_script(value: Any) -> Markup:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("runner.report", "templates"), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["json_script"] = json_script
    env.filters["num"] = _num
    env.filters["secs"] = format_seconds
    env.filters["int_"] = lambda v: "–" if v is None else f"{int(v):,}"
    env.globals["runner_version"] = __version__
    return env


def _markup(svg: str | None) -> Any:
    """Trusted SVG from :mod:`runner.report.plots` (matplotlib escapes the text it draws)."""
    from markupsafe import Markup

    return Markup(svg) if svg else None


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(mean: float | None, stderr: float | None,
        bounds: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """The 95 % interval of a mean, cut at the metric's range over the run
    (:func:`runner.core.metric.mean_interval`)."""
    return mean_interval(mean, stderr, *(bounds or (None, None)))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02} min" if hours else f"{minutes} min {secs:02} s"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _bounds(summary: Summary, name: str) -> tuple[float, float] | None:
    metric = summary.metrics[name]
    return (metric.min, metric.max) if metric.min is not None and metric.max is not None else None


def _numerical(summary: Summary) -> list[str]:
    return [name for name, m in summary.metrics.items() if m.type is MetricType.NUMERICAL and m.mean is not None]


def _headline(summary: Summary) -> dict[str, Any]:
    """The main figure: the score, else the first numerical metric's mean; ``partial`` says, when some items have
    no record yet, that it covers only the items done (shown beside it)."""
    partial = (f"partial: {summary.missing} of {summary.expected} items have no record yet; this covers the "
               f"{summary.completed} items done") if summary.missing else ""
    partial = "; ".join(part for part in (partial, score_left_out_line(summary)) if part)
    if summary.score is not None:
        parts = " · ".join(f"{k} {v:.3f}" for k, v in summary.score_components.items() if k != "Overall")
        return {"label": "score", "value": summary.score, "ci": None, "detail": parts, "partial": partial}
    for name in _numerical(summary):
        metric = summary.metrics[name]
        return {"label": f"{name} (mean)", "value": metric.mean,
                "ci": _ci(metric.mean, metric.stderr, _bounds(summary, name)), "detail": "",
                "partial": partial}
    return {"label": "score", "value": None, "ci": None, "detail": "", "partial": partial}


def _kpis(summary: Summary) -> list[dict[str, str]]:
    share = f"{100 * summary.completed / summary.expected:.0f} % of {summary.expected:,}" if summary.expected else ""
    repeats = f" × {summary.n_repeats} repeats" if summary.n_repeats > 1 else ""
    return [
        {"label": "items", "value": f"{summary.completed:,}", "detail": f"{share}; {summary.n_tasks:,} tasks{repeats}"},
        {"label": "errors", "value": f"{summary.errors:,}",
         "detail": ", ".join(f"{k} {v}" for k, v in summary.by_status.items() if k != "ok") or "none"},
        {"label": "duration", "value": _duration(summary.duration_s),
         "detail": f"{_duration(summary.item_seconds)} of item time"},
    ]


def _metric_rows(summary: Summary) -> list[dict[str, Any]]:
    return [{"name": name, **m.model_dump(), "ci": _ci(m.mean, m.stderr, _bounds(summary, name))}
            for name, m in summary.metrics.items()]


def _categories(summary: Summary) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """The per-category charts, the table of every category, and a line about categories left out of a chart."""
    names = [n for n in _numerical(summary) if any(n in group for group in summary.by_category.values())]
    table = {"metrics": names, "rows": []}
    for category, group in summary.by_category.items():
        cells = []
        for name in names:
            entry = group.get(name)
            cells.append({"mean": entry["mean"], "n": entry.get("n"),
                          "ci": _ci(entry["mean"], entry.get("stderr"), _bounds(summary, name))}
                         if entry and entry.get("mean") is not None else None)
        table["rows"].append({"category": category, "cells": cells})
    charts, left_out = [], ""
    for index, name in enumerate(names[:CATEGORY_CHARTS]):
        entries = [(row["category"], cell["mean"], cell["ci"], cell["n"])
                   for row in table["rows"] if (cell := row["cells"][index]) is not None]
        if len(entries) > CHART_CATEGORIES:
            left_out = f"Charts show the {CHART_CATEGORIES} categories with the most items; the table has all."
            keep = {e[0] for e in sorted(entries, key=lambda e: -(e[3] or 0))[:CHART_CATEGORIES]}
            entries = [e for e in entries if e[0] in keep]
        svg = plots.category_chart(name, entries, _bounds(summary, name), f"category-{index}")
        charts.append({"metric": name, "svg": _markup(svg)})
    if len(names) > CATEGORY_CHARTS:
        left_out = (left_out + " " if left_out else "") + (
            f"Charts show the first {CATEGORY_CHARTS} metrics; the table has all {len(names)}.")
    return charts, table, left_out


def _repeats(summary: Summary) -> dict[str, Any]:
    if summary.n_repeats < 2:
        return {"repeat_svg": None, "passk_svg": None, "passk_table": None}
    series: dict[str, Any] = {}
    for name in _numerical(summary)[: len(plots.SERIES)]:
        points = [(int(r), e["mean"], _ci(e["mean"], e.get("stderr"), _bounds(summary, name)))
                  for r, group in summary.by_repeat.items()
                  if (e := group.get(name)) and e.get("mean") is not None]
        if points:
            series[name] = (sorted(points), _bounds(summary, name))
    passk_svg, passk_table = None, None
    if summary.pass_at_k:
        shown = dict(list(summary.pass_at_k.items())[: len(plots.SERIES)])
        passk_svg = _markup(plots.pass_k_chart(shown, summary.pass_hat_k, "pass-k"))
        ks = sorted({int(k) for values in summary.pass_at_k.values() for k in values})
        passk_table = {"ks": ks, "rows": [
            {"metric": name, "at": [values.get(str(k)) for k in ks],
             "hat": [summary.pass_hat_k.get(name, {}).get(str(k)) for k in ks]}
            for name, values in summary.pass_at_k.items()]}
    return {"repeat_svg": _markup(plots.repeat_chart(series, "repeats")) if series else None,
            "passk_svg": passk_svg, "passk_table": passk_table}


def _latency(summary: Summary) -> list[dict[str, Any]]:
    groups = [("all items", summary.latency)] + list(summary.latency_by_category.items())
    return [{"group": group, "n": entry.get("n"), "solution": entry.get("solution_s", {}),
             "total": entry.get("total_s", {})} for group, entry in groups if entry]


def _tokens(summary: Summary) -> list[dict[str, Any]]:
    """The token table's rows, one per model: a model none of whose calls reported usage shows no token counts
    (``None``, printed "–"), never 0; ``note`` says what the counts leave out or the runner counted
    (:func:`~runner.report.table.usage_caveat`)."""
    rows = []
    for model, usage in summary.usage.items():
        per_item = summary.tokens_per_item.get(model, {})
        unknown = tokens_unknown(usage)
        rows.append({"model": model, "calls": usage.get("calls"),
                     "input": None if unknown else usage.get("input_tokens"),
                     "output": None if unknown else usage.get("output_tokens"),
                     "per_input": None if unknown else per_item.get("input_tokens"),
                     "per_output": None if unknown else per_item.get("output_tokens"),
                     "per_calls": per_item.get("calls"), "note": usage_caveat(usage) or ""})
    return rows


def _item_note(table: ItemTable) -> str:
    """The line above the item table: how many items carry their detail, and which kinds, in words that follow the
    run's counts (items that ended in an error or a timeout, and items that scored 0, apart)."""
    return (f"{len(table.details)} of {table.total:,} items (●) carry their input, output, trajectory and metric "
            f"results in this page: {_kept_kinds(table)}. Click a "
            "row to open it; every record is in the run directory under records/.")


def _kept_kinds(table: ItemTable) -> str:
    """Which items keep their detail, as :func:`_item_note` says it: ``failing items (2 ended in an error or a
    timeout, 18 more scored 0 on a metric), the slowest, and a sample``; the items that scored 0 are not called
    failing when none ended in an error, and a run where no item did either says so."""
    unfinished, zero = table.unfinished, table.failing - table.unfinished
    if not table.failing:
        return "the slowest and a sample (no item ended in an error or a timeout, none scored 0 on a metric)"
    if not unfinished:
        return (f"items that scored 0 on a metric ({zero:,} in the run; none ended in an error or a timeout), the "
                "slowest, and a sample")
    ended = f"{unfinished:,} ended in an error or a timeout"
    more = f", {zero:,} more scored 0 on a metric" if zero else ""
    return f"failing items ({ended}{more}), the slowest, and a sample"


def report_context(summary: Summary, manifest: RunManifest, table: ItemTable, uri: str) -> dict[str, Any]:
    """Everything ``report.html.j2`` shows, from ``summary`` (all aggregate numbers), the run's manifest (identity)
    and its :class:`ItemTable`."""
    config = manifest.config
    charts, category_table, categories_left_out = _categories(summary)
    data = summary.model_dump(mode="json")
    return {
        "benchmark": summary.benchmark, "version": summary.benchmark_version, "run_id": summary.run_id,
        "solution": config.get("solution"), "model": config.get("model"), "judge_model": config.get("judge_model"),
        "uri": uri, "updated_at": manifest.updated_at, "generated_at": _now(),
        "headline": _headline(summary), "kpis": _kpis(summary), "notes": summary.notes,
        "metrics": _metric_rows(summary), "components": summary.score_components,
        "category_charts": charts, "category_table": category_table, "categories_left_out": categories_left_out,
        **_repeats(summary),
        "latency": _latency(summary), "tokens": _tokens(summary),
        "statuses": summary.by_status, "error_types": summary.error_types,
        "items_json": table.as_json(), "details_json": table.details, "item_note": _item_note(table),
        "summary_data": data, "summary_text": json.dumps(data, indent=2, ensure_ascii=False),
    }


def html_report(store: ResultStore, summary: Summary, *, seed: int = 0) -> str:
    """The text of ``report.html`` for the run at ``store`` whose summary is ``summary``.

    Args:
        store: the run; its records are streamed once for the item table.
        summary: the run's :class:`Summary` (as :func:`runner.report.build_report` returns it).
        seed: seeds the sample of items that keep their detail.

    Raises:
        StorageError: no run at ``store``, or it cannot be read.
    """
    manifest = store.read_manifest()
    if manifest is None:
        raise StorageError(f"no run at {store.uri} (no run.json); check the URI")
    table = item_table(store.iter_records(), PlanScope.of(manifest), seed=seed)
    context = report_context(summary, manifest, table, store.uri)
    return _environment().get_template("report.html.j2").render(**context)


def write_html_report(store: ResultStore, summary: Summary, *, name: str = "report.html", seed: int = 0) -> str:
    """Write ``report.html`` (see :func:`html_report`) into the run directory and return its URI.

    Args:
        store: the run (any fsspec URL).
        summary: the run's :class:`Summary`, e.g. the return value of :func:`runner.report.build_report`.
        name: the file name under the run directory.
        seed: seeds the sample of items that keep their detail.

    Raises:
        StorageError: no run at ``store``, or the page cannot be written.
    """
    store.write_file(name, html_report(store, summary, seed=seed).encode())
    return f"{store.uri}/{name}"


def comparison_html(comparison: Comparison) -> str:
    """The text of ``compare.html``: the runs, warnings, a difference chart per metric and other run, the table."""
    charts = []
    for metric in dict.fromkeys(row.metric for row in comparison.rows):
        rows = [row for row in comparison.rows if row.metric == metric]
        for index, run in enumerate(comparison.runs[1:]):
            entries = [(row.category or "all items", d.diff, d.ci, d.significant)
                       for row in rows if (d := row.differences[index]).diff is not None][:CHART_CATEGORIES + 1]
            if entries:
                svg = plots.difference_chart(f"{metric}: {run.label} − {comparison.baseline}", entries,
                                             f"diff-{len(charts)}")
                charts.append(_markup(svg))
    context = {"c": comparison, "charts": charts, "generated_at": _now(),
               "data_text": json.dumps(comparison.model_dump(mode="json"), indent=2, ensure_ascii=False)}
    return _environment().get_template("compare.html.j2").render(**context)
