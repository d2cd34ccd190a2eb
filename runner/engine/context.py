"""What every item of one run shares, handed to an executor and, on Ray, to each worker once."""

from __future__ import annotations

from dataclasses import dataclass

from runner.core.benchmark import BenchmarkBase
from runner.engine.solution import SolutionSpec
from runner.storage.store import ResultStore


@dataclass(frozen=True)
class RunContext:
    """The parts of a run that do not change from one item to the next.

    Args:
        benchmark: the benchmark (given to solution factories that ask for ``benchmark=``).
        solution: the solution recipe; each executor (each Ray worker) builds it once.
        store: where records go.
        run_id: the run's id, written into every record.
        timeout: seconds per solution call, or ``None`` for none.
        retry_errors: extra tries when the solution raises (see :func:`~runner.engine.execute.execute_one`).

    It pickles (the store without live connections), so the Ray executor puts it in the object store once and every
    worker receives it from there.
    """

    benchmark: BenchmarkBase
    solution: SolutionSpec
    store: ResultStore
    run_id: str
    timeout: float | None = None
    retry_errors: int = 0
