"""Built-in solutions: reference answers, a calculator, one chat call, and the ACEBench and HotpotQA agents.

Each is named in :data:`runner.registry.SOLUTIONS` (``--solution NAME``) and imported only when it is used. A
solution imports ``runner.core`` (and ``runner.models`` when it calls a model), never the engine.
"""
