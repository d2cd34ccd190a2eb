"""Built-in benchmarks.

``BENCHMARKS`` maps each built-in name to an import path; modules are imported only when their benchmark is used.
"""

BENCHMARKS: dict[str, str] = {
    "acebench": "runner.benchmarks.acebench:ACEBenchmark",
    "hotpotqa": "runner.benchmarks.hotpotqa:HotpotQABenchmark",
    "toy": "runner.benchmarks.toy:ToyBenchmark",
}
