"""The evaluators users call: ``GeneralEvaluator`` (sequential) and ``RayEvaluator`` (a pool of Ray actors).

They keep AgentScope's constructor forms and run every item through the same engine, then build the report::

    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage())
    summary = await evaluator.run()

    evaluator = GeneralEvaluator(name="toy", benchmark=ToyBenchmark(), n_repeat=3, storage=FileEvaluatorStorage("runs/x"))
    summary = await evaluator.run(solve)

    evaluator = RayEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage(),
                             max_workers=4)

Ray itself is imported only when a ``RayEvaluator`` runs, so ``from runner import RayEvaluator`` costs nothing.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from rich.console import Console

from runner.core.benchmark import BenchmarkBase
from runner.core.config import WorkerSpec, format_validation_error
from runner.core.errors import ConfigError
from runner.engine.run import Executor, RunOutcome, RunRequest, execute_run
from runner.engine.sequential import SequentialExecutor
from runner.engine.solution import SolutionSpec, describe
from runner.report import Summary, build_report, render
from runner.storage.store import ResultStore


class EvaluatorBase:
    """Run a benchmark with a solution, store every record, and report.

    Args:
        name: a name for the evaluation (AgentScope's first argument; informational).
        benchmark: the :class:`BenchmarkBase` to run.
        n_repeat: repeats per task (>= 1); pass@k is reported when > 1.
        storage: a :class:`ResultStore` / ``FileEvaluatorStorage``; ``None`` for ``./runs/<benchmark>-<timestamp>``.
        solution_func: the solution (the seed's form); or pass it to :meth:`run` (AgentScope v1's form). A
            function ``(task)`` or ``(task, context)``, sync or async; a class or ``@solution_factory`` is built
            once per worker; a :class:`SolutionSpec` is used as is.
        timeout: seconds per solution call, or ``None``.
        limit: only the first ``limit`` tasks.
        retry_errors: extra tries when the solution raises.
        force: delete earlier records at the storage URI and start over.
        rerun_errors: run again the items whose record is an error or a timeout (the old records move to
            ``retired/``).
        show: print the summary table when the run ends.
        fingerprint_fields: what identifies the configuration for resume (default: benchmark and solution names).
        config: the configuration stored in ``run.json``.

    Raises:
        ConfigError: a missing benchmark, ``n_repeat < 1``, or no solution at :meth:`run`.
    """

    executor_name = "base"

    def __init__(
        self,
        name: str | None = None,
        benchmark: BenchmarkBase | None = None,
        n_repeat: int = 1,
        storage: ResultStore | None = None,
        *,
        solution_func: Any = None,
        timeout: float | None = None,
        limit: int | None = None,
        retry_errors: int = 0,
        force: bool = False,
        rerun_errors: bool = False,
        show: bool = True,
        progress_bar: bool | None = None,
        fingerprint_fields: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(benchmark, BenchmarkBase):
            raise ConfigError(f"benchmark must be a BenchmarkBase instance, got {type(benchmark).__name__}")
        if n_repeat < 1:
            raise ConfigError(f"n_repeat must be at least 1, got {n_repeat}")
        self.name = name or benchmark.name
        self.benchmark = benchmark
        self.n_repeat = n_repeat
        self.storage = storage if storage is not None else ResultStore()
        self.solution_func = solution_func
        self.timeout = timeout
        self.limit = limit
        self.retry_errors = retry_errors
        self.force = force
        self.rerun_errors = rerun_errors
        self.show = show
        self.progress_bar = progress_bar
        self.fingerprint_fields = fingerprint_fields
        self.config = config
        self.outcome: RunOutcome | None = None

    def make_executor(self) -> Executor:
        """The executor that runs the items."""
        raise NotImplementedError

    def _spec(self, solution: Any) -> SolutionSpec:
        chosen = solution if solution is not None else self.solution_func
        if chosen is None:
            raise ConfigError("no solution: pass solution_func= to the evaluator or a solution to run()")
        return chosen if isinstance(chosen, SolutionSpec) else SolutionSpec(target=chosen, name=describe(chosen))

    async def run(self, solution: Any = None) -> Summary:
        """Run every item without a record, then aggregate all records into ``summary.json`` and ``results.csv``.

        Returns:
            the :class:`Summary` (also printed when ``show``).

        Raises:
            RunnerError: bad input, before anything is written.
        """
        spec = self._spec(solution)
        fields = self.fingerprint_fields or {
            "benchmark": f"{describe(type(self.benchmark))}[{self.benchmark.name}]",
            "solution": spec.display,
        }
        request = RunRequest(
            benchmark=self.benchmark,
            solution=spec,
            store=self.storage,
            repeats=self.n_repeat,
            limit=self.limit,
            timeout=self.timeout,
            retry_errors=self.retry_errors,
            force=self.force,
            rerun_errors=self.rerun_errors,
            fingerprint_fields=fields,
            config=self.config or {"name": self.name, "benchmark": self.benchmark.name, "solution": spec.display},
            progress_bar=self.progress_bar,
        )
        self.outcome = await execute_run(request, self.make_executor())
        summary = build_report(self.storage, self.benchmark)
        if self.show:
            render(summary, Console(), storage=self.storage.uri)
        return summary


class GeneralEvaluator(EvaluatorBase):
    """Sequential evaluation in this process, one item at a time: the debugging mode.

    ``n_workers`` (AgentScope v1) is accepted for compatibility and ignored: use ``RayEvaluator`` for parallelism.
    """

    executor_name = "sequential"

    def __init__(self, name: str | None = None, benchmark: BenchmarkBase | None = None, n_repeat: int = 1,
                 storage: ResultStore | None = None, n_workers: int = 1, **options: Any) -> None:
        super().__init__(name, benchmark, n_repeat, storage, **options)
        self.n_workers = n_workers

    def make_executor(self) -> Executor:
        """A :class:`SequentialExecutor`."""
        return SequentialExecutor()


_WORKER_SHORTCUTS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "max_concurrency",
                     "max_attempts")


class RayEvaluator(EvaluatorBase):
    """Distributed evaluation on a pool of Ray actors, each with the worker spec's resources.

    Every constructor form of :class:`GeneralEvaluator` works, plus AgentScope's worker counts::

        RayEvaluator(benchmark=b, solution_func=solve, storage=FileEvaluatorStorage(), max_workers=4)
        RayEvaluator("toy", b, 3, FileEvaluatorStorage("runs/x"), 4)      # name, benchmark, n_repeat, storage,
        await evaluator.run(solve)                                        # n_workers (AgentScope v1)
        RayEvaluator(benchmark=b, solution_func=Agent, num_gpus=1, max_concurrency=8, ray_address="auto")

    Args:
        name, benchmark, n_repeat, storage: as for :class:`EvaluatorBase`.
        n_workers, max_workers: number of actors (AgentScope's two names for ``WorkerSpec.num_workers``);
            default: as many as the cluster's nodes fit.
        worker: the full :class:`WorkerSpec`; the keyword shortcuts below override its fields.
        num_cpus, num_gpus (fractions allowed), memory (bytes, or a string such as ``"8GiB"``), resources (custom
            Ray resources), accelerator_type (e.g. ``"A100"``), max_concurrency (items in flight per actor),
            max_attempts (executions of an item before a dying worker makes it an error record).
        ray_address: the cluster to attach to; default ``RAY_ADDRESS`` if set, else an embedded Ray.
        **options: :class:`EvaluatorBase` options (``timeout`` in seconds, ``limit``, ``retry_errors``, ``force``,
            ``show``...). ``retry_errors`` defaults to the worker spec's.

    Raises:
        ConfigError: a worker option that does not validate, or the base class's errors.
        RayUnavailable: at :meth:`run`, when Ray is missing or the address unreachable (before anything is written).
    """

    executor_name = "ray"

    def __init__(
        self,
        name: str | None = None,
        benchmark: BenchmarkBase | None = None,
        n_repeat: int = 1,
        storage: ResultStore | None = None,
        n_workers: int | None = None,
        *,
        max_workers: int | None = None,
        worker: WorkerSpec | None = None,
        ray_address: str | None = None,
        **options: Any,
    ) -> None:
        fields = (worker or WorkerSpec()).model_dump(exclude_unset=True)
        for key in _WORKER_SHORTCUTS:
            if options.get(key) is not None:
                fields[key] = options.pop(key)
            else:
                options.pop(key, None)
        count = n_workers if n_workers is not None else max_workers
        if count is not None:
            fields["num_workers"] = count
        try:
            self.worker = WorkerSpec.model_validate(fields)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "RayEvaluator worker options")) from None
        options.setdefault("retry_errors", self.worker.retry_errors)
        super().__init__(name, benchmark, n_repeat, storage, **options)
        self.ray_address = ray_address
        self.executor: Executor | None = None

    def make_executor(self) -> Executor:
        """A ``RayExecutor`` whose cluster address was checked (in seconds, starting nothing); the run then has it
        attach or start Ray and size its pool before anything is written, and only when there is work."""
        from runner.engine.ray_executor import RayExecutor

        executor = RayExecutor(self.worker, self.ray_address)
        executor.preflight()
        self.executor = executor
        return executor
