"""What to run: a :class:`RunRequest` holds the resolved benchmark, the solution recipe, the store and the run's
settings.

It is the one shape between the faces and the engine, and :meth:`RunRequest.from_config` is its one builder: the
CLI's ``run`` and ``submit`` call it with the :class:`RunConfig` of the flags and file, the evaluators
(``GeneralEvaluator``, ``RayEvaluator``) with the :class:`RunConfig` of their keywords and the objects they were
given (a benchmark, a solution, a store) in place of names. Names are resolved through :mod:`runner.registry` once,
the model and judge defaults settled from the environment (:func:`model_defaults`), and the changes of the
configuration validated once, together (:func:`changed`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner import registry
from runner.core import plugin
from runner.core.benchmark import BenchmarkBase
from runner.core.config import RunConfig, RunSettings, build_config
from runner.core.errors import ConfigError
from runner.core.limits import model_key
from runner.core.solution import SolutionSpec
from runner.serving import ReplicaSpec, default_concurrency, model_environment, replica_specs
from runner.storage.store import ResultStore

if TYPE_CHECKING:
    from runner.engine.run import Executor

MODEL_ENV = "AGENT_CHAT_MODEL_NAME"
"""The environment variable naming the agent's model when ``--model`` is not given (as on BeeAI's evaluation page)."""

JUDGE_ENV = "EVAL_CHAT_MODEL_NAME"
"""The environment variable naming the judge model when ``--judge-model`` is not given (as on BeeAI's evaluation
page)."""

NO_JUDGE = "none"
"""``--judge-model none``: no judge, so the benchmark's LLM-judged metrics are left out (BeeAI's default judge is the
agent's model, which doubles a run's model calls)."""

JUDGE_ARGS = ("judge_model", "judge_base_url")
"""The benchmark constructor arguments that carry the judge."""

MODEL_FIELDS = ("model", "model_base_url", "user_model", "user_model_base_url", "judge_model", "judge_base_url")
"""The :class:`RunConfig` fields that name a run's models and their servers."""


