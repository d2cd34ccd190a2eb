"""``-b lm-eval``: any lm-evaluation-harness task or group as one runner benchmark, one item per document, scored
and aggregated by lm-eval itself (see docs/lm-eval.md)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from runner.benchmarks.lmeval import loading, results, routes, scoring
from runner.benchmarks.lmeval.scoring import TaskScorer, metrics_for
from runner.core.benchmark import BenchmarkBase
from runner.core.errors import BenchmarkError
from runner.core.local_code import LocalCode, collect
from runner.core.plugin import declare
from runner.core.record import TaskRecord
from runner.core.results import Headline, ReportFile, RunResults
from runner.core.served import embedded_folder
from runner.core.task import Task

LM_EVAL_VERSION = "0.4.13"
"""The lm-eval release this benchmark is written against and tested with (the ``lm-eval`` extra pins it): its
private aggregation helper (``evaluator_utils._process_results``) may change between releases."""


def _parse_kwargs(value: str | dict[str, Any] | None, what: str) -> dict[str, Any] | None:
    """A mapping, or lm-eval's ``key=value,key=value`` string (``simple_parse_args_string``).

    Raises:
        BenchmarkError: a string with a part that is no ``key=value``, or that does not parse.
    """
    if value is None or isinstance(value, dict):
        return value
    from lm_eval.utils import simple_parse_args_string

    problem = f"-B {what}={value!r}: write key=value,key=value (as lm_eval --{what}) or a JSON object"
    text = str(value).strip()
    if not text or any("=" not in part for part in text.split(",") if part.strip()):
        raise BenchmarkError(problem)
    try:
        return simple_parse_args_string(text)
    except Exception:  # noqa: BLE001 - any parse failure is the user's input
        raise BenchmarkError(problem) from None


@declare("lm-eval", needs={"model", "model_base_url"}, default_solution="lm-eval")
class LMEvalBenchmark(BenchmarkBase):
    """Tasks of lm-evaluation-harness (lm-eval), run by the runner: each document one item (task id
    ``<task>/<doc_id>``, category the task, tag ``group`` its top-level group), its prompts built by lm-eval on the
    driver before any item is sent, answered by lm-eval's own model class on each worker (the ``lm-eval``
    solution), scored by the task's filters and ``process_results`` and aggregated by lm-eval into
    ``lm_eval/results.json`` and ``lm_eval/samples_<task>.jsonl``.

    Args:
        tasks: task, group and tag names, YAML paths or globs, comma-separated (``lm_eval --tasks``).
        include_path: a folder of your own task YAMLs (``--include_path``).
        num_fewshot: few-shot examples per prompt (``--num_fewshot``).
        limit: documents per task, or a fraction below 1 (``--limit``; the runner's ``--limit`` counts documents
            over all tasks in order).
        batch_size: requests per model batch (``--batch_size``; 1 reproduces ``lm_eval --batch_size 1`` exactly): a
            worker gathers the requests of the documents in flight into batches of the model.
        apply_chat_template, fewshot_as_multiturn, system_instruction: as lm-eval's flags
            (``fewshot_as_multiturn`` defaults to ``apply_chat_template``, as ``lm_eval`` does).
        gen_kwargs: generation arguments for ``generate_until`` tasks (``--gen_kwargs``: ``temperature=0,...``).
        seed: ``random,numpy,torch,fewshot`` seeds, or one for all (``--seed``; default ``0,1234,1234,1234``).
        bootstrap_iters: bootstrap resamples of the standard error of a metric that is not a mean
            (``--bootstrap_iters``; 0: none).
        confirm_run_unsafe_code: allow tasks that execute the model's output (``--confirm_run_unsafe_code``).
        metadata: task metadata (``--metadata``), a JSON object or ``key=value,...``.
        endpoint: for a model reached over HTTP, ``completions`` (``local-completions``) or ``chat``
            (``local-chat-completions``).
        max_length: the model's context in tokens (default: the model's own, as its server or config says).
        model_args: more arguments of lm-eval's model class (``--model_args``: ``dtype=bfloat16,...``).
        num_concurrent: requests in flight to an HTTP model per worker (``num_concurrent`` in lm-eval's
            ``model_args``; default 16).
        model, model_base_url: the run's ``--model`` and ``--model-base-url`` (set by the runner).

    Raises:
        BenchmarkError: (when prepared) an unknown task (with the closest names), a dataset that cannot be had, a
            task that needs prompt log-probabilities from an engine that returns none, bad arguments.
    """


    def __init__(
        self,
        tasks: str | list[str] | None = None,
        include_path: str | None = None,
        num_fewshot: int | None = None,
        limit: float | None = None,
        batch_size: int = 1,
        apply_chat_template: bool = False,
        fewshot_as_multiturn: bool | None = None,
        system_instruction: str | None = None,
        gen_kwargs: str | dict[str, Any] | None = None,
        seed: int | str | None = None,
        bootstrap_iters: int = 100000,
        confirm_run_unsafe_code: bool = False,
        metadata: str | dict[str, Any] | None = None,
        endpoint: str = "completions",
        max_length: int | None = None,
        model_args: str | dict[str, Any] | None = None,
        num_concurrent: int = 16,
        model: str | None = None,
        model_base_url: str | None = None,
    ) -> None:
        super().__init__(name="lm-eval", description="lm-evaluation-harness tasks")
        if not tasks:
            raise BenchmarkError("no lm-eval task: pass -B tasks=NAME[,NAME...] (e.g. -B tasks=gsm8k,mmlu)")
        for name, value, low in (("batch_size", batch_size, 1), ("num_concurrent", num_concurrent, 1),
                                 ("bootstrap_iters", bootstrap_iters, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise BenchmarkError(f"-B {name}={value!r}: give a whole number of at least {low}")
        if num_fewshot is not None and (not isinstance(num_fewshot, int) or isinstance(num_fewshot, bool)
                                        or num_fewshot < 0):
            raise BenchmarkError(f"-B num_fewshot={num_fewshot!r}: give a whole number of examples, 0 or more")
        if endpoint == "chat" and not apply_chat_template:
            raise BenchmarkError("-B endpoint=chat sends each prompt as chat messages, which lm-eval builds only with "
                                 "its chat template: add -B apply_chat_template=true (as lm_eval's "
                                 "local-chat-completions needs --apply_chat_template)")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 2):
            raise BenchmarkError(f"-B max_length={max_length!r}: give the model's context in tokens")
        if limit is not None and (isinstance(limit, bool) or limit <= 0):
            raise BenchmarkError(f"-B limit={limit!r}: give a number of documents per task, or a fraction below 1")
        names = tuple(tasks) if isinstance(tasks, list) else (str(tasks),)
        self.options = loading.TaskOptions(
            tasks=names, include_path=include_path, num_fewshot=num_fewshot, limit=limit,
            apply_chat_template=bool(apply_chat_template),
            fewshot_as_multiturn=bool(apply_chat_template) if fewshot_as_multiturn is None else fewshot_as_multiturn,
            system_instruction=system_instruction, gen_kwargs=None, seeds=loading.parse_seeds(seed),
            confirm_run_unsafe_code=confirm_run_unsafe_code,
            metadata=dict(metadata) if isinstance(metadata, dict) else {})
        self._gen_kwargs, self._metadata, self._model_args = gen_kwargs, metadata, model_args
        self.batch_size = batch_size
        self.bootstrap_iters = bootstrap_iters
        self.endpoint = endpoint
        self.max_length = max_length
        self.num_concurrent = num_concurrent
        self.model, self.model_base_url = model, model_base_url
        self.route = routes.route(model, model_base_url, endpoint) if model else None
        self._loaded: loading.LoadedTasks | None = None
        self._model_metadata: dict[str, Any] = {}
        self._scorers: dict[str, TaskScorer] = {}
        self._aggregated: tuple[Any, dict[str, Any]] | None = None

    def items_in_flight(self) -> int:
        """Documents each worker holds in flight so that its model's batches fill (the default of ``--concurrency``):
        ``8 x batch_size`` for a model in the worker, whose call sorts the requests by length and cuts them into
        batches itself, as lm-eval does over a whole task (why 8: W9 in docs/performance.md); ``batch_size x
        num_concurrent`` for one over HTTP."""
        if self.route is not None and self.route.kind != "hf":
            return self.batch_size * self.num_concurrent
        return 8 * self.batch_size

    @property
    def model_args(self) -> dict[str, Any]:
        """lm-eval ``model_args`` for the model class (parsed from ``key=value,...``)."""
        return _parse_kwargs(self._model_args, "model_args") or {}

    def prepare(self) -> None:
        """Load, configure and build every task's requests (lm-eval's ``TaskManager`` indexes its task YAMLs in
        about 7 s, then each dataset loads from the Hugging Face cache), and refuse what the run's model cannot
        answer.

        Raises:
            BenchmarkError: see the class.
        """
        if self._loaded is not None:
            return
        if self.route is None:
            raise BenchmarkError("the lm-eval benchmark evaluates a model: pass --model (e.g. --model "
                                 "transformers:smollm2-135m-instruct)")
        try:
            import lm_eval
        except ImportError:
            raise BenchmarkError("the lm-eval benchmark needs lm-evaluation-harness: pip install "
                                 "'ray-bench-runner[lm-eval]'") from None
        if lm_eval.__version__ != LM_EVAL_VERSION:
            raise BenchmarkError(f"lm-eval {lm_eval.__version__} is installed and the runner is tested with "
                                 f"{LM_EVAL_VERSION} (its aggregation helper is private): pip install "
                                 f"'lm-eval=={LM_EVAL_VERSION}'")
        route = self.route
        # As lm_eval does, the model's arguments are the tasks' metadata too (RULER reads its tokenizer there).
        described = {"pretrained": route.source or embedded_folder()} if route.kind == "hf" else \
            {"model": route.model.partition(":")[2]}
        self._model_metadata = {**described, **self.model_args}
        options = loading.TaskOptions(**{**self.options.__dict__,
                                         "gen_kwargs": _parse_kwargs(self._gen_kwargs, "gen_kwargs"),
                                         "metadata": {**described, **self.model_args,
                                                      **(_parse_kwargs(self._metadata, "metadata") or {})}})
        self.options = options
        tokenizer = self.model_args.get("tokenizer")
        loaded = loading.prepare(options, lambda: routes.chat_template(route, embedded_folder, tokenizer))
        route.refuse_logprob_tasks(routes.output_types(loaded.tasks.values()))
        self._scorers = {name: TaskScorer(task) for name, task in loaded.tasks.items()}
        self._loaded = loaded

    @property
    def loaded(self) -> loading.LoadedTasks:
        """The prepared tasks (preparing them on first use)."""
        self.prepare()
        assert self._loaded is not None
        return self._loaded

    @property
    def version(self) -> str | None:  # type: ignore[override]
        """``<lm-eval version>-<digest>``: the digest of every task's configuration (after the run's options), its
        version, and every document's requests, so a changed task, lm-eval release, few-shot setting or prompt
        is a changed fingerprint. ``None`` when the tasks cannot be prepared here (``status`` on a machine without
        the data)."""
        # Where this machine keeps the embedded model is no part of the configuration (a resume elsewhere).
        return self._digest({"pretrained"}, lambda document: [document.doc_id,
                                                             [instance.args for instance in document.instances]])

    @property
    def scoring_version(self) -> str | None:
        """``<lm-eval version>-<digest>`` of what decides the items and their scoring, whatever the model: every
        task's configuration less the metadata the model puts there (``pretrained`` or ``model``, its
        ``model_args``), its version, and every document's id and dataset row. Unlike :attr:`version`, it leaves out
        the requests' prompts, which a model's chat template shapes: two models' runs of the same tasks and options
        are compared item by item (lm-eval#3831). ``None`` when the tasks cannot be prepared here."""
        return self._digest({"pretrained", *self._model_metadata},
                            lambda document: [document.doc_id, document.doc])

    def _digest(self, model_keys: set[str], per_document: Callable[[loading.Document], Any]) -> str | None:
        """``<lm-eval version>-<digest>`` of every task's configuration (its metadata less ``model_keys``), its
        version and ``per_document`` of each of its documents; ``None`` when the tasks cannot be prepared here."""
        try:
            loaded = self.loaded
        except BenchmarkError:
            return None
        digest = hashlib.sha256()
        for name, task in loaded.tasks.items():
            config = dict(task.dump_config())
            config["metadata"] = {key: value for key, value in (config.get("metadata") or {}).items()
                                  if key not in model_keys}
            digest.update(json.dumps([name, str(task.VERSION), config], sort_keys=True, default=_stable).encode())
            for document in loaded.documents[name]:
                digest.update(json.dumps(per_document(document), default=_stable).encode())
        return f"{LM_EVAL_VERSION}-{digest.hexdigest()[:16]}"

    def __len__(self) -> int:
        return sum(len(documents) for documents in self.loaded.documents.values())

    def __iter__(self) -> Iterator[Task]:
        loaded = self.loaded
        groups = {name: loaded.group_of(name) for name in loaded.tasks}
        for name, documents in loaded.documents.items():
            scorer = self._scorers[name]
            tags = {"category": name, **({"group": groups[name]} if groups[name] else {})}
            for document in documents:
                requests = [{"request_type": instance.request_type, "arguments": instance.arguments,
                             "idx": instance.idx, "repeats": instance.repeats, "doc_id": document.doc_id}
                            for instance in document.instances]
                yield Task(id=f"{name}/{document.doc_id}",
                           input={"task": name, "doc_id": document.doc_id, "doc": document.doc, "requests": requests},
                           metrics=metrics_for(scorer, document.doc, requests), tags=tags)

    def __getstate__(self) -> dict[str, Any]:
        # A worker gets the benchmark once: the options and route, never the datasets or requests (items carry
        # their own requests and their tasks' scorers). The task folders' code travels with it (local_code).
        state = self.__dict__.copy()
        state.update(_loaded=None, _scorers={}, _aggregated=None)
        return state

    def local_code(self) -> LocalCode | None:
        """The Python modules of the run's task folders (``include_path`` and the folder of each task file the tasks
        use), with those task files as the entries a worker imports at once, so that a task file that cannot be
        imported there stops the run before any item is sent (:mod:`runner.core.local_code`); ``None`` before
        :meth:`prepare`, or when the tasks use no file of their own."""
        if self._loaded is None:
            return None
        files = scoring.task_file_modules(self._loaded.tasks.values())
        folders = [self.options.include_path, *(os.path.dirname(name) for name in files)]
        return collect(folders, files)

    def _results(self, rows: list[Any]) -> dict[str, Any]:
        """lm-eval's results of ``rows`` (kept for the report's second use of the same rows)."""
        key = tuple(sorted((row.task_id, row.repeat) for row in rows))
        if self._aggregated is not None and self._aggregated[0] == key:
            return self._aggregated[1]
        loaded = self.loaded
        raw = results.raw_metrics(rows, self._scorers)
        aggregated = results.aggregate(raw, loaded.tasks, loaded.groups, self.bootstrap_iters)
        self._aggregated = (key, aggregated)
        return aggregated

    def score(self, run: RunResults) -> Headline:
        """lm-eval's aggregate of every task and group (see :func:`runner.benchmarks.lmeval.results.headline`), with
        the documents it leaves out counted, and a note when the run's repeats share one sampling seed."""
        headline = results.headline(self._results(run.rows), self.loaded.top,
                                    results.left_out(run.rows, self._scorers))
        if any(row.repeat > 0 for row in run.rows):
            headline.notes.extend(self._shared_seeds())
        return headline

    def _shared_seeds(self) -> list[str]:
        """Lines for a run of several repeats whose sampled requests keep one seed: the user's
        (``-B model_args=seed=N``, ``-B gen_kwargs=seed=N``) or a task's own ``generation_kwargs`` seed, which lm-eval
        sends as it is (:func:`runner.solutions.lmeval.reseeded` gives every other request its repeat's seed)."""
        if self.route is None or self.route.kind == "hf":
            return []
        notes = []
        if "seed" in self.model_args:
            notes.append(f"the repeats share the sampling seed {self.model_args['seed']} (-B model_args=seed=...): a "
                         "server that honours seeds (vLLM) answers a sampled request alike in every repeat, so the "
                         "repeats are not independent samples; drop it to give each repeat a seed of its own")
        for name, task in self.loaded.tasks.items():
            kwargs = getattr(task.config, "generation_kwargs", None) or {}
            temperature = kwargs.get("temperature")
            if task.OUTPUT_TYPE == "generate_until" and "seed" in kwargs and isinstance(temperature, (int, float)) \
                    and temperature > 0:
                notes.append(f"task {name} samples (temperature {temperature}) with the seed {kwargs['seed']} of its "
                             "generation_kwargs, which lm-eval sends as it is: the repeats share it, and a server that "
                             "honours seeds answers alike in every repeat")
        return notes

    def report_files(self, records: Iterable[TaskRecord]) -> list[ReportFile]:
        """``lm_eval/results.json`` and one ``lm_eval/samples_<task>.jsonl`` per task (see
        :mod:`runner.benchmarks.lmeval.results`)."""
        from runner.core.results import ResultRow

        loaded = self.loaded
        kept = list(records)
        rows = [ResultRow(r.task_id, r.repeat, r.status, dict(r.tags),
                          {m.name: m.result for m in r.metrics if m.error is None}, r.tries) for r in kept]
        aggregated = self._results(rows)
        documents = {(name, document.doc_id): document for name, found in loaded.documents.items()
                     for document in found}
        repeats = any(record.repeat > 0 for record in kept)
        lines = results.samples(kept, loaded.tasks, documents, self._scorers, repeats)
        model_name = self.options.metadata.get("pretrained") or self.options.metadata.get("model") or self.model
        starts = [record.started_at for record in kept if record.started_at]
        ends = [record.finished_at for record in kept if record.finished_at]
        extra = {
            "task_hashes": results.task_hashes(lines),
            "model_source": routes.MODEL_CLASSES[self.route.kind] if self.route is not None else None,
            "model_name": model_name,
            "model_name_sanitized": str(model_name).replace("/", "__"),
            "date": time.time(),
            "total_evaluation_time_seconds": str(_seconds(min(starts), max(ends))) if starts and ends else None,
            "config": {"model": routes.MODEL_CLASSES[self.route.kind] if self.route is not None else None,
                       "runner_model": self.model,
                       "model_args": {**({"pretrained": model_name} if self.route is not None and
                                         self.route.kind == "hf" else {"model": model_name}), **self.model_args},
                       "batch_size": self.batch_size,
                       "limit": self.options.limit, "bootstrap_iters": self.bootstrap_iters,
                       "gen_kwargs": self.options.gen_kwargs, "random_seed": self.options.seeds[0],
                       "numpy_seed": self.options.seeds[1], "torch_seed": self.options.seeds[2],
                       "fewshot_seed": self.options.seeds[3]},
            "lm_eval_version": LM_EVAL_VERSION,
            "system_instruction": self.options.system_instruction,
            "fewshot_as_multiturn": self.options.fewshot_as_multiturn,
            "chat_template": self.options.apply_chat_template,
        }
        left_out = sorted(set(self.loaded.groups) - set(aggregated.get("group_subtasks", {})))
        note = "lm-eval's results_<date>.json, aggregated by lm-eval from the records"
        if left_out:
            note += (f"; group(s) {', '.join(left_out)} left out, as lm-eval leaves out a group with a task that has no "
                     "result (no record yet, or past --limit)")
        files = [ReportFile(results.RESULTS_FILE, results.results_json(aggregated, extra), note)]
        for name, found in lines.items():
            files.append(ReportFile(results.SAMPLES_FILE.format(task=name), results.samples_jsonl(found),
                                    f"lm-eval's --log_samples lines of {name}"))
        return files


def _seconds(start: str, end: str) -> float:
    """Seconds from one ISO-8601 time to another (the records' first start to their last end)."""
    return (_dt.datetime.fromisoformat(end) - _dt.datetime.fromisoformat(start)).total_seconds()


def _stable(value: Any) -> Any:
    """A JSON stand-in for a value of a task's configuration that is the same in every process: a function by its
    module, name and source (lm-eval writes its repr, which holds its address), anything else as lm-eval's
    ``handle_non_serializable`` writes it."""
    if callable(value):
        import inspect

        try:
            source = hashlib.sha256(inspect.getsource(value).encode()).hexdigest()[:16]
        except (OSError, TypeError):
            source = ""
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}:{source}"
    from lm_eval.utils import handle_non_serializable

    return handle_non_serializable(value)
