"""Compare runs of one benchmark version item by item (``python -m runner compare RUN_A RUN_B [RUN_C ...]``).

The first run is the baseline; every other run is compared with it. Items are aligned on (task id, repeat): only
those every run has a record of count, so partial runs compare on what they share, and each run says how many of its
items were left out and which run lacked them. Records outside a run's current plan (:mod:`runner.report.scope`) are
not read into it. Per numerical metric, overall and per ``tags["category"]`` (the baseline's), the comparison gives
each run's mean with its 95 % interval and, per other run, the paired difference ``run - baseline`` with its 95 %
interval and a p-value (:mod:`runner.report.paired`). An aligned item where a metric has no value in some run (the
metric raised, its result is no value a mean can use, :func:`runner.core.metric.number`: NaN, an infinity, an
integer no float can hold; or that run's benchmark did not give it) is left out of that metric only, and counted.
Category metrics (labels) are not compared.

Only per-item metric values are kept in memory (a float per metric and item, and the item's category); the records
are streamed from any fsspec URL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from runner._version import __version__
from runner.core.errors import CompareError, StorageError
from runner.core.metric import MetricType, number
from runner.report import paired
from runner.report.scope import PlanScope
from runner.storage.manifest import RunManifest, describe_difference, utc_now
from runner.storage.store import ResultStore

# What may differ between compared runs without a warning: what answers (fingerprint fields, see RunConfig).
COMPARED_FIELDS = ("solution", "solution_args", "model")

Key = tuple[str, int]


class RunInfo(BaseModel):
    """One compared run.

    Args:
        label: its name in tables (the last part of its URI; a letter is added when two are alike).
        uri, run_id, solution, model: identity (``solution`` and ``model`` from its ``run.json``).
        records: its records in its current plan; ``aligned``: those also in every other run; ``left_out``: the
            rest, and ``left_out_because``: ``"absent from <label>"`` -> count (an item absent from two runs counts
            under both).
        outside_plan: records outside its current plan, not read.
    """

    label: str
    uri: str
    run_id: str
    solution: str | None = None
    model: str | None = None
    records: int
    aligned: int
    left_out: int
    left_out_because: dict[str, int] = Field(default_factory=dict)
    outside_plan: int = 0


class Estimate(BaseModel):
    """A run's mean over the compared items: ``mean``, ``ci`` (95 %, clustered by task; ``None`` under 2 tasks)."""

    mean: float | None = None
    ci: tuple[float, float] | None = None


class Difference(BaseModel):
    """``run - baseline`` over the compared items.

    Args:
        run: the other run's label.
        diff: the difference of the means; ``ci``: its 95 % paired, task-clustered bootstrap interval.
        significant: the interval excludes 0.
        p_value: from ``test``: ``"mcnemar-exact"`` (0/1 metrics) or ``"wilcoxon"`` (per-task mean differences).
        only_baseline, only_run: McNemar's discordant items (right in the baseline only, in the run only).
    """

    run: str
    diff: float | None = None
    ci: tuple[float, float] | None = None
    significant: bool = False
    p_value: float | None = None
    test: str
    only_baseline: int | None = None
    only_run: int | None = None


class Row(BaseModel):
    """One metric over all items (``category`` ``None``) or one category: ``n`` items of ``n_tasks`` tasks have a
    value in every run; ``excluded`` aligned items of the group lack one somewhere. ``runs`` follows the order of
    :attr:`Comparison.runs`; ``differences`` the runs after the baseline."""

    metric: str
    category: str | None = None
    n: int
    n_tasks: int
    excluded: int = 0
    runs: list[Estimate]
    differences: list[Difference]


class Comparison(BaseModel):
    """The content of ``compare.json``: the runs, the aligned count, warnings and notes, and one :class:`Row` per
    metric and category. ``confidence``, ``n_resamples`` and ``seed`` say how the intervals were drawn."""

    benchmark: str
    benchmark_version: str | None = None
    baseline: str
    runs: list[RunInfo]
    aligned: int
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    confidence: float = paired.CONFIDENCE
    n_resamples: int
    seed: int
    rows: list[Row] = Field(default_factory=list)
    created_at: str = Field(default_factory=utc_now)
    runner_version: str = __version__


