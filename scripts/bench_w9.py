"""W9 (issue 26): lm-evaluation-harness tasks on the embedded model, the runner against ``lm_eval`` alone.

``python scripts/bench_w9.py`` writes the local tasks of the tests (``tests/benchmarks/lmeval/conftest.py``: a
``generate_until`` task with two filters and 3-shot prompts, two ``multiple_choice`` tasks in a group, a
``loglikelihood_rolling`` task) with more documents (``--sizes``, default 40 + 80 + 80 + 20 = 220 documents) from
``../shared/data/hotpotqa_dev_sample``, and times three whole commands at each batch size (``--batch-sizes``,
default ``1,8``), each in a process of its own, interleaved over ``--reps`` rounds (default 3):

- **lm_eval**: ``lm_eval --model hf --model_args pretrained=<embedded model> --device cpu --batch_size B
  --log_samples`` (its torch on the machine's cores);
- **runner seq**: ``python -m runner -b lm-eval ... -B batch_size=B --sequential`` (lm-eval's HFLM in this process,
  one document at a time);
- **runner 2 workers**: the same with ``--workers 2`` on an embedded Ray (two workers of one CPU, each with its HFLM
  and one torch thread, documents in flight batched on each).

Each time is the command's wall time, the model's load and lm-eval's task index included (both tools pay them).
Targets: runner seq at most 1.1 x lm_eval; runner 2 workers faster than lm_eval. The numbers go in docs/performance.md
and the README's table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.benchmarks.lmeval.conftest import OFFLINE, TASKS, write_tasks  # noqa: E402

MODEL = "transformers:smollm2-135m-instruct"
SIZES = {"hotpot_gen": 40, "hotpot_yesno": 80, "hotpot_type": 80, "hotpot_ppl": 20}


def commands(tasks: Path, model_dir: Path, batch: int, out: Path) -> dict[str, list[str]]:
    """The three ways, writing under ``out``."""
    runner = [sys.executable, "-m", "runner", "-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={tasks}",
              "-B", f"batch_size={batch}", "--model", MODEL]
    return {
        "lm_eval": [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model_dir}",
                    "--device", "cpu", "--batch_size", str(batch), "--tasks", TASKS, "--include_path", str(tasks),
                    "--log_samples", "--output_path", str(out / "lm-eval")],
        "runner seq": [*runner, "--sequential", "--storage", str(out / "seq")],
        "runner 2 workers": [*runner, "--workers", "2", "--storage", str(out / "ray")],
    }


def timed(command: list[str], cwd: Path) -> float:
    """Seconds ``command`` took, from start to exit; it must succeed."""
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", type=json.loads, default=SIZES, help="documents per task, as JSON")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    from runner.serving import embedded

    model_dir = embedded.model_dir()
    work = Path(tempfile.mkdtemp(prefix="bench-w9-"))
    tasks = write_tasks(work / "tasks", REPO.parent / "shared" / "data", args.sizes)
    results: dict[str, dict[str, list[float]]] = {}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        seconds: dict[str, list[float]] = {}
        for rep in range(args.reps):
            for name, command in commands(tasks, model_dir, batch, work / f"b{batch}-r{rep}").items():
                seconds.setdefault(name, []).append(timed(command, tasks))
                print(f"batch {batch} rep {rep} {name}: {seconds[name][-1]:.1f} s", flush=True)
        results[str(batch)] = seconds
    docs = sum(args.sizes.values())
    print(f"\nW9: {docs} documents, the embedded model on {os.cpu_count()} CPUs; median (min) wall seconds")
    for batch, seconds in results.items():
        base = statistics.median(seconds["lm_eval"])
        cells = [f"{name} {statistics.median(s):.1f} ({min(s):.1f}) = {statistics.median(s) / base:.2f} x"
                 for name, s in seconds.items()]
        print(f"batch {batch}: " + "; ".join(cells))
    if args.out:
        args.out.write_text(json.dumps({"documents": docs, "sizes": args.sizes, "seconds": results}, indent=2))


if __name__ == "__main__":
    main()
