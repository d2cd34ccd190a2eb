"""What a matrix runs: its models (checkpoints expanded), its benchmark entries, and each cell as an ordinary
:class:`~runner.engine.request.RunRequest`, built by :meth:`MatrixRequest.from_config`, the one builder of the CLI's
``matrix``, ``submit matrix`` and :class:`~runner.evaluators.MatrixEvaluator`.

A cell's configuration is the matrix file's run settings, then its model entry's, then its benchmark entry's, then
the command line's flags, with the cell's model, benchmark and storage (``<root>/cells/<model key>/<benchmark
key>``): the configuration of ``python -m runner`` with the same settings, so the cell has that run's fingerprint
and numbers, and that command pointed at the cell finds every item done. A servable model (``vllm:``, ``sglang:``,
``transformers:``) without a URL is served by the run (``serve``), except where the cell's solution loads it in the
worker's own process (lm-eval's ``HFLM``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from runner import registry
from runner.core.config import EMBEDDED_MODEL, SERVABLE_PROVIDERS, RunConfig, RunSettings, build_config
from runner.core.errors import ConfigError, RunnerError
from runner.core.limits import model_key as usage_key
from runner.core.matrix import (BenchmarkEntry, MatrixConfig, ModelEntry, benchmark_keys, entry_identity,
                                 entry_settings, merged, model_key, slug, unique_keys)
from runner.core.solution import SolutionSpec
from runner.engine.matrix.checkpoints import Checkpoint, expand
from runner.engine.request import RunRequest, _solution_target
from runner.engine.run_directory import default_run_uri
from runner.serving import ReplicaSpec
from runner.storage.matrix_manifest import CELLS, MatrixManifest
from runner.storage.store import ResultStore

if TYPE_CHECKING:
    from runner.engine.run import Executor


@dataclass
class MatrixModelSlot:
    """One model of the matrix, resolved: a model entry's model, or one checkpoint its glob matched.

    Args:
        model: the model's name (``provider:model``; a checkpoint's path).
        key: its cells' folder.
        entry: the entry that named it.
        order: its position among the models.
        baseline: it is the matrix's baseline.
        checkpoint: the checkpoint, when a glob named it.
    """

    model: str
    key: str
    entry: ModelEntry
    order: int = 0
    baseline: bool = False
    checkpoint: Checkpoint | None = None

    @property
    def step(self) -> int | None:
        """The checkpoint's step (``None``: not a checkpoint, or no number in its folder's name)."""
        return self.checkpoint.step if self.checkpoint is not None else None


@dataclass
class MatrixCellPlan:
    """One cell, built: a model x a benchmark entry as an ordinary run.

    Args:
        index: its number among the matrix's cells (its items carry it).
        slot: its model.
        entry: its benchmark entry; ``benchmark_key``: its folder.
        path: its run directory, relative to the matrix's root (``cells/<model key>/<benchmark key>``).
        request: the run.
        placed: the model a worker must hold to run its items (``None``: any worker; a hosted model, a URL).
        replicas: that model's replicas.
        pinned: the other replicas its run serves (a served judge), which every worker keeps.
    """

    index: int
    slot: MatrixModelSlot
    entry: BenchmarkEntry
    benchmark_key: str
    path: str
    request: RunRequest
    placed: str | None = None
    replicas: tuple[ReplicaSpec, ...] = ()
    pinned: tuple[ReplicaSpec, ...] = ()

    @property
    def name(self) -> str:
        """The cell in messages: ``<model key>/<benchmark key>``."""
        return f"{self.slot.key}/{self.benchmark_key}"


@dataclass
class MatrixRequest:
    """A matrix, resolved (see the module's docstring).

    Args:
        config: the matrix configuration.
        overrides: the run settings the command line gave (they override the file's, entries included).
        root: the matrix's storage root.
        settings: the settings of the whole matrix (its executor, workers, traffic and budget).
        run_config: those settings as one run's configuration (what a RayJob and ``submit`` read).
        benchmark_keys: each benchmark entry's key, in the file's order (:func:`~runner.core.matrix.benchmark_keys`:
            from the entry and the keys ``matrix.json`` gave before).
        identities: each benchmark entry's identity (:func:`~runner.core.matrix.entry_identity`, with the file's
            settings and the command line's around it).
        slots: the models, in order (checkpoints by step).
        cells: every cell, model by model.
        baseline: the baseline's model name (``None``: none).
        executor: who runs the cells (one executor, one Ray start, one pool).
        progress_bar: kept for the caller; cells draw no bar (several live bars cannot share a terminal): each logs
            its progress, and ``status <matrix-uri>`` shows every cell's.
    """

    config: MatrixConfig
    overrides: dict[str, Any]
    root: ResultStore
    settings: RunSettings
    run_config: RunConfig
    benchmark_keys: list[str] = field(default_factory=list)
    identities: list[str] = field(default_factory=list)
    slots: list[MatrixModelSlot] = field(default_factory=list)
    cells: list[MatrixCellPlan] = field(default_factory=list)
    baseline: str | None = None
    executor: Executor | None = None
    progress_bar: bool | None = None

    @classmethod
    def from_config(cls, config: MatrixConfig, overrides: dict[str, Any] | None = None, *,
                    manifest: MatrixManifest | None = None, progress_bar: bool | None = None,
                    read_root: bool = True) -> MatrixRequest:
        """The one builder of a matrix: the matrix settings validated, the root store opened, the models resolved
        (globs expanded: every match, or with a watch the ready ones and those the matrix has cells of), every cell
        built and checked (its benchmark's and solution's arguments, its models), the executor built. Nothing is
        written and nothing started.

        Args:
            config: the matrix.
            overrides: run settings the command line gave.
            manifest: the root's ``matrix.json`` (default: read it; keys of earlier models stay theirs).
            progress_bar: draw a bar for each cell.
            read_root: read the root's ``matrix.json`` when ``manifest`` is not given and list the checkpoints'
                globs (``False``: a RayJob builder, which must reach neither: a glob stands for its checkpoints).

        Raises:
            ConfigError: a setting of the whole matrix that does not validate, a glob that matches nothing (without a
                watch), a baseline that is none of the models, two entries that make the same cell, and any cell's
                own refusal (an unknown benchmark, solution or argument, a missing model...), prefixed with the cell.
        """
        overrides = dict(overrides or {})
        data = {**config.settings, **overrides}
        run_config = build_config({**data, "benchmark": config.benchmarks[0].benchmark}, "the matrix's settings")
        root = ResultStore(run_config.storage, run_config.storage_options)
        root.bind_default(default_run_uri("matrix"))
        if manifest is None and read_root:
            from runner.storage.matrix_manifest import read_matrix

            manifest = read_matrix(root)
        request = cls(config, overrides, root, run_config.settings(), run_config, progress_bar=progress_bar)
        request.identities = [entry_identity(entry, config.settings, overrides) for entry in config.benchmarks]
        request.benchmark_keys = benchmark_keys(config.benchmarks, manifest.benchmarks if manifest else None,
                                                request.identities)
        request.slots = resolve_models(config, run_config, manifest, root, expand_globs=read_root)
        request.baseline = _baseline(config, request.slots)
        for slot in request.slots:
            slot.baseline = slot.model == request.baseline
        request.cells = request.build_cells(request.slots)
        request.executor = registry.executor_class(run_config.executor).from_settings(request.settings)
        return request

    def checkpoint_options(self, model: str) -> dict[str, Any]:
        """The fsspec options every read of ``model``'s checkpoints takes (a glob's listing, the watch's looks, its
        ``until`` file): the matrix's ``storage_options`` where the checkpoints are on the storage's kind of
        filesystem (:meth:`RunConfig.storage_options_for <runner.core.config.RunConfig.storage_options_for>`)."""
        return self.run_config.storage_options_for(model.partition(":")[2])

    def build_cells(self, slots: list[MatrixModelSlot], start: int = 0) -> list[MatrixCellPlan]:
        """The cells of ``slots`` x every benchmark entry, numbered from ``start``.

        Raises:
            ConfigError: a cell's refusal, prefixed with the cell (``cell step_200/hotpotqa: ...``).
        """
        keys = self.benchmark_keys
        cells = []
        for slot in slots:
            for entry, key in zip(self.config.benchmarks, keys):
                cells.append(self._cell(start + len(cells), slot, entry, key))
        return cells

    def _cell(self, index: int, slot: MatrixModelSlot, entry: BenchmarkEntry, key: str) -> MatrixCellPlan:
        path = f"{CELLS}/{slot.key}/{key}"
        name = f"{slot.key}/{key}"
        data = merged(self.config.settings, slot.entry.settings(), entry_settings(entry), self.overrides)
        data.update(model=slot.model, benchmark=entry.benchmark, storage=f"{self.root.uri}/{path}",
                    storage_options=self.run_config.storage_options)
        try:
            config = build_config(data, f"cell {name}")
            config = _served(config, slot)
            # One bar per cell cannot share a terminal (rich keeps one live display): cells log their progress
            # (run.progress), and 'status <matrix-uri>' shows every cell's.
            digest = slot.checkpoint.digest if slot.checkpoint is not None else ""
            request = RunRequest.from_config(config, progress_bar=False,
                                             weights={usage_key(slot.model): digest} if digest else None)
        except RunnerError as exc:
            message = str(exc)
            if not message.startswith(f"cell {name}"):
                message = f"cell {name}: {message}"
            raise ConfigError(message) from None
        placed, replicas, pinned = _placement(slot, request)
        return MatrixCellPlan(index, slot, entry, key, path, request, placed, replicas, pinned)


def _served(config: RunConfig, slot: MatrixModelSlot) -> RunConfig:
    """``config`` serving its model when the run can and nothing else reaches it: a servable provider, no URL, a
    solution that does not load it in its own process; with the model entry's ``engine_args``."""
    provider = usage_key(slot.model).partition(":")[0]
    if provider not in SERVABLE_PROVIDERS or config.model_base_url is not None:
        return config
    if any(spec.model is not None and usage_key(spec.model) == usage_key(slot.model) for spec in config.serve):
        return config
    benchmark = registry.resolve(config.benchmark, registry.available_benchmarks(), "benchmark")[0]
    target = _solution_target(config, benchmark)
    if target is not None and provider in SolutionSpec(target=target).in_process_providers:
        return config
    if usage_key(slot.model) == EMBEDDED_MODEL and not slot.entry.engine_args:
        return config  # served by every run that names it
    serve = [*config.model_dump(exclude_unset=True).get("serve", []),
             {"model": slot.model, "engine_args": list(slot.entry.engine_args)}]
    return build_config({**config.model_dump(exclude_unset=True), "serve": serve}, "the cell's configuration")


def _placement(slot: MatrixModelSlot, request: RunRequest) -> tuple[str | None, tuple[ReplicaSpec, ...],
                                                                     tuple[ReplicaSpec, ...]]:
    """The model a worker must hold for the cell (its model when the run serves it or its solution loads it in the
    worker; a checkpoint always, even at an endpoint: a watch adds its cells while the workers run, and a worker
    learns a cell's solution when it takes the cell's model), that model's replicas (swappable for a checkpoint), and
    the cell's other replicas (pinned)."""
    own = usage_key(slot.model)
    mine = tuple(dataclasses.replace(spec, swappable=slot.checkpoint is not None)
                 for spec in request.replicas if usage_key(spec.model) == own)
    pinned = tuple(spec for spec in request.replicas if usage_key(spec.model) != own)
    in_process = own.partition(":")[0] in request.solution.in_process_providers and \
        request.config.get("model_base_url") is None
    placed = slot.model if mine or in_process or slot.checkpoint is not None else None
    return placed, mine, pinned


def resolve_models(config: MatrixConfig, run_config: RunConfig, manifest: MatrixManifest | None = None,
                   root: ResultStore | None = None, expand_globs: bool = True) -> list[MatrixModelSlot]:
    """The matrix's models in order: each entry's model, or the checkpoints its glob matches (by step; with a
    watch, those ready now and those the matrix already has cells of). Keys are readable and unique (a short hash
    where two models would share one), and a model ``matrix.json`` knows keeps its key, unless its checkpoint's
    digest changed and its cells hold records: those cells are kept (``stale``) and the new weights get new ones,
    ``<key>-<digest>``.

    Raises:
        ConfigError: a glob that matches no folder (without a watch), or a glob of a provider the run cannot serve.
    """
    every = manifest.models if manifest is not None else []
    known = {entry.model: entry for entry in every if entry.status != "stale"}
    slots: list[MatrixModelSlot] = []
    for entry in config.models:
        if not entry.is_glob:
            slots.append(MatrixModelSlot(entry.model, slug(entry.key) if entry.key else model_key(entry.model), entry))
            continue
        provider = usage_key(entry.model).partition(":")[0]
        if provider not in SERVABLE_PROVIDERS:
            raise ConfigError(f"{entry.model}: a glob names checkpoint folders, which only a served model can load "
                              f"(vllm:, sglang:, transformers:), not {provider}:")
        if not expand_globs:
            stand_in = Checkpoint(entry.model, slug(entry.key) if entry.key else model_key(entry.model), None, "", ())
            slots.append(MatrixModelSlot(entry.model, stand_in.key, entry, checkpoint=stand_in))
            continue
        watch = config.watch
        found = expand(entry.model, watch.ready_file if watch else None,
                       run_config.storage_options_for(entry.model.partition(":")[2]))
        if not found and watch is None:
            raise ConfigError(f"the glob {entry.model.partition(':')[2]} matches no folder; check the path (or add "
                              "watch: to wait for checkpoints to appear)")
        for checkpoint in found:
            if watch is not None and not checkpoint.ready and checkpoint.model not in known:
                continue
            if watch is not None and watch.ready_file is None and checkpoint.model not in known:
                continue  # ready once its listing holds still between two looks (the watch's)
            slot = MatrixModelSlot(checkpoint.model, checkpoint.key, entry, checkpoint=checkpoint)
            old = known.get(checkpoint.model)
            if old is not None and old.digest not in (None, checkpoint.digest) and root is not None \
                    and has_records(root, old.key):
                slot.key = f"{checkpoint.key}-{checkpoint.digest[:6]}"
                known.pop(checkpoint.model)
            slots.append(slot)
    return keyed(slots, known, {entry.key for entry in every})


def has_records(root: ResultStore, key: str) -> bool:
    """Whether a model's cells (``cells/<key>/``) hold any record or result shard."""
    try:
        found = root.fs.find(root.path(CELLS, key), maxdepth=4)
    except (FileNotFoundError, OSError):
        return False
    return any("/records/" in path or "/shards/" in path for path in found)


def keyed(slots: list[MatrixModelSlot], known: dict[str, Any], taken: set[str] | None = None,
          warn: bool = True) -> list[MatrixModelSlot]:
    """``slots`` with unique keys and their order set: a model ``matrix.json`` knows (``known``: model -> its entry)
    keeps its key (a ``key:`` given later does not move its cells: a warning says so, with ``warn``); any other gets
    its own key or its readable one, with a short hash of its name where another model of the file, or any model
    ``matrix.json`` has had (``taken``: their keys, stale ones included), has it.

    Raises:
        ConfigError: a model named twice; a ``key:`` of two models, or that is the key of another model's cells.
    """
    names = [slot.model for slot in slots]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"the model {twice[0]} is named by two entries (a glob and a model, or two globs); name "
                          "each model once")
    owners = {entry.key: model for model, entry in known.items()}
    taken = set(taken or ()) | set(owners)
    for slot in slots:
        if slot.model in known:
            if warn and slot.entry.key and not slot.entry.is_glob and slug(slot.entry.key) != known[slot.model].key:
                structlog.get_logger("runner").warning(
                    "matrix.key_kept", model=slot.model, key=known[slot.model].key,
                    detail=f"matrix.json has this model's cells under {known[slot.model].key}; key: "
                           f"{slug(slot.entry.key)} does not move them (use another storage to start afresh)")
            slot.key = known[slot.model].key
    fresh = [slot for slot in slots if slot.model not in known]
    own = [slug(slot.entry.key) for slot in fresh if slot.entry.key and not slot.entry.is_glob]
    again = next((key for key in own if own.count(key) > 1), None)
    if again is not None:
        raise ConfigError(f"two models have key: {again}; give each model its own key")
    for slot, key in zip(fresh, unique_keys([slot.key for slot in fresh], [slot.model for slot in fresh])):
        if key in taken and slot.entry.key and not slot.entry.is_glob and key == slug(slot.entry.key):
            raise ConfigError(f"key: {key} of the model {slot.model} is the key of another model's cells "
                              f"({owners.get(key, 'one the matrix had')}); give it another key")
        slot.key = key if key not in taken else f"{key}-{hashlib.sha256(slot.model.encode()).hexdigest()[:6]}"
    for order, slot in enumerate(slots):
        slot.order = order
    return slots


def _baseline(config: MatrixConfig, slots: list[MatrixModelSlot]) -> str | None:
    """The baseline's model name: ``config.baseline`` matched against the models' names and keys.

    Raises:
        ConfigError: it is none of the models.
    """
    if config.baseline is None:
        return None
    for slot in slots:
        if config.baseline in (slot.model, slot.key) or usage_key(config.baseline) == usage_key(slot.model):
            return slot.model
    names = ", ".join(slot.key for slot in slots[:6])
    raise ConfigError(f"the baseline {config.baseline!r} is none of the matrix's models ({names}); name one of them "
                      "(its model or its key)")
