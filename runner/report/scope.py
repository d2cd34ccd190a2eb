"""Which stored records belong to a run's current plan.

A resume may lower ``repeats`` or ``limit`` (README, "Storage and resume"). Records of repeats or tasks the current
plan no longer has stay on disk, never deleted (raising the setting again counts them again), but the report and
``status`` leave them out: a record is in the plan when its ``repeat < n_repeats`` and its task position
(``TaskRecord.task_index``) is below the number of task positions planned. Records written before runner kept the
position have none and count as in the plan.

When the benchmark is at hand (the run's own, or rebuilt from ``run.json`` by ``report`` and ``status``), a record
must also be of one of the plan's task ids: a file under ``records/`` of another id (put there from outside the
runner) is not counted either.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.core.benchmark import BenchmarkBase
from runner.storage.keys import encode_key
from runner.storage.manifest import RunManifest
from runner.storage.reading import Scan
from runner.storage.store import ResultStore, UnusableFiles


@dataclass(frozen=True)
class PlanScope:
    """The current plan of a run, as its manifest describes it.

    Args:
        n_repeats: repeats per task.
        n_positions: task positions planned (``n_tasks``, else the run's ``limit``); ``None``: no bound known.
        may_hold_later_tasks: whether records of positions past the bound can exist (a run of this directory had
            a higher limit, or none, or its manifest does not say).
        task_keys: the storage keys of the planned tasks' ids (:func:`~runner.storage.keys.encode_key`);
            ``None``: not known (no benchmark at hand), so ids are not checked.
    """

    n_repeats: int
    n_positions: int | None
    may_hold_later_tasks: bool
    task_keys: frozenset[str] | None = None

    @classmethod
    def of(cls, manifest: RunManifest, benchmark: BenchmarkBase | None = None) -> PlanScope:
        """The scope of ``manifest``'s latest run; with ``benchmark``, its task ids too (:func:`plan_task_keys`)."""
        info = manifest.benchmark
        n_positions = info.n_tasks if info.n_tasks is not None else info.limit
        later = info.limit is not None and (info.widest_limit is None or info.widest_limit > info.limit)
        keys = plan_task_keys(benchmark, manifest, n_positions) if benchmark is not None else None
        return cls(manifest.n_repeats, n_positions, later, keys)

    def outside(self, repeat: int, task_index: int | None, key: str | None = None) -> str | None:
        """Why a record of task key ``key`` (``None``: not checked) is outside the plan (``"repeats"``,
        ``"limit"``, or ``"task_id"``: an id the plan does not have), or ``None`` if it is in it."""
        if repeat >= self.n_repeats:
            return "repeats"
        if task_index is not None and self.n_positions is not None and task_index >= self.n_positions:
            return "limit"
        if key is not None and self.task_keys is not None and key not in self.task_keys:
            return "task_id"
        return None

    def note(self, outside: dict[str, int]) -> str | None:
        """One line saying how many records were left out and why, or ``None`` when none were."""
        total = sum(outside.values())
        if not total:
            return None
        reasons = []
        if outside.get("repeats"):
            reasons.append(f"{outside['repeats']} with repeat index >= {self.n_repeats}")
        if outside.get("limit"):
            reasons.append(f"{outside['limit']} of tasks past the first {self.n_positions}")
        if outside.get("task_id"):
            reasons.append(f"{outside['task_id']} of task ids the benchmark does not have: files put under records/ "
                           "from outside the runner")
        return (f"{total} stored records are outside the current plan ({', '.join(reasons)}): kept on disk, "
                "not counted")


def plan_task_keys(benchmark: BenchmarkBase, manifest: RunManifest, n_positions: int | None) -> frozenset[str] | None:
    """The storage keys of the ids of ``benchmark``'s first ``n_positions`` tasks (all: ``None``), or ``None`` when
    ``benchmark`` is not surely the run's: another name or version than ``manifest`` says, another number of task
    positions than the run planned, or tasks that cannot be iterated here (data missing on this machine)."""
    info = manifest.benchmark
    if (benchmark.name, benchmark.version) != (info.name, info.version):
        return None
    keys = set()
    positions = 0
    try:
        for task in benchmark:
            if n_positions is not None and positions >= n_positions:
                break
            positions += 1
            keys.add(encode_key(task.id))
    except Exception:  # noqa: BLE001 - a benchmark that cannot be read here: its ids are not checked
        return None
    if info.n_tasks is not None and positions != info.n_tasks:
        return None
    return frozenset(keys)


@dataclass
class StoredCount:
    """What a store holds for a plan: ``done`` records in it, ``outside`` records out of it by reason."""

    done: int = 0
    outside: Counter[str] = field(default_factory=Counter)


def count_stored(store: ResultStore, scope: PlanScope) -> StoredCount:
    """Count the records of ``store`` in and out of ``scope``: the rows of its shards (their ``repeat``,
    ``task_key`` and ``task_index`` columns) and one listing of the record objects no shard holds
    (:class:`~runner.storage.reading.Scan`).

    A record object's repeat and task key are in its path; its task position only inside it, so objects are read
    only when the plan's limit is below one an earlier run of the directory used
    (:attr:`PlanScope.may_hold_later_tasks`), and then only those of repeats in the plan (and, when the scope
    knows the plan's task ids, only those of other ids: past the limit, or put there from outside the runner).
    """
    count = StoredCount()
    kept = []
    for stored in Scan(store, ("task_index",), read_objects=False):
        key, repeat = stored.item
        if stored.row is not None:
            reason = scope.outside(repeat, stored.row["task_index"], key)
            if reason is None:
                count.done += 1
            else:
                count.outside[reason] += 1
        elif scope.outside(repeat, None) is not None:
            count.outside["repeats"] += 1
        elif scope.task_keys is not None and key in scope.task_keys:
            count.done += 1
        else:
            kept.append(stored.path)
    if not scope.may_hold_later_tasks:
        if scope.task_keys is None:
            count.done += len(kept)
        else:
            count.outside["task_id"] += len(kept)
        return count
    left_out = UnusableFiles()
    for record in store.read_record_objects(kept, left_out):
        reason = scope.outside(record.repeat, record.task_index, encode_key(record.task_id))
        if reason is None:
            count.done += 1
        else:
            count.outside[reason] += 1
    if scope.task_keys is not None:  # files of other ids that do not hold their own record
        count.outside["task_id"] += len(left_out.unreadable) + len(left_out.misplaced)
    return count
