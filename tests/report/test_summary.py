"""Reports computed from records alone: partial runs, categories, repeats, pass@k, CSV layout."""

import csv
import io
import json

import pytest

from runner.core.record import ErrorInfo, MetricRecord, TaskRecord, Timings, TokenUsage
from runner.report import PlanScope, build_report, count_stored, results_csv
from runner.storage import BenchmarkInfo, ResultStore, RunManifest


def record(task, repeat, value, category, status="ok", usage=0):
    return TaskRecord(
        run_id="r", task_id=task, repeat=repeat, status=status, tags={"category": category},
        metrics=[MetricRecord(name="acc", result=value), MetricRecord(name="grade", type="category",
                                                                     result="A" if value else "F")],
        started_at=f"2026-01-01T00:00:0{repeat}+00:00", finished_at=f"2026-01-01T00:00:0{repeat + 1}+00:00",
        usage={"m": TokenUsage(input_tokens=usage, output_tokens=1, calls=1)} if usage else {},
    )


@pytest.fixture
def store(tmp_path):
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=3,
                                     benchmark=BenchmarkInfo(name="demo", n_tasks=3), runner_version="0"))
    # task a: 1,1,0 ; task b: 0,0,0 ; task c: only one repeat so far (a partial run), an error record
    for repeat, value in enumerate([1, 1, 0]):
        store.write_record(record("a", repeat, value, "easy", usage=10))
    for repeat in range(3):
        store.write_record(record("b", repeat, 0, "hard"))
    store.write_record(record("c", 0, 1, "hard", status="error"))
    return store


def test_partial_run_summary(store):
    summary = build_report(store)
    assert (summary.expected, summary.completed, summary.missing, summary.errors) == (9, 7, 2, 1)
    acc = summary.metrics["acc"]
    # each task weighs the same: the mean of the per-task means 2/3, 0 and 1 (not 3/7, the mean of the 7 values,
    # which would weigh task c, with one value so far, a third as much as the others)
    assert acc.mean == pytest.approx(5 / 9) and acc.n == 7 and acc.n_tasks == 3 and summary.weighting == "task"
    assert (acc.min, acc.max) == (0.0, 1.0)
    # clustered by task: the stderr of the per-task means 2/3, 0 and 1 (mean 5/9), the standard error of that mean
    deviations = [2 / 3 - 5 / 9, 0 - 5 / 9, 1 - 5 / 9]
    assert acc.stderr == pytest.approx((sum(d * d for d in deviations) / 2 / 3) ** 0.5)
    assert summary.metrics["grade"].distribution == {"A": pytest.approx(3 / 7), "F": pytest.approx(4 / 7)}
    # easy: task a only (no stderr); hard: tasks b (mean 0) and c (mean 1), clustered stderr sd([0, 1]) / sqrt(2)
    assert summary.by_category["easy"]["acc"] == {"mean": pytest.approx(2 / 3), "stderr": None, "n": 3}
    assert summary.by_category["hard"]["acc"] == {"mean": 0.5, "stderr": pytest.approx(0.5), "n": 4}
    # repeat 0: a 1, b 0, c 1, one value per task: sd([1, 0, 1]) / sqrt(3) = 1/3
    assert summary.by_repeat["0"]["acc"] == {"mean": pytest.approx(2 / 3), "stderr": pytest.approx(1 / 3), "n": 3}
    assert summary.usage == {"m": {"input_tokens": 30, "output_tokens": 3, "calls": 3}}
    assert summary.duration_s == 3.0


