"""Peak memory of ``python -m runner report`` over records with large outputs (issue 11, item 6).

Writes a toy run of ``--records`` records whose outputs are ``--output-mb`` MB each (200 x 5 MB by default: 1 GB of
records) with the result store, then runs ``python -m runner report`` on it in a child process and reads the
child's peak RSS from ``os.wait4`` (Linux reports ``ru_maxrss`` in KiB)::

    python scripts/report_memory.py                                   # this checkout
    python scripts/report_memory.py --pythonpath /tmp/runner-before   # another checkout's runner package

``--pythonpath`` puts another copy of the ``runner`` package first on the child's path, so two versions are
measured on the same records; the line printed names the package measured. ``--keep DIR`` writes the records to
``DIR`` and keeps them (the next call with the same ``DIR`` reuses them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner import ResultStore, TaskRecord
from runner.storage import BenchmarkInfo, RunManifest, new_run_id


def write_run(root: Path, records: int, output_mb: float) -> None:
    """A finished toy run at ``root`` whose ``records`` records each carry an output of ``output_mb`` MB."""
    store = ResultStore(str(root))
    if store.read_manifest() is not None:
        return
    run_id = new_run_id()
    output = "x" * int(output_mb * 2**20)
    for index in range(records):
        store.write_record(TaskRecord(run_id=run_id, task_id=f"toy-{index:03d}", repeat=0, task_index=index,
                                      status="ok", output=output, started_at="2026-01-01T00:00:00+00:00",
                                      finished_at="2026-01-01T00:00:01+00:00"))
    store.write_manifest(RunManifest(
        run_id=run_id, fingerprint="-", fingerprint_fields={}, n_repeats=1, runner_version="-",
        benchmark=BenchmarkInfo(name="toy", n_tasks=records), config={"benchmark": "toy"},
    ))


def measure(root: Path, pythonpath: str | None) -> tuple[str, float, float]:
    """``(runner package measured, peak RSS in MiB, seconds)`` of ``python -m runner report root --json``."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH", "")) if p)
    # From the run's folder, so that the current directory (first on a child's path) holds no runner package.
    package = subprocess.run([sys.executable, "-c", "import runner; print(runner.__file__)"], env=env, cwd=root,
                             capture_output=True, text=True, check=True).stdout.strip()
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "runner", "report", str(root), "--json"], env=env, cwd=root,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"report failed: {child.stderr.read().decode()[-2000:] if child.stderr else ''}")
    return package, usage.ru_maxrss / 1024, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--output-mb", type=float, default=5.0)
    parser.add_argument("--pythonpath", help="a directory holding another runner package to measure")
    parser.add_argument("--keep", type=Path, help="write the records here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch) / "run"
        write_run(root, args.records, args.output_mb)
        package, peak_mib, seconds = measure(root, args.pythonpath)
    print(f"report of {args.records} records x {args.output_mb:g} MB: peak RSS {peak_mib:.0f} MiB, "
          f"{seconds:.1f} s ({package})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
