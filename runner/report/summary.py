"""Build the summary of a run from its records alone.

Every number in ``summary.json`` and ``results.csv`` comes from the stored records (and the run manifest for the
planned size), so a partial run, or a run finished on another machine, reports the same way. Only the records of
the current plan count (see :mod:`runner.report.scope`); the others are counted in ``outside_plan``.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from runner._version import __version__
from runner.core.benchmark import BenchmarkBase
from runner.core.metric import CLAMPED_FROM, SEVERAL_SCORES, MetricType, number
from runner.core.record import TaskRecord
from runner.core.storable import too_large
from runner.core.results import Headline, ResultRow, RunResults
from runner.report import stats
from runner.report.scope import PlanScope
from runner.report.values import UNUSABLE_REASONS, unusable_reason
from runner.storage.keys import encode_key
from runner.storage.manifest import RunManifest
from runner.storage.store import UnusableFiles


class MetricSummary(BaseModel):
    """Aggregate of one metric.

    ``NUMERICAL``: ``mean`` (each task weighs the same: the mean of the per-task means, see ``weighting`` in
    :class:`Summary`), ``stderr`` (clustered by task: that mean's standard error; see :mod:`runner.report.stats`),
    ``n`` (values), ``n_tasks``, ``min``, ``max``. ``CATEGORY``: ``distribution`` (label -> share) and ``n``.
    ``CORPUS``: ``n`` and ``n_tasks`` only; no mean of per-item values stands in for the corpus-level aggregate,
    which the benchmark's headline gives (``score_components``, ``by_category``).
    ``errors`` counts items where the metric raised (they are not in ``n``); ``unusable`` counts every result left
    out of ``n`` by reason (:data:`~runner.report.values.UNUSABLE_REASONS`, plus the codes of coded errors), so
    ``n`` plus its values is the number of items scored. ``clamped`` counts results the metric clamped into its
    range (their metadata keeps the value before, :data:`~runner.core.metric.CLAMPED_FROM`); ``several_scores``
    counts results (scores and errors alike) read from a judge's reply that gave several different scores, of which
    the last was taken (their metadata lists them, :data:`~runner.core.metric.SEVERAL_SCORES`).

    A metric that allows infinite values (``MetricBase(allows_infinite=True)``) has the mean of the extended reals
    (:func:`~runner.report.stats.extended_mean`: ``inf`` when a value is ``inf``; ``None`` with both signs) and no
    ``stderr`` while a value is infinite; ``min``/``max`` may be infinite. ``summary.json`` writes those as
    ``"Infinity"``/``"-Infinity"``.

    ``by_tries``, when some item of the run needed solution retries: ``first_try`` and ``retried`` ->
    ``{"mean", "n"}`` of the ``NUMERICAL`` metric over the items whose solution ran once and those that needed more
    tries (``tries > 1``), so that a reader sees whether retried items score differently (tasks weigh the same in
    each group too).
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    type: MetricType
    mean: float | None = None
    stderr: float | None = None
    n: int = 0
    n_tasks: int = 0
    min: float | None = None
    max: float | None = None
    distribution: dict[str, float] | None = None
    errors: int = 0
    unusable: dict[str, int] = Field(default_factory=dict)
    clamped: int = 0
    several_scores: int = 0
    by_tries: dict[str, dict[str, Any]] | None = None


class Summary(BaseModel):
    """The content of ``summary.json``.

    Args:
        benchmark, benchmark_version, run_id: identity.
        n_tasks: distinct tasks planned (from the manifest, less its duplicate task ids; the number of distinct
            tasks seen if unknown).
        n_repeats: repeats per task.
        expected, completed, missing: items planned, with a record, without one (records of the current plan only).
        outside_plan: stored records left out because the current plan does not have them (a lowered ``repeats``
            or ``limit``, a task id the benchmark does not have); ``outside_plan_by`` breaks them down by reason
            (``repeats``, ``limit``, ``task_id``).
        unreadable_records: files under ``records/`` that are not records (damaged outside the runner): their
            items count as missing, and ``--rerun-failed`` runs them again.
        misplaced_records: files under ``records/`` that hold the record of another item than their path names (a
            copy made outside the runner): not counted.
        unreadable_shards: files under ``shards/`` that are not result shards (damaged outside the runner): their
            rows are not counted.
        duplicate_tasks: task positions whose id repeats an earlier one (from the manifest; not in ``n_tasks``).
        notes: one line each about items without a record (the score covers the others), what is left out
            (outside the plan, files that are not records, duplicate task ids, metric results that could not be
            used), about infinite means, clamped scores and retried items, for people.
        errors: records whose status is not ``ok``; ``by_status`` breaks them down.
        retried_items: records whose solution needed more than one try (``tries > 1``); each metric's ``by_tries``
            compares them with the others.
        metrics: metric name -> :class:`MetricSummary`.
        by_category: ``tags["category"]`` -> metric -> ``{"mean", "stderr", "n"}`` (``distribution`` for category
            metrics; ``stderr`` clustered by task, ``None`` under 2 tasks), plus what the benchmark's headline adds
            (an entry it replaces keeps the generic ``stderr`` only when it counts the same ``n`` items).
        by_repeat: repeat index -> metric -> ``{"mean", "stderr", "n"}``.
        weighting: how values aggregate, ``"task"``: each task weighs the same in every mean (a metric's, per
            category, per repeat, by tries), in pass@k and pass^k and in the clustered standard errors, whatever
            its number of usable values; a task's own value is its mean over its usable repeats
            (:func:`runner.report.stats.task_mean`). With as many usable values per task it is the plain mean.
        pass_at_k, pass_hat_k: metric -> k -> value, for metrics whose values are all 0/1, when repeats > 1: the
            unbiased estimators per task with the task's own number of usable values ``n`` and successes ``c``,
            averaged over the tasks with ``n >= k`` (:mod:`runner.report.stats`); a k with no such task has none.
        pass_k_tasks: metric -> k -> the tasks that pass@k and pass^k average (``n >= k``).
        pass_k_left_out: metric -> k -> the tasks left out at that k (fewer than k usable values: the metric failed
            on some repeats, or items are missing); a note names each k that leaves tasks out.
        score: the benchmark's headline score or ``None``; ``score_components`` its named parts; ``score_stderr``
            its standard error where the benchmark gives one (:attr:`Headline.stderr
            <runner.core.results.Headline.stderr>`).
        score_left_out: items the score and its components do not count, because the benchmark's own aggregation
            cannot take a failed item (:attr:`Headline.left_out <runner.core.results.Headline.left_out>`), and
            ``score_left_out_why`` why; the terminal and the page say it in the score's line. 0: every item is in
            the score's denominator.
        usage: model -> ``{"input_tokens", "output_tokens", "calls"}`` summed over records, with
            ``calls_without_usage`` (calls whose tokens are unknown: not in the sums; the terminal and the page then
            say so, and show no sums when no call reported any), ``calls_counted_by_runner`` (calls whose server
            reported none, counted with the served model's tokenizer: in the sums), ``cached_calls`` (response cache
            hits: no call made), ``cache_misses`` and ``timeouts`` (requests abandoned at the model timeout) when not
            0.
        limits: the model traffic of the run's latest invocation (``limits.json``, written by the driver): per
            endpoint its rate, 429s seen and pauses; the budget's spend. ``None`` for a run without model endpoints
            or budget.
        tokens_per_item: model -> ``{"input_tokens", "output_tokens", "calls"}`` per completed item (the sums of
            ``usage`` over ``completed``: what an item costs on average, items that never called the model included).
        latency: ``{"solution_s": {"p50", "p90", "p99"}, "total_s": {...}, "n"}``: percentiles of the seconds items
            spent in the solution and end to end (:func:`runner.report.stats.percentiles`), over every completed
            item, errors and timeouts included; empty for no items.
        latency_by_category: ``tags["category"]`` -> the same, per category.
        error_types: ``error.type`` of the records that are not ``ok`` (``TimeoutError``, ``MetricError``, the
            solution's exception class ...) -> count.
        duration_s: seconds from the first item's start to the last item's end; ``item_seconds`` the sum of
            per-item times.
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    benchmark: str
    benchmark_version: str | None = None
    run_id: str
    n_tasks: int
    n_repeats: int
    expected: int
    completed: int
    missing: int
    outside_plan: int = 0
    outside_plan_by: dict[str, int] = Field(default_factory=dict)
    unreadable_records: int = 0
    misplaced_records: int = 0
    unreadable_shards: int = 0
    duplicate_tasks: int = 0
    notes: list[str] = Field(default_factory=list)
    errors: int
    by_status: dict[str, int] = Field(default_factory=dict)
    retried_items: int = 0
    metrics: dict[str, MetricSummary] = Field(default_factory=dict)
    by_category: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    by_repeat: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    weighting: str = "task"
    pass_at_k: dict[str, dict[str, float]] = Field(default_factory=dict)
    pass_hat_k: dict[str, dict[str, float]] = Field(default_factory=dict)
    pass_k_tasks: dict[str, dict[str, int]] = Field(default_factory=dict)
    pass_k_left_out: dict[str, dict[str, int]] = Field(default_factory=dict)
    score: float | None = None
    score_stderr: float | None = None
    score_components: dict[str, float] = Field(default_factory=dict)
    score_left_out: int = 0
    score_left_out_why: str | None = None
    usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    tokens_per_item: dict[str, dict[str, float]] = Field(default_factory=dict)
    latency: dict[str, Any] = Field(default_factory=dict)
    latency_by_category: dict[str, dict[str, Any]] = Field(default_factory=dict)
    error_types: dict[str, int] = Field(default_factory=dict)
    limits: dict[str, Any] | None = None
    duration_s: float | None = None
    item_seconds: float = 0.0
    runner_version: str = __version__


def score_left_out_line(summary: Summary) -> str:
    """``N of M items left out of the score: why`` when the benchmark's aggregation leaves failed items out
    (:attr:`Summary.score_left_out`), else ``""``: the terminal and the page say it in the score's own line."""
    if not summary.score_left_out:
        return ""
    why = f": {summary.score_left_out_why}" if summary.score_left_out_why else ""
    return f"{summary.score_left_out} of {summary.completed} items left out of the score{why}"


def _group_stats(per_task: dict[str, list[float]]) -> dict[str, Any]:
    """``{"mean", "n"}`` of one group's values, by task: the mean of the per-task means, and the number of values."""
    return {"mean": stats.task_mean(per_task.values()), "n": sum(map(len, per_task.values()))}


LATENCY_PERCENTILES = (50, 90, 99)


def _latency(solution_s: list[float], total_s: list[float]) -> dict[str, Any]:
    """``{"solution_s": {"p50", "p90", "p99"}, "total_s": {...}, "n"}`` of one group of items."""
    out: dict[str, Any] = {}
    for name, values in (("solution_s", solution_s), ("total_s", total_s)):
        points = stats.percentiles(values, LATENCY_PERCENTILES)
        if points is not None:
            out[name] = {f"p{q}": value for q, value in zip(LATENCY_PERCENTILES, points)}
    if out:
        out["n"] = len(solution_s)
    return out


class _Collector:
    """Streams records into the rows and tallies the summary needs."""

    def __init__(self) -> None:
        self.rows: list[ResultRow] = []
        self.types: dict[str, MetricType] = {}
        # metric -> the tasks whose records carry it, scored or not (for what pass@k leaves out)
        self.metric_tasks: dict[str, set[str]] = defaultdict(set)
        self.metric_errors: Counter[str] = Counter()
        self.unusable: dict[str, Counter[str]] = defaultdict(Counter)
        self.clamped: Counter[str] = Counter()
        self.several_scores: Counter[str] = Counter()
        self.infinite_ok: set[str] = set()
        self.status: Counter[str] = Counter()
        self.usage: dict[str, Counter[str]] = defaultdict(Counter)
        self.first_start: str | None = None
        self.last_end: str | None = None
        self.item_seconds = 0.0
        self.error_types: Counter[str] = Counter()
        # (solution seconds, total seconds) per item, overall ("") and by category: floats only, for percentiles
        self.latency: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))

    def add(self, record: TaskRecord) -> None:
        scores: dict[str, Any] = {}
        for metric in record.metrics:
            self.types.setdefault(metric.name, metric.type)
            self.metric_tasks[metric.name].add(record.task_id)
            if metric.allows_infinite:
                self.infinite_ok.add(metric.name)
            reason = unusable_reason(metric)
            if reason is not None:
                self.unusable[metric.name][reason] += 1
            if CLAMPED_FROM in (metric.metadata or {}):
                self.clamped[metric.name] += 1
            if SEVERAL_SCORES in (metric.metadata or {}):
                self.several_scores[metric.name] += 1
            if metric.error is not None:
                self.metric_errors[metric.name] += 1
            else:
                scores[metric.name] = metric.result
        self.rows.append(ResultRow(record.task_id, record.repeat, record.status, dict(record.tags), scores,
                                   record.tries))
        self.status[record.status] += 1
        for model, usage in record.usage.items():
            self.usage[model].update(usage.model_dump())
        self.first_start = min(filter(None, [self.first_start, record.started_at]))
        self.last_end = max(filter(None, [self.last_end, record.finished_at]))
        self.item_seconds += record.timings.total_s
        if record.status != "ok":
            self.error_types[record.error.type if record.error else record.status] += 1
        groups = ["", record.tags["category"]] if "category" in record.tags else [""]
        for group in groups:
            solution_s, total_s = self.latency[group]
            solution_s.append(record.timings.solution_s)
            total_s.append(record.timings.total_s)


