"""Built-in benchmarks: ACEBench (tool use), HotpotQA (multi-hop QA) and a toy arithmetic benchmark.

Each is named in :data:`runner.registry.BENCHMARKS` (``--benchmark NAME``) and imported only when it is used. A
benchmark imports ``runner.core`` (and ``runner.models`` for LLM-judged metrics), never the engine.
"""
