"""The model-driven BFCL solution, ``bfcl`` (``--solution bfcl``, or ``--model X`` alone).

Public face: :class:`BFCLAgent`. Its prompts and tool schemas are BFCL's own (:mod:`.prompts`); ``mock:bfcl``
(:mod:`.mock`) plays a whole run offline. ``docs/bfcl.md`` describes it for users.

May import ``runner.core``, ``runner.models`` and BFCL's formats (``runner.benchmarks.bfcl``); never the engine or
storage.
"""

from runner.solutions.bfcl.agent import BFCLAgent

__all__ = ["BFCLAgent"]