def _metric_summaries(collector: _Collector) -> dict[str, MetricSummary]:
    out: dict[str, MetricSummary] = {}
    retried = any(row.tries > 1 for row in collector.rows)
    for name, mtype in sorted(collector.types.items()):
        values = [row.scores[name] for row in collector.rows if name in row.scores]
        summary = MetricSummary(type=mtype, n=len(values), errors=collector.metric_errors[name],
                                unusable={**dict.fromkeys(UNUSABLE_REASONS, 0), **collector.unusable[name]},
                                clamped=collector.clamped[name], several_scores=collector.several_scores[name])
        if mtype is MetricType.CATEGORY:
            counts = Counter(str(v) for v in values)
            summary.distribution = {label: count / len(values) for label, count in sorted(counts.items())}
            summary.n_tasks = len({row.task_id for row in collector.rows if name in row.scores})
        elif mtype is MetricType.CORPUS:
            summary.n_tasks = len({row.task_id for row in collector.rows if name in row.scores})
        else:
            infinite_ok = name in collector.infinite_ok
            per_task: dict[str, list[float]] = defaultdict(list)
            by_tries: dict[str, dict[str, list[float]]] = {"first_try": defaultdict(list), "retried": defaultdict(list)}
            for row in collector.rows:
                value = number(row.scores.get(name), infinite_ok)
                if value is not None:
                    per_task[row.task_id].append(value)
                    by_tries["retried" if row.tries > 1 else "first_try"][row.task_id].append(value)
            numbers = [n for task_values in per_task.values() for n in task_values]
            summary.n, summary.n_tasks = len(numbers), len(per_task)
            summary.mean = stats.task_mean(per_task.values())
            if not any(math.isinf(n) for n in numbers):
                # With one value per task this is the plain standard error of the values.
                summary.stderr = stats.clustered_stderr(per_task.values())
            summary.min = min(numbers) if numbers else None
            summary.max = max(numbers) if numbers else None
            if retried:
                summary.by_tries = {group: _group_stats(group_values) for group, group_values in by_tries.items()}
        out[name] = summary
    return out


