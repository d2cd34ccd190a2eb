"""BFCL v4, the Berkeley Function Calling Leaderboard (``bfcl-eval`` 2026.3.23): the 17 categories that run
offline, scored item by item as the leaderboard's evaluator scores them.

Public face: :class:`BFCLBenchmark` (the ``bfcl`` benchmark), :class:`Environment` (a multi-turn item's simulated
APIs), and the per-item checks :func:`check_ast`, :func:`check_relevance`, :func:`check_multi_turn`.
``docs/bfcl.md`` describes it for users.

May import ``runner.core`` (and its own ``apis`` and ``vendor``); never the engine, storage or a face.
"""

from runner.benchmarks.bfcl.benchmark import BFCLBenchmark
from runner.benchmarks.bfcl.multi_turn import Environment
from runner.benchmarks.bfcl.scoring import check_ast, check_multi_turn, check_relevance

__all__ = ["BFCLBenchmark", "Environment", "check_ast", "check_multi_turn", "check_relevance"]
