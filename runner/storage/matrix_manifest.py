"""``matrix.json``: what an evaluation matrix's root says of it: its models (and checkpoints), benchmarks, cells,
baseline and model loads. The driver writes it when the matrix starts and as cells end; the matrix report
(:mod:`runner.report.matrix`) adds each cell's headline.

Layout under the matrix's root::

    matrix.json                          MatrixManifest
    cells/<model key>/<benchmark key>/   one ordinary run directory per cell (run.json, records/, summary.json...)
    matrix.csv  matrix.html              the matrix report
    replicas/                            the replicas' server logs
    limits.json                          the matrix's model traffic (one budget, one set of limits)

Placement is never stored: a resume places models again by the rule (:mod:`runner.engine.pool.placement`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from runner.storage.manifest import new_run_id, utc_now
from runner.storage.object_store import ObjectStore
from runner.storage.store import MATRIX_FILE

CELLS = "cells"
"""The folder of a matrix's cells under its root."""

CellStatus = Literal["pending", "done", "incomplete", "failed", "load_failed", "stale"]
"""A cell's state: ``pending`` (not run yet), ``done`` (every item has a record), ``incomplete`` (some items have
none: the matrix stopped, the budget ran out), ``failed`` (its solution could not be built, or its server failed
every call the same way), ``load_failed`` (its model's replica could not start; the engine's line is kept),
``stale`` (its checkpoint's weights changed since; a new cell has the new weights)."""


class MatrixModel(BaseModel):
    """One model of the matrix.

    Args:
        model: its name (``provider:model``; a checkpoint's path).
        key: its cells' folder.
        step: its checkpoint's step (``None``: not a checkpoint, or no number in its folder's name).
        digest: its checkpoint's identity (:func:`runner.engine.matrix.checkpoints.digest_of`; ``None``: not a
            checkpoint).
        checkpoint: it was named by a glob.
        order: its position among the models.
        status: ``ok``, ``load_failed`` (its last load failed: ``error`` is the engine's line), ``stale``.
        load_attempts: failed loads so far (a watch tries again, up to ``--replica-restarts`` times).
    """

    model: str
    key: str
    step: int | None = None
    digest: str | None = None
    checkpoint: bool = False
    order: int = 0
    status: Literal["ok", "load_failed", "stale"] = "ok"
    error: str | None = None
    load_attempts: int = 0


class MatrixCell(BaseModel):
    """One cell: a model x a benchmark entry, an ordinary run at ``path`` (relative to the root).

    Args:
        counts: ``done`` (items with a record), ``total`` (items planned; ``None``: unknown), ``errors``.
        headline: the cell's headline score (``score``, ``metric``, ``ci``...) once reported.
    """

    model: str
    model_key: str
    benchmark: str
    benchmark_key: str
    path: str
    status: CellStatus = "pending"
    error: str | None = None
    counts: dict[str, int | None] = Field(default_factory=dict)
    headline: dict[str, Any] | None = None


class MatrixManifest(BaseModel):
    """The content of ``matrix.json`` (see the module's docstring).

    Args:
        benchmarks: every benchmark entry the matrix has had, each with its cells' ``key``, its readable key
            (``base``), its ``identity`` (:func:`runner.core.matrix.entry_identity`), whether the key was its own
            ``key:`` (``explicit``) and whether the latest run's file had it (``current``), ``benchmark``, ``args``
            and ``solution``: an entry keeps its key whatever entries come and go
            (:func:`runner.core.matrix.benchmark_keys`).
        loads: one entry per model load of a worker: ``model``, ``worker``, ``node``, ``replica_starts``, ``swaps``,
            ``builds`` (in-process models, lm-eval's ``HFLM``), ``seconds``, ``error``, ``invocation`` (which run of
            the matrix command).
    """

    kind: Literal["matrix"] = "matrix"
    matrix_id: str = Field(default_factory=new_run_id)
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    runner_version: str = ""
    baseline: str | None = None
    invocations: int = 0
    models: list[MatrixModel] = Field(default_factory=list)
    benchmarks: list[dict[str, Any]] = Field(default_factory=list)
    cells: list[MatrixCell] = Field(default_factory=list)
    loads: list[dict[str, Any]] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)

    def model_entry(self, model: str) -> MatrixModel | None:
        """The entry of ``model`` (by name), or ``None``."""
        return next((entry for entry in self.models if entry.model == model), None)

    def cell(self, path: str) -> MatrixCell | None:
        """The cell at ``path`` (relative to the root), or ``None``."""
        return next((cell for cell in self.cells if cell.path == path), None)


def read_matrix(store: ObjectStore) -> MatrixManifest | None:
    """The ``matrix.json`` at ``store``'s root, or ``None`` when there is none.

    Raises:
        StorageError: it cannot be read, or is not a matrix manifest.
    """
    from runner.core.errors import StorageError

    data = store.read_file(MATRIX_FILE)
    if data is None:
        return None
    try:
        return MatrixManifest.model_validate(json.loads(data))
    except ValueError as exc:
        raise StorageError(f"{store.display(MATRIX_FILE)} is not a matrix manifest ({str(exc).splitlines()[0]}); "
                           "it was changed outside the runner") from None


def write_matrix(store: ObjectStore, manifest: MatrixManifest) -> None:
    """Write ``matrix.json`` whole (its ``updated_at`` set now).

    Raises:
        StorageError: the store refused the write.
    """
    manifest.updated_at = utc_now()
    store.write_file(MATRIX_FILE, manifest.model_dump_json(indent=1).encode())
