"""lm-evaluation-harness tasks on the driver: names resolved as ``lm_eval --tasks`` resolves them, tasks loaded,
configured as ``lm_eval.simple_evaluate`` configures them, and every document's requests built once.

Building the requests here, in one process, before any item is sent, is what makes the prompts lm-eval's: its
default few-shot sampler is one seeded RNG consumed in document order (``lm_eval/api/samplers.py``), so prompts
built per document or per worker differ from a single-process run (3-shot: 19 of 20 documents differed, and lm-eval's
own two-rank split differed on 18). ``Task.build_all_requests`` runs with rank 0 and world size 1, as a
single-process ``lm_eval`` run does, and each document's requests travel with its item. The datasets are read here
only (a task's ``data_files`` relative to the working directory included): workers never load them.
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import logging
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.benchmarks.lmeval.bars import no_bars
from runner.core.errors import BenchmarkError

DEFAULT_SEEDS = (0, 1234, 1234, 1234)
"""lm-eval's ``--seed`` default: Python's ``random``, numpy, torch, and the few-shot sampler's
(``lm_eval.defaults``)."""


def parse_seeds(value: int | str | None) -> tuple[int | None, int | None, int | None, int | None]:
    """lm-eval's ``--seed``: one integer for all four seeds, or ``random,numpy,torch,fewshot`` (``None`` leaves one
    unset; three values keep the default few-shot seed), as ``lm_eval/_cli/utils.py`` parses it.

    Raises:
        BenchmarkError: not integers, or another number of values.
    """
    if value is None:
        return DEFAULT_SEEDS
    if isinstance(value, bool):
        raise BenchmarkError(f"-B seed={value!r}: give an integer or random,numpy,torch,fewshot")
    if isinstance(value, int):
        return (value,) * 4  # type: ignore[return-value]
    parts = [part.strip().lower() for part in str(value).split(",")]
    try:
        seeds = [None if part == "none" else int(part) for part in parts]
    except ValueError:
        raise BenchmarkError(f"-B seed={value!r}: give an integer or random,numpy,torch,fewshot (integers or "
                             "None), as lm_eval --seed") from None
    if len(seeds) == 1:
        seeds *= 4
    elif len(seeds) == 3:
        seeds.append(DEFAULT_SEEDS[3])
    elif len(seeds) != 4:
        raise BenchmarkError(f"-B seed={value!r}: give 1, 3 or 4 values (random,numpy,torch,fewshot)")
    return tuple(seeds)  # type: ignore[return-value]


@dataclass(frozen=True)
class TaskOptions:
    """The lm-eval options of a run, as ``lm_eval`` names them (see docs/lm-eval.md for each flag).

    Args:
        tasks: task, group and tag names, YAML paths or globs, comma-separated (``--tasks``).
        include_path: a folder of the user's own task YAMLs (``--include_path``).
        num_fewshot: few-shot examples per prompt (``--num_fewshot``); a task whose YAML sets 0 keeps 0.
        limit: documents per task, or a fraction of each below 1 (``--limit``).
        apply_chat_template, fewshot_as_multiturn, system_instruction: prompt rendering (the same flags).
        gen_kwargs: generation arguments merged into every ``generate_until`` task's (``--gen_kwargs``:
            ``temperature=0,max_gen_toks=64``, or a mapping).
        seeds: Python's ``random``, numpy, torch and the few-shot sampler's (``--seed``).
        confirm_run_unsafe_code: allow tasks that execute model output (``--confirm_run_unsafe_code``).
        metadata: extra task metadata (``--metadata``), e.g. ``max_seq_lengths`` for RULER.
    """

    tasks: tuple[str, ...]
    include_path: str | None = None
    num_fewshot: int | None = None
    limit: float | None = None
    apply_chat_template: bool = False
    fewshot_as_multiturn: bool = False
    system_instruction: str | None = None
    gen_kwargs: dict[str, Any] | None = None
    seeds: tuple[int | None, int | None, int | None, int | None] = DEFAULT_SEEDS
    confirm_run_unsafe_code: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Document:
    """One document of one task with the requests lm-eval built for it (sorted by ``idx``, as the evaluator sorts
    them before ``process_results``)."""

    task: str
    doc_id: int
    doc: dict[str, Any]
    instances: list[Any]


@dataclass
class LoadedTasks:
    """What the driver holds after preparing a run's tasks.

    Args:
        tasks: leaf task name -> lm-eval ``Task`` (configured; its dataset loaded), in lm-eval's order.
        groups: group name -> lm-eval ``Group`` (every level).
        top: the names the run asked for, resolved: leaf tasks and top-level groups, in order.
        documents: task name -> its documents with their requests, in document order.
    """

    tasks: dict[str, Any]
    groups: dict[str, Any]
    top: list[str]
    documents: dict[str, list[Document]]

    def group_of(self, task: str) -> str | None:
        """The top-level group a leaf task belongs to, or ``None``."""
        for name in self.top:
            group = self.groups.get(name)
            if group is not None and task in {leaf.task_name for leaf in group.get_all_tasks()}:
                return name
        return None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """lm-eval's per-task progress bars (:func:`runner.benchmarks.lmeval.bars.no_bars`) and the ``datasets``
    library's (``Generating test split``) off, and lm-eval's INFO lines dropped, while the driver loads tasks and
    builds requests (57 of each for MMLU); warnings still show."""
    import datasets

    logger = logging.getLogger("lm_eval")
    level = logger.level
    bars = not datasets.are_progress_bars_disabled()
    logger.setLevel(max(level, logging.WARNING))
    datasets.disable_progress_bars()
    try:
        with no_bars():
            yield
    finally:
        if bars:
            datasets.enable_progress_bars()
        logger.setLevel(level)


def task_manager(options: TaskOptions, include_defaults: bool = True) -> Any:
    """lm-eval's ``TaskManager`` with the run's ``include_path`` and metadata; with ``include_defaults`` it indexes
    every built-in task YAML too (about 7 s on 2 cores), as ``lm_eval`` always does.

    Raises:
        BenchmarkError: an ``include_path`` that is not a folder.
    """
    from lm_eval.tasks import TaskManager

    if options.include_path is not None and not Path(options.include_path).expanduser().is_dir():
        raise BenchmarkError(f"-B include_path={options.include_path}: no such folder; point it at the folder of "
                             "your task YAMLs (as lm_eval --include_path)")
    include = str(Path(options.include_path).expanduser()) if options.include_path else None
    return TaskManager(include_path=include, include_defaults=include_defaults, metadata=dict(options.metadata))


def _own_tasks_only(options: TaskOptions) -> tuple[Any, list[Any]] | None:
    """The ``include_path``'s own index and specs when every requested name is a task or group defined there (no tag,
    which may gather built-in tasks too, and no pattern): lm-eval's result is the same without its built-in index,
    since a name of the include path wins over a built-in one; ``None`` otherwise. A group of the folder that names a
    built-in task then fails to load, and :func:`prepare` falls back to the full index."""
    from lm_eval.tasks._index import Kind

    if options.include_path is None:
        return None
    names = [name.strip() for entry in options.tasks for name in str(entry).split(",") if name.strip()]
    if not names or any(name.endswith(".yaml") or any(c in name for c in "*?[") for name in names):
        return None
    own = task_manager(options, include_defaults=False)
    if not all(_covered(own, name, Kind) for name in names):
        return None
    return own, list(dict.fromkeys(names))


def _covered(own: Any, name: str, kind: Any, depth: int = 0) -> bool:
    """Whether ``name`` is a task of ``own``'s index, or a group of it whose children (their groups' too) all are."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = own.task_index.get(name)
    if entry is None or depth > 16:
        return False
    if entry.kind in (kind.TASK, kind.PY_TASK):
        return True
    if entry.kind is not kind.GROUP or not getattr(entry, "yaml_path", None):
        return False
    children = load_yaml(entry.yaml_path, resolve_func=False).get("task") or []
    for child in children if isinstance(children, list) else [children]:
        if isinstance(child, dict):
            if "dataset_path" not in child and not _covered(own, str(child.get("task", "")), kind, depth + 1):
                return False
        elif not _covered(own, str(child), kind, depth + 1):
            return False
    return True


