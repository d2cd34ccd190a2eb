"""Charts of the HTML pages as inline SVG text, drawn offline by matplotlib.

matplotlib is imported when a chart is drawn (never by ``import runner``), and only through its object-oriented API
(:class:`matplotlib.figure.Figure`, no pyplot), so no global backend or figure state is touched. Text stays text in
the SVG (``svg.fonttype: none``): the page's font draws it, and the files stay small. Each chart gets its own
``svg.hashsalt``, so that the ids of clip paths never collide between the charts of one page.

Every function returns an ``<svg>`` element (no XML declaration, DOCTYPE or metadata) ready to be placed in a page.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

ACCENT = "#3b6fd8"
GOOD = "#1a7f37"
BAD = "#cf222e"
INK = "#24292f"
MUTED = "#8c959f"
SERIES = ("#3b6fd8", "#e16f24", "#1a7f37", "#8250df", "#bf3989", "#0a7ea4")

_STYLE = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["Helvetica", "Arial", "DejaVu Sans"],
    "font.size": 9,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "axes.titlesize": 10,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#eaeef2",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
}

Interval = tuple[float, float] | None
WIDTH = 10.4  # inches: 1,000 pixels at 96 per inch, the width of the pages' content


def _label(text: str) -> str:
    """``text`` with mathtext's ``$`` escaped, so a category name is drawn as written."""
    return text.replace("$", r"\$")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(figure: Any, salt: str) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    return text.strip()


def _whiskers(means: Sequence[float], intervals: Sequence[Interval], bounds: Interval = None) -> list[list[float]]:
    """Error-bar lengths below and above each mean (0 where no interval), cut at ``bounds`` (the metric's range: a
    normal interval of a share can pass 0 or 1, the share cannot)."""
    if bounds is not None:
        intervals = [(max(ci[0], bounds[0]), min(ci[1], bounds[1])) if ci else None for ci in intervals]
    low = [m - ci[0] if ci else 0.0 for m, ci in zip(means, intervals)]
    high = [ci[1] - m if ci else 0.0 for m, ci in zip(means, intervals)]
    return [[max(v, 0.0) for v in low], [max(v, 0.0) for v in high]]


def _unit_range(bounds: Interval) -> bool:
    return bounds is not None and 0.0 <= bounds[0] and bounds[1] <= 1.0


def category_chart(metric: str, entries: Sequence[tuple[str, float, Interval, int]], bounds: Interval,
                   salt: str) -> str:
    """Horizontal bars of a metric's mean per category with 95 % whiskers, the mean and n written beside each.

    Args:
        metric: the metric's name (the x-axis label).
        entries: ``(category, mean, (low, high) or None, n)`` in the order to show, top to bottom.
        bounds: the metric's ``(min, max)`` over the run; whiskers stop there, and the axis spans 0 to 1 when they
            lie within it.
        salt: unique within the page.
    """
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        figure = _figure(WIDTH, 0.55 + 0.24 * len(entries))
        axes = figure.add_subplot()
        ys = list(range(len(entries)))[::-1]
        means = [e[1] for e in entries]
        axes.barh(ys, means, height=0.62, color=ACCENT, alpha=0.85)
        with_ci = [(y, e) for y, e in zip(ys, entries) if e[2] is not None]
        if with_ci:
            centres = [e[1] for _, e in with_ci]
            axes.errorbar(centres, [y for y, _ in with_ci], xerr=_whiskers(centres, [e[2] for _, e in with_ci], bounds),
                          fmt="none", ecolor=INK, elinewidth=0.9, capsize=2.2)
        axes.set_yticks(ys, [_label(e[0]) for e in entries])
        axes.tick_params(axis="y", length=0)
        axes.grid(axis="y", visible=False)
        if _unit_range(bounds):
            axes.set_xlim(0, 1.0)
        axes.set_ylim(-0.6, len(entries) - 0.4)
        axes.set_xlabel(_label(f"{metric} (mean, 95 % CI)"))
        transform = matplotlib.transforms.blended_transform_factory(axes.transAxes, axes.transData)
        for y, entry in zip(ys, entries):
            axes.text(1.01, y, f"{entry[1]:.3f}  n={entry[3]}", transform=transform, va="center", fontsize=8,
                      color=INK)
        axes.spines["left"].set_visible(False)
        return _svg(figure, salt)


def repeat_chart(series: dict[str, tuple[list[tuple[int, float, Interval]], Interval]], salt: str) -> str:
    """Each metric's mean per repeat with 95 % whiskers.

    Args:
        series: metric -> (``(repeat index, mean, interval)`` points, the metric's ``(min, max)``: whiskers stop
            there, and the axis spans 0 to 1 when every metric lies within it).
    """
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        figure = _figure(WIDTH, 2.3)
        axes = figure.add_subplot()
        offsets = _offsets(len(series))
        unit = all(_unit_range(bounds) for _, bounds in series.values())
        for (name, (points, bounds)), colour, offset in zip(series.items(), SERIES, offsets):
            xs = [p[0] + offset for p in points]
            means = [p[1] for p in points]
            axes.errorbar(xs, means, yerr=_whiskers(means, [p[2] for p in points], bounds), fmt="o", color=colour,
                          markersize=4, elinewidth=0.9, capsize=2.2, label=_label(name))
        repeats = sorted({p[0] for points, _ in series.values() for p in points})
        axes.set_xticks(repeats, [str(r) for r in repeats])
        axes.set_xlabel("repeat")
        axes.set_ylabel("mean (95 % CI)")
        if unit:
            axes.set_ylim(-0.02, 1.02)
        axes.legend(frameon=False, fontsize=8, loc="best")
        return _svg(figure, salt)