@dataclass
class RunRequest:
    """A run, resolved: what :func:`~runner.engine.run.execute_run` executes.

    Args:
        benchmark: the benchmark.
        solution: the solution recipe (built once per worker).
        store: the run's store (``./runs/<benchmark>-<UTC timestamp>`` is bound if it has no URI).
        settings: repeats, limit, timeout (seconds), solution retries, force, rerun_failed, the executor's name, the
            Ray address and the worker spec (:class:`RunSettings`).
        fingerprint_fields: what identifies the configuration (see :meth:`RunConfig.fingerprint_fields`).
        config: the configuration kept in ``run.json`` (never storage options), with the model and judge defaults
            settled.
        progress_bar: draw a bar (``None``: when stderr is a terminal).
        executor: who runs it (``None``: the one ``settings.executor`` names, built when the run starts).
        replicas: the models the run serves itself (:func:`runner.serving.replica_specs`): each worker (the driver,
            when sequential) starts one replica of each before it takes items.
        weights: with a response cache (``--cache``), model name -> the digest of the checkpoint folder its name
            points at (:func:`~runner.engine.matrix.checkpoints.weights_of`), which the cache's keys take: a
            checkpoint rewritten in place is asked anew, never answered from its old weights' replies.
    """

    benchmark: BenchmarkBase
    solution: SolutionSpec
    store: ResultStore
    settings: RunSettings = field(default_factory=RunSettings)
    fingerprint_fields: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    progress_bar: bool | None = None
    executor: Executor | None = None
    replicas: tuple[ReplicaSpec, ...] = ()
    weights: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: RunConfig, *, benchmark: BenchmarkBase | None = None,
                    solution: SolutionSpec | None = None, store: ResultStore | None = None,
                    fingerprint_fields: dict[str, Any] | None = None, record: dict[str, Any] | None = None,
                    progress_bar: bool | None = None, weights: dict[str, str] | None = None) -> RunRequest:
        """The one builder of a run: the CLI (``run``, ``submit``) and the evaluators call it with a validated
        :class:`RunConfig`, the evaluators with the objects they were given in place of names.

        Each name is resolved once (the benchmark's class, the solution's target); the model and judge defaults
        are settled from the environment (:func:`model_defaults`); the benchmark is built with its judge, the
        solution recipe checked once (:meth:`SolutionSpec.check`), the replicas chosen (:func:`replica_specs`) and
        the items in flight that fill their batches set; these changes of the configuration are validated once,
        together (:func:`changed`); then the store is opened and the executor the configuration names built (which
        starts nothing). Nothing is written and nothing started.

        Args:
            config: what to run and how; its ``benchmark`` (and ``solution``) name what ``benchmark`` (and
                ``solution``) stand for when those are given.
            benchmark: a benchmark object in place of ``config.benchmark`` (the Python API): used as it is, so the
                judge defaults do not apply (its constructor took its judge).
            solution: a solution recipe in place of ``config.solution``.
            store: the run's store in place of ``config.storage``.
            fingerprint_fields: what identifies the configuration for a resume; default
                :meth:`RunConfig.fingerprint_fields` (the evaluators pass an object's class and the solution's
                name).
            record: the configuration kept in ``run.json``; default: ``config`` with its defaults settled (never
                storage options).
            progress_bar: draw a bar (``None``: as ``config.progress`` says).
            weights: digests of models' weights already read (a matrix's checkpoints, digested when their glob was
                listed), which :attr:`weights` takes instead of reading the folders again.

        Raises:
            PluginError: an unknown benchmark, solution or executor, or an import path that does not import.
            BenchmarkError: benchmark arguments it does not accept.
            ConfigError: solution arguments it does not take, a missing model, a judge for a benchmark without
                judged metrics, ``max_cost`` without a price for one of the run's models.
        """
        executor_class = registry.executor_class(config.executor)
        # The judge decides which metrics the tasks carry, so the model and judge are settled from the benchmark's
        # class before the benchmark is built with them.
        target = type(benchmark) if benchmark is not None else registry.resolve(
            config.benchmark, registry.available_benchmarks(), "benchmark")[0]
        solution_target = None if solution is not None else _solution_target(config, target)
        update = model_defaults(config, target, solution_target, judge=benchmark is None)
        # What follows reads the settled names before the one validation below: no validator rewrites a model's name.
        settled = config.model_copy(update=update)
        _check_prices(settled)
        if benchmark is None:
            benchmark = registry.build_benchmark(config.benchmark, {**config.benchmark_args, **judge_args(settled)},
                                                 config.data_dir, run_models=run_models(settled), target=target)
        if solution is None:
            solution = registry.solution_spec(config.solution, config.solution_args, settled.model, benchmark,
                                              config.model_base_url, config.user_model, config.user_model_base_url,
                                              target=solution_target)
        solution.check()
        replicas = tuple(replica_specs(settled, in_process=solution.in_process_providers,
                                       any_model=solution_target is None))
        update.update(_concurrency(config, replicas, benchmark))
        config = changed(config, **update) if update else config
        settings = config.settings()
        return cls(
            benchmark=benchmark,
            solution=solution,
            store=store if store is not None else ResultStore(config.storage, config.storage_options),
            settings=settings,
            fingerprint_fields=fingerprint_fields if fingerprint_fields is not None else config.fingerprint_fields(),
            config=record if record is not None else config.model_dump(
                mode="json", exclude={"storage_options", "force", "rerun_failed", "take_over"}),
            progress_bar=progress_bar if progress_bar is not None else {"on": True, "off": False}.get(config.progress),
            executor=executor_class.from_settings(settings),
            replicas=replicas,
            weights=_weights(config, weights or {}) if config.cache is not None and config.cache_policy != "off"
            else {},
        )

    def models(self) -> dict[str, str | None]:
        """The run's models and servers as its configuration settled them (:data:`MODEL_FIELDS`; ``None`` where
        unset), for a preflight check; a model the run serves itself is left out (its replicas start in the
        workers, and are checked there before they take items), and so is one the solution loads in its own
        process (:attr:`SolutionSpec.in_process_providers`)."""
        served = {spec.model for spec in self.replicas}
        agent = self.config.get("model")
        if agent and model_key(agent).partition(":")[0] in self.solution.in_process_providers:
            served.add(agent)  # loaded by the solution in each worker: no server to check
        found = {name: self.config.get(name) for name in MODEL_FIELDS}
        for model, url in (("model", "model_base_url"), ("user_model", "user_model_base_url"),
                           ("judge_model", "judge_base_url")):
            if found[model] in served and found[url] is None:
                found[model] = None
        return found

    def model_environment(self) -> dict[str, str]:
        """What the run's replicas need from this environment (``HF_TOKEN``, the model cache...): captured on the
        driver, handed to every worker (:func:`runner.serving.model_environment`); empty without replicas. It
        holds secrets: never written or logged."""
        return model_environment() if self.replicas else {}

    def preflight(self) -> None:
        """Check the run's models before anything is written: each provider known, its API key set, its server
        answering with the OpenAI shape (the model layer's check, through :func:`runner.registry.check_models`).

        Raises:
            ConfigError: an unknown provider or a missing API key.
            RunnerError: a model server that refuses, rejects the key, lacks the model or speaks another protocol.
        """
        registry.check_models(**self.models())


