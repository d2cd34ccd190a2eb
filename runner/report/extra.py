"""Files a benchmark adds to its runs' reports (:meth:`BenchmarkBase.report_files
<runner.core.benchmark.BenchmarkBase.report_files>`), such as GAIA's leaderboard submission."""

from __future__ import annotations

from collections.abc import Iterator

import structlog

from runner.core.benchmark import BenchmarkBase
from runner.core.record import TaskRecord
from runner.core.results import ReportFile
from runner.report.scope import PlanScope
from runner.storage.keys import encode_key
from runner.storage.manifest import RunManifest
from runner.storage.store import ResultStore


def defines_report_files(benchmark: BenchmarkBase | None) -> bool:
    """Whether ``benchmark`` overrides :meth:`BenchmarkBase.report_files` (so the records are read for it)."""
    return benchmark is not None and type(benchmark).report_files is not BenchmarkBase.report_files


def benchmark_files(store: ResultStore, manifest: RunManifest, benchmark: BenchmarkBase | None) -> list[ReportFile]:
    """The files ``benchmark`` makes from the records of the run's current plan (one more pass over the records,
    only for a benchmark that defines :meth:`~BenchmarkBase.report_files`).

    A hook that raises, or a file whose name is not a plain file name (or one folder and a plain name:
    ``lm_eval/results.json``), is logged and left out: the report stands without it (as it does when a benchmark's
    score function fails).
    """
    if not defines_report_files(benchmark):
        return []
    assert benchmark is not None
    scope = PlanScope.of(manifest, benchmark)

    def in_plan() -> Iterator[TaskRecord]:
        for record in store.iter_records():
            if scope.outside(record.repeat, record.task_index, encode_key(record.task_id)) is None:
                yield record

    log = structlog.get_logger("runner")
    try:
        files = list(benchmark.report_files(in_plan()))
    except Exception as exc:  # noqa: BLE001 - a broken hook must not lose the report
        log.warning("report.files_failed", error=f"{type(exc).__name__}: {exc}")
        return []
    usable = []
    for file in files:
        parts = file.name.split("/")
        if "\\" in file.name or any(not part or part.startswith(".") for part in parts) or len(parts) > 2:
            log.warning("report.file_name_refused", name=file.name,
                        detail="a report file needs a plain name, or one folder and a plain name")
            continue
        usable.append(file)
    return usable
