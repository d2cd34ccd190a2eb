"""The benchmark interface, as in AgentScope's ``BenchmarkBase``, with optional extras."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from runner.core.local_code import LocalCode, code_of_module, with_code
from runner.core.record import TaskRecord
from runner.core.results import Headline, ReportFile, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task

R = TypeVar("R")


class BenchmarkBase(ABC):
    """A named set of tasks.

    Required: ``__iter__`` yielding :class:`Task` objects in a stable order. Optional:

    - ``__len__``: the number of tasks, for progress and ``status`` (otherwise counted while planning);
    - ``version``: a string that changes when tasks or scoring change (it enters the run fingerprint);
    - ``scoring_version``: a string that changes when the items or their scoring change, but not with the model under
      evaluation (default: ``version``): runs with equal values are compared item by item (``compare``, a matrix's
      deltas), whatever their models;
    - ``headline_metrics``: the metrics whose running mean the progress of a run shows, in order of preference (the
      first one that has values; default: the first metric seen), the nearest live stand-in for :meth:`score`;
    - :meth:`prepare`: load or verify data before anything is written, raising ``BenchmarkError`` on a problem;
    - :meth:`reference`: the gold answer of a task, used by the built-in ``reference`` solution;
    - :meth:`score`: a headline score computed from aggregated results;
    - :meth:`report_files`: files written beside ``summary.json`` from the run's records (e.g. GAIA's leaderboard
      submission);
    - :meth:`items_in_flight`: the items each worker should hold in flight to fill the benchmark's model batches
      (lm-eval's ``batch_size``), the default of ``--concurrency`` when the run sets none.

    What it needs from the run (its model, a judge, the data folder), its agent for a bare ``--model`` and its
    ``mock:<name>`` policy are declared on the class (:func:`runner.core.plugin.declare`); its arguments (``-B``)
    are its constructor's keyword arguments (:func:`runner.core.plugin.arguments_model`). A benchmark that declares
    nothing gets what its constructor names: ``model``, ``model_base_url``, ``judge_model``, ``data_dir``.

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

    @property
    def scoring_version(self) -> str | None:
        """What two runs of this benchmark must share to be compared item by item: their items and how each is
        scored, whatever model answers (see the class). Default: :attr:`version`, for a benchmark whose version does
        not depend on the model."""
        return self.version

    def prepare(self) -> None:
        """Load or verify data before a run writes anything; raise ``BenchmarkError`` with the fix on failure."""

    def size(self) -> int | None:
        """The number of tasks if known without iterating (``len(self)`` when defined), else ``None``."""
        try:
            return len(self)  # type: ignore[arg-type]
        except TypeError:
            return None

    def items_in_flight(self) -> int | None:
        """The items each worker should hold in flight to fill the benchmark's model batches, the default of
        ``--concurrency`` when the run sets none; ``None`` (the default): no opinion."""
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

    def local_code(self) -> LocalCode | None:
        """The Python modules of the user's own folders that a worker needs to rebuild this benchmark and score its
        tasks (:mod:`runner.core.local_code`): by default those of the folder of the benchmark's module when it is
        no installed package (``-b my_bench:MyBenchmark`` from a local file), that module the entry a worker
        imports at once; ``None`` for the runner's own benchmarks."""
        return code_of_module(type(self).__module__)

    def __reduce_ex__(self, protocol: Any) -> str | tuple[Any, ...]:
        # The benchmark's own code first: unpickled, it makes its modules importable where its class is imported.
        return with_code(super().__reduce_ex__(protocol), self.local_code())


class RecordsBenchmark(BenchmarkBase, Generic[R]):
    """A benchmark whose tasks are made one per record of data loaded once, on first need (ACEBench, BFCL, GAIA,
    HotpotQA).

    A subclass defines :meth:`load_records` (read and check the data; the records in task order) and
    :meth:`make_task`; this class gives :meth:`prepare`, :meth:`records`, ``len()`` and iteration on them.
    Construction stays cheap, as :class:`BenchmarkBase` asks. Pickling (Ray sends the benchmark to every worker, for
    :meth:`~BenchmarkBase.reference` and the headline) leaves the records out, and the attributes named in
    :attr:`transient`: a copy that needs them loads them again.
    """

    transient: tuple[str, ...] = ()
    """Attributes set by :meth:`load_records` that a pickled copy leaves out (set to ``None``), besides the records."""

    _records: list[R] | None = None

    @abstractmethod
    def load_records(self) -> list[R]:
        """Read and check the data; the records, in task order.

        Raises:
            BenchmarkError: the data is missing, unreadable or not the benchmark's (one line, with the fix).
        """

    @abstractmethod
    def make_task(self, record: R) -> Task:
        """The task of one record."""

    def prepare(self) -> None:
        """Load the records (:meth:`load_records`) unless they are loaded; raises what it raises."""
        if self._records is None:
            self._records = self.load_records()

    def records(self) -> list[R]:
        """The records, loaded on first use."""
        self.prepare()
        assert self._records is not None
        return self._records

    def __len__(self) -> int:
        return len(self.records())

    def __iter__(self) -> Iterator[Task]:
        for record in self.records():
            yield self.make_task(record)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_records", *self.transient):
            state[name] = None
        return state
