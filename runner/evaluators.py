"""The evaluators users call: ``GeneralEvaluator`` (sequential) and ``RayEvaluator`` (a pool of Ray actors).

They keep AgentScope's constructor forms, build the same :class:`RunRequest` the CLI builds, run it through the
engine and report (:func:`evaluate`)::

    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage())
    summary = await evaluator.run()

    evaluator = GeneralEvaluator(name="toy", benchmark=ToyBenchmark(), n_repeat=3, storage=FileEvaluatorStorage("runs/x"))
    summary = await evaluator.run(solve)

    evaluator = RayEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage(),
                             max_workers=4)

Ray itself is imported only when a ``RayEvaluator`` runs, so ``from runner import RayEvaluator`` costs nothing.
"""

from __future__ import annotations

import os
from typing import Any

import structlog
from pydantic import ValidationError

from runner import log
from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig, WorkerSpec, format_validation_error, renamed
from runner.core.errors import BudgetExhausted, ConfigError, MatrixIncomplete, ServerStop, one_line
from runner.core.matrix import MatrixConfig
from runner.core.solution import SolutionSpec, describe
from runner.engine.matrix.request import MatrixRequest
from runner.engine.matrix.run import MatrixOutcome, execute_matrix
from runner.engine.request import RunRequest
from runner.engine.run import Executor, RunOutcome, execute_run
from runner.report import (
    MatrixReport,
    Summary,
    build_report,
    render,
    render_matrix,
    report_matrix,
    write_html_report,
)
from runner.report.table import default_console
from runner.storage.store import ResultStore


async def evaluate(request: RunRequest, *, show: bool = True, executor: Executor | None = None,
                   html: bool = False) -> tuple[Summary, RunOutcome]:
    """Run ``request`` (every item without a record), then aggregate all records into ``summary.json`` and
    ``results.csv``: what the CLI's ``run`` and every evaluator do.

    Args:
        request: what to run.
        show: print the summary table.
        executor: who runs it; default: the one the request's settings name.
        html: also write ``report.html`` in the run directory (:func:`~runner.report.write_html_report`) and, with
            ``show``, print where it is.

    Returns:
        the :class:`Summary` and what the run did.

    Raises:
        RunnerError: bad input, before anything is written.
        StorageError: a record cannot be written mid-run (finished records stay; the same call resumes).
        RunStopped: the run stopped after writing started (exit status 3): a model server that fails every call
            the same way (``ServerStop``: another protocol, HTTP 429 refusals; the summary of the records written so
            far is written first), a storage outage, another driver taking the run over.
        BudgetExhausted: the run's budget is spent (``summary.json`` holds the records written so far; the same
            call with a larger budget resumes).
    """
    try:
        outcome = await execute_run(request, executor)
    except (BudgetExhausted, ServerStop):
        # The records written so far are the run's results until it resumes: report them (after a storage fault
        # the store is what failed, so nothing more is written there).
        _report(request, show, html)
        raise
    return _report(request, show, html), outcome


async def evaluate_matrix(request: MatrixRequest, *, show: bool = True,
                          html: bool = False) -> tuple[MatrixReport, MatrixOutcome]:
    """Run every cell of ``request`` (:func:`~runner.engine.matrix.run.execute_matrix`), then report each cell and
    the matrix (:func:`~runner.report.matrix.report_matrix`: every cell's ``summary.json`` and ``report.html``,
    ``matrix.json``'s headlines, ``matrix.csv``, ``matrix.html``): what the CLI's ``matrix`` and
    :class:`MatrixEvaluator` do.

    Args:
        show: print the models x benchmarks table of headlines (and, with ``html``, where ``matrix.html`` is).

    Raises:
        RunnerError: bad input, before anything is written (any cell's).
        MatrixIncomplete: some cell could not finish (its model did not load, its server failed every call the same
            way, none of its items succeeded): exit status 3 after the report; the same call resumes.
        BudgetExhausted: the budget is spent (after the report; a larger budget resumes).
        RunStopped: a fault of the whole matrix (storage, a lost lease).
    """
    outcome = await execute_matrix(request)
    report = report_matrix(request.root)
    reported = {cell.path: cell for cell in report.cells}
    for cell_outcome in outcome.cells:
        seen = reported.get(cell_outcome.plan.path)
        if seen is not None and seen.status == "failed" and cell_outcome.status == "done":
            # Every record an error: no score (runner.report.matrix.no_answer), a cell that could not finish.
            cell_outcome.status, cell_outcome.error = "failed", seen.error
    if show:
        console = default_console()
        render_matrix(report, console)
        if html and report.page:
            console.print(f"report: {report.page}", markup=False, soft_wrap=True)
    if outcome.budget_stopped:
        done = sum(cell.done for cell in outcome.cells)
        total = sum(cell.total or 0 for cell in outcome.cells)
        raise BudgetExhausted(f"the budget is spent: {outcome.budget_line}; {done} of {total} items of the matrix "
                              "are done; run the same command with a larger budget to resume")
    if outcome.incomplete:
        first = outcome.incomplete[0]
        failed = any(cell.status == "failed" for cell in outcome.incomplete)
        raise MatrixIncomplete(
            f"{len(outcome.incomplete)} of {len(outcome.cells)} cells could not finish (cell {first.plan.name}: "
            f"{one_line(first.error or first.status, 300)}); the other cells are done; fix the cause and run the same "
            f"command to resume{' (with --rerun-failed to run the failed items again)' if failed else ''}")
    return report, outcome