def error_notes(completed: int, ok: int, error_types: Counter[str]) -> list[str]:
    """One line when no item of a run with records is ``ok``: its score then says nothing of the solution, only of
    what failed (the most common ``error.type``)."""
    if not completed or ok:
        return []
    kind, count = error_types.most_common(1)[0]
    return [f"no item succeeded: all {completed} records are errors ({count} {kind}); the score covers no answer of "
            "the solution: see results.csv or report.html for the errors, fix their cause and rerun with "
            "--rerun-failed"]


def cache_notes(config: dict[str, Any], usage: dict[str, Counter[str]]) -> list[str]:
    """One line when the run has a response cache (``--cache``) but made model calls of which none was cacheable
    under its policy: otherwise the cache is silently unused (the default policy keeps deterministic requests only,
    :mod:`runner.storage.response_cache`)."""
    if not config.get("cache") or config.get("cache_policy", "deterministic") == "off":
        return []
    calls = sum(counts["calls"] for counts in usage.values())
    looked_up = sum(counts["cached_calls"] + counts["cache_misses"] for counts in usage.values())
    if not calls or looked_up:
        return []
    return [f"--cache {config['cache']} held no call: none of the {calls} model calls was cacheable under the "
            f"{config.get('cache_policy', 'deterministic')!r} policy (it keeps requests with temperature 0 or a seed; "
            "the mock model is never cached); set -S temperature=0 (or a seed), or --cache-policy always"]


