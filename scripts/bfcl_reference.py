"""How long BFCL takes to load and to score every offline item with the reference solution, sequentially.

Three measurements on the 4,441 items of the 17 offline categories, from a data folder (default
``../shared/data/bfcl``), each in this process, and a Markdown table on stdout::

    python scripts/bfcl_reference.py [--data-dir DIR]

- load: ``BFCLBenchmark.prepare()`` (read and verify every file) and building every task;
- score: the reference answer of every task and its ``accuracy`` metric, called directly (no engine);
- run: ``python -m runner --benchmark bfcl --solution reference --sequential`` in a subprocess (process start,
  one record written per item, the report), wall time, and that subprocess's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from runner.benchmarks.bfcl import BFCLBenchmark

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "bfcl"))
    args = parser.parse_args()

    started = time.perf_counter()
    benchmark = BFCLBenchmark(data_dir=args.data_dir)
    tasks = list(benchmark)
    load_s = time.perf_counter() - started

    started = time.perf_counter()
    seconds: Counter[str] = Counter()
    right = 0
    for task in tasks:
        begun = time.perf_counter()
        right += task.metrics[0](benchmark.reference(task)).result == 1.0
        seconds[task.tags["group"]] += time.perf_counter() - begun
    score_s = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "runner", "--benchmark", "bfcl", "--solution", "reference",
                        "--data-dir", args.data_dir, "--sequential", "--storage", f"{tmp}/run", "--log-format",
                        "json"], check=True, capture_output=True, cwd=REPO)
        run_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    print("| step | items | seconds | detail |")
    print("|---|---:|---:|---|")
    print(f"| load | {len(tasks)} | {load_s:.1f} | read, verify and build every task |")
    detail = ", ".join(f"{group} {value:.1f} s" for group, value in sorted(seconds.items()))
    print(f"| score | {len(tasks)} | {score_s:.1f} | {right} right; {detail} |")
    print(f"| run | {len(tasks)} | {run_s:.1f} | the command line, sequential, records and report; "
          f"peak RSS {peak_mb:.0f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