def _solution_target(config: RunConfig, benchmark: Any) -> Any:
    """The solution the configuration names, resolved once: ``config.solution``, else the benchmark's declared
    ``default_solution`` (its model-driven agent, :mod:`runner.core.plugin`); ``None`` when it names none.

    Raises:
        PluginError: the name cannot be resolved.
    """
    name = config.solution or plugin.declaration(benchmark).default_solution
    if name is None:
        return None
    return registry.resolve(name, registry.available_solutions(), "solution")[0]


def changed(config: RunConfig, **update: Any) -> RunConfig:
    """``config`` with the fields of ``update`` replaced, validated again as a whole (pydantic's
    ``model_copy(update=)`` skips every validator); the fields left unset stay unset.

    Raises:
        ConfigError: the changed configuration does not validate (naming the field).
    """
    return build_config({**config.model_dump(exclude_unset=True), **update}, "the run's configuration")


def model_defaults(config: RunConfig, benchmark: Any, solution: Any, *, judge: bool = True) -> dict[str, Any]:
    """The fields that settle ``config``'s agent's model and its judge (empty when nothing changes).

    The model: ``--model``, else ``$AGENT_CHAT_MODEL_NAME`` when a model is wanted, that is when the solution
    (``solution``, its resolved target) takes a ``model`` argument; a run of a solution without one (e.g.
    ``reference``), or of a solution object, ignores the variable, so its configuration (and fingerprint) does not
    change with the environment.

    The judge (with ``judge``; not for a benchmark object, whose constructor took its judge): ``--judge-model``,
    else ``$EVAL_CHAT_MODEL_NAME``, else the agent's ``--model`` (BeeAI's order); ``judge_base_url`` defaults to
    ``model_base_url`` when the judge is the agent's model. ``--judge-model none`` (:data:`NO_JUDGE`) means no judge.
    A benchmark without judged metrics keeps no judge; ``-B judge_model=...`` wins over all of these.

    Args:
        benchmark: the benchmark's class or factory (or an instance).
        solution: the solution's target, or ``None`` for a solution object.

    Raises:
        ConfigError: ``--judge-model`` or ``--judge-base-url`` for a benchmark that has no judged metrics.
    """
    update: dict[str, Any] = {}
    name = os.environ.get(MODEL_ENV, "").strip()
    if config.model is None and name and solution is not None and SolutionSpec(target=solution).accepts("model"):
        update["model"] = name
    if judge:
        update.update(_judge_default(config, benchmark, update.get("model", config.model)))
    return update