def seed_notes(config: dict[str, Any], n_repeats: int) -> list[str]:
    """One line when a run of several repeats gives its solution a sampling seed (``-S seed=N``) and does not turn
    sampling off (``-S temperature=0``): every repeat then sends that seed, and a server that honours it (vLLM)
    answers each repeat alike, so pass@k measures one sample (evalchemy PR #75). The seed is the user's and is kept."""
    arguments = config.get("solution_args") or {}
    seed, temperature = arguments.get("seed"), arguments.get("temperature")
    if n_repeats < 2 or seed is None or temperature == 0:
        return []
    return [f"the {n_repeats} repeats share the sampling seed {seed} (-S seed={seed}): a server that honours seeds "
            "(vLLM) answers a sampled request alike in every repeat, so the repeats are not independent samples and "
            "pass@k measures one; drop the seed to sample each repeat on its own"]


def metric_notes(metrics: dict[str, MetricSummary], retried_items: int) -> list[str]:
    """One line per metric whose results were not all used (how many, why), whose mean is infinite or undefined,
    whose results were clamped, or whose judge replies gave several different scores; and one about retried
    items."""
    notes = []
    corpus = [name for name, metric in metrics.items() if metric.type is MetricType.CORPUS]
    if corpus:
        names = ", ".join(repr(name) for name in corpus)
        notes.append(f"metric{'s' if len(corpus) > 1 else ''} {names}: aggregated over the corpus by the benchmark, "
                     "not averaged: see score_components and by_category")
    for name, metric in metrics.items():
        left_out = {reason: count for reason, count in metric.unusable.items() if count}
        if left_out:
            reasons = ", ".join(f"{count} {reason}" for reason, count in left_out.items())
            used = "distribution" if metric.type is MetricType.CATEGORY else "mean"
            notes.append(f"metric {name!r}: {sum(left_out.values())} of {metric.n + sum(left_out.values())} "
                         f"results could not be used and are left out of its {used} ({reasons})")
        if any(bound is not None and math.isinf(bound) for bound in (metric.min, metric.max)):
            mean = "undefined (both +inf and -inf)" if metric.mean is None else f"{metric.mean:g}"
            notes.append(f"metric {name!r}: infinite results, which the metric allows: its mean is {mean} and its "
                         "stderr is not reported")
        if metric.clamped:
            notes.append(f"metric {name!r}: {metric.clamped} result(s) were clamped into the metric's range (the "
                         f"value before is the result's metadata {CLAMPED_FROM!r})")
        if metric.several_scores:
            notes.append(f"metric {name!r}: {metric.several_scores} judge repl(ies) gave several different scores; the "
                         f"last one was read as the verdict (all of them are the result's metadata "
                         f"{SEVERAL_SCORES!r})")
    if retried_items:
        notes.append(f"{retried_items} item(s) needed solution retries; each metric's by_tries compares their "
                     "mean with the items whose solution ran once")
    return notes