def resolve_names(manager: Any, names: tuple[str, ...]) -> list[Any]:
    """``--tasks`` as ``lm_eval`` resolves it (``EvaluatorConfig.process_tasks``): a folder of YAMLs, YAML paths and
    globs, names and glob patterns of tasks, groups and tags; the list ``TaskManager.load`` takes.

    Raises:
        BenchmarkError: no names, or a name that matches nothing (with the closest known names).
    """
    from lm_eval.tasks._yaml_loader import load_yaml

    listed = [name.strip() for entry in names for name in str(entry).split(",") if name.strip()]
    if not listed:
        raise BenchmarkError("no lm-eval task: pass -B tasks=NAME[,NAME...] (e.g. -B tasks=gsm8k,mmlu)")
    if len(listed) == 1 and Path(listed[0]).is_dir() and not manager.match_tasks([listed[0]]):
        return [load_yaml(path, resolve_func=True) for path in sorted(glob.glob(str(Path(listed[0]) / "*.yaml")))]
    resolved: list[Any] = []
    for name in dict.fromkeys(str(Path(n).absolute()) if n.endswith(".yaml") else n for n in listed):
        if name.endswith(".yaml"):
            matches: list[Any] = [load_yaml(path, resolve_func=True) for path in sorted(glob.glob(name))]
        else:
            matches = manager.match_tasks([name])
        if not matches:
            raise BenchmarkError(_unknown(name, manager.all_tasks))
        resolved.extend(match for match in matches if match not in resolved)
    return resolved


