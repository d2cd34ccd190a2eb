"""The engine's calls to a :class:`~runner.storage.compaction.Compactor`, made from outside the engine until the
engine makes them itself (the hooks are listed in docs/storage.md, "Result shards"): used by the tests and by
``scripts/bench.py`` (W5).

:func:`wire` patches, for as long as it is in force:

- ``runner.engine.run._execute_owned`` (the run under its lease): a compactor is made for the run's store, with
  the benchmark's headline metrics and the lease keeper's ``check``; :meth:`Compactor.finish` when the run returns,
  :meth:`Compactor.close` when it raises (interrupted, a fault, a spent budget);
- ``Progress.advance`` (every finished item of both executors goes through it): :meth:`Compactor.add` and
  :meth:`Compactor.maybe_compact` for each item that has a record;
- ``ResultStore.write_record``: a record this process wrote (the sequential executor's, or the driver's record of
  a fault) is handed to :meth:`Compactor.add` with its item, so that the compaction does not read it back (Ray
  workers write in their own processes: those records are read).
"""

from __future__ import annotations

import uuid
from typing import Any

from runner.core.record import TaskRecord
from runner.engine import progress as progress_module
from runner.engine import run as run_module
from runner.storage.compaction import Compactor
from runner.storage.store import ResultStore

_ACTIVE: list[Compactor] = []
_WRITTEN: dict[tuple[str, int], bytes] = {}


class Wiring:
    """The compactors made while :func:`wire` was in force, newest last."""

    def __init__(self) -> None:
        self.compactors: list[Compactor] = []


def wire(monkeypatch: Any, **options: Any) -> Wiring:
    """Make every run in this process consolidate its records (``options``: :class:`Compactor` arguments such as
    ``every_records``); ``monkeypatch`` is pytest's (or any object with its ``setattr``)."""
    wiring = Wiring()
    execute_owned = run_module._execute_owned
    advance = progress_module.Progress.advance
    write_record = ResultStore.write_record

    async def compacting_run(request: Any, executor: Any, keeper: Any) -> Any:
        compactor = Compactor(request.store, headline=request.benchmark.headline_metrics, check=keeper.check,
                              **options)
        wiring.compactors.append(compactor)
        _ACTIVE.append(compactor)
        try:
            outcome = await execute_owned(request, executor, keeper)
        except BaseException:
            compactor.close()
            raise
        finally:
            _ACTIVE.remove(compactor)
            _WRITTEN.clear()
        compactor.finish()
        return outcome

    def compacting_advance(self: Any, status: str, duplicate: bool = False, error: Any = None,
                           item: tuple[str, int] | None = None) -> None:
        if _ACTIVE and status != "skipped" and item is not None:
            _ACTIVE[-1].add(*item, record=_WRITTEN.pop(item, None))
            _ACTIVE[-1].maybe_compact()
        advance(self, status, duplicate, error, item)

    def remembering_write(self: ResultStore, record: TaskRecord) -> bool:
        if record.write_id is None:
            record = record.model_copy(update={"write_id": uuid.uuid4().hex})
        written = write_record(self, record)
        if written and _ACTIVE and _ACTIVE[-1].store is self:
            _WRITTEN[(record.task_id, record.repeat)] = record.model_dump_json().encode()
        return written

    monkeypatch.setattr(run_module, "_execute_owned", compacting_run)
    monkeypatch.setattr(progress_module.Progress, "advance", compacting_advance)
    monkeypatch.setattr(ResultStore, "write_record", remembering_write)
    return wiring