def _grouped(collector: _Collector, key: Any) -> dict[str, dict[str, dict[str, Any]]]:
    groups: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    tasks: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in collector.rows:
        group = key(row)
        if group is None:
            continue
        for name, value in row.scores.items():
            groups[group][name].append(value)
            usable = number(value, name in collector.infinite_ok)
            if usable is not None:
                tasks[group][name][row.task_id].append(usable)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group in sorted(groups):
        out[group] = {}
        for name, values in sorted(groups[group].items()):
            if collector.types.get(name) is MetricType.CORPUS:
                out[group][name] = {"n": len(values)}
            elif collector.types.get(name) is MetricType.CATEGORY:
                counts = Counter(str(v) for v in values)
                out[group][name] = {
                    "distribution": {k: c / len(values) for k, c in sorted(counts.items())},
                    "n": len(values),
                }
            else:
                per_task = tasks[group][name]
                finite = all(math.isfinite(value) for values_of_task in per_task.values() for value in values_of_task)
                out[group][name] = {**_group_stats(per_task),
                                    "stderr": stats.clustered_stderr(per_task.values()) if finite else None}
    return out


class _PassK:
    """pass@k and pass^k of a run's 0/1 metrics, with the tasks each k averages and leaves out (see
    :class:`Summary`)."""

    def __init__(self, collector: _Collector, n_repeats: int) -> None:
        self.at_k: dict[str, dict[str, float]] = {}
        self.hat_k: dict[str, dict[str, float]] = {}
        self.tasks: dict[str, dict[str, int]] = {}
        self.left_out: dict[str, dict[str, int]] = {}
        if n_repeats < 2:
            return
        for name, mtype in sorted(collector.types.items()):
            if mtype is MetricType.NUMERICAL:
                self._add(name, collector, n_repeats)

    def _add(self, name: str, collector: _Collector, n_repeats: int) -> None:
        per_task: dict[str, list[float]] = {task: [] for task in collector.metric_tasks[name]}
        for row in collector.rows:
            value = number(row.scores.get(name))
            if value is not None:
                per_task[row.task_id].append(value)
        values = [v for task_values in per_task.values() for v in task_values]
        if not values or any(v not in (0.0, 1.0) for v in values):
            return
        tries = [(len(v), int(sum(v))) for v in per_task.values()]
        self.at_k[name], self.hat_k[name], self.tasks[name], self.left_out[name] = {}, {}, {}, {}
        for k in stats.k_values(n_repeats):
            eligible = [(n, c) for n, c in tries if n >= k]
            self.tasks[name][str(k)] = len(eligible)
            self.left_out[name][str(k)] = len(tries) - len(eligible)
            if eligible:
                self.at_k[name][str(k)] = math.fsum(stats.pass_at_k(n, c, k) for n, c in eligible) / len(eligible)
                self.hat_k[name][str(k)] = math.fsum(stats.pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)

    def notes(self) -> list[str]:
        """One line per metric and k that leaves tasks out."""
        notes = []
        for name, by_k in self.left_out.items():
            for k, left_out in by_k.items():
                if left_out:
                    total = left_out + self.tasks[name][k]
                    notes.append(f"metric {name!r}: pass@{k} and pass^{k} average {self.tasks[name][k]} of {total} "
                                 f"tasks; {left_out} task(s) with fewer than {k} usable result(s) (errors, missing "
                                 "items) are left out")
        return notes


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (_dt.datetime.fromisoformat(end) - _dt.datetime.fromisoformat(start)).total_seconds()


