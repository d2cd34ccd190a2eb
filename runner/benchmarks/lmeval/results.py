"""A run's lm-evaluation-harness results, aggregated by lm-eval itself and written in its own formats.

The per-document values come from the records (one per (document, repeat)); lm-eval's private
``lm_eval.evaluator_utils._process_results`` aggregates them exactly as ``lm_eval.evaluator.evaluate`` does: each
metric's aggregation function, its standard error (closed form for means, bootstrap for the others), and the group
rules (size-weighted means, as MMLU's groups are). It is private, so the extra pins lm-eval's version and the tests
check this pinned behaviour against the ``lm_eval`` command itself.

Files, beside ``summary.json``:

- ``lm_eval/results.json``: the shape of lm-eval's ``results_<date>.json`` (``results``, ``groups``,
  ``group_subtasks``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``, ``task_hashes``,
  ``config``, ``lm_eval_version``);
- ``lm_eval/samples_<task>.jsonl``: the shape of its ``--log_samples`` files, one line per document and filter, the
  responses and arguments sanitised as ``EvaluationTracker.save_results_samples`` writes them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from runner.core.record import TaskRecord
from runner.core.results import Headline, ResultRow

RESULTS_FILE = "lm_eval/results.json"
SAMPLES_FILE = "lm_eval/samples_{task}.jsonl"
RESERVED = ("name", "alias", "sample_len", " ", "samples")
"""Keys of an entry of lm-eval's ``results`` that are not metrics."""


def split_task_id(task_id: str) -> tuple[str, int] | None:
    """``(task, doc_id)`` of a runner task id ``<task>/<doc_id>``; ``None`` for another shape."""
    task, sep, doc = task_id.rpartition("/")
    if not sep or not doc.isdigit():
        return None
    return task, int(doc)


def raw_metrics(rows: Iterable[ResultRow], scorers: Mapping[str, Any]) -> dict[str, dict[tuple[str, str], list]]:
    """Task -> ``(metric, filter)`` -> the per-document values, in lm-eval's order (filters outer, then metrics;
    documents by id, repeats in order), from the rows of a run's records. A document whose metric raised is
    left out of that metric, as lm-eval leaves out a document whose ``process_results`` omits a key."""
    by_task: dict[str, list[tuple[int, int, Mapping[str, Any]]]] = defaultdict(list)
    for row in rows:
        found = split_task_id(row.task_id)
        if found is not None and found[0] in scorers:
            by_task[found[0]].append((found[1], row.repeat, row.scores))
    raw: dict[str, dict[tuple[str, str], list]] = {}
    for task, entries in by_task.items():
        entries.sort(key=lambda entry: (entry[0], entry[1]))
        per_key: dict[tuple[str, str], list] = {}
        for metric, filter_name in scorers[task].keys():
            name = f"{metric},{filter_name}"
            values = [scores[name] for _, _, scores in entries if name in scores]
            if values:
                per_key[(metric, filter_name)] = values
        raw[task] = per_key
    return raw


def aggregate(raw: dict[str, dict[tuple[str, str], list]], tasks: Mapping[str, Any], groups: Mapping[str, Any],
              bootstrap_iters: int) -> dict[str, Any]:
    """lm-eval's results dictionary of ``raw`` (see the module docstring): ``results``, ``groups``,
    ``group_subtasks``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``. A task with no
    value yet is left out; a group without any of its tasks too."""
    from lm_eval.evaluator_utils import _process_results

    present = {name: task for name, task in tasks.items() if raw.get(name)}
    accumulated = {name: {"task": task, "raw_metrics": defaultdict(list, raw[name]), "logged_samples": []}
                   for name, task in present.items()}
    usable_groups = {name: group for name, group in groups.items()
                     if all(leaf.task_name in present for leaf in group.get_all_tasks())}
    return dict(_process_results(accumulated, usable_groups, bootstrap_iters)._to_eval_results())


