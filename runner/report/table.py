"""The summary and a comparison of runs as tables in the terminal (rich)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from runner.core.metric import MetricType
from runner.report.compare import Comparison
from runner.report.summary import Summary, score_left_out_line



WIDTH_OFF_TERMINAL = 160
"""Columns of the tables when stdout is no terminal (a pipe, a CI log) and ``COLUMNS`` does not say: rich's default of
80 would split metric and category names."""


def default_console() -> Console:
    """The console tables print to: the terminal's width on a terminal, ``COLUMNS`` when set, else
    :data:`WIDTH_OFF_TERMINAL`; no emoji codes (``:x:``) replaced."""
    # emoji=False: a model or metric name is printed as written (rich turned "vllm:x: 0 in" into "vllm❌ 0 in").
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console(emoji=False)
    return Console(width=WIDTH_OFF_TERMINAL, emoji=False)

def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if math.isfinite(value) else f"{value:g}"


def format_seconds(value: float | None) -> str:
    """Seconds for people: milliseconds under a second, 3 significant digits (``-`` for none)."""
    if value is None:
        return "–"
    if value < 1:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s" if value < 1000 else f"{value:,.0f} s"


def render(summary: Summary, console: Console | None = None, storage: str | None = None) -> None:
    """Print the run's headline, its notes, the metric table, per-category table and pass@k table, and the score
    (with how many items it covers when some have no record yet).

    The metric table's ``unusable`` column counts the results each metric could not use (errors included); the
    notes above it say why.
    """
    console = console or default_console()
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

    if summary.latency.get("solution_s"):
        points = summary.latency["solution_s"]
        console.print("solution time per item: " + "  ".join(f"{k} {format_seconds(v)}" for k, v in points.items()))
    for line in usage_lines(summary):
        console.print(line, markup=False, soft_wrap=True)

    if summary.pass_at_k:
        table = Table(title="pass@k", title_justify="left")
        table.add_column("metric")
        ks = sorted({int(k) for values in summary.pass_at_k.values() for k in values})
        for k in ks:
            table.add_column(f"pass@{k}", justify="right")
        for name, values in summary.pass_at_k.items():
            table.add_row(name, *(_fmt(values.get(str(k))) + _left_out(summary, name, str(k)) for k in ks))
        console.print(table)

    partial = f"  [yellow]of {summary.completed}/{summary.expected} items[/yellow]" if summary.missing else ""
    # Failed items the benchmark's aggregation leaves out, in the score's own line (never wrapped onto another).
    left_out = f"  [yellow]{escape(score_left_out_line(summary))}[/yellow]" if summary.score_left_out else ""
    if summary.score is not None:
        parts = "  ".join(f"{k} {v:.3f}" for k, v in summary.score_components.items())
        console.print(f"[bold]score {summary.score:.3f}[/bold]" + partial + (f"  ({parts})" if parts else "")
                      + left_out, soft_wrap=True)
    elif summary.score_components:
        # Several headline figures and no one number (lm-eval's tasks: each task's and group's main metric).
        parts = "  ".join(f"{k} {v:.3f}" for k, v in summary.score_components.items())
        console.print(f"[bold]headline[/bold]  {parts}" + partial + left_out, soft_wrap=True)
    elif summary.score_left_out:
        console.print("[bold]score[/bold] none" + left_out, soft_wrap=True)


def _left_out(summary: Summary, name: str, k: str) -> str:
    """`` (3/4 tasks)`` when pass@k leaves tasks out at ``k``, else ``""``."""
    left_out = summary.pass_k_left_out.get(name, {}).get(k, 0)
    if not left_out:
        return ""
    tasks = summary.pass_k_tasks[name][k]
    return f" ({tasks}/{tasks + left_out} tasks)"


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


def _interval(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def render_comparison(comparison: Comparison, console: Console | None = None) -> None:
    """Print a comparison: the runs and what was left out of each, warnings, then one table row per metric and
    category with each run's mean [95 % CI] and each difference from the baseline [95 % CI] and p-value, the
    difference coloured only where its interval excludes 0 (green above the baseline, red below)."""
    console = console or default_console()
    version = f" version {comparison.benchmark_version}" if comparison.benchmark_version else ""
    console.print(f"[bold]compare {comparison.benchmark}[/bold]{version}: {comparison.aligned} items in every run; "
                  f"baseline {comparison.baseline}", soft_wrap=True)
    for run in comparison.runs:
        why = ", ".join(f"{n} {reason}" for reason, n in run.left_out_because.items())
        left = f"; {run.left_out} left out ({why})" if run.left_out else ""
        console.print(f"  {run.label}: {run.uri}  solution {run.solution or '-'}  model {run.model or '-'}  "
                      f"{run.records} records{left}", markup=False, soft_wrap=True)
    for warning in comparison.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", soft_wrap=True)
    for note in comparison.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    if not comparison.rows:
        return
    table = _comparison_table(comparison, one_line=True)
    if Measurement.get(console, console.options.update_width(10_000), table).maximum > console.width:
        table = _comparison_table(comparison, one_line=False)
    console.print(table)


def _comparison_table(comparison: Comparison, one_line: bool) -> Table:
    """The comparison's table; a mean and its interval on one line, or (``one_line`` false, for a narrow
    terminal) on two."""
    sep = " " if one_line else "\n"
    table = Table(title=f"mean [{comparison.confidence:.0%} CI]; difference from {comparison.baseline}, p-value",
                  title_justify="left")
    table.add_column("metric / category" if one_line else "metric /\ncategory", overflow="fold")
    table.add_column("n", justify="right", no_wrap=True)
    for run in comparison.runs:
        table.add_column(run.label, justify="right", no_wrap=True, overflow="fold")
    for run in comparison.runs[1:]:
        table.add_column(f"{run.label}{sep}- {comparison.baseline}", justify="right", no_wrap=True, overflow="fold")
        table.add_column("p", justify="right", no_wrap=True)
    for index, row in enumerate(comparison.rows):
        name = Text(row.metric, style="bold") if row.category is None else Text(f"  {row.category}")
        cells: list[str | Text] = [name, str(row.n)]
        cells += [f"{_fmt(e.mean, 3)}{sep}{_interval(e.ci).strip()}".strip() for e in row.runs]
        for d in row.differences:
            text = f"{'-' if d.diff is None else f'{d.diff:+.3f}'}{sep}{_interval(d.ci).strip()}".strip()
            if d.significant and d.diff is not None:
                text = f"[{'green' if d.diff > 0 else 'red'}]{text}[/]"
            cells += [text, _p(d.p_value)]
        following = comparison.rows[index + 1] if index + 1 < len(comparison.rows) else None
        table.add_row(*cells, end_section=following is not None and following.metric != row.metric)
    return table


def usage_lines(summary: Summary) -> list[str]:
    """One line per model that spent tokens in the run: input and output tokens, calls, and per item (``tokens
    transformers:smollm2-135m-instruct: 5,403 in, 495 out, 20 calls; per item 270 in, 25 out``); cached calls and
    requests abandoned at the model timeout (``2 timed out``) when there were any, and what :func:`usage_caveat` says
    of calls whose server reported no usage. Tokens no call reported are never shown as 0: a model none of whose
    calls reported any reads ``usage unknown``, without sums or a per-item figure."""
    lines = []
    for model, used in sorted((summary.usage or {}).items()):
        calls = used.get("calls", 0)
        if not (calls or used.get("cached_calls")):
            continue
        per = (summary.tokens_per_item or {}).get(model) or {}
        cached = f", {used['cached_calls']:,} cached" if used.get("cached_calls") else ""
        if used.get("timeouts"):
            cached += f", {used['timeouts']:,} timed out"
        caveat = usage_caveat(used)
        cached += f" ({caveat})" if caveat else ""
        if tokens_unknown(used):
            lines.append(f"tokens {model}: usage unknown, {calls:,} calls{cached}")
            continue
        each = (f"; per item {per.get('input_tokens', 0):,.0f} in, {per.get('output_tokens', 0):,.0f} out"
                if per else "")
        lines.append(f"tokens {model}: {used.get('input_tokens', 0):,} in, {used.get('output_tokens', 0):,} out, "
                     f"{calls:,} calls{cached}{each}")
    return lines


def tokens_unknown(used: Mapping[str, int]) -> bool:
    """Whether no call of a model's summed usage (``summary.json``'s ``usage[model]``) reported its tokens: its sums
    are then not 0 tokens but unknown."""
    calls = used.get("calls", 0)
    return calls > 0 and used.get("calls_without_usage", 0) >= calls


def usage_caveat(used: Mapping[str, int]) -> str | None:
    """What a model's summed usage (``summary.json``'s ``usage[model]``) says of calls whose server reported no
    usage, in words (``3 of 20 reported no usage, not in the sums``; ``20 counted by the runner with the model's
    tokenizer, the server reported none``), or ``None`` when every call's server reported its own."""
    calls = used.get("calls", 0)
    unknown = used.get("calls_without_usage", 0)
    counted = used.get("calls_counted_by_runner", 0)
    parts = []
    if unknown:
        parts.append("none reported usage" if unknown >= calls else
                     f"{unknown:,} of {calls:,} reported no usage, not in the sums")
    if counted:
        parts.append(f"{counted:,} counted by the runner with the model's tokenizer, the server reported none")
    return "; ".join(parts) or None