def summarize(
    records: Iterable[TaskRecord],
    manifest: RunManifest,
    benchmark: BenchmarkBase | None = None,
    left_out: UnusableFiles | None = None,
) -> tuple[Summary, list[ResultRow]]:
    """Aggregate ``records`` into a :class:`Summary` (and the per-item rows, for ``results.csv``).

    Args:
        records: the run's records (streamed); those outside the manifest's current plan are counted, not used.
        manifest: the run manifest (identity and planned size).
        benchmark: when given, its :meth:`~BenchmarkBase.score` adds the headline score (a score function that
            raises is logged and the score left ``None``), and records of task ids it does not have are left out
            (:class:`PlanScope`).
        left_out: the files :meth:`ResultStore.iter_records <runner.storage.store.ResultStore.iter_records>`
            skipped while yielding ``records`` (read once ``records`` is consumed), for the counts and notes.
    """
    scope = PlanScope.of(manifest, benchmark)
    collector = _Collector()
    outside: Counter[str] = Counter()
    for record in records:
        reason = scope.outside(record.repeat, record.task_index, encode_key(record.task_id))
        if reason is None:
            collector.add(record)
        else:
            outside[reason] += 1
    collector.rows.sort(key=lambda row: (row.task_id, row.repeat))
    duplicates = manifest.benchmark.duplicate_tasks
    n_tasks = manifest.benchmark.n_tasks
    if n_tasks is None:
        n_tasks = len({row.task_id for row in collector.rows})
    else:
        n_tasks -= duplicates
    n_repeats = manifest.n_repeats
    expected = n_tasks * n_repeats
    completed = len(collector.rows)
    missing = max(expected - completed, 0)
    left_out = left_out or UnusableFiles()
    metrics = _metric_summaries(collector)
    retried_items = sum(1 for row in collector.rows if row.tries > 1)
    pass_k = _PassK(collector, n_repeats)
    summary = Summary(
        benchmark=manifest.benchmark.name,
        benchmark_version=manifest.benchmark.version,
        run_id=manifest.run_id,
        n_tasks=n_tasks,
        n_repeats=n_repeats,
        expected=expected,
        completed=completed,
        missing=missing,
        outside_plan=sum(outside.values()),
        outside_plan_by=dict(sorted(outside.items())),
        unreadable_records=len(left_out.unreadable),
        misplaced_records=len(left_out.misplaced),
        unreadable_shards=len(left_out.unreadable_shards),
        duplicate_tasks=duplicates,
        notes=(missing_notes(missing, expected, completed, left_out) + scope_notes(scope, outside, duplicates)
               + error_notes(completed, collector.status["ok"], collector.error_types)
               + cache_notes(manifest.config, collector.usage) + seed_notes(manifest.config, n_repeats)
               + metric_notes(metrics, retried_items) + pass_k.notes()),
        errors=completed - collector.status["ok"],
        by_status=dict(sorted(collector.status.items())),
        retried_items=retried_items,
        metrics=metrics,
        pass_at_k=pass_k.at_k,
        pass_hat_k=pass_k.hat_k,
        pass_k_tasks=pass_k.tasks,
        pass_k_left_out=pass_k.left_out,
        **_breakdowns(collector, completed),
    )
    if benchmark is not None:
        _apply_headline(summary, benchmark, collector.rows)
    return summary, collector.rows


