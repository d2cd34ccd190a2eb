"""Which stored records belong to a run's current plan.

A resume may lower ``repeats`` or ``limit`` (README, "Storage and resume"). Records of repeats or tasks the current
plan no longer has stay on disk, never deleted (raising the setting again counts them again), but the report and
``status`` leave them out: a record is in the plan when its ``repeat < n_repeats`` and its task position
(``TaskRecord.task_index``) is below the number of task positions planned. Records written before runner kept the
position have none and count as in the plan.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from runner.storage.manifest import RunManifest
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class PlanScope:
    """The current plan of a run, as its manifest describes it.

    Args:
        n_repeats: repeats per task.
        n_positions: task positions planned (``n_tasks``, else the run's ``limit``); ``None``: no bound known.
        may_hold_later_tasks: whether records of positions past the bound can exist (a run of this directory had
            a higher limit, or none, or its manifest does not say).
    """

    n_repeats: int
    n_positions: int | None
    may_hold_later_tasks: bool

    @classmethod
    def of(cls, manifest: RunManifest) -> PlanScope:
        """The scope of ``manifest``'s latest run."""
        info = manifest.benchmark
        n_positions = info.n_tasks if info.n_tasks is not None else info.limit
        later = info.limit is not None and (info.widest_limit is None or info.widest_limit > info.limit)
        return cls(manifest.n_repeats, n_positions, later)

    def outside(self, repeat: int, task_index: int | None) -> str | None:
        """Why a record is outside the plan (``"repeats"`` or ``"limit"``), or ``None`` if it is in it."""
        if repeat >= self.n_repeats:
            return "repeats"
        if task_index is not None and self.n_positions is not None and task_index >= self.n_positions:
            return "limit"
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
        return (f"{total} stored records are outside the current plan ({', '.join(reasons)}): kept on disk, "
                "not counted")


@dataclass
class StoredCount:
    """What a store holds for a plan: ``done`` records in it, ``outside`` records out of it by reason."""

    done: int = 0
    outside: Counter[str] = field(default_factory=Counter)


def count_stored(store: ResultStore, scope: PlanScope) -> StoredCount:
    """Count the records of ``store`` in and out of ``scope``, by one listing of ``records/``.

    The repeat is in each record's path; the task position only inside the record, so records are read only when
    the plan's limit is below one an earlier run of the directory used (:attr:`PlanScope.may_hold_later_tasks`),
    and then only those of repeats in the plan.
    """
    count = StoredCount()
    kept = []
    for path in store.list_record_paths():
        stem = path.rsplit("/", 1)[-1][: -len(".json")]
        if not stem.isdigit():
            continue
        if scope.outside(int(stem), None) is not None:
            count.outside["repeats"] += 1
        else:
            kept.append(path)
    if not scope.may_hold_later_tasks:
        count.done = len(kept)
        return count
    for record in store.iter_records(kept):
        reason = scope.outside(record.repeat, record.task_index)
        if reason is None:
            count.done += 1
        else:
            count.outside[reason] += 1
    return count
