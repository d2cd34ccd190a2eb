"""The run's own code travels by source (``runner/core/local_code.py``): a recipe pickled in this process, whose
module lives in a folder of the user's and imports a sibling module (at import, and inside a function), is unpickled
and called in a fresh Python process that has no such folder on its path, as on a Ray worker of another node; a
module that still cannot be imported there is one line naming it; the runner and installed packages never travel."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.local_code import collect
from runner.core.solution import SolutionSpec
from tests.support.local_code import drop_modules_of

WORKER = textwrap.dedent("""\
    import json, pickle, sys
    spec = pickle.loads(sys.stdin.buffer.read())
    print(json.dumps(spec.build()(sys.argv[1])))
""")
"""A worker stand-in: unpickles a solution recipe, builds it and answers one input."""

SOLVER = textwrap.dedent("""\
    import arith

    def solve(expression):
        import wording  # imported when called, as on a worker
        return wording.say(arith.compute(expression))
""")
ARITH = "def compute(expression):\n    left, right = expression.split('+')\n    return int(left) + int(right)\n"
WORDING = "def say(number):\n    return f'the sum is {number}'\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user's folder on this process's Python path (as the working directory of ``python -m runner`` is)."""
    code = tmp_path / "my_code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    yield code
    drop_modules_of(code)


def elsewhere(data: bytes, argument: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """:data:`WORKER` in a fresh process whose path holds the runner but not the user's folder (its output as
    text)."""
    done = subprocess.run([sys.executable, "-c", WORKER, argument], input=data, capture_output=True, cwd=cwd,
                          check=False, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])})
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def test_a_solution_that_imports_sibling_modules_is_called_where_its_folder_is_not(folder: Path,
                                                                                    tmp_path: Path) -> None:
    (folder / "solver.py").write_text(SOLVER)
    (folder / "arith.py").write_text(ARITH)
    (folder / "wording.py").write_text(WORDING)
    from solver import solve  # type: ignore[import-not-found]

    data = pickle.dumps(SolutionSpec(solve, name="solver:solve"))
    without = subprocess.run([sys.executable, "-c", "import solver"], capture_output=True, text=True, cwd=tmp_path,
                             check=False)
    assert "No module named 'solver'" in without.stderr  # the stand-in worker has no such module of its own

    done = elsewhere(data, "40+2", tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "the sum is 42"


def test_a_module_that_is_not_in_the_folder_is_one_line_naming_it(folder: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other_folder"
    other.mkdir()
    (other / "helper_elsewhere.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(other))
    (folder / "needy.py").write_text("import helper_elsewhere\n\ndef solve(text):\n    return text\n")
    from needy import solve  # type: ignore[import-not-found]

    try:
        data = pickle.dumps(SolutionSpec(solve, name="needy:solve"))
    finally:
        drop_modules_of(other)
    done = elsewhere(data, "x", tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("runner.core.errors.CodeImportError: ")
    assert f"{folder / 'needy.py'} imports 'helper_elsewhere', which cannot be imported on the worker" in last
    assert f"it is no module of {folder}" in last and "install it where the workers run" in last


def test_the_runner_and_installed_packages_do_not_travel(folder: Path) -> None:
    import json as stdlib_json

    from runner.solutions.calculator import calculator

    assert SolutionSpec(calculator).local_code() is None
    assert SolutionSpec(stdlib_json.dumps).local_code() is None
    assert collect([Path(stdlib_json.__file__).parent], ["json"]) is None


def test_what_travels_is_the_folders_modules_and_no_data(folder: Path) -> None:
    (folder / "solver.py").write_text(SOLVER)
    (folder / "arith.py").write_text(ARITH)
    (folder / "wording.py").write_text(WORDING)
    (folder / "words.json").write_text("[]")
    package = folder / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "deep.py").write_text("X = 1\n")
    (folder / "not_a_package").mkdir()
    (folder / "not_a_package" / "loose.py").write_text("X = 2\n")
    import solver  # type: ignore[import-not-found]  # noqa: F401 - imported as a run's solution would be

    code = collect([folder], ["solver"])
    assert code is not None
    assert sorted(code.imported) == ["arith", "solver"]  # what this process imported from the folder
    assert sorted(code.spare) == ["pkg", "pkg.deep", "wording"]  # what a worker may import later
    assert code.entries == ("solver",)


BENCHMARK = textwrap.dedent("""\
    from runner.core.benchmark import BenchmarkBase
    from runner.core.task import Task

    import questions


    class SumsBenchmark(BenchmarkBase):
        def __init__(self):
            super().__init__(name="sums")

        def __iter__(self):
            for index, expression in enumerate(questions.EXPRESSIONS):
                yield Task(id=f"sum-{index}", input=expression, ground_truth=questions.answer(expression))
""")
BENCHMARK_WORKER = textwrap.dedent("""\
    import json, pickle, sys
    benchmark = pickle.loads(sys.stdin.buffer.read())
    print(json.dumps([[task.input, task.ground_truth] for task in benchmark]))
""")


def test_a_benchmark_class_of_a_local_file_is_rebuilt_where_its_folder_is_not(folder: Path, tmp_path: Path) -> None:
    """``-b my_bench:SumsBenchmark``: the benchmark's class and the module of questions beside it travel too."""
    (folder / "my_bench.py").write_text(BENCHMARK)
    (folder / "questions.py").write_text("EXPRESSIONS = ['1+2', '20+22']\n\ndef answer(expression):\n"
                                         "    left, right = expression.split('+')\n    return int(left) + int(right)\n")
    from my_bench import SumsBenchmark  # type: ignore[import-not-found]

    done = subprocess.run([sys.executable, "-c", BENCHMARK_WORKER], input=pickle.dumps(SumsBenchmark()),
                          capture_output=True, cwd=tmp_path, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [["1+2", 3], ["20+22", 42]]
