"""ACEBench (Chen et al., 2025, arXiv:2501.12851): the whole benchmark, official and strict scoring.

Public face: :class:`ACEBenchmark` (the ``acebench`` benchmark), :class:`ACEEnvironment` (an agent task's
simulated phone or airline), and the checkers :func:`check_normal`, :func:`check_special`,
:func:`check_end_state`.

May import ``runner.core`` and ``runner.models``; never the engine, storage or a face.
"""

from runner.benchmarks.acebench.agent_checker import check_end_state, process_accuracy
from runner.benchmarks.acebench.answer_checks import check_normal, check_special
from runner.benchmarks.acebench.benchmark import ACEBenchmark
from runner.benchmarks.acebench.environment import ACEEnvironment

__all__ = ["ACEBenchmark", "ACEEnvironment", "check_end_state", "check_normal", "check_special", "process_accuracy"]