def _unknown(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"unknown lm-eval task {name!r}{hint} (lm_eval --tasks list shows them; a task of your own: -B "
            "include_path=FOLDER)")


_DATASET_PATTERNS = (re.compile(r"Dataset '?([^' ]+?)'? is not cached"), re.compile(r"Couldn't reach '([^']+)'"),
                     re.compile(r"Dataset '([^']+)' is a gated dataset"), re.compile(r"datasets/([\w.-]+/[\w.-]+)"))


def _dataset_problem(exc: BaseException) -> str | None:
    """One line for a dataset that cannot be had (not cached while offline, gated without ``HF_TOKEN``), from the
    exception or its causes; ``None`` for another failure."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    text = " | ".join(f"{type(e).__name__}: {e}" for e in chain)
    gated = any(word in text for word in ("gated", "401", "403", "GatedRepoError", "authenticated"))
    offline = any(word in text for word in ("not cached", "Couldn't reach", "OfflineModeIsEnabled", "client has been "
                                            "closed", "ConnectError", "LocalEntryNotFoundError", "offline"))
    if not (gated or offline):
        return None
    name = next((m.group(1) for pattern in _DATASET_PATTERNS for e in chain if (m := pattern.search(str(e)))), None)
    which = f"dataset {name}" if name else "a dataset of these tasks"
    if gated:
        return (f"{which} is gated on the Hugging Face Hub: set HF_TOKEN to a token that was granted access (and "
                "accept the dataset's terms on its page)")
    return (f"{which} is not in the local Hugging Face cache and the Hub cannot be reached: download it where the "
            "Hub answers (python -c \"import datasets; datasets.load_dataset(...)\") and point HF_HOME (or "
            "HF_DATASETS_CACHE) at that cache, or set HF_TOKEN if the dataset is gated")


def load(manager: Any, specs: list[Any]) -> dict[str, Any]:
    """``TaskManager.load(specs)``: ``{"tasks", "groups", "group_map"}``.

    Raises:
        BenchmarkError: a dataset that cannot be had (one line naming it and the variable to set), a task listed
            twice through two groups, or a task that does not load (its error in one line).
    """
    try:
        return manager.load(specs)
    except Exception as exc:  # noqa: BLE001 - datasets and lm-eval raise many kinds; each becomes one line
        problem = _dataset_problem(exc)
        if problem is not None:
            raise BenchmarkError(problem) from None
        if isinstance(exc, ModuleNotFoundError):
            raise BenchmarkError(
                f"an lm-eval task needs the Python package {exc.name!r}, which is not installed: install it on the "
                "driver and the workers (lm-eval names the extras of its tasks, e.g. pip install "
                "'lm-eval[ifeval]==0.4.13' for IFEval, 'lm-eval[math]==0.4.13' for the MATH tasks)") from None
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        raise BenchmarkError(f"lm-eval could not load the tasks ({type(exc).__name__}: {first}); check -B tasks "
                             "and -B include_path") from None


def configure(tasks: dict[str, Any], options: TaskOptions) -> None:
    """Apply the run's options to every task as ``simple_evaluate`` does: ``gen_kwargs`` merged into each
    ``generate_until`` task's generation arguments, ``num_fewshot`` (a task whose YAML sets 0 keeps 0; a task without
    one gets 0), and the few-shot seed set on every task.

    Raises:
        BenchmarkError: a task that executes model output without ``confirm_run_unsafe_code``, or a multimodal
            task (no model class of the runner takes images or audio).
    """
    for name, task in tasks.items():
        if getattr(task, "UNSAFE_CODE", False) and not options.confirm_run_unsafe_code:
            raise BenchmarkError(f"lm-eval task {name!r} executes the model's output; run it only in a sandbox, with "
                                 "-B confirm_run_unsafe_code=true")
        if getattr(task, "MULTIMODAL", False):
            raise BenchmarkError(f"lm-eval task {name!r} is multimodal, which the runner's lm-eval models do not "
                                 "take; drop it from -B tasks")
        if task.get_config("output_type") == "generate_until" and options.gen_kwargs:
            task.set_config(key="generation_kwargs", value=dict(options.gen_kwargs), update=True)
        if options.num_fewshot is not None:
            if task.get_config("num_fewshot") != 0:
                task.set_config(key="num_fewshot", value=options.num_fewshot)
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=options.seeds[3])


def sample_size(task: Any, limit: float | None) -> int | None:
    """Documents of ``task`` under ``limit`` (a count, or a fraction of the task below 1), as
    ``lm_eval.evaluator_utils.get_sample_size`` counts them."""
    from lm_eval.evaluator_utils import get_sample_size

    return get_sample_size(task, limit)


def build(tasks: dict[str, Any], options: TaskOptions, chat_template: Callable[..., Any] | None
          ) -> dict[str, list[Document]]:
    """Every task's requests, built once (``Task.build_all_requests`` at rank 0 of 1), grouped by document.

    Raises:
        BenchmarkError: a task whose requests cannot be built (its error in one line).
    """
    documents: dict[str, list[Document]] = {}
    for name, task in tasks.items():
        try:
            task.build_all_requests(
                limit=sample_size(task, options.limit), rank=0, world_size=1, cache_requests=False,
                system_instruction=options.system_instruction, apply_chat_template=options.apply_chat_template,
                fewshot_as_multiturn=options.fewshot_as_multiturn,
                chat_template=chat_template if options.apply_chat_template else None, tokenizer_name="")
        except Exception as exc:  # noqa: BLE001 - a task's own code may raise anything
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            raise BenchmarkError(f"lm-eval task {name!r}: its requests cannot be built ({type(exc).__name__}: "
                                 f"{first})") from None
        grouped: dict[int, list[Any]] = defaultdict(list)
        for instance in task.instances:
            grouped[instance.doc_id].append(instance)
        documents[name] = [Document(name, doc_id, found[0].doc, sorted(found, key=lambda inst: inst.idx))
                           for doc_id, found in sorted(grouped.items())]
        task._instances = None  # the documents hold them now
    return documents


def _seed(random_seed: int | None, numpy_seed: int | None) -> None:
    """Python's and numpy's global seeds, as ``simple_evaluate`` sets them before it loads tasks."""
    import numpy

    if random_seed is not None:
        random.seed(random_seed)
    if numpy_seed is not None:
        numpy.random.seed(numpy_seed)


def prepare(options: TaskOptions, chat_template: Callable[[], Callable[..., Any] | None]) -> LoadedTasks:
    """Resolve, load, configure and build, in ``simple_evaluate``'s order: the seeds of Python's ``random`` and numpy
    first (some tasks draw from them while loading), then the tasks, their options, their requests.

    Args:
        options: the run's lm-eval options.
        chat_template: returns the ``chat_template`` callable of the run's model class (called only with
            ``apply_chat_template``).

    Raises:
        BenchmarkError: as :func:`resolve_names`, :func:`load`, :func:`configure` and :func:`build`.
    """
    random_seed, numpy_seed, _, _ = options.seeds
    with quiet():
        own = _own_tasks_only(options)
        if own is not None:
            _seed(random_seed, numpy_seed)
            loaded = load(*own)
        else:
            manager = task_manager(options)
            specs = resolve_names(manager, options.tasks)
            _seed(random_seed, numpy_seed)
            loaded = load(manager, specs)
        tasks, groups = loaded["tasks"], loaded.get("groups", {})
        configure(tasks, options)
        documents = build(tasks, options, chat_template() if options.apply_chat_template else None)
    children = {child for group in groups.values() for child in group.child_names}
    position = {name: index for index, name in enumerate(tasks)}

    def first(name: str) -> int:
        group = groups.get(name)
        leaves = [task.task_name for task in group.get_all_tasks()] if group is not None else [name]
        return min((position[leaf] for leaf in leaves if leaf in position), default=len(position))

    top = sorted((name for name in [*groups, *tasks] if name not in children), key=first)
    return LoadedTasks(tasks, groups, top, documents)
