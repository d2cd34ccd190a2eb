"""The engine's calls to a :class:`~runner.storage.compaction.Compactor`, made from outside the engine until the
engine makes them itself (the hooks are listed in docs/storage.md, "Result shards"): used by the tests and by
``scripts/bench.py`` (W5).

:func:`wire` patches, for as long as it is in force:

- ``runner.engine.run._execute_owned`` (the run under its lease): a compactor is made for the run's store, with
  the benchmark's headline metrics and the lease keeper's ``check``; :meth:`Compactor.finish` when the run returns,
  :meth:`Compactor.close` when it raises (interrupted, a fault, a spent budget);
- ``Progress.advance`` (every finished item of both executors goes through it): :meth:`Compactor.add` and
  :meth:`Compactor.maybe_compact` for each item that has a record.
"""

from __future__ import annotations

from typing import Any

from runner.engine import progress as progress_module
from runner.engine import run as run_module
from runner.storage.compaction import Compactor

_ACTIVE: list[Compactor] = []


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
        compactor.finish()
        return outcome

    def compacting_advance(self: Any, status: str, duplicate: bool = False, error: Any = None,
                           item: tuple[str, int] | None = None) -> None:
        if _ACTIVE and status != "skipped" and item is not None:
            _ACTIVE[-1].add(*item)
            _ACTIVE[-1].maybe_compact()
        advance(self, status, duplicate, error, item)

    monkeypatch.setattr(run_module, "_execute_owned", compacting_run)
    monkeypatch.setattr(progress_module.Progress, "advance", compacting_advance)
    return wiring