def _report(request: RunRequest, show: bool, html: bool) -> Summary:
    """``summary.json`` and ``results.csv`` of the run's records (and ``report.html``), printed with ``show``.

    Record files that cannot be read are logged (``run.unreadable_records``): a resume takes every item with a
    record file as done without reading it, so this says how many of them are damaged and how to run them again.
    """
    summary = build_report(request.store, request.benchmark)
    if summary.unreadable_records:
        structlog.get_logger("runner").warning(
            "run.unreadable_records", files=summary.unreadable_records,
            detail=f"{summary.unreadable_records} record file(s) cannot be read (damaged outside the runner): their "
            "items count as missing, and a resume does not run them; run the same command with --rerun-failed to "
            "run them again")
    page = write_html_report(request.store, summary) if html else None
    if show:
        console = default_console()
        render(summary, console, storage=request.store.uri)
        if page:
            console.print(f"report: {page}", markup=False, soft_wrap=True)
    return summary


class EvaluatorBase:
    """Run a benchmark with a solution, store every record, and report.

    Args:
        name: a name for the evaluation (AgentScope's first argument; informational).
        benchmark: the :class:`BenchmarkBase` to run, or the name of one (``"hotpotqa"``, ``module:Class``: see
            ``python -m runner list``), built as the CLI builds it (with ``benchmark_args``, ``data_dir`` and the
            judge defaults).
        n_repeat: repeats per task (>= 1); pass@k is reported when > 1.
        storage: a :class:`ResultStore` / ``FileEvaluatorStorage``, or its URI (a path, ``s3://bucket/prefix``, any
            fsspec URL: a ``ResultStore`` of it); ``None`` for ``./runs/<benchmark>-<timestamp>``.
        solution_func: the solution (the seed's form); or pass it to :meth:`run` (AgentScope v1's form). A
            function ``(task)`` or ``(task, context)``, sync or async; a class or ``@solution_factory`` is built
            once per worker; a :class:`SolutionSpec` is used as is; a name (``"hotpotqa-reader"``) is resolved as
            the CLI resolves ``--solution`` (with ``solution_args`` and ``model``).
        show: print the summary table when the run ends.
        progress_bar: draw a progress bar (``None``: when stderr is a terminal).
        fingerprint_fields: what identifies the configuration for resume (default: benchmark and solution names).
        config: the configuration stored in ``run.json``.
        **settings: any other field of :class:`~runner.core.config.RunConfig` (``docs/settings.md`` lists them),
            e.g. ``timeout`` (seconds per solution call), ``limit``, ``solution_retries``, ``force``,
            ``rerun_failed`` (``retry_errors`` and ``rerun_errors``, their former names, still work with a
            deprecation warning), the models (``model``, ``judge_model``...), model traffic (``max_rpm``,
            ``max_tpm``, ``max_connections``, ``model_limits``, ``max_tokens``, ``max_cost``, ``prices``, ``cache``,
            ``cache_policy``: a spent budget raises :class:`~runner.core.errors.BudgetExhausted` after the summary
            is written), served models (``serve``).

    Raises:
        ConfigError: a missing benchmark, ``n_repeat < 1``, a storage that is neither a store nor a URI, a setting
            that does not validate, or no solution at :meth:`run`.
    """

    default_executor = "sequential"
    """The executor of :data:`runner.registry.EXECUTORS` this evaluator runs on."""

    def __init__(
        self,
        name: str | None = None,
        benchmark: BenchmarkBase | str | None = None,
        n_repeat: int = 1,
        storage: ResultStore | str | os.PathLike[str] | None = None,
        *,
        solution_func: Any = None,
        show: bool = True,
        progress_bar: bool | None = None,
        fingerprint_fields: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(benchmark, (BenchmarkBase, str)):
            raise ConfigError(f"benchmark must be a BenchmarkBase instance or a benchmark's name, got "
                              f"{type(benchmark).__name__}")
        if n_repeat < 1:
            raise ConfigError(f"n_repeat must be at least 1, got {n_repeat}")
        settings = renamed(settings, "{old}= is deprecated; use {new}=")
        self.storage = _store_of(storage, settings.get("storage_options"))
        self._storage_uri = os.fspath(storage) if isinstance(storage, (str, os.PathLike)) else (
            self.storage.uri if self.storage.has_uri else None)
        given = {key: value for key, value in settings.items() if value is not None}
        self.run_config = self._config({"executor": self.default_executor, **given, "repeats": n_repeat,
                                        "benchmark": benchmark if isinstance(benchmark, str) else benchmark.name})
        self.settings = self.run_config.settings()
        self.name = name or self.run_config.benchmark
        self.benchmark = benchmark
        self.n_repeat = n_repeat
        self.solution_func = solution_func
        self.show = show
        self.progress_bar = progress_bar
        self.fingerprint_fields = fingerprint_fields
        self.config = config
        self.outcome: RunOutcome | None = None
        self.executor: Executor | None = None

    def _config(self, data: dict[str, Any]) -> RunConfig:
        """The evaluation's :class:`RunConfig`, its storage the store's URI.

        Raises:
            ConfigError: a field that does not validate, or a keyword that is no setting.
        """
        data = {**data, "storage": self._storage_uri}
        try:
            return RunConfig.model_validate(data)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, f"{type(self).__name__} options")) from None

    def request(self, solution: Any = None) -> RunRequest:
        """The :class:`RunRequest` of this evaluation with ``solution`` (default: ``solution_func``), built by the
        CLI's builder (:meth:`RunRequest.from_config`): a benchmark and a solution given by name make the very
        request of the same ``python -m runner`` flags.

        Raises:
            ConfigError: no solution, or what the builder refuses.
        """
        chosen = solution if solution is not None else self.solution_func
        config = self.run_config
        if isinstance(chosen, str):
            config = self._config({**config.model_dump(exclude_unset=True), "solution": chosen})
        elif chosen is None and config.solution is None and config.model is None:
            raise ConfigError("no solution: pass solution_func= to the evaluator or a solution to run()")
        spec = None if chosen is None or isinstance(chosen, str) else (
            chosen if isinstance(chosen, SolutionSpec) else SolutionSpec(target=chosen, name=describe(chosen)))
        benchmark = self.benchmark if isinstance(self.benchmark, BenchmarkBase) else None
        fields, record = self.fingerprint_fields, self.config
        if benchmark is not None or spec is not None:
            shown = spec.display if spec is not None else config.solution
            fields = fields or {"benchmark": f"{describe(type(benchmark))}[{benchmark.name}]" if benchmark else
                                config.benchmark, "solution": shown}
            record = record or {"name": self.name, "benchmark": config.benchmark, "solution": shown}
        return RunRequest.from_config(config, benchmark=benchmark, solution=spec, store=self.storage,
                                      fingerprint_fields=fields, record=record, progress_bar=self.progress_bar)

    async def run(self, solution: Any = None) -> Summary:
        """Run every item without a record, then aggregate all records into ``summary.json`` and ``results.csv``.

        Logs warnings and errors only, unless structlog was configured before
        (:func:`runner.log.configure_unless_configured`).

        Returns:
            the :class:`Summary` (also printed when ``show``).

        Raises:
            RunnerError: bad input, before anything is written.
        """
        request = self.request(solution)
        self.executor = request.executor
        log.configure_unless_configured()
        summary, self.outcome = await evaluate(request, show=self.show)
        return summary