def _breakdowns(collector: _Collector, completed: int) -> dict[str, Any]:
    """The summary's tables by category and by repeat, its usage and latency, error types and durations, from the
    records ``collector`` holds (``completed`` of them)."""
    usage = sorted(collector.usage.items())
    return {
        "by_category": _grouped(collector, lambda row: row.tags.get("category")),
        "by_repeat": _grouped(collector, lambda row: str(row.repeat)),
        "usage": {model: dict(counts) for model, counts in usage},
        "tokens_per_item": {model: {name: count / completed for name, count in counts.items()}
                            for model, counts in usage} if completed else {},
        "latency": _latency(*collector.latency[""]) if completed else {},
        "latency_by_category": {category: _latency(*collector.latency[category])
                                for category in sorted(collector.latency) if category},
        "error_types": dict(collector.error_types.most_common()),
        "duration_s": _seconds_between(collector.first_start, collector.last_end),
        "item_seconds": collector.item_seconds,
    }


def missing_notes(missing: int, expected: int, completed: int, left_out: UnusableFiles) -> list[str]:
    """The lines that say which items the numbers do not cover: items without a record yet (a partial run), files
    under ``records/`` that are not records, copies of records at another item's path, files under ``shards/``
    that are not shards."""
    notes = []
    if missing:
        notes.append(f"{missing} of {expected} items have no record yet: the score and the metrics cover the "
                     f"{completed} items done")
    if left_out.unreadable:
        notes.append(f"{len(left_out.unreadable)} record file(s) cannot be read (damaged outside the runner: "
                     f"{_some(left_out.unreadable)}): their items count as missing; run the same command with "
                     "--rerun-failed to run them again")
    if left_out.misplaced:
        notes.append(f"{len(left_out.misplaced)} file(s) under records/ hold the record of another item (copies "
                     f"made outside the runner: {_some(left_out.misplaced)}): not counted; remove them")
    if left_out.unreadable_shards:
        notes.append(f"{len(left_out.unreadable_shards)} file(s) under shards/ are not result shards (damaged "
                     f"outside the runner: {_some(left_out.unreadable_shards)}): the records they held are not "
                     "counted, and a resume runs their items again; remove them")
    return notes