@dataclass
class _RunItems:
    """What compare keeps of a run: per item its category and numerical metric values."""

    manifest: RunManifest
    items: dict[Key, tuple[str | None, dict[str, float]]] = field(default_factory=dict)
    outside: int = 0


def _load(store: ResultStore, manifest: RunManifest) -> _RunItems:
    scope = PlanScope.of(manifest)
    run = _RunItems(manifest)
    for record in store.iter_records(full=False):
        if scope.outside(record.repeat, record.task_index) is not None:
            run.outside += 1
            continue
        values = {}
        for metric in record.metrics:
            value = number(metric.result) if metric.error is None and metric.type is MetricType.NUMERICAL else None
            if value is not None:
                values[metric.name] = value
        run.items[(record.task_id, record.repeat)] = (record.tags.get("category"), values)
    return run


def _labels(stores: Sequence[ResultStore]) -> list[str]:
    names = [store.uri.rstrip("/").rsplit("/", 1)[-1] or store.uri for store in stores]
    if len(set(names)) == len(names):
        return names
    return [f"{chr(ord('A') + i)}:{name}" for i, name in enumerate(names)]


def _manifests(stores: Sequence[ResultStore], labels: list[str]) -> list[RunManifest]:
    manifests = []
    for store in stores:
        manifest = store.read_manifest()
        if manifest is None:
            raise StorageError(f"no run at {store.uri} (no run.json); check the URI")
        manifests.append(manifest)
    base = manifests[0].benchmark
    for label, manifest in zip(labels[1:], manifests[1:]):
        other = manifest.benchmark
        # Items and scoring, whatever the model (a version may digest what only the model changes: lm-eval's prompts
        # under a model's chat template); runs written before scoring_version was kept are matched by version.
        kept = base.scoring_version is not None and other.scoring_version is not None
        if other.name != base.name or (other.scoring_version != base.scoring_version if kept
                                       else other.version != base.version):
            why = ("they are runs of different benchmarks" if other.name != base.name
                   else "their items or their scoring differ (the benchmark's version)")
            raise CompareError(
                f"cannot compare {labels[0]} ({base.name} version {base.version}) with {label} ({other.name} version "
                f"{other.version}): {why}; compare runs of one benchmark version"
            )
    return manifests


def _warnings(manifests: list[RunManifest], labels: list[str]) -> list[str]:
    """A line per run whose results may differ from the baseline's for more than its solution and model: another
    fingerprint field (benchmark arguments, data, judge or user model) or another per-task ``timeout`` (a timed-out
    item scores as an error)."""

    def scored(manifest: RunManifest) -> dict[str, object]:
        fields = {k: v for k, v in manifest.fingerprint_fields.items() if k not in COMPARED_FIELDS}
        return {**fields, "timeout": manifest.config.get("timeout")}

    out = []
    for label, manifest in zip(labels[1:], manifests[1:]):
        if scored(manifest) != scored(manifests[0]):
            out.append(f"{label} differs from {labels[0]} in more than the solution and model "
                       f"({describe_difference(scored(manifests[0]), scored(manifest))})")
    return out


