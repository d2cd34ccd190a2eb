"""Reports computed from records alone: partial runs, categories, repeats, pass@k, CSV layout."""

import csv
import io

import pytest

from runner.core.record import MetricRecord, TaskRecord, TokenUsage
from runner.report import build_report, results_csv
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
    assert acc.mean == pytest.approx(3 / 7) and acc.n == 7 and acc.n_tasks == 3
    assert (acc.min, acc.max) == (0.0, 1.0)
    # clustered by task: the stderr of the per-task means 2/3, 0 and 1 (mean 5/9)
    deviations = [2 / 3 - 5 / 9, 0 - 5 / 9, 1 - 5 / 9]
    assert acc.stderr == pytest.approx((sum(d * d for d in deviations) / 2 / 3) ** 0.5)
    assert summary.metrics["grade"].distribution == {"A": pytest.approx(3 / 7), "F": pytest.approx(4 / 7)}
    assert summary.by_category["easy"]["acc"] == {"mean": pytest.approx(2 / 3), "n": 3}
    assert summary.by_category["hard"]["acc"] == {"mean": 0.25, "n": 4}
    assert summary.by_repeat["0"]["acc"] == {"mean": pytest.approx(2 / 3), "n": 3}
    assert summary.usage == {"m": {"input_tokens": 30, "output_tokens": 3, "calls": 3}}
    assert summary.duration_s == 3.0


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
    assert rows[0] == ["task_id", "repeat", "status", "tag.category", "acc", "grade"]
    assert rows[1] == ["a", "0", "ok", "easy", "1", "A"]
    assert len(rows) == 8


def test_csv_column_order_is_stable():
    from runner.core.results import ResultRow

    rows = [ResultRow("x", 0, "ok", {"z": "1", "a": "2"}, {"m2": 1.0, "m1": True})]
    text = results_csv(rows, ["m2", "m1"]).decode()
    assert text.splitlines() == ["task_id,repeat,status,tag.a,tag.z,m1,m2", "x,0,ok,2,1,1,1.0"]
