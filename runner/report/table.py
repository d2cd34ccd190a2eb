"""The summary as tables in the terminal (rich)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from runner.core.metric import MetricType
from runner.report.summary import Summary


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if math.isfinite(value) else f"{value:g}"


def render(summary: Summary, console: Console | None = None, storage: str | None = None) -> None:
    """Print the run's headline, its notes, the metric table, per-category table and pass@k table.

    The metric table's ``unusable`` column counts the results each metric could not use (errors included); the
    notes above it say why.
    """
    console = console or Console()
    head = (
        f"[bold]{summary.benchmark}[/bold]  run {summary.run_id}  "
        f"{summary.completed}/{summary.expected} items  errors {summary.errors}"
    )
    if summary.duration_s is not None:
        head += f"  {summary.duration_s:.1f} s"
    console.print(head)
    if storage:
        console.print(f"results: {storage}")
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)

    metrics = Table(title="metrics", title_justify="left")
    for column in ("metric", "mean", "stderr", "n", "min", "max", "unusable"):
        metrics.add_column(column, justify="left" if column == "metric" else "right")
    for name, m in summary.metrics.items():
        unusable = str(sum(m.unusable.values()))
        if m.type is MetricType.CATEGORY:
            dist = ", ".join(f"{k}: {v:.2f}" for k, v in (m.distribution or {}).items())
            metrics.add_row(name, dist, "", str(m.n), "", "", unusable)
        else:
            metrics.add_row(name, _fmt(m.mean), _fmt(m.stderr), str(m.n), _fmt(m.min, 3), _fmt(m.max, 3), unusable)
    console.print(metrics)

    if summary.by_category:
        console.print(_category_table(summary))

    if summary.pass_at_k:
        table = Table(title="pass@k", title_justify="left")
        table.add_column("metric")
        ks = sorted({int(k) for values in summary.pass_at_k.values() for k in values})
        for k in ks:
            table.add_column(f"pass@{k}", justify="right")
        for name, values in summary.pass_at_k.items():
            table.add_row(name, *(_fmt(values.get(str(k))) for k in ks))
        console.print(table)

    if summary.score is not None:
        parts = "  ".join(f"{k} {v:.3f}" for k, v in summary.score_components.items())
        console.print(f"[bold]score {summary.score:.3f}[/bold]" + (f"  ({parts})" if parts else ""))


def _category_table(summary: Summary) -> Table:
    """Per-category means; categories as rows, or as columns when there are more metrics than categories."""
    names = sorted({name for group in summary.by_category.values() for name in group})
    categories = list(summary.by_category)

    def cell(category: str, name: str) -> str:
        entry = summary.by_category[category].get(name)
        return "" if not entry or entry.get("mean") is None else f"{entry['mean']:.3f} ({entry['n']})"

    table = Table(title="by category (mean, n)", title_justify="left")
    if len(names) > len(categories):
        table.add_column("metric")
        for category in categories:
            table.add_column(category, justify="right")
        for name in names:
            table.add_row(name, *(cell(category, name) for category in categories))
    else:
        table.add_column("category")
        for name in names:
            table.add_column(name, justify="right")
        for category in categories:
            table.add_row(category, *(cell(category, name) for name in names))
    return table
