"""An evaluation matrix's configuration: models (or the checkpoints a glob names) x benchmark entries, one job.

A matrix file is a run's configuration file (``docs/settings.md``) with two lists in place of ``model`` and
``benchmark``::

    models:                                   # each a model as --model takes it; a glob names one per checkpoint
      - transformers:smollm2-135m-instruct
      - model: "transformers:/ckpts/run42/step_*"
        engine_args: ["--dtype", "float32"]   # its served model's engine flags
    benchmarks:
      - {benchmark: lm-eval, args: {tasks: "arc_easy,gsm8k"}}
      - {benchmark: hotpotqa, args: {answer_only: true}, solution: hotpotqa-reader, limit: 100}
    baseline: transformers:smollm2-135m-instruct
    watch: {every: 300, ready_file: STABLE, until: DONE}
    judge_model: none
    storage: s3://bucket/evals/run42
    worker: {num_workers: 8, num_gpus: 1}

Every other key is a run setting that holds for every cell; a model or benchmark entry may set any run setting for
its own cells (``limit``, ``data_dir``, ``repeats``, ``timeout``...), except those of the whole job
(:data:`MATRIX_ONLY`: the storage, the executor and its workers, the model traffic and budget), which a cell cannot
have apart from the others. Flags on the command line override the file, entries included (``--limit 5`` makes a
quick trial of a whole matrix).

:class:`MatrixConfig` validates the shape; the cells' own settings are validated when each cell is built
(:mod:`runner.engine.matrix.request`), so an error names its cell.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.core.errors import ConfigError

MATRIX_ONLY = frozenset({
    "storage", "storage_options", "executor", "sequential", "ray_address", "worker", "log_format", "progress",
    "max_rpm", "max_tpm", "max_connections", "model_limits", "max_tokens", "max_cost", "prices", "cache",
    "cache_policy", "lease_ttl", "take_over", "storage_outage", "allow_overwriting_store", "force",
})
"""Run settings of the whole matrix, which a model or benchmark entry may not set: one storage, one executor and
pool of workers, one traffic control (cluster-wide limits, one budget, one cache) for every cell."""

ENTRY_NAMES = frozenset({"models", "benchmarks", "baseline", "watch"})
"""The keys a matrix file has besides a run's."""


class WatchSpec(BaseModel):
    """Keep evaluating checkpoints as they appear.

    Args:
        every: seconds between two looks at the checkpoints' globs.
        ready_file: a checkpoint is ready once this file exists in its folder (``None``: once its listing did not
            change between two looks, for writers that leave no mark).
        until: the watch ends once this file exists next to the checkpoints (in the folder of a glob's matches),
            and every cell is done; ``None``: it ends on SIGTERM or Ctrl-C only (the same command resumes).
    """

    model_config = ConfigDict(extra="forbid")

    every: float = Field(default=300.0, gt=0)
    ready_file: str | None = None
    until: str | None = None

    @field_validator("ready_file", "until")
    @classmethod
    def _file_name(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "/" in value):
            raise ValueError("must be a file name (no folder), e.g. STABLE")
        return value