def _judge_default(config: RunConfig, benchmark: Any, model: str | None) -> dict[str, Any]:
    """The judge fields :func:`model_defaults` sets (none for a benchmark without judged metrics)."""
    if not takes_judge(benchmark):
        if (config.judge_model and config.judge_model.strip().lower() != NO_JUDGE) or config.judge_base_url:
            raise ConfigError(f"benchmark {config.benchmark!r} has no LLM-judged metrics; drop --judge-model and "
                              "--judge-base-url")
        # --judge-model none asks for what such a benchmark has anyway (a matrix's file says it for every cell).
        return {"judge_model": None} if config.judge_model else {}
    if config.benchmark_args.get("judge_model"):
        return {"judge_model": config.benchmark_args["judge_model"],
                "judge_base_url": config.benchmark_args.get("judge_base_url")}
    if (config.judge_model or "").strip().lower() == NO_JUDGE:
        return {"judge_model": None, "judge_base_url": None}
    judge = config.judge_model or os.environ.get(JUDGE_ENV, "").strip() or model
    base_url = config.judge_base_url
    if base_url is None and judge == model:
        base_url = config.model_base_url
    return {"judge_model": judge or None, "judge_base_url": base_url}


def takes_judge(benchmark: Any) -> bool:
    """Whether a benchmark (its class, factory or an instance) needs a judge (it has LLM-judged metrics;
    :func:`runner.core.plugin.declaration`)."""
    return "judge" in plugin.declaration(benchmark).needs


def _check_prices(config: RunConfig) -> None:
    """Refuse ``max_cost`` while one of the run's models has no price.

    Raises:
        ConfigError: naming the model and the ``--price`` to add.
    """
    unpriced = config.unpriced_models()
    if unpriced:
        raise ConfigError(f"--max-cost needs a price for every model of the run, and {unpriced[0]} has none; add "
                          f"--price {unpriced[0]}=IN,OUT (USD per million input and output tokens)")


def _concurrency(config: RunConfig, replicas: tuple[ReplicaSpec, ...], benchmark: BenchmarkBase) -> dict[str, Any]:
    """The ``worker`` field that sets the items in flight per worker filling the served engines' batches (and the
    benchmark's model batches, :meth:`~runner.core.benchmark.BenchmarkBase.items_in_flight`); empty when
    ``--concurrency`` was given or nothing asks."""
    on_gpu = config.worker.num_gpus > 0
    wanted = [default_concurrency(replica, on_gpu) for replica in replicas]
    hint = benchmark.items_in_flight()
    if hint is not None:
        wanted.append(hint)
    if not wanted or "max_concurrency" in config.worker.model_fields_set:
        return {}
    return {"worker": {**config.worker.model_dump(exclude_unset=True), "max_concurrency": max(wanted)}}


def run_models(config: RunConfig | dict[str, Any]) -> dict[str, Any]:
    """The run's model settings a benchmark may take (:data:`runner.registry.RUN_MODEL_ARGS`), from a
    :class:`RunConfig` or ``run.json``'s configuration."""
    get = config.get if isinstance(config, dict) else lambda name: getattr(config, name, None)
    return {name: get(name) for name in registry.RUN_MODEL_ARGS}


def judge_args(config: RunConfig) -> dict[str, str]:
    """The benchmark constructor arguments that carry the judge (none without a judge)."""
    return {name: getattr(config, name) for name in JUDGE_ARGS if getattr(config, name)}


def _weights(config: RunConfig, known: dict[str, str]) -> dict[str, str]:
    """The digests of the checkpoint folders the run's models name (the agent's, the simulated user's, the judge's),
    ``known`` ones as given, the others read with the run's storage options where they apply:
    :attr:`RunRequest.weights`."""
    from runner.engine.matrix.checkpoints import weights_of

    found = {}
    for name in dict.fromkeys(filter(None, (config.model, config.user_model, config.judge_model))):
        digest = known.get(model_key(name)) or weights_of(name, config.storage_options_for(name.partition(":")[2]))
        if digest is not None:
            found[model_key(name)] = digest
    return found
