"""lm-evaluation-harness (lm-eval) tasks as a runner benchmark (``-b lm-eval -B tasks=gsm8k,mmlu``): every task,
group and tag lm-eval defines, and the user's own YAMLs (``-B include_path=``), one item per document, prompts built
by lm-eval on the driver, scored by the task's own filters and ``process_results``, aggregated by lm-eval into its
``results.json`` and ``--log_samples`` formats (docs/lm-eval.md). The ``lm-eval`` solution
(:mod:`runner.solutions.lmeval`) answers the documents with lm-eval's own model classes.

Imports lm-eval only when a run prepares the benchmark (``pip install 'ray-bench-runner[lm-eval]'``).
"""

from runner.benchmarks.lmeval.benchmark import LM_EVAL_VERSION, LMEvalBenchmark

__all__ = ["LM_EVAL_VERSION", "LMEvalBenchmark"]