def _store_of(storage: ResultStore | str | os.PathLike[str] | None,
              options: dict[str, Any] | None = None) -> ResultStore:
    """The store of an evaluator's ``storage`` argument: a store as it is, a URI or path as a store of it (with the
    fsspec ``options`` of the ``storage_options`` setting).

    Raises:
        ConfigError: anything else.
    """
    if storage is None:
        return ResultStore(None, options)
    if isinstance(storage, ResultStore):
        return storage
    if isinstance(storage, (str, os.PathLike)):
        return ResultStore(os.fspath(storage), options)
    raise ConfigError(f"storage must be a ResultStore (FileEvaluatorStorage) or a URI such as 'runs/x', got "
                      f"{type(storage).__name__}")


class GeneralEvaluator(EvaluatorBase):
    """Sequential evaluation in this process, one item at a time: the debugging mode.

    ``n_workers`` (AgentScope v1) is accepted for compatibility and ignored: use ``RayEvaluator`` for parallelism.
    """

    default_executor = "sequential"

    def __init__(self, name: str | None = None, benchmark: BenchmarkBase | None = None, n_repeat: int = 1,
                 storage: ResultStore | str | os.PathLike[str] | None = None, n_workers: int = 1,
                 **options: Any) -> None:
        super().__init__(name, benchmark, n_repeat, storage, **options)
        self.n_workers = n_workers


