"""Built-in solutions: reference answers, a calculator, one chat call, the ACEBench, BFCL, GAIA and HotpotQA agents,
the HotpotQA reader (no tools) and opt-in live web tools.

Each is named in :data:`runner.registry.SOLUTIONS` (``--solution NAME``) and imported only when it is used. A
solution imports ``runner.core`` (and ``runner.models`` when it calls a model), never the engine.
"""