def compare_runs(runs: Sequence[ResultStore | str], seed: int = 0, n_resamples: int = paired.N_RESAMPLES,
                 storage_options: dict[str, Any] | None = None) -> Comparison:
    """Compare the runs at ``runs`` (the first is the baseline).

    Args:
        runs: two or more runs of one benchmark version: stores, or URIs (with ``storage_options``).
        seed: seeds every bootstrap, so the same runs give the same numbers.
        n_resamples: bootstrap resamples per interval.
        storage_options: the fsspec options of the URIs' filesystems.

    Raises:
        CompareError: fewer than two runs, or runs of different benchmarks or benchmark versions.
        StorageError: a URI holds no run or cannot be read.
    """
    if len(runs) < 2:
        raise CompareError("compare needs two runs or more: python -m runner compare RUN_A RUN_B")
    stores = [run if isinstance(run, ResultStore) else ResultStore(run, storage_options or {}) for run in runs]
    labels = _labels(stores)
    manifests = _manifests(stores, labels)
    loaded = [_load(store, manifest) for store, manifest in zip(stores, manifests)]
    aligned = set(loaded[0].items).intersection(*(run.items for run in loaded[1:]))
    infos = []
    for label, store, run in zip(labels, stores, loaded):
        because: dict[str, int] = defaultdict(int)
        for key in run.items.keys() - aligned:
            for other_label, other in zip(labels, loaded):
                if key not in other.items:
                    because[f"absent from {other_label}"] += 1
        config = run.manifest.config
        infos.append(RunInfo(
            label=label, uri=store.uri, run_id=run.manifest.run_id, solution=config.get("solution"),
            model=config.get("model"), records=len(run.items), aligned=len(aligned),
            left_out=len(run.items) - len(aligned), left_out_because=dict(sorted(because.items())),
            outside_plan=run.outside,
        ))
    comparison = Comparison(
        benchmark=manifests[0].benchmark.name, benchmark_version=manifests[0].benchmark.version, baseline=labels[0],
        runs=infos, aligned=len(aligned), warnings=_warnings(manifests, labels), n_resamples=n_resamples, seed=seed,
    )
    if len(runs) > 2:
        comparison.notes.append(f"{len(runs) - 1} runs are each compared with the first, {labels[0]} (the baseline)")
    metric_sets = [{name for _, values in run.items.values() for name in values} for run in loaded]
    for name in sorted(set().union(*metric_sets)):
        missing = [label for label, names in zip(labels, metric_sets) if name not in names]
        if missing:
            comparison.notes.append(f"metric {name!r} is not in {', '.join(missing)}: not compared")
            continue
        comparison.rows.extend(_metric_rows(name, sorted(aligned), loaded, labels, seed, n_resamples))
    if not aligned:
        comparison.notes.append("no item is in every run: nothing to compare")
    return comparison


def _metric_rows(
    name: str, keys: list[Key], runs: list[_RunItems], labels: list[str], seed: int, n_resamples: int,
) -> list[Row]:
    groups: dict[str | None, list[Key]] = defaultdict(list)
    for key in keys:
        groups[None].append(key)
        category = runs[0].items[key][0]
        if category is not None:
            groups[category].append(key)
    rows = []
    for category in [None, *sorted(c for c in groups if c is not None)]:
        members = groups[category]
        complete = [key for key in members if all(name in run.items[key][1] for run in runs)]
        values = [[run.items[key][1][name] for key in complete] for run in runs]
        tasks = [key[0] for key in complete]
        rows.append(Row(
            metric=name, category=category, n=len(complete), n_tasks=len(set(tasks)),
            excluded=len(members) - len(complete),
            runs=[_estimate(tasks, run_values, seed, n_resamples) for run_values in values],
            differences=[_difference(label, tasks, values[0], run_values, seed, n_resamples)
                         for label, run_values in zip(labels[1:], values[1:])],
        ))
    return rows


def _by_task(tasks: list[str], values: list[float]) -> tuple[list[float], list[int]]:
    """Per task (in first-seen order): the sum of its values and their number."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for task, value in zip(tasks, values):
        sums[task] += value
        counts[task] += 1
    return list(sums.values()), list(counts.values())


def _estimate(tasks: list[str], values: list[float], seed: int, n_resamples: int) -> Estimate:
    if not values:
        return Estimate()
    sums, counts = _by_task(tasks, values)
    return Estimate(mean=sum(values) / len(values), ci=paired.cluster_mean_ci(sums, counts, seed, n_resamples))


def _difference(
    label: str, tasks: list[str], baseline: list[float], other: list[float], seed: int, n_resamples: int,
) -> Difference:
    binary = all(v in (0.0, 1.0) for v in (*baseline, *other))
    result = Difference(run=label, test="mcnemar-exact" if binary else "wilcoxon")
    if not baseline:
        return result
    differences = [b - a for a, b in zip(baseline, other)]
    sums, counts = _by_task(tasks, differences)
    result.diff = sum(differences) / len(differences)
    result.ci = paired.cluster_mean_ci(sums, counts, seed, n_resamples)
    result.significant = result.ci is not None and (result.ci[0] > 0 or result.ci[1] < 0)
    if binary:
        result.p_value, result.only_baseline, result.only_run = paired.mcnemar_exact(baseline, other)
    else:
        result.p_value = paired.wilcoxon_p([s / c for s, c in zip(sums, counts)])
    return result
