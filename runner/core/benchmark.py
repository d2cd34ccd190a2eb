"""The benchmark interface, as in AgentScope's ``BenchmarkBase``, with optional extras."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

from runner.core.record import TaskRecord
from runner.core.results import Headline, ReportFile, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task


class BenchmarkBase(ABC):
    """A named set of tasks.

    Required: ``__iter__`` yielding :class:`Task` objects in a stable order. Optional:

    - ``__len__``: the number of tasks, for progress and ``status`` (otherwise counted while planning);
    - ``version``: a string that changes when tasks or scoring change (it enters the run fingerprint);
    - ``headline_metrics``: the metrics whose running mean the progress of a run shows, in order of preference (the
      first one that has values; default: the first metric seen), the nearest live stand-in for :meth:`score`;
    - :meth:`prepare`: load or verify data before anything is written, raising ``BenchmarkError`` on a problem;
    - :meth:`reference`: the gold answer of a task, used by the built-in ``reference`` solution;
    - :meth:`score`: a headline score computed from aggregated results;
    - :meth:`report_files`: files written beside ``summary.json`` from the run's records (e.g. GAIA's leaderboard
      submission);
    - ``items_in_flight()``: the items each worker should hold in flight to fill the benchmark's model batches
      (lm-eval's ``batch_size``), the default of ``--concurrency`` when the run sets none (``None``: no opinion).
    - a constructor that names ``model`` or ``model_base_url`` gets the run's ``--model`` and ``--model-base-url``
      (:data:`runner.registry.RUN_MODEL_ARGS`).

    Construction should be cheap (load data in :meth:`prepare` or on first iteration): ``python -m runner report``
    rebuilds the benchmark from the run manifest to compute its headline score.

    Args:
        name: the benchmark's name (reports, default storage folder).
        description: one line for reports.
    """

    version: str | None = None
    headline_metrics: tuple[str, ...] = ()

    def __init__(self, name: str, description: str = "") -> None:
        self.name = name
        self.description = description

    @abstractmethod
    def __iter__(self) -> Iterator[Task]:
        """Yield the tasks."""

    def prepare(self) -> None:
        """Load or verify data before a run writes anything; raise ``BenchmarkError`` with the fix on failure."""

    def size(self) -> int | None:
        """The number of tasks if known without iterating (``len(self)`` when defined), else ``None``."""
        try:
            return len(self)  # type: ignore[arg-type]
        except TypeError:
            return None

    def reference(self, task: Task) -> SolutionOutput | Any:
        """The gold answer of ``task``; by default its ``ground_truth``."""
        return SolutionOutput(success=True, output=task.ground_truth)

    def score(self, results: RunResults) -> Headline | float | None:
        """The headline score of a run from its aggregated results; ``None`` (the default) when there is none."""
        return None

    def report_files(self, records: Iterable[TaskRecord]) -> list[ReportFile]:
        """Files to write beside ``summary.json``, made from the records of the run's current plan (streamed once,
        in storage order; the default makes none). The report writes them each time it is built (at the end of a
        run and by ``python -m runner report``), and adds each file's note to the summary's notes."""
        return []
