"""Built-in benchmarks: ACEBench (tool use), BFCL v4 (function calling), GAIA (assistants with files and tools),
HotpotQA (multi-hop QA) and a toy arithmetic benchmark; ``judge_scores`` reads an LLM judge's score.

Each is named in :data:`runner.registry.BENCHMARKS` (``--benchmark NAME``) and imported only when it is used. A
benchmark imports ``runner.core`` (and ``runner.models`` for LLM-judged metrics), never the engine.
"""
