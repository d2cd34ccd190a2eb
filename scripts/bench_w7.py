"""W7 (issue 19): the embedded model served on this machine, the same items three ways.

``python scripts/bench.py --only W7`` (or ``python scripts/bench_w7.py``) takes the first N HotpotQA dev questions
(``--w7-n``, default 100) of ``../shared/data/hotpotqa_dev_sample`` (or ``--w7-data``) as the ``hotpotqa-reader``
solution asks them (its system prompt and the question's gold paragraphs; at most 32 output tokens, temperature 0)
and sends them to SmolLM2-135M-Instruct, the embedded model (``transformers:smollm2-135m-instruct``), with the same
number of requests in flight (``--w7-concurrency``, default 16, the runner's default for ``transformers serve`` on
the CPU):

- **(a) engine**: the engine alone. One ``transformers serve --continuous-batching`` (started with the command line a
  run uses, 2 torch threads) and a plain asyncio client (``httpx``) posting each item's chat completion.
- **(b) runner**: ``python -m runner -b hotpotqa -s hotpotqa-reader --model transformers:smollm2-135m-instruct``
  with one worker of 2 CPUs (Ray gives the worker's processes ``OMP_NUM_THREADS`` = its CPUs, so its replica runs 2
  torch threads) and ``--concurrency 16``; also ``runner 2x1``: two workers of 1 CPU, each with its replica of one
  thread and 8 in flight, and ``runner seq``: the same run with ``--sequential`` (the replica in the run's own
  process tree, 16 in flight).
- **(c) Inspect AI**: Inspect's ``hf/`` provider on the same model directory and the same messages
  (``max_connections`` 16, its batch size), installed by this script in a virtual environment of its own
  (``<runner cache>/bench/inspect-<version>``; torch and transformers come from this interpreter's, through a
  ``.pth`` file, so that the same builds run).

Each way reports items/s and output tokens/s over its requests only (the engine: first request sent to last reply;
the runner: first record's ``started_at`` to last ``finished_at``; Inspect: first sample's ``started_at`` to last
``completed_at``), and its wall time with start-up (the server's or the model's load included): one JSON line per
way on standard error, with the span's bounds as ``first`` and ``last`` (seconds since the epoch, so that a sampler
of the machine's processes can align with them), then a Markdown table. Targets: (b) at least 0.95 x (a) in items/s
and in output tokens/s, and (b) ahead of (c).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json"
MODEL = "transformers:smollm2-135m-instruct"
MAX_TOKENS = 32
INSPECT_VERSION = "0.3.285"
THREADS = 2

INSPECT_DRIVER = r'''
import json, sys, time
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import generate

spec = json.load(open(sys.argv[1]))
samples = [Sample(id=item_id, input=[ChatMessageSystem(content=messages[0]["content"]),
                                     ChatMessageUser(content=messages[1]["content"])])
           for item_id, messages in spec["items"]]
start = time.perf_counter()
log = inspect_eval(Task(dataset=samples, solver=generate()), model="hf/smollm2-135m-instruct",
                   model_args={"model_path": spec["model_dir"], "device": "cpu"},
                   max_connections=spec["concurrency"], max_tokens=spec["max_tokens"],
                   log_dir=spec["log_dir"], display="none")[0]
wall = time.perf_counter() - start
done = [sample for sample in log.samples if sample.output and sample.output.completion is not None]
from datetime import datetime
first = min(datetime.fromisoformat(str(sample.started_at)) for sample in done)
last = max(datetime.fromisoformat(str(sample.completed_at)) for sample in done)
# Inspect's hf provider reports each sample's usage as its batch's padded lengths (every sample of a batch: the
# longest input, max_tokens out): count the completions' own tokens instead, with the model's tokenizer.
from transformers import AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
usage = sum(len(tokenizer(sample.output.completion, add_special_tokens=False).input_ids) for sample in done)
print(json.dumps({"status": log.status, "items": len(done), "errors": sum(1 for s in log.samples if s.error),
                  "span_s": (last - first).total_seconds() if done else None,
                  "first": str(first), "last": str(last), "wall_s": wall, "output_tokens": usage}))
'''


def items(data: Path, n: int) -> list[tuple[str, list[dict[str, str]]]]:
    """The first ``n`` questions as ``hotpotqa-reader`` sends them: ``(task id, [system, user])``."""
    from runner.benchmarks.hotpotqa.benchmark import HotpotQABenchmark
    from runner.solutions.hotpotqa_reader import SYSTEM_PROMPT, prompt

    tasks = islice(HotpotQABenchmark(data_dir=str(data), answer_only=True), n)
    return [(task.id, [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt(task, "gold")}])
            for task in tasks]


def engine_alone(work: Path, prompts: list[tuple[str, list[dict[str, str]]]], concurrency: int) -> dict[str, Any]:
    """(a): one replica started as a run starts it (:class:`runner.serving.replica.Replica`, ``THREADS`` torch
    threads) and a plain asyncio client with ``concurrency`` requests in flight."""
    import httpx

    from runner.serving.embedded import model_dir
    from runner.serving.replica import Replica
    from runner.serving.spec import ReplicaSpec

    start = time.perf_counter()
    spec = ReplicaSpec(model=MODEL, engine="transformers", source=str(model_dir()), embedded=True)
    replica = Replica(spec, (), work / "engine-logs", env={"OMP_NUM_THREADS": str(THREADS)})
    replica.start()
    try:
        replica.wait_ready(time.monotonic() + 600)

        async def send_all() -> tuple[float, list[dict[str, Any]]]:
            gate = asyncio.Semaphore(concurrency)
            limits = httpx.Limits(max_connections=concurrency)
            async with httpx.AsyncClient(base_url=replica.base_url, timeout=600, limits=limits) as client:
                async def one(messages: list[dict[str, str]]) -> dict[str, Any]:
                    async with gate:
                        response = await client.post("/chat/completions", json={
                            "model": replica.served_name, "messages": messages, "max_tokens": MAX_TOKENS,
                            "temperature": 0.0})
                        response.raise_for_status()
                        return response.json()
                began, first = time.perf_counter(), time.time()
                replies = await asyncio.gather(*(one(messages) for _, messages in prompts))
                return time.perf_counter() - began, first, replies

        span, first, replies = asyncio.run(send_all())
    finally:
        replica.stop()
    output = sum((reply.get("usage") or {}).get("completion_tokens", 0) for reply in replies)
    return {"way": "engine", "items": len(replies), "errors": 0, "span_s": span, "output_tokens": output,
            "wall_s": time.perf_counter() - start, "first": first, "last": first + span}


def runner_run(work: Path, data: Path, n: int, concurrency: int, workers: int, sequential: bool,
               name: str, directory: str) -> dict[str, Any]:
    """(b): the CLI, ``workers`` workers of ``THREADS / workers`` CPUs each (or ``--sequential``), ``concurrency``
    items in flight in all."""
    from runner import ResultStore

    storage = work / directory
    argv = [sys.executable, "-m", "runner", "-b", "hotpotqa", "--data-dir", str(data), "-B", "answer_only=true",
            "-s", "hotpotqa-reader", "--model", MODEL, "--judge-model", "none", "--limit", str(n),
            "--storage", str(storage), "--concurrency", str(concurrency // workers)]
    argv += ["--sequential"] if sequential else ["--workers", str(workers), "--num-cpus", str(THREADS // workers)]
    env = {**os.environ, "RAY_DEDUP_LOGS": "1"}
    if sequential:
        env["OMP_NUM_THREADS"] = str(THREADS)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"W7 {name}: the run exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    first = last = None
    count = errors = output = 0
    for record in ResultStore(str(storage)).iter_records():
        began = dt.datetime.fromisoformat(record.started_at)
        ended = dt.datetime.fromisoformat(record.finished_at)
        first = began if first is None or began < first else first
        last = ended if last is None or ended > last else last
        count += 1
        errors += record.status != "ok"
        output += sum(usage.output_tokens for usage in record.usage.values())
    assert first is not None and last is not None
    return {"way": name, "items": count, "errors": errors, "span_s": (last - first).total_seconds(),
            "output_tokens": output, "wall_s": wall, "first": first.timestamp(), "last": last.timestamp()}


def inspect_venv() -> Path:
    """Inspect AI ``INSPECT_VERSION`` in a virtual environment of its own, made once; its interpreter."""
    from runner.serving.paths import cache_root

    venv = cache_root() / "bench" / f"inspect-{INSPECT_VERSION}"
    python = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"inspect-ai=={INSPECT_VERSION}"], check=True)
        # torch and transformers from this interpreter, after Inspect's own packages (a .pth appends its path).
        import sysconfig
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        Path(purelib, "zz_runner_torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        (venv / ".ready").write_text(INSPECT_VERSION)
    return python


def inspect_run(work: Path, prompts: list[tuple[str, list[dict[str, str]]]], concurrency: int) -> dict[str, Any]:
    """(c): Inspect AI's ``hf/`` provider on the embedded model's directory, ``concurrency`` connections."""
    from runner.serving.embedded import model_dir

    python = inspect_venv()
    spec = work / "inspect.json"
    spec.write_text(json.dumps({"items": prompts, "model_dir": str(model_dir()), "concurrency": concurrency,
                                "max_tokens": MAX_TOKENS, "log_dir": str(work / "inspect-logs")}))
    driver = work / "inspect_driver.py"
    driver.write_text(INSPECT_DRIVER)
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "INSPECT_LOG_LEVEL": "warning"}
    start = time.perf_counter()
    done = subprocess.run([str(python), str(driver), str(spec)], capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"W7 inspect: exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"way": "inspect", "items": result["items"], "errors": result["errors"], "span_s": result["span_s"],
            "output_tokens": result["output_tokens"], "wall_s": wall,
            "first": dt.datetime.fromisoformat(result["first"]).timestamp(),
            "last": dt.datetime.fromisoformat(result["last"]).timestamp()}


def run_w7(work: Path, data: Path, n: int, concurrency: int, ways: list[str]) -> list[dict[str, Any]]:
    """Each way of ``ways`` (``engine``, ``runner``, ``runner 2x1``, ``runner seq``, ``inspect``) in turn."""
    prompts = items(data, n)
    results = []
    for index, way in enumerate(ways):
        if way == "engine":
            result = engine_alone(work, prompts, concurrency)
        elif way == "inspect":
            result = inspect_run(work, prompts, concurrency)
        else:
            workers = 2 if way == "runner 2x1" else 1
            result = runner_run(work, data, n, concurrency, workers, way == "runner seq", way, f"run-{index}")
        print(json.dumps(result), file=sys.stderr, flush=True)
        results.append(result)
    return results


def w7_table(results: list[dict[str, Any]], concurrency: int) -> str:
    """The Markdown table: each way's items/s and output tokens/s over its requests, against (a), and its wall."""
    engine = next((row for row in results if row["way"] == "engine"), None)
    lines = [f"| way ({concurrency} in flight) | items (errors) | requests' span | items/s | output tokens/s | "
             "vs engine (items, tokens) | wall with start-up |", "|---|---:|---:|---:|---:|---|---:|"]
    for row in results:
        per_s = row["items"] / row["span_s"]
        tokens_s = row["output_tokens"] / row["span_s"]
        versus = "-"
        if engine is not None and row is not engine:
            versus = (f"{per_s / (engine['items'] / engine['span_s']):.2f} x, "
                      f"{tokens_s / (engine['output_tokens'] / engine['span_s']):.2f} x")
        lines.append(f"| {row['way']} | {row['items']} ({row['errors']}) | {row['span_s']:.1f} s | {per_s:.2f} | "
                     f"{tokens_s:.1f} | {versus} | {row['wall_s']:.1f} s |")
    return "\n".join(lines)


WAYS = ("engine", "runner", "runner 2x1", "runner seq", "inspect")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w7-n", type=int, default=100, help="questions (default 100)")
    parser.add_argument("--w7-concurrency", type=int, default=16, help="requests in flight (default 16)")
    parser.add_argument("--w7-data", type=Path, default=DATA, help="the HotpotQA file")
    parser.add_argument("--w7-ways", nargs="+", choices=WAYS, default=list(WAYS))
    args, _ = parser.parse_known_args(argv)
    if not args.w7_data.is_file():
        raise SystemExit(f"W7: no HotpotQA file at {args.w7_data}; pass --w7-data PATH")
    with tempfile.TemporaryDirectory(prefix="runner-bench-w7-") as tmp:
        results = run_w7(Path(tmp), args.w7_data, args.w7_n, args.w7_concurrency, args.w7_ways)
    print(w7_table(results, args.w7_concurrency), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
