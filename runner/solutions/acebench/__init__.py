"""The model-driven ACEBench solution, ``acebench`` (``--solution acebench``, or ``--model X`` alone).

Public face: :class:`ACEBenchAgent`. Its prompts (:mod:`.prompts`, worded in :mod:`.texts`) ask for the official
output formats; agent tasks run as episodes (:mod:`.episodes`) against the task's simulated environment;
``mock:acebench`` (:mod:`.mock`) plays a whole run offline. ``docs/acebench.md`` describes it for users.

May import ``runner.core``, ``runner.models`` and ACEBench's formats (``runner.benchmarks.acebench``); never the
engine or storage.
"""

from runner.solutions.acebench.agent import ACEBenchAgent

__all__ = ["ACEBenchAgent"]