_WORKER_SHORTCUTS = tuple(name for name in WorkerSpec.model_fields if name != "num_workers")
"""The :class:`WorkerSpec` fields a ``RayEvaluator`` takes as keyword arguments (``num_workers`` is AgentScope's
``n_workers`` / ``max_workers``)."""


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
        num_cpus, num_gpus (fractions allowed), memory (bytes, or a string such as ``"8GiB"``: reserved for Ray's
            scheduler only), memory_limit (bytes each worker process may use, enforced), resources (custom Ray
            resources), accelerator_type (e.g. ``"A100"``), max_concurrency (items in flight per actor),
            max_attempts (executions of an item before a dying worker makes it an error record),
            placement_timeout (seconds to wait, with no worker running, for workers to get their resources).
        ray_address: the cluster to attach to; default ``RAY_ADDRESS`` if set, else an embedded Ray.
        **options: :class:`EvaluatorBase` options (``timeout`` in seconds, ``limit``, ``solution_retries``,
            ``force``, ``show``...).

    Raises:
        ConfigError: a worker option that does not validate, or the base class's errors.
        RayUnavailable: at :meth:`run`, when Ray is missing or the address unreachable (before anything is written).
    """

    default_executor = "ray"

    def __init__(
        self,
        name: str | None = None,
        benchmark: BenchmarkBase | None = None,
        n_repeat: int = 1,
        storage: ResultStore | str | os.PathLike[str] | None = None,
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
            spec = WorkerSpec.model_validate(fields)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "RayEvaluator worker options")) from None
        super().__init__(name, benchmark, n_repeat, storage, worker=spec, ray_address=ray_address, **options)
        self.worker = spec
        self.ray_address = ray_address


class MatrixEvaluator:
    """An evaluation matrix from Python: models (or checkpoint globs) x benchmarks in one job, built by the CLI's
    builder (:meth:`MatrixRequest.from_config <runner.engine.matrix.request.MatrixRequest.from_config>`)::

        evaluator = MatrixEvaluator(models=["transformers:smollm2-135m-instruct",
                                            {"model": "transformers:/ckpts/run42/step_*"}],
                                    benchmarks=[{"benchmark": "hotpotqa", "args": {"answer_only": True},
                                                 "solution": "hotpotqa-reader", "limit": 20}],
                                    baseline="transformers:smollm2-135m-instruct", storage="runs/sweep",
                                    judge_model="none", worker={"num_workers": 2})
        report = await evaluator.run()        # report.cells: each cell's summary and headline

    Args:
        models: each a model name as ``--model`` takes it (a glob names one model per checkpoint folder) or a
            mapping with ``model`` and run settings for its cells (``engine_args``, ``limit``...).
        benchmarks: each a benchmark name or a mapping with ``benchmark``, ``args``, ``solution``,
            ``solution_args`` and run settings for its cells.
        baseline: the model every other one is compared with, cell by cell.
        watch: keep evaluating checkpoints as they appear (``{"every": 300, "ready_file": ..., "until": ...}``).
        show: print the table of headlines.
        **settings: the run settings of every cell and of the whole matrix (``storage``, ``worker``, ``executor``,
            ``judge_model``, ``limit``, ``max_tokens``...: ``docs/settings.md``).

    Raises:
        ConfigError: the matrix does not validate (at construction), or a cell refuses (at :meth:`run`).
    """

    def __init__(self, models: list[Any], benchmarks: list[Any], *, baseline: str | None = None,
                 watch: dict[str, Any] | None = None, show: bool = True, **settings: Any) -> None:
        data: dict[str, Any] = {"models": models, "benchmarks": benchmarks, **settings}
        if baseline is not None:
            data["baseline"] = baseline
        if watch is not None:
            data["watch"] = watch
        try:
            self.config = MatrixConfig.model_validate(data)
        except ValidationError as err:
            raise ConfigError(format_validation_error(err, "MatrixEvaluator options")) from None
        self.show = show
        self.outcome: MatrixOutcome | None = None

    def request(self) -> MatrixRequest:
        """The :class:`MatrixRequest` of this matrix (the CLI's builder).

        Raises:
            ConfigError: a cell refuses (naming it).
        """
        return MatrixRequest.from_config(self.config)

    async def run(self) -> MatrixReport:
        """Run every cell without all its records, then report the matrix.

        Raises:
            MatrixIncomplete: some cell could not finish (after the report).
            BudgetExhausted: the budget is spent (after the report).
        """
        log.configure_unless_configured()
        report, self.outcome = await evaluate_matrix(self.request(), show=self.show)
        return report