def _offsets(n: int) -> list[float]:
    """Small horizontal shifts, so that the whiskers of several series at one x do not hide each other."""
    step = 0.08
    return [(i - (n - 1) / 2) * step for i in range(n)]


def pass_k_chart(pass_at_k: dict[str, dict[str, float]], pass_hat_k: dict[str, dict[str, float]], salt: str) -> str:
    """pass@k (solid) and pass^k (dashed) against k, one colour per metric (values as in ``summary.json``)."""
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        figure = _figure(WIDTH, 2.3)
        axes = figure.add_subplot()
        ks: set[int] = set()
        for (name, at_k), colour in zip(pass_at_k.items(), SERIES):
            for values, style, what in ((at_k, "-", "pass@k"), (pass_hat_k.get(name, {}), "--", "pass^k")):
                points = sorted((int(k), v) for k, v in values.items())
                ks.update(k for k, _ in points)
                axes.plot([k for k, _ in points], [v for _, v in points], style, marker="o", markersize=3.5,
                          color=colour, label=_label(f"{name} {what}"))
        axes.set_xscale("log", base=2)
        axes.set_xticks(sorted(ks), [str(k) for k in sorted(ks)])
        axes.minorticks_off()
        axes.set_xlabel("k (tries)")
        axes.set_ylim(-0.02, 1.02)
        axes.legend(frameon=False, fontsize=8, loc="best")
        return _svg(figure, salt)


def difference_chart(title: str, entries: Sequence[tuple[str, float, Interval, bool]], salt: str) -> str:
    """A forest plot: per row (all items, then each category) the difference from the baseline with its 95 %
    interval; green or red where the interval excludes 0, grey elsewhere.

    Args:
        title: what is compared, e.g. ``"accuracy: B - A"``.
        entries: ``(row label, difference, interval, significant)``, top to bottom.
    """
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        figure = _figure(WIDTH, 0.7 + 0.24 * len(entries))
        axes = figure.add_subplot()
        ys = list(range(len(entries)))[::-1]
        for y, (_, diff, interval, significant) in zip(ys, entries):
            colour = (GOOD if diff > 0 else BAD) if significant else MUTED
            axes.errorbar([diff], [y], xerr=_whiskers([diff], [interval]), fmt="o", color=colour, markersize=4,
                          elinewidth=1.1, capsize=2.2)
        axes.axvline(0, color=INK, linewidth=0.8)
        axes.set_yticks(ys, [_label(e[0]) for e in entries])
        axes.tick_params(axis="y", length=0)
        axes.grid(axis="y", visible=False)
        axes.set_ylim(-0.6, len(entries) - 0.4)
        axes.set_title(_label(title), loc="left")
        axes.set_xlabel("difference of means (95 % CI)")
        axes.spines["left"].set_visible(False)
        return _svg(figure, salt)


def step_chart(benchmark: str, points: Sequence[tuple[int, float, Sequence[float] | None]], salt: str,
               baseline: tuple[str, float] | None = None) -> str:
    """A checkpoint sweep: one benchmark's headline against the training step, with its 95 % band where the
    headline has an interval, and the baseline's headline as a dashed line.

    Args:
        benchmark: the benchmark's key (the chart's title).
        points: ``(step, value, (low, high) or None)``, by step.
        salt: unique within the page.
        baseline: the baseline's key and headline value (``None``: no baseline, or no value).
    """
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        figure = _figure(WIDTH, 2.6)
        axes = figure.add_subplot()
        steps = [point[0] for point in points]
        values = [point[1] for point in points]
        banded = [(step, ci) for step, _, ci in points if ci]
        if len(banded) >= 2:
            axes.fill_between([step for step, _ in banded], [ci[0] for _, ci in banded], [ci[1] for _, ci in banded],
                              color=ACCENT, alpha=0.18, linewidth=0)
        axes.plot(steps, values, marker="o", color=ACCENT, markersize=4, linewidth=1.4)
        if baseline is not None:
            axes.axhline(baseline[1], color=MUTED, linestyle="--", linewidth=1.1)
            axes.annotate(f"baseline {_label(baseline[0])}", (0, baseline[1]), xycoords=("axes fraction", "data"),
                          xytext=(4, 3), textcoords="offset points", fontsize=8, color=MUTED)
        axes.set_title(_label(benchmark), loc="left")
        axes.set_xlabel("step")
        axes.set_ylabel("headline (95 % band)")
        return _svg(figure, salt)
