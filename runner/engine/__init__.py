"""The engine: one run from its request to its records.

``execute_run(request)`` plans the items without a record, has an executor run each through ``execute_one``, and
writes one record per item; the report is built afterwards from the records alone. Executors are chosen by name
(:data:`runner.registry.EXECUTORS`): ``SequentialExecutor`` in this process, ``RayExecutor`` on a pool of Ray
actors. Names are imported on first use, so ``import runner.engine`` imports neither Ray nor any executor.

The run's lifecycle is at this level (``request``, ``run``, ``plan``, ``context``, ``lease``, ``progress``, ``live``,
``watch``, ``sequential``); one item's path is in :mod:`runner.engine.item`, the pool's bookkeeping in
:mod:`runner.engine.pool`, and everything that imports Ray in :mod:`runner.engine.ray`.

May import ``core``, ``storage``, ``traffic``, ``serving``, ``registry``, ``log`` and ``_version``; never a plug-in
(plug-ins come by name from the registry) or a face.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner._lazy import lazy_exports

if TYPE_CHECKING:
    from runner.engine.item.execute import ItemResult, execute_one
    from runner.engine.ray.executor import RayExecutor
    from runner.engine.request import RunRequest
    from runner.engine.run import Executor, RunOutcome, execute_run
    from runner.engine.sequential import SequentialExecutor

_LAZY = {
    "Executor": "runner.engine.run",
    "ItemResult": "runner.engine.item.execute",
    "RayExecutor": "runner.engine.ray.executor",
    "RunOutcome": "runner.engine.run",
    "RunRequest": "runner.engine.request",
    "SequentialExecutor": "runner.engine.sequential",
    "execute_one": "runner.engine.item.execute",
    "execute_run": "runner.engine.run",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