def main_metric(entry: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first metric of one entry of lm-eval's ``results`` (the first row lm-eval's table prints for it), as
    ``(key, value)``; ``None`` when it has none."""
    for key, value in entry.items():
        if key in RESERVED or "_stderr," in key:
            continue
        return key, value
    return None


def left_out(rows: Iterable[ResultRow], scorers: Mapping[str, Any]) -> int:
    """The documents (rows, one per document and repeat) that lm-eval's aggregation does not count: those without a
    value of any of their task's metrics (a failed log-likelihood document, for which lm-eval has no miss; a
    document whose ``process_results`` raised). A failed generation is scored as a miss and counted
    (:class:`~runner.benchmarks.lmeval.scoring.DocScore`)."""
    count = 0
    for row in rows:
        found = split_task_id(row.task_id)
        if found is None or found[0] not in scorers:
            continue
        if not any(f"{metric},{filter_name}" in row.scores for metric, filter_name in scorers[found[0]].keys()):
            count += 1
    return count


def headline(results: dict[str, Any], top: list[str], left: int = 0) -> Headline:
    """The headline: each top-level task's and group's main metric as a component (``"<name> <metric>,<filter>"``),
    and every task's and group's metrics as per-category entries (``mean`` the aggregate, ``stderr`` lm-eval's or
    ``None`` where it says ``N/A``, ``n`` its documents). ``score`` is the main metric when the run has one top-level
    task or group (its ``stderr`` lm-eval's), else ``None``: lm-eval's table gives no overall number, and averaging a
    perplexity with an accuracy would mean nothing. ``left``: the documents lm-eval's aggregation does not count
    (:func:`left_out`), which the headline's line then names."""
    entries = results.get("results", {})
    components = {}
    for name in top:
        found = main_metric(entries.get(name, {}))
        if found is not None and isinstance(found[1], (int, float)):
            components[f"{name} {found[0]}"] = float(found[1])
    by_category: dict[str, dict[str, dict[str, Any]]] = {}
    for name, entry in entries.items():
        metrics = {}
        for key, value in entry.items():
            if key in RESERVED or "_stderr," in key or not isinstance(value, (int, float)):
                continue
            metric, _, filter_name = key.partition(",")
            stderr = entry.get(f"{metric}_stderr,{filter_name}")
            metrics[key] = {"mean": float(value), "stderr": float(stderr) if isinstance(stderr, (int, float)) else None,
                            "n": entry.get("sample_len")}
        if metrics:
            by_category[name] = metrics
    score = next(iter(components.values())) if len(top) == 1 and components else None
    stderr = None
    if score is not None:
        found = main_metric(entries.get(top[0], {}))
        stderr = by_category.get(top[0], {}).get(found[0], {}).get("stderr") if found is not None else None
    why = "their model calls failed and lm-eval has no miss for a log-likelihood (see the records' errors)"
    return Headline(score=score, stderr=stderr, components=components, by_category=by_category, left_out=left,
                    left_out_why=why if left else "")


def samples(records: Iterable[TaskRecord], tasks: Mapping[str, Any], documents: Mapping[tuple[str, int], Any],
            scorers: Mapping[str, Any], repeats: bool) -> dict[str, list[dict[str, Any]]]:
    """Task -> its ``--log_samples`` lines, in lm-eval's order (filters outer, documents by id), from the records and
    the driver's documents (the document, its requests and target as lm-eval built them).

    Args:
        records: the run's records (those of other tasks are skipped).
        tasks: task name -> lm-eval ``Task`` (for ``doc_to_target``).
        documents: ``(task, doc_id)`` -> :class:`~runner.benchmarks.lmeval.loading.Document`.
        scorers: task name -> its :class:`~runner.benchmarks.lmeval.scoring.TaskScorer`.
        repeats: the run has several repeats: each line then says its ``repeat`` (lm-eval has none).
    """
    from lm_eval.utils import handle_non_serializable, hash_string

    from lm_eval.models.api_models import LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER

    lines: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = defaultdict(list)
    for record in records:
        found = split_task_id(record.task_id)
        if found is None or found not in documents:
            continue
        task, doc_id = found
        document, scorer = documents[found], scorers[task]
        resps = record.output.get("resps") if isinstance(record.output, dict) else None
        if resps is None:
            if not any(metric.error is None for metric in record.metrics):
                continue
            # A failed generation scored as a miss (scoring.DocScore): lm-eval's placeholder for each answer.
            resps = [[LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER] * max(1, instance.repeats or 1)
                     for instance in document.instances]
        target = tasks[task].doc_to_target(document.doc)
        by_name = {metric.name: metric for metric in record.metrics}
        for order, filter_name in enumerate(scorer.filters):
            values = {metric: by_name[f"{metric},{filter_name}"].result for metric in scorer.metrics
                      if f"{metric},{filter_name}" in by_name and by_name[f"{metric},{filter_name}"].error is None}
            filtered = next((by_name[f"{metric},{filter_name}"].metadata or {}).get("filtered_resps")
                            for metric in scorer.metrics if f"{metric},{filter_name}" in by_name)
            line = {
                "doc_id": doc_id,
                "doc": document.doc,
                "target": target,
                "arguments": [instance.args for instance in document.instances],
                "resps": resps,
                "filtered_resps": filtered,
                "filter": filter_name,
                "metrics": list(values),
                "doc_hash": hash_string(json.dumps(document.instances[0].doc, indent=2,
                                                   default=handle_non_serializable, ensure_ascii=False)),
                "prompt_hash": hash_string(document.instances[0].arguments[0]),
                "target_hash": hash_string(str(target)),
                **({"repeat": record.repeat} if repeats else {}),
                **values,
            }
            lines[task].append((order, doc_id, record.repeat, line))
    return {task: [line for *_, line in sorted(found, key=lambda entry: entry[:3])] for task, found in lines.items()}


def samples_jsonl(lines: list[dict[str, Any]]) -> bytes:
    """``--log_samples`` lines as ``EvaluationTracker.save_results_samples`` writes them: each request's arguments
    as ``gen_args_<i>: {arg_<j>: ...}``, responses sanitised to strings (``sanitize_list``), the target as a string."""
    from lm_eval.utils import handle_non_serializable, sanitize_list

    out = []
    for sample in lines:
        sample = dict(sample)
        sample["arguments"] = {f"gen_args_{i}": {f"arg_{j}": part for j, part in enumerate(arguments)}
                               for i, arguments in enumerate(sample["arguments"])}
        sample["resps"] = sanitize_list(sample["resps"])
        sample["filtered_resps"] = sanitize_list(sample["filtered_resps"])
        sample["target"] = str(sample["target"])
        out.append(json.dumps(sample, default=handle_non_serializable, ensure_ascii=False))
    return ("\n".join(out) + "\n").encode() if out else b""


def task_hashes(samples_by_task: Mapping[str, list[dict[str, Any]]]) -> dict[str, str]:
    """lm-eval's ``task_hashes``: per task, the hash of its samples' document, prompt and target hashes in order
    (``EvaluationTracker.save_results_aggregated``)."""
    from lm_eval.utils import hash_string

    return {task: hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in lines))
            for task, lines in samples_by_task.items()}


def results_json(results: dict[str, Any], extra: Mapping[str, Any]) -> bytes:
    """``results.json``: lm-eval's results dictionary with ``extra`` (``config``, ``task_hashes``...), as
    ``save_results_aggregated`` dumps it (indented, non-JSON values as lm-eval's ``handle_non_serializable``)."""
    from lm_eval.utils import handle_non_serializable

    return (json.dumps({**results, **extra}, indent=2, default=handle_non_serializable, ensure_ascii=False)
            + "\n").encode()