def _some(paths: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``paths``, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def scope_notes(scope: PlanScope, outside: dict[str, int], duplicate_tasks: int) -> list[str]:
    """The lines that say what the counts leave out: records outside the plan, duplicate task ids."""
    notes = [note] if (note := scope.note(outside)) else []
    if duplicate_tasks:
        notes.append(f"the benchmark repeats {duplicate_tasks} task id(s) at later positions: each id has one "
                     "record per repeat and is counted once")
    return notes


def _apply_headline(summary: Summary, benchmark: BenchmarkBase, rows: list[ResultRow]) -> None:
    results = RunResults(
        rows=rows,
        metrics={name: m.model_dump() for name, m in summary.metrics.items()},
        by_category=summary.by_category,
    )
    try:
        headline = benchmark.score(results)
    except Exception as exc:  # noqa: BLE001 - a broken score function must not lose the report
        structlog.get_logger("runner").warning("report.score_failed", error=f"{type(exc).__name__}: {exc}")
        return
    if isinstance(headline, Headline):
        summary.score = _headline_number(summary, "score", headline.score)
        if summary.score is not None and isinstance(headline.stderr, (int, float)) and math.isfinite(headline.stderr):
            summary.score_stderr = float(headline.stderr)
        summary.score_components = {name: value for name, value in headline.components.items()
                                    if _headline_number(summary, f"component {name!r}", value) is not None}
        if headline.left_out:
            summary.score_left_out = headline.left_out
            summary.score_left_out_why = headline.left_out_why or None
        summary.notes.extend(headline.notes)
        for category, metrics in headline.by_category.items():
            generic = summary.by_category.setdefault(category, {})
            for name, entry in metrics.items():
                before = generic.get(name) or {}
                same_items = before.get("n") == entry.get("n") and "stderr" not in entry
                generic[name] = {**entry, "stderr": before.get("stderr")} if same_items else dict(entry)
    elif headline is not None and _headline_number(summary, "score", headline) is not None:
        summary.score = float(headline)


def _headline_number(summary: Summary, what: str, value: Any) -> Any:
    """``value``, a number of the benchmark's headline, or ``None`` with a note when no float can hold it (an
    integer past about ±1.8e308, which a score function summing a ``CORPUS`` metric's exact integers can give):
    ``summary.json``, the table and the page would not hold it either."""
    if not too_large(value):
        return value
    summary.notes.append(f"the benchmark's headline {what} is an integer no float can hold: not reported (the "
                         "records keep every metric result exactly)")
    return None
