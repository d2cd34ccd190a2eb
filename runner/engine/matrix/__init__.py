"""An evaluation matrix: models (or the checkpoints a glob names) x benchmark entries, each cell an ordinary run,
all run by one executor (:mod:`.request`: the cells built; :mod:`.run`: the cells executed together;
:mod:`.checkpoints`: globs, steps, digests and readiness).

May import what the engine may, and the engine's run-level modules; never Ray (the executor is the engine's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner._lazy import lazy_exports

if TYPE_CHECKING:
    from runner.engine.matrix.request import MatrixRequest
    from runner.engine.matrix.run import MatrixOutcome, execute_matrix

_LAZY = {
    "MatrixOutcome": "runner.engine.matrix.run",
    "MatrixRequest": "runner.engine.matrix.request",
    "execute_matrix": "runner.engine.matrix.run",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