class ModelEntry(BaseModel):
    """One model of the matrix, or the checkpoints its glob names (any other key: a run setting of its cells).

    Args:
        model: as ``--model`` takes it (``provider:model``); ``*``, ``?`` or ``[...]`` in its path make it a glob of
            checkpoint folders (a local folder or any fsspec URL: ``s3://``, ``gs://``, ``az://``).
        key: the name of its cells' folder (default: from the model's name; a checkpoint's folder name).
        engine_args: flags for its served model's engine (``--engine-arg``).
    """

    model_config = ConfigDict(extra="allow")

    model: str
    key: str | None = None
    engine_args: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    @field_validator("model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("names no model; write provider:model, e.g. transformers:/ckpts/step_*")
        return value.strip()

    @property
    def is_glob(self) -> bool:
        """Whether the model's path is a glob of checkpoint folders."""
        return is_glob(self.model.partition(":")[2])

    def settings(self) -> dict[str, Any]:
        """The run settings the entry sets for its cells."""
        return dict(self.model_extra or {})


class BenchmarkEntry(BaseModel):
    """One benchmark of the matrix with its arguments and solution (any other key: a run setting of its cells).

    Args:
        benchmark: as ``-b`` takes it.
        args: its arguments (``-B``).
        solution: its solution (``-s``; default: the benchmark's own for the model).
        solution_args: the solution's arguments (``-S``).
        key: the name of its cells' folders (default: the benchmark's name and its ``tasks``).
    """

    model_config = ConfigDict(extra="allow")

    benchmark: str
    args: dict[str, Any] = Field(default_factory=dict)
    solution: str | None = None
    solution_args: dict[str, Any] = Field(default_factory=dict)
    key: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"benchmark": data}
        if isinstance(data, dict) and "benchmark_args" in data:
            if "args" in data:
                raise ValueError("gives both args and benchmark_args (the same thing); merge them into args")
            data = dict(data)
            data["args"] = data.pop("benchmark_args")
        return data

    def settings(self) -> dict[str, Any]:
        """The run settings the entry sets for its cells."""
        return dict(self.model_extra or {})


class MatrixConfig(BaseModel):
    """A matrix: models x benchmark entries (see the module's docstring); ``settings`` holds every other key of the
    file, the run settings of every cell.

    Raises (validation):
        ValueError: no model or no benchmark, a ``model`` or ``benchmark`` key beside the lists, an entry that sets
            a setting of the whole matrix, two model entries naming one model, a watch without a checkpoint glob.
    """

    model_config = ConfigDict(extra="forbid")

    models: list[ModelEntry] = Field(min_length=1)
    benchmarks: list[BenchmarkEntry] = Field(min_length=1)
    baseline: str | None = None
    watch: WatchSpec | None = None
    settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_settings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for single, lists in (("model", "models"), ("benchmark", "benchmarks")):
            if single in data:
                raise ValueError(f"a matrix names its {lists} in the list '{lists}', not in '{single}'; move "
                                 f"{data[single]!r} there")
        settings = {key: data.pop(key) for key in list(data) if key not in ENTRY_NAMES}
        data["settings"] = {**settings, **data.get("settings", {})}
        return data

    @model_validator(mode="after")
    def _entries(self) -> MatrixConfig:
        for entry in (*self.models, *self.benchmarks):
            name = entry.model if isinstance(entry, ModelEntry) else entry.benchmark
            shared = sorted(set(entry.settings()) & MATRIX_ONLY)
            if shared:
                raise ValueError(f"the entry {name!r} sets {shared[0]!r}, a setting of the whole matrix (one storage, "
                                 f"one pool of workers, one traffic control and budget); set it at the file's top "
                                 "level or as a flag")
        names = [entry.model for entry in self.models]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"the model {twice[0]!r} is listed twice; list each model once (two entries make the "
                             "same cells)")
        if self.watch is not None and not any(entry.is_glob for entry in self.models):
            raise ValueError("watch: looks for new checkpoints of a glob (e.g. transformers:/ckpts/run42/step_*), and "
                             "no model is one; add the glob, or drop watch:")
        return self


_GLOB = re.compile(r"[*?\[]")


def is_glob(path: str) -> bool:
    """Whether ``path`` holds a glob pattern (``*``, ``?`` or ``[``)."""
    return bool(_GLOB.search(path))


def slug(text: str, limit: int = 60) -> str:
    """``text`` as a folder name: lower case letters, digits, ``.``, ``-`` and ``_`` (``Qwen2.5-7B-Instruct`` ->
    ``qwen2.5-7b-instruct``), ``x`` when nothing is left."""
    clean = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.")
    return clean[:limit].rstrip("-.") or "x"


def model_key(model: str) -> str:
    """The readable key of a model's cells: its path's last part (``vllm:Qwen/Qwen2.5-7B-Instruct`` ->
    ``qwen2.5-7b-instruct``, ``transformers:/ckpts/run42/step_200`` -> ``step_200``)."""
    provider, colon, path = model.partition(":")
    path = path.rstrip("/") if colon else provider
    return slug(path.rsplit("/", 1)[-1] or model)


