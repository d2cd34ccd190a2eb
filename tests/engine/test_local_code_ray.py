"""A ``--solution module:function`` from a local file reaches every Ray worker whole: its module and the sibling
modules it imports (at import, and inside the function) run on a real local Ray whose workers lack the folder on
their Python path (the tests' shared Ray was started from the repository, as a remote worker would be); a module of
another folder that the workers cannot import is one line naming it, exit 2, before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.local_code import drop_modules_of

SOLVER = '''\
"""Answers the toy benchmark with the folder's own arithmetic."""

import arith


def solve(task):
    import rounding  # imported when the first item runs: on a Ray worker

    return rounding.tidy(arith.compute(task.input.removeprefix("What is ").removesuffix("?")))
'''
ARITH = '''\
import ast


def compute(expression):
    return eval(compile(ast.parse(expression, mode="eval"), "<toy>", "eval"), {"__builtins__": {}})
'''
ROUNDING = "def tidy(number):\n    return round(number, 9)\n"


@pytest.fixture
def solver_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The solution's folder on this process's Python path, as the working directory of ``python -m runner`` is."""
    folder = tmp_path / "my_solver"
    folder.mkdir()
    (folder / "toy_solver.py").write_text(SOLVER)
    (folder / "arith.py").write_text(ARITH)
    (folder / "rounding.py").write_text(ROUNDING)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    drop_modules_of(folder)


def test_a_local_solution_that_imports_its_siblings_answers_on_ray_workers(cli, ray_session, solver_folder: Path,
                                                                         tmp_path: Path) -> None:
    done = cli("--benchmark", "toy", "--solution", "toy_solver:solve", "--limit", "12", "--workers", "2",
               "--storage", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["completed"] == 12 and summary["errors"] == 0
    assert summary["metrics"]["exact-match"]["mean"] == 1.0
    records = [json.loads(path.read_text()) for path in (tmp_path / "run").glob("records/*/0.json")]
    assert len({record["worker"]["pid"] for record in records}) == 2  # both workers answered


def test_a_module_of_another_folder_is_one_line_before_anything_is_written(cli, ray_session, solver_folder: Path,
                                                                           tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "driver_only"
    elsewhere.mkdir()
    (elsewhere / "shared_maths.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    (solver_folder / "toy_solver.py").write_text("import shared_maths\n" + SOLVER)
    try:
        done = cli("--benchmark", "toy", "--solution", "toy_solver:solve", "--limit", "4", "--workers", "2",
                   "--storage", str(tmp_path / "run"))
    finally:
        drop_modules_of(elsewhere)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), done.stderr[-3000:]
    assert f"{solver_folder / 'toy_solver.py'} imports 'shared_maths', which cannot be imported on the worker" in last
    assert f"it is no module of {solver_folder}" in last
    assert not (tmp_path / "run").exists()


BENCHMARK = '''\
"""Sums whose metric comes from a module of another folder, imported only when the tasks are made."""

from runner.core.benchmark import BenchmarkBase
from runner.core.task import Task


class Sums(BenchmarkBase):
    def __init__(self):
        super().__init__(name="sums")

    def __iter__(self):
        from house_metric import Exact  # on the driver's path only

        for index in range(4):
            yield Task(id=f"sum-{index}", input=f"What is {index} + 1?", metrics=[Exact(index + 1)])
'''
METRIC = '''\
from runner.core.metric import MetricBase, MetricResult, MetricType


class Exact(MetricBase):
    def __init__(self, expected):
        super().__init__(name="exact", metric_type=MetricType.NUMERICAL)
        self.expected = expected

    def __call__(self, solution):
        return MetricResult(name="exact", result=float(solution.output == self.expected))
'''


def test_items_that_hold_code_the_workers_cannot_import_stop_the_run_in_one_line(cli, ray_session,
                                                                                 solver_folder: Path, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    """The benchmark's module travels and imports on the workers, but its tasks hold a metric of a module of another
    folder that it imports only when it makes them: the first batch a worker gets cannot be unpickled there (it was
    Ray's RaySystemError with its traceback, exit 1)."""
    elsewhere = tmp_path / "driver_only"
    elsewhere.mkdir()
    (elsewhere / "house_metric.py").write_text(METRIC)
    monkeypatch.syspath_prepend(str(elsewhere))
    (solver_folder / "sums_bench.py").write_text(BENCHMARK)
    try:
        done = cli("--benchmark", "sums_bench:Sums", "--solution", "toy_solver:solve", "--workers", "2",
                   "--storage", str(tmp_path / "run"))
    finally:
        drop_modules_of(elsewhere)
    # The driver's own output ends with one line and holds no traceback; the worker's own log, which Ray forwards
    # behind its "(EvalWorker pid=...)" prefix (when it arrives before the driver ends), may hold the worker's.
    assert done.returncode == 3, done.stderr
    own = [line for line in done.stderr.splitlines() if "(EvalWorker pid=" not in line and line.strip()]
    assert not [line for line in own if "Traceback" in line], done.stderr
    line = own[-1]
    for fragment in ("error: a Ray worker could not unpickle the items sent to it (ModuleNotFoundError: No module "
                     "named 'house_metric')", "install it where the workers run", "the records written so far are kept"):
        assert fragment in line, line
    assert list((tmp_path / "run").glob("records/*/*.json")) == []
