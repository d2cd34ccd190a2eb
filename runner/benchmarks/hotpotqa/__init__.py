"""HotpotQA: multi-hop question answering with the official metrics and BeeAI's metric set.

May import ``runner.core``, ``runner.models`` (its LLM judges) and ``runner.integrations`` (DeepEval and
Ragas metric sets); never the engine, storage or a face.
"""

from runner.benchmarks.hotpotqa.benchmark import HotpotQABenchmark
from runner.benchmarks.hotpotqa.data import HotpotRecord, load_records
from runner.benchmarks.hotpotqa.metrics import CONTEXT_LOOKUP, parse_prediction, tool_usage_score

__all__ = ["CONTEXT_LOOKUP", "HotpotQABenchmark", "HotpotRecord", "load_records", "parse_prediction",
           "tool_usage_score"]