def test_latency_percentiles_tokens_per_item_and_error_types(tmp_path):
    """Percentiles by linear interpolation (numpy's default): for 1..11 s, p50 = 6, p90 = 10, p99 = 10.9."""
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=1,
                                     benchmark=BenchmarkInfo(name="demo", n_tasks=11), runner_version="0"))
    for i in range(11):
        item = record(f"t{i:02}", 0, 1, "slow" if i >= 8 else "fast", usage=10 * i)
        update = {"timings": Timings(solution_s=i + 1, total_s=i + 1.5)}
        if i == 10:
            update.update(status="timeout", error=ErrorInfo(type="TimeoutError", message="late"))
        store.write_record(item.model_copy(update=update))
    summary = build_report(store)
    assert summary.latency["solution_s"] == {"p50": 6.0, "p90": 10.0, "p99": pytest.approx(10.9)}
    assert summary.latency["total_s"]["p50"] == 6.5 and summary.latency["n"] == 11
    # slow: 9, 10, 11 s -> p50 10, p90 10.8
    assert summary.latency_by_category["slow"]["solution_s"]["p90"] == pytest.approx(10.8)
    assert summary.latency_by_category["fast"]["n"] == 8
    # model m: input 10 * (1 + ... + 10) = 550 over 11 items (t00 never called it); output 1 per call
    assert summary.tokens_per_item == {"m": {"input_tokens": 50.0, "output_tokens": pytest.approx(10 / 11),
                                             "calls": pytest.approx(10 / 11)}}
    assert summary.error_types == {"TimeoutError": 1}
    stored = json.loads(store.read_file("summary.json"))
    assert stored["latency_by_category"]["slow"]["solution_s"]["p50"] == 10.0


def test_pass_at_k_uses_tasks_with_enough_repeats(store):
    summary = build_report(store)
    # k=1 over a (2/3), b (0), c (1): mean 5/9; k=2 over a, b only: a: 1 - C(1,2)/C(3,2) = 1, b: 0
    assert summary.pass_at_k["acc"]["1"] == pytest.approx(5 / 9)
    assert summary.pass_at_k["acc"]["2"] == pytest.approx(0.5)
    assert summary.pass_at_k["acc"]["3"] == pytest.approx(0.5)
    assert summary.pass_hat_k["acc"]["2"] == pytest.approx((1 / 3 + 0) / 2)
    assert "grade" not in summary.pass_at_k


def test_report_files_are_written(store):
    build_report(store)
    assert store.read_file("summary.json")
    rows = list(csv.reader(io.StringIO(store.read_file("results.csv").decode())))
    assert rows[0] == ["task_id", "repeat", "status", "tries", "tag.category", "acc", "grade"]
    assert rows[1] == ["a", "0", "ok", "1", "easy", "1", "A"]
    assert len(rows) == 8


def test_csv_column_order_is_stable():
    from runner.core.results import ResultRow

    rows = [ResultRow("x", 0, "ok", {"z": "1", "a": "2"}, {"m2": 1.0, "m1": True})]
    text = results_csv(rows, ["m2", "m1"]).decode()
    assert text.splitlines() == ["task_id,repeat,status,tries,tag.a,tag.z,m1,m2", "x,0,ok,1,2,1,1,1.0"]


def scoped_store(tmp_path, n_repeats, n_tasks, limit, widest_limit, duplicate_tasks=0):
    """A run directory whose latest run planned ``n_tasks`` positions and ``n_repeats`` repeats, holding records of
    5 tasks x 3 repeats (positions 0-4) and one task ``old`` recorded before records kept their position."""
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(
        run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=n_repeats, runner_version="0",
        benchmark=BenchmarkInfo(name="demo", n_tasks=n_tasks, limit=limit, widest_limit=widest_limit,
                                duplicate_tasks=duplicate_tasks)))
    for index, task in enumerate("abcde"):
        for repeat in range(3):
            store.write_record(record(task, repeat, 1, "easy").model_copy(update={"task_index": index}))
    store.write_record(record("old", 0, 0, "easy"))
    return store


