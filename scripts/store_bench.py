"""A run's cost on each store: 2,000 no-op tasks written to local disk, moto's S3, fake-gcs-server and Azurite.

For each store, the same command a user types, in a process of its own::

    python -m runner -b toy -B n_tasks=2000 -s reference --sequential --storage URI

(the toy benchmark's gold answers: no model, so what is measured is the runner and its store), each time on a fresh
bucket: ``--runs`` times straight to the emulator, for the wall time (the process's start and the report included;
the fastest run is shown, the one the machine's other work disturbed least), and once through the counting proxy of
``tests/support/store_proxy.py``, for the requests the store received, per task. The emulators are started as the
tests start them (``tests/support/emulators.py``; Azurite from ``scripts/test-prerequisites.sh``, or on PATH)::

    python scripts/store_bench.py                      # local, s3, gcs, azure; a Markdown table on stdout
    python scripts/store_bench.py --only gcs azure --tasks 500

Numbers from a loopback emulator say what the runner asks of a store (requests per task) and what the client
libraries cost; a cloud's own latency (5-50 ms a request) comes on top in production.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the emulators and the proxy live in tests/support (run from the checkout)

from tests.support.emulators import STORES, start  # noqa: E402
from tests.support.store_proxy import FaultyStoreProxy  # noqa: E402

BACKENDS = ("local", *STORES)


def run(storage: str, tasks: int, env: dict[str, str]) -> float:
    """Seconds the run of ``tasks`` toy tasks into ``storage`` takes, end to end (exit status 0 checked)."""
    command = [sys.executable, "-m", "runner", "-b", "toy", "-B", f"n_tasks={tasks}", "-s", "reference",
               "--sequential", "--storage", storage, "--log-format", "json"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{storage}: exit {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def measure(backend: str, tasks: int, runs: int) -> dict[str, object]:
    """The fastest of ``runs`` run times, and the requests, of one store (``local``: no requests)."""
    if backend == "local":
        with tempfile.TemporaryDirectory() as tmp:
            return {"store": "local disk",
                    "run_s": min(run(str(Path(tmp) / f"run{index}"), tasks, {}) for index in range(runs))}
    with start(backend) as emulator:
        seconds = min(run(emulator.uri(emulator.bucket(), "runs/toy"), tasks, emulator.env) for _ in range(runs))
        with FaultyStoreProxy(emulator.url) as proxy:
            run(emulator.uri(emulator.bucket(), "runs/toy"), tasks, emulator.env_for(proxy.url))
            ops = Counter(seen.op or f"other {seen.method}" for seen in proxy.requests)
        return {"store": {"s3": "S3 (moto)", "gcs": "GCS (fake-gcs-server)", "azure": "Azure Blob (Azurite)"}[backend],
                "run_s": seconds, "requests": len(proxy.requests), "per_task": len(proxy.requests) / tasks,
                "ops": dict(ops)}


def table(rows: list[dict[str, object]], tasks: int) -> str:
    lines = [f"| {tasks:,} no-op tasks, sequential | run (s) | requests | per task | by operation |",
             "|---|---|---|---|---|"]
    for row in rows:
        if "requests" not in row:
            lines.append(f"| {row['store']} | {row['run_s']:.1f} | - | - | - |")
            continue
        ops = ", ".join(f"{name} {count:,}" for name, count in sorted(row["ops"].items(), key=lambda kv: -kv[1]))
        lines.append(f"| {row['store']} | {row['run_s']:.1f} | {row['requests']:,} | {row['per_task']:.2f} | "
                     f"{ops} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per store; the fastest is shown")
    args = parser.parse_args()
    rows = [measure(backend, args.tasks, args.runs) for backend in args.only]
    print(table(rows, args.tasks))


if __name__ == "__main__":
    main()
