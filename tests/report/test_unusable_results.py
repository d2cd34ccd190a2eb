"""Metric results a report cannot use (errors, NaN, infinities, values that are no number) are counted per metric by
reason and said in a note, never silently dropped; infinities of a metric that allows them aggregate as such; the
CSV keeps each value as the record has it. From records alone, and end to end through the evaluator."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from runner import BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, MetricBase, Task
from runner.core.record import ErrorInfo, MetricRecord, TaskRecord
from runner.report import build_report
from runner.storage import BenchmarkInfo, ResultStore, RunManifest


def store_of(tmp_path, results, *, allows_infinite=False, tries=None, n_repeats=1):
    """A run whose task ``t<i>`` has the metric ``m`` with ``results[i]`` (an ``ErrorInfo`` for an error) and the
    metric ``ok`` with 1.0."""
    store = ResultStore(str(tmp_path))
    store.write_manifest(RunManifest(run_id="r", fingerprint="f", fingerprint_fields={}, n_repeats=n_repeats,
                                     benchmark=BenchmarkInfo(name="demo", n_tasks=len(results)), runner_version="0"))
    for index, value in enumerate(results):
        metric = MetricRecord(name="m", error=value, allows_infinite=allows_infinite) if isinstance(value, ErrorInfo) \
            else MetricRecord(name="m", result=value, allows_infinite=allows_infinite)
        store.write_record(TaskRecord(
            run_id="r", task_id=f"t{index}", repeat=0, status="ok", tags={"category": "c"},
            metrics=[metric, MetricRecord(name="ok", result=1.0)], tries=(tries or {}).get(index, 1),
            started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00"))
    return store


def test_every_metric_says_how_many_results_it_could_not_use_and_why(tmp_path):
    store = store_of(tmp_path, [1.0, float("nan"), 0.0, None, "high", ErrorInfo(type="RuntimeError", message="x"),
                                ErrorInfo(type="JudgeScoreOutOfRange", message="y", code="judge_score_out_of_range"),
                                True, math.inf])
    summary = build_report(store)
    m = summary.metrics["m"]
    assert (m.mean, m.n, m.errors, m.min, m.max) == (pytest.approx(2 / 3), 3, 2, 0.0, 1.0)
    assert m.unusable == {"error": 1, "non_finite": 2, "not_a_number": 2, "too_large": 0,
                          "judge_score_out_of_range": 1}
    assert summary.metrics["ok"].unusable == {"error": 0, "non_finite": 0, "not_a_number": 0, "too_large": 0}
    assert summary.notes == ["metric 'm': 6 of 9 results could not be used and are left out of its mean (1 error, 2 "
                             "non_finite, 2 not_a_number, 1 judge_score_out_of_range)"]
    assert summary.by_category["c"]["m"] == {"mean": pytest.approx(2 / 3), "stderr": pytest.approx(1 / 3), "n": 3}
    stored = json.loads(store.read_file("summary.json"))
    assert stored["metrics"]["m"]["unusable"] == m.unusable
    rows = {row["task_id"]: row for row in csv.DictReader(io.StringIO(store.read_file("results.csv").decode()))}
    assert [rows[f"t{i}"]["m"] for i in range(9)] == ["1.0", "NaN", "0.0", "", "high", "", "", "1", "Infinity"]


NINES = int("9" * 400)
"""The answer of 400 nines that ``abs(int(answer) - gold)`` met (traceroot-py PR #161)."""


def test_an_integer_no_float_can_hold_is_kept_exactly_counted_too_large_and_left_out_of_the_mean(tmp_path, cli):
    """The issue's ``abs(int(answer) - gold)`` for 400 nines, and its neighbours: a negative one, and one of 4,301
    digits (past what JSON readers take: stored as its digits' text). Before: ``OverflowError`` from the report,
    no summary.json, ``report`` exit 1."""
    huge, huge_digits = 7 * 10**4300, "7" + "0" * 4300
    store = store_of(tmp_path, [1.0, NINES - 3, -(10**400), huge, 0.0])
    summary = build_report(store)
    m = summary.metrics["m"]
    assert (m.mean, m.n, m.min, m.max) == (0.5, 2, 0.0, 1.0)
    assert m.unusable == {"error": 0, "non_finite": 0, "not_a_number": 0, "too_large": 3}
    assert summary.notes == ["metric 'm': 3 of 5 results could not be used and are left out of its mean (3 "
                             "too_large)"]
    assert summary.by_category["c"]["m"] == {"mean": 0.5, "stderr": 0.5, "n": 2}
    stored = {record.task_id: record.metrics[0].result for record in store.iter_records()}
    assert stored == {"t0": 1.0, "t1": NINES - 3, "t2": -(10**400), "t3": huge_digits, "t4": 0.0}
    assert json.loads(store.read_file("summary.json"))["metrics"]["m"]["unusable"]["too_large"] == 3
    rows = {row["task_id"]: row for row in csv.DictReader(io.StringIO(store.read_file("results.csv").decode()))}
    assert [rows[f"t{i}"]["m"] for i in range(5)] == ["1.0", str(NINES - 3), str(-(10**400)), huge_digits, "0.0"]

    again = cli("report", str(tmp_path), "--html")
    assert again.returncode == 0, again.stderr
    assert "3 too_large" in again.stdout
    page = (tmp_path / "report.html").read_text()
    assert str(NINES - 3) in page and "Infinity" not in page


def test_the_table_counts_unusable_results_and_prints_the_notes(tmp_path):
    from rich.console import Console

    from runner.report import render

    summary = build_report(store_of(tmp_path, [1.0, float("nan"), None]))
    console = Console(file=io.StringIO(), width=200)
    render(summary, console)
    text = console.file.getvalue()
    assert "note: metric 'm': 2 of 3 results could not be used and are left out of its mean (1 non_finite, 1 " \
           "not_a_number)" in text
    cells = [[cell.strip() for cell in line.strip("┃│").split(line[0])] for line in text.splitlines()
             if line[:1] in "┃│"]
    assert cells[0] == ["metric", "mean", "stderr", "n", "min", "max", "unusable"]
    assert cells[1] == ["m", "1.0000", "-", "1", "1.000", "1.000", "2"]


def test_infinities_a_metric_allows_aggregate_as_such(tmp_path):
    summary = build_report(store_of(tmp_path / "inf", [1.0, math.inf, 3.0], allows_infinite=True))
    m = summary.metrics["m"]
    assert (m.mean, m.stderr, m.n, m.min, m.max) == (math.inf, None, 3, 1.0, math.inf)
    assert m.unusable["non_finite"] == 0
    assert summary.notes == ["metric 'm': infinite results, which the metric allows: its mean is inf and its stderr "
                             "is not reported"]
    assert summary.by_category["c"]["m"] == {"mean": math.inf, "stderr": None, "n": 3}
    stored = json.loads((tmp_path / "inf" / "summary.json").read_text(),
                        parse_constant=lambda constant: pytest.fail(f"{constant} in summary.json"))
    assert (stored["metrics"]["m"]["mean"], stored["metrics"]["m"]["max"]) == ("Infinity", "Infinity")

    both = build_report(store_of(tmp_path / "both", [math.inf, -math.inf, float("nan")], allows_infinite=True))
    assert both.metrics["m"].mean is None and both.metrics["m"].unusable["non_finite"] == 1
    assert "metric 'm': infinite results, which the metric allows: its mean is undefined (both +inf and -inf) and " \
           "its stderr is not reported" in both.notes

    finite_only = build_report(store_of(tmp_path / "finite", [1.0, math.inf, 3.0]))
    assert (finite_only.metrics["m"].mean, finite_only.metrics["m"].unusable["non_finite"]) == (2.0, 1)


def test_retried_items_are_counted_and_their_mean_is_beside_the_others(tmp_path):
    summary = build_report(store_of(tmp_path, [1.0, 0.0, 0.0, 1.0], tries={1: 3, 2: 2}))
    assert summary.retried_items == 2
    assert summary.metrics["m"].by_tries == {"first_try": {"mean": 1.0, "n": 2}, "retried": {"mean": 0.0, "n": 2}}
    assert "2 item(s) needed solution retries; each metric's by_tries compares their mean with the items whose " \
           "solution ran once" in summary.notes
    rows = list(csv.DictReader(io.StringIO(tmp_path.joinpath("results.csv").read_text())))
    assert [row["tries"] for row in rows] == ["1", "3", "2", "1"]
    assert build_report(store_of(tmp_path / "none", [1.0])).metrics["m"].by_tries is None


class _Five(BenchmarkBase):
    """Five tasks; the metric ``custom`` gives ``values[i]`` on task i."""

    def __init__(self, values, allows_infinite=False):
        super().__init__(name="five")
        self.values, self.allows_infinite = values, allows_infinite

    def __iter__(self):
        for index, value in enumerate(self.values):
            yield Task(id=f"t{index}", metrics=[_Given(value, self.allows_infinite)])


class _Given(MetricBase):
    def __init__(self, value, allows_infinite):
        super().__init__(name="custom", allows_infinite=allows_infinite)
        self.value = value

    def __call__(self, solution):
        return self.value


async def test_a_custom_metric_returning_nan_is_counted_and_noted_end_to_end(tmp_path):
    """The issue's case: NaN on one task of five. Before: the record said ok with an empty score, the mean was
    over 4 of 5, errors 0, no note."""
    evaluator = GeneralEvaluator(benchmark=_Five([1.0, 0.0, float("nan"), 1.0, 1.0]),
                                 storage=FileEvaluatorStorage(str(tmp_path)), show=False)
    summary = await evaluator.run(lambda task: "answer")
    custom = summary.metrics["custom"]
    assert (custom.mean, custom.n, custom.unusable["non_finite"]) == (0.75, 4, 1)
    assert summary.notes == ["metric 'custom': 1 of 5 results could not be used and are left out of its mean (1 "
                             "non_finite)"]
    record = json.loads((tmp_path / "records" / "t2" / "0.json").read_text())
    assert record["status"] == "ok" and record["metrics"][0]["result"] == "NaN"