def benchmark_key(entry: BenchmarkEntry) -> str:
    """The readable key of a benchmark entry's cells: its ``key``, else its name and its ``tasks`` (lm-eval's tasks,
    comma- or list-separated): ``lm-eval-arc_easy-gsm8k``, ``hotpotqa``."""
    if entry.key:
        return slug(entry.key)
    tasks = entry.args.get("tasks")
    names = tasks.split(",") if isinstance(tasks, str) else list(tasks) if isinstance(tasks, list) else []
    return slug("-".join([entry.benchmark.rsplit(":", 1)[-1], *[str(name).strip() for name in names if name]]), 80)


def merged(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """The run settings of ``layers``, each over the ones before: a mapping (``benchmark_args``,
    ``solution_args``, ``worker``...) merged key by key, anything else replaced."""
    data: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = merged(data[key], value)
            else:
                data[key] = value
    return data


def entry_settings(entry: BenchmarkEntry) -> dict[str, Any]:
    """The run settings a benchmark entry gives its cells: its own keys, its ``args`` and ``solution_args``, and its
    ``solution`` when it names one."""
    own: dict[str, Any] = {"benchmark_args": entry.args, "solution_args": entry.solution_args}
    if entry.solution is not None:
        own["solution"] = entry.solution
    return merged(entry.settings(), own)


def entry_identity(entry: BenchmarkEntry, file_settings: dict[str, Any] | None = None,
                   overrides: dict[str, Any] | None = None) -> str:
    """What decides the items of a benchmark entry's cells and their scoring, as a digest (16 hex digits): the
    settings of a run's fingerprint (:data:`~runner.core.config.FINGERPRINT_SETTINGS`: the benchmark, its arguments,
    the solution and its arguments, ``data_dir``, ``judge_model``, ``user_model``) that its cells get from the matrix
    file's settings, the entry and the command line's ``overrides``, in that order; the model apart. What only says
    how much or how to run (``limit``, ``repeats``, ``timeout``, ``key``...) is not in it: raising an entry's ``limit``
    keeps its cells."""
    from runner.core.config import FINGERPRINT_SETTINGS

    data = merged(file_settings, entry_settings(entry), overrides)
    fields = {"benchmark": entry.benchmark, "benchmark_args": data.get("benchmark_args") or {},
              "solution": data.get("solution"), "solution_args": data.get("solution_args") or {}}
    fields.update({name: data[name] for name in FINGERPRINT_SETTINGS
                   if name not in fields and name != "model" and data.get(name) is not None})
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def benchmark_keys(entries: list[BenchmarkEntry], known: list[dict[str, Any]] | None = None,
                   identities: list[str] | None = None) -> list[str]:
    """The key of each entry's cells (their folder, ``cells/<model key>/<key>``), each decided by the entry alone and
    by the keys the matrix gave before (``known``: ``matrix.json``'s ``benchmarks``, each with its ``key`` and, where
    written, its ``identity``, readable key ``base``, whether its key was its own (``explicit``) and whether the
    latest run's file had it (``current``)), so that adding, removing or reordering entries never changes another
    entry's key:

    1. an entry's own ``key:``;
    2. the key ``matrix.json`` gave an entry without a ``key:`` of the same identity (``identities``, default
       :func:`entry_identity` of each entry alone; for a ``matrix.json`` written before identities were kept: the
       entry of the same benchmark, arguments and solution);
    3. an entry whose identity is new, where the latest run's file had one entry of the same readable key
       (:func:`benchmark_key`) that this file has no more: that entry changed, and keeps its key, so that its cells'
       fingerprint refuses the change in one line (a run's rule: put it back, or give it a ``key:``);
    4. else its readable key, with a short hash of its identity (``toy-3f9a0c``) where another entry of the file or of
       ``matrix.json`` has that readable key.

    Raises:
        ConfigError: several new entries share the readable key of entries the latest run had and this file has no
            more (which changed into which cannot be told: give the new ones a ``key:``); two entries with one
            ``key:``, or of one identity.
    """
    known = [entry for entry in (known or []) if entry.get("key")]
    identities = identities if identities is not None else [entry_identity(entry) for entry in entries]
    bases = [benchmark_key(entry) for entry in entries]
    keys: list[str | None] = [slug(entry.key) if entry.key else None for entry in entries]
    explicit = {key for key in keys if key is not None}
    unkeyed = {identity for identity, key in zip(identities, keys) if key is None}
    for old in known:
        if old["key"] in explicit and not old.get("explicit") and old.get("identity") in unkeyed:
            raise ConfigError(f"two benchmark entries have the cells' key {old['key']} (one's own key:, and the key "
                              f"the matrix gave the other before); give the entry with key: {old['key']} another key")
    by_identity: dict[str, str] = {}
    for old in known:
        if old.get("identity") and not old.get("explicit") and old["key"] not in explicit:
            by_identity.setdefault(old["identity"], old["key"])
    for index, entry in enumerate(entries):
        if keys[index] is None and identities[index] in by_identity:
            keys[index] = by_identity[identities[index]]
        elif keys[index] is None:
            legacy = [old["key"] for old in known if not old.get("identity") and old["key"] not in explicit
                      and old.get("benchmark") == entry.benchmark and (old.get("args") or {}) == entry.args
                      and old.get("solution") == entry.solution]
            keys[index] = legacy[0] if len(legacy) == 1 else None
    used = {key for key in keys if key is not None}
    gone = [old for old in known if old["key"] not in used and old.get("identity") not in identities
            and old.get("current", True) and not old.get("explicit")]
    for base in dict.fromkeys(base for base, key in zip(bases, keys) if key is None):
        new = [index for index, key in enumerate(keys) if key is None and bases[index] == base]
        old = [entry for entry in gone if _base(entry) == base]
        if len(old) == 1 and len(new) == 1:
            keys[new[0]] = old[0]["key"]
        elif old:
            raise ConfigError(
                f"the benchmark entries of {base} changed since the matrix ran (its cells "
                f"{', '.join(entry['key'] for entry in old)} hold other entries); put the entries back as they were, "
                "or give each new entry its own key (key: ...) to make new cells")
    taken = {entry["key"] for entry in known} | {key for key in keys if key is not None}
    open_ = [index for index, key in enumerate(keys) if key is None]
    for index in open_:
        rivals = [other for other in open_ if bases[other] == bases[index] and identities[other] != identities[index]]
        clash = bases[index] in taken or rivals
        keys[index] = f"{bases[index]}-{identities[index][:6]}" if clash else bases[index]
    final = [key for key in keys if key is not None]
    twice = next((key for key in final if final.count(key) > 1), None)
    if twice is not None:
        owners = [entry for entry, key in zip(entries, final) if key == twice]
        if any(entry.key for entry in owners):
            raise ConfigError(f"two benchmark entries have the cells' key {twice} (a key: of its own, or the key the "
                              "matrix gave an entry before); give each entry its own key")
        raise ConfigError(f"two benchmark entries make the same cells ({twice}); list each benchmark entry once")
    return final


def _base(known: dict[str, Any]) -> str:
    """The readable key of an entry ``matrix.json`` knows (written since identities are kept; else made again)."""
    if known.get("base"):
        return str(known["base"])
    try:
        return benchmark_key(BenchmarkEntry(benchmark=known.get("benchmark") or "x", args=known.get("args") or {}))
    except ValueError:
        return str(known["key"])


def unique_keys(keys: list[str], identities: list[str]) -> list[str]:
    """``keys``, each that two different ``identities`` share made unique by a short hash of its identity
    (``step_200-3f9a0c``)."""
    owners: dict[str, set[str]] = {}
    for key, identity in zip(keys, identities):
        owners.setdefault(key, set()).add(identity)
    return [key if len(owners[key]) == 1 else f"{key}-{hashlib.sha256(identity.encode()).hexdigest()[:6]}"
            for key, identity in zip(keys, identities)]
