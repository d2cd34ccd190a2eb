"""RecordsBenchmark (runner.core.benchmark): records loaded once on first need, one task per record, and a pickled
copy (what Ray's workers get) without the records or the transient attributes."""

from __future__ import annotations

import pickle

from runner.core.benchmark import RecordsBenchmark
from runner.core.task import Task


class Letters(RecordsBenchmark[str]):
    transient = ("_source",)

    def __init__(self) -> None:
        super().__init__(name="letters")
        self.loads = 0
        self._source: str | None = None

    def load_records(self) -> list[str]:
        self.loads += 1
        self._source = "abc"
        return list(self._source)

    def make_task(self, record: str) -> Task:
        return Task(id=record, input=record, ground_truth=record.upper())


def test_records_load_once_and_make_one_task_each():
    benchmark = Letters()
    assert benchmark.loads == 0
    assert len(benchmark) == 3
    assert [task.id for task in benchmark] == ["a", "b", "c"]
    assert benchmark.records() == ["a", "b", "c"]
    assert benchmark.loads == 1


def test_a_pickled_copy_leaves_the_data_out_and_loads_it_again():
    benchmark = Letters()
    benchmark.prepare()
    copy = pickle.loads(pickle.dumps(benchmark))
    assert copy._records is None and copy._source is None
    assert benchmark.records() == ["a", "b", "c"] and benchmark._source == "abc"
    assert [task.ground_truth for task in copy] == ["A", "B", "C"]
    assert copy.loads == 2
