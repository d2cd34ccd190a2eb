"""The engine: one run from its request to its records.

``execute_run(request)`` plans the items without a record, has an executor run each through ``execute_one``, and
writes one record per item; the report is built afterwards from the records alone. Executors are chosen by name
(:data:`runner.registry.EXECUTORS`): ``SequentialExecutor`` in this process, ``RayExecutor`` on a pool of Ray
actors. Names are imported on first use, so ``import runner.engine`` imports neither Ray nor any executor.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.engine.execute import ItemResult, execute_one
    from runner.engine.ray_executor import RayExecutor
    from runner.engine.request import RunRequest
    from runner.engine.run import Executor, RunOutcome, execute_run
    from runner.engine.sequential import SequentialExecutor

_EXPORTS = {
    "Executor": "runner.engine.run",
    "ItemResult": "runner.engine.execute",
    "RayExecutor": "runner.engine.ray_executor",
    "RunOutcome": "runner.engine.run",
    "RunRequest": "runner.engine.request",
    "SequentialExecutor": "runner.engine.sequential",
    "execute_one": "runner.engine.execute",
    "execute_run": "runner.engine.run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
