"""Sequential W1 against AgentScope (issue 18): the same program, 2,000 no-op tasks through ``GeneralEvaluator``,
with ``from agentscope.evaluate import ...`` or ``from runner import ...``, each run as a whole process.

    python scripts/bench_agentscope.py            # 5 pairs, 2,000 tasks
    python scripts/bench_agentscope.py --runs 9 --n 2000

The program is AgentScope 1.0's own form (its seed's custom benchmark and metric: ``GeneralEvaluator(name=...,
benchmark=..., n_repeat=1, storage=FileEvaluatorStorage(dir), n_workers=1)``, ``await evaluator.run(solve)``), which
the runner accepts unchanged (README, "AgentScope's names"). AgentScope ``AGENTSCOPE_VERSION`` is installed once in a
virtual environment of its own (``<runner cache>/bench/agentscope-<version>``, with :data:`AGENTSCOPE_PINS`). The two commands run in turn, A B A
B ..., and the ratio runner / AgentScope is taken pair by pair, so that a machine that slows down during the call
moves both sides; the table gives each side's min, median and max wall seconds (process start to exit, start-up and
imports included) and the median of the pairs' ratios. Target (issue 18): at most 0.7.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENTSCOPE_VERSION = "1.0.21"
AGENTSCOPE_PINS = ("mcp==1.19.0", "pydantic==2.11.10", "greenlet==3.5.6", "ray==2.60.0", "tqdm==4.70.1")
"""AgentScope 1.0.21 leaves ``mcp`` unbounded and imports ``streamablehttp_client``, which later ``mcp`` releases
moved (and that mcp needs pydantic 2.11's internals); its evaluator's SQLAlchemy asyncio storage needs
``greenlet``, and its evaluate module imports ray and tqdm: none of these three is among its requirements."""
PROGRAM = '''
import asyncio, sys, tempfile
if sys.argv[1] == "agentscope":
    from agentscope.evaluate import (BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, MetricBase,
                                     MetricResult, MetricType, SolutionOutput, Task)
else:
    from runner import (BenchmarkBase, FileEvaluatorStorage, GeneralEvaluator, MetricBase, MetricResult,
                        MetricType, SolutionOutput, Task)


class CheckEqual(MetricBase):
    def __init__(self, gt):
        super().__init__(name="exact-match", metric_type=MetricType.NUMERICAL, description="eq", categories=[])
        self.gt = gt

    async def __call__(self, solution: SolutionOutput) -> MetricResult:
        return MetricResult(name=self.name, result=float(solution.output == self.gt), message="")


class Bench(BenchmarkBase):
    def __init__(self, n):
        super().__init__(name="noop", description="noop")
        self.tasks = [Task(id=f"t{i}", input=i, ground_truth=i, metrics=[CheckEqual(i)], metadata={})
                      for i in range(n)]

    def __len__(self):
        return len(self.tasks)

    def __getitem__(self, index):
        return self.tasks[index]

    def __iter__(self):
        yield from self.tasks


async def solve(task, pre_print_hook):
    return SolutionOutput(success=True, output=task.input, trajectory=[])


async def main():
    with tempfile.TemporaryDirectory(dir=sys.argv[3]) as directory:
        evaluator = GeneralEvaluator(name="noop", benchmark=Bench(int(sys.argv[2])), n_repeat=1,
                                     storage=FileEvaluatorStorage(directory), n_workers=1)
        await evaluator.run(solve)

asyncio.run(main())
'''


def agentscope_python() -> Path:
    """AgentScope ``AGENTSCOPE_VERSION`` in a virtual environment of its own, made once; its interpreter."""
    from runner.serving.paths import cache_root

    venv = cache_root() / "bench" / f"agentscope-{AGENTSCOPE_VERSION}"
    if not (venv / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        f"agentscope=={AGENTSCOPE_VERSION}", *AGENTSCOPE_PINS], check=True)
        (venv / ".ready").write_text(AGENTSCOPE_VERSION)
    return venv / "bin" / "python"


def timed(argv: list[str]) -> float:
    """Wall seconds of one whole process; its output is discarded.

    Raises:
        subprocess.CalledProcessError: the program failed.
    """
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="pairs (default 5), after one warm-up pair")
    parser.add_argument("--n", type=int, default=2000, help="tasks (default 2,000)")
    args = parser.parse_args()
    other = str(agentscope_python())
    with tempfile.TemporaryDirectory(prefix="runner-bench-agentscope-") as tmp:
        program = Path(tmp) / "w1_general_evaluator.py"
        program.write_text(PROGRAM)
        ours = [sys.executable, str(program), "runner", str(args.n), tmp]
        theirs = [other, str(program), "agentscope", str(args.n), tmp]
        timed(ours), timed(theirs)
        pairs = [(timed(ours), timed(theirs)) for _ in range(args.runs)]
    runner_s, agentscope_s = [a for a, _ in pairs], [b for _, b in pairs]
    ratio = statistics.median(a / b for a, b in pairs)
    print(f"| program ({args.n:,} no-op tasks, sequential) | min | median | max |\n|---|---:|---:|---:|")
    for name, values in (("runner", runner_s), (f"AgentScope {AGENTSCOPE_VERSION}", agentscope_s)):
        print(f"| {name} | {min(values):.2f} s | {statistics.median(values):.2f} s | {max(values):.2f} s |")
    print(f"\nrunner / AgentScope, the median of {len(pairs)} pairs: {ratio:.2f} (target <= 0.7)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