def test_records_outside_the_current_plan_are_kept_and_not_counted(tmp_path):
    """Run with 3 repeats on 5 tasks, resumed with --repeats 2 --limit 2: only positions 0-1, repeats 0-1 count."""
    store = scoped_store(tmp_path, n_repeats=2, n_tasks=2, limit=2, widest_limit=None)
    summary = build_report(store)
    # a, b: 2 repeats each; "old" has no position, so it counts (repeat 0 is in the plan)
    assert (summary.expected, summary.completed, summary.missing) == (4, 5, 0)
    assert (summary.outside_plan, summary.outside_plan_by) == (11, {"limit": 6, "repeats": 5})
    assert summary.notes == ["11 stored records are outside the current plan (5 with repeat index >= 2, 6 of tasks "
                             "past the first 2): kept on disk, not counted",
                             "metric 'acc': pass@2 and pass^2 average 2 of 3 tasks; 1 task(s) with fewer than 2 "
                             "usable result(s) (errors, missing items) are left out"]
    assert (summary.pass_k_tasks["acc"], summary.pass_k_left_out["acc"]) == ({"1": 3, "2": 2}, {"1": 0, "2": 1})
    assert summary.metrics["acc"].n == 5 and set(summary.by_repeat) == {"0", "1"}
    assert set(summary.pass_at_k["acc"]) == {"1", "2"}
    assert len(store.list_record_paths()) == 16
    stored = json.loads(store.read_file("summary.json"))
    assert (stored["completed"], stored["outside_plan"]) == (5, 11)


def test_count_stored_reads_records_only_when_a_wider_limit_ran(tmp_path):
    """status's count: the repeat comes from the path; positions are read only when records past the limit can
    exist, and then agree with the report."""
    wide = scoped_store(tmp_path / "wide", n_repeats=2, n_tasks=2, limit=2, widest_limit=None)
    count = count_stored(wide, PlanScope.of(wide.read_manifest()))
    assert (count.done, dict(count.outside)) == (build_report(wide, write=False).completed, {"limit": 6, "repeats": 5})
    # The manifest says no run went past position 2, so the listing is trusted and no record is read (the records
    # past it that this fixture fakes are not looked for).
    narrow = scoped_store(tmp_path / "narrow", n_repeats=2, n_tasks=2, limit=2, widest_limit=2)
    assert not PlanScope.of(narrow.read_manifest()).may_hold_later_tasks
    assert count_stored(narrow, PlanScope.of(narrow.read_manifest())).done == 11


def test_duplicate_task_ids_count_once(tmp_path):
    store = scoped_store(tmp_path, n_repeats=3, n_tasks=7, limit=None, widest_limit=None, duplicate_tasks=1)
    summary = build_report(store)
    assert (summary.n_tasks, summary.expected, summary.completed, summary.missing) == (6, 18, 16, 2)
    assert summary.duplicate_tasks == 1 and summary.outside_plan == 0
    assert summary.notes == ["2 of 18 items have no record yet: the score and the metrics cover the 16 items done",
                             "the benchmark repeats 1 task id(s) at later positions: each id has one record per "
                             "repeat and is counted once",
                             *(f"metric 'acc': pass@{k} and pass^{k} average 5 of 6 tasks; 1 task(s) with fewer than "
                               f"{k} usable result(s) (errors, missing items) are left out" for k in (2, 3))]


def test_a_run_where_no_item_succeeded_says_so(tmp_path):
    """Every record an error (a server that refused every call): the score is noted as covering no answer, with the
    most common error type; one ok record removes the note."""
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=1,
                                     benchmark=BenchmarkInfo(name="demo", n_tasks=4), runner_version="0"))
    for index, kind in enumerate(["ModelError", "ModelError", "TimeoutError"]):
        failed = record(f"t{index}", 0, 0, "c", status="error")
        failed.error = ErrorInfo(type=kind, message="refused")
        store.write_record(failed)
    summary = build_report(store)
    assert ("no item succeeded: all 3 records are errors (2 ModelError); the score covers no answer of the solution: "
            "see results.csv or report.html for the errors, fix their cause and rerun with --rerun-failed"
            ) in summary.notes
    store.write_record(record("t3", 0, 1, "c"))
    assert not [note for note in build_report(store).notes if note.startswith("no item succeeded")]
