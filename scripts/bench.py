"""Speed and scale of the Ray executor: workloads W1-W4 of issue 3 and W6 of issue 14, on an embedded Ray, local
storage; and the fault workload F of issue 11 on a head and two worker nodes.

Each workload is a synthetic benchmark of N tasks (task i asks for i; one numerical exact-match metric) and runs in
its own process, so the driver's peak RSS is that workload's alone::

    python scripts/bench.py                    # all four, a Markdown table on stdout
    python scripts/bench.py --only W1 W2       # some of them

- W1 dispatch: N = 2000, the solution returns at once. Tasks/s end to end and after start-up.
- W2 latency-bound: N = 500, the solution awaits ``asyncio.sleep(0.2)``; 32 items in flight in total (2 workers x 16).
  Efficiency = ideal / measured after start-up, ideal = 500 x 0.2 / 32 = 3.125 s.
- W3 resume: W1 again on W1's finished storage. Seconds (including the report, which reads every record).
- W4 scale: N = 100,000 no-op tasks. Driver peak RSS while executing (and after the report, which aggregates every
  record) and tasks/s.

- W6 model traffic (issue 14): 1,000 items of the ``chat`` solution (temperature 0) against the scripted
  OpenAI-compatible server of ``tests/support/model_server.py``, which admits 50 requests/s (a token bucket holding
  one second of them; beyond it: 429 with ``Retry-After: 1``), answers each request after 100 ms with the echo
  policy (so task i scores 1 with the answer "i"), and runs in this process; 4 workers x 32 in flight. Three runs,
  each into a new run directory: ``W6`` without limits; ``W6rpm`` with ``--max-rpm 3000`` and a new ``--cache``
  (every request misses and is stored); ``W6cache``, the same run again with that cache. Targets: ``W6rpm`` at most
  1 % of requests answered 429 and at least 0.9 x 50 successful requests/s (after start-up); ``W6cache`` zero
  requests and the same score. ``W6short`` (issue 20): 300 items on 2 workers x 32 in flight with
  ``--max-rpm 3000`` and no cache, a run too short for a rate halved by a 429 to grow back; the same targets as
  ``W6rpm``. ``W6short429``: ``W6short`` where the server refuses one request (429, ``Retry-After: 1``) once 100
  have arrived, as it refused two by chance in issue 20's run (the rate was halved: 26.8 requests/s); a rare 429
  under ``--max-rpm`` should cost its pause and no more. Each run also shows the most requests the server received in any
  one second (a sliding window), in the run's first second and after it: the first holds the workers' start (their
  model clients' first requests leave late, and together). Run them all with ``--only W6``, or some with e.g.
  ``--only W6short W6rpm``.

Each workload does what ``RayEvaluator.run`` does: ``execute_run`` with a :class:`RayExecutor` (default worker spec:
one worker per CPU), then ``build_report``; the driver's peak RSS is read between the two.

"After start-up" is measured from the stored records themselves: from the earliest ``started_at`` to the latest
``finished_at``, so Ray's and the actors' start-up are excluded and nothing in the executor is instrumented.
Targets (issue 3, on the 2-core development machine): W1 >= 1000 tasks/s after start-up, W2 efficiency >= 0.9,
W3 < 2 s, W4 driver peak RSS < 500 MB and throughput within 20 % of W1's.

- W5 results at scale (issue 21, ``--only W5``): a run-write-report-resume workload of N no-op tasks run
  sequentially (N = 2,000 and 20,000; ``--w5-n``), on local disk and on moto's S3 server on 127.0.0.1 behind the
  counting proxy of ``tests/support/store_proxy.py`` (and on any store with ``--w5-store URL``, e.g. a GCS or Azure
  emulator's bucket: its requests are not counted). Three phases, each in a process of its own: ``run`` (the
  sequential executor writes N records, and the driver consolidates them into result shards), ``report``
  (``build_report``: summary.json and results.csv) and ``resume`` (the same run again, which finds nothing to do,
  then its report, as the CLI does), with ``--shards on`` on every store; ``--w5-no-compaction`` measures the store
  without shards (``--shards off``).
  Targets: report and resume at most 2 x their local-disk times, and at most N / 500 + 20 requests each.

- W7 the embedded model served (issue 19, ``--only W7``, options ``--w7-...``): the same HotpotQA questions sent to
  SmolLM2-135M-Instruct by the engine alone, by the runner and by Inspect AI; see ``scripts/bench_w7.py``.

- F node loss (``--only F``): N = 2,000 tasks of 0.05 s (``asyncio.sleep``) on a head without CPUs and two worker
  nodes of 4 CPUs (4 workers each), all on 127.0.0.1 (:class:`tests.support.ray_nodes.LocalCluster`), run twice on
  fresh storage: F0 as is, F with node ``a``'s raylet killed (SIGKILL) once 30 % of the records exist. The table
  shows records (0 lost), second writes refused by the write-once store (0: nothing written twice), solution calls
  per task (each call is logged by the solution; target: at most 1 + the items in flight on the dead node, which
  the driver's ``worker.died`` events count), the records charged an attempt, and the wall time of F against F0.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from runner import BenchmarkBase, ResultStore, RunSettings, SolutionSpec, Task, WorkerSpec, log, registry
from runner.benchmarks.toy import NumericMatch
from runner.engine import RunRequest, execute_run
from runner.report import build_report

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the fault workload's cluster and solution live in tests/ (run from the checkout)

W2_SLEEP_S = 0.2
W2_IN_FLIGHT = 32
WORKLOADS = {
    # name: (tasks, solution, worker options)
    "W1": (2000, "instant", {}),
    "W2": (500, "sleepy", {"num_workers": 2, "max_concurrency": W2_IN_FLIGHT // 2}),
    "W3": (2000, "instant", {}),
    "W4": (100_000, "instant", {}),
    # Not one of the four: W1 on the sequential executor in the driver's process, to tell the cost of an item
    # (execute_one: scoring, one record written) from the cost of distributing it. Run it with --only W1s.
    "W1s": (2000, "instant", {}),
}
DEFAULT = ["W1", "W2", "W3", "W4"]
W6_RATE, W6_LATENCY_S = 50, 0.1
W6_WORKER = {"num_workers": 4, "num_cpus": 0.5, "max_concurrency": 32}  # 4 workers fit the 2-core machine
W6_RUNS: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {
    # name: (items, worker options, limits)
    "W6": (1000, W6_WORKER, {}),
    "W6rpm": (1000, W6_WORKER, {"max_rpm": 3000}),
    "W6cache": (1000, W6_WORKER, {"max_rpm": 3000}),
    "W6short": (300, {**W6_WORKER, "num_workers": 2}, {"max_rpm": 3000}),
    "W6short429": (300, {**W6_WORKER, "num_workers": 2}, {"max_rpm": 3000}),
}
"""W6's runs; ``W6rpm`` and ``W6cache`` share one response cache."""
W6_CACHED = ("W6rpm", "W6cache")
W6_REFUSED = {"W6short429": (100, 1)}
"""Runs whose server refuses some requests (429, ``Retry-After: 1``) whatever the rate: (after how many requests of
the run, how many)."""
FAULT_N = 2000
FAULT_SLEEP_S = 0.05
FAULT_KILL_AT = 0.3
FAULT_NODES = {"a": 4, "b": 4}
"""Worker nodes of the fault workload and their CPUs (one worker per CPU); ``a`` is the one killed."""


class Synthetic(BenchmarkBase):
    """``n`` tasks; task ``i`` has input ``i``, ground truth ``i`` and one numerical exact-match metric."""

    version = "1"

    def __init__(self, n: int) -> None:
        super().__init__(name=f"synthetic-{n}")
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Task]:
        for i in range(self.n):
            yield Task(id=f"t{i:06d}", input=i, ground_truth=i, metrics=[NumericMatch(i)])


def instant(task: Task) -> int:
    """Answer at once."""
    return task.input


async def sleepy(task: Task) -> int:
    """Wait like a model call, then answer."""
    await asyncio.sleep(W2_SLEEP_S)
    return task.input


def _span_s(store: ResultStore) -> tuple[float, int]:
    """Seconds from the first record's start to the last record's end, and the number of records."""
    first, last, count = None, None, 0
    for record in store.iter_records():
        start = dt.datetime.fromisoformat(record.started_at)
        end = dt.datetime.fromisoformat(record.finished_at)
        first = start if first is None or start < first else first
        last = end if last is None or end > last else last
        count += 1
    assert first is not None and last is not None
    return (last - first).total_seconds(), count


async def _run(name: str, storage: str) -> dict[str, float | int | str]:
    n, solution, options = WORKLOADS[name]
    benchmark, store = Synthetic(n), ResultStore(storage)
    spec = SolutionSpec(globals()[solution], name=solution)
    # What RayEvaluator.run does (execute, then report), with the driver's peak RSS read in between.
    started = time.perf_counter()
    settings = RunSettings(executor="sequential" if name == "W1s" else "ray", worker=WorkerSpec(**options))
    request = RunRequest(benchmark=benchmark, solution=spec, store=store, settings=settings, progress_bar=False,
                         fingerprint_fields={"benchmark": benchmark.name, "solution": solution})
    outcome = await execute_run(request)
    executed_at = time.perf_counter()
    peak_exec_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    build_report(store, benchmark)
    wall = time.perf_counter() - started
    return {"workload": name, "n": n, "wall_s": round(wall, 3), "execute_s": round(executed_at - started, 3),
            "executed": outcome.executed, "driver_peak_rss_mb": round(peak_exec_mb, 1),
            "driver_peak_rss_with_report_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def child(name: str, storage: str, url: str | None = None, cache: str | None = None) -> dict[str, Any]:
    """Run workload ``name`` in this process; its measurements."""
    log.configure("json")  # as the CLI does: INFO and up, so no per-item debug lines
    if name in W6_RUNS:
        assert url is not None
        return asyncio.run(_run_w6(name, storage, url, cache))
    result = asyncio.run(_run(name, storage))
    if name == "W3":
        return result
    n = WORKLOADS[name][0]
    span, count = _span_s(ResultStore(storage))
    assert count == n, f"{count} records for {n} tasks"
    result.update(span_s=round(span, 3), end_to_end_per_s=round(n / result["wall_s"], 1),
                  after_startup_per_s=round(n / span, 1))
    if name == "W2":
        ideal = n * W2_SLEEP_S / W2_IN_FLIGHT
        result.update(ideal_s=ideal, efficiency=round(ideal / span, 3))
    return result


async def _run_w6(name: str, storage: str, url: str, cache: str | None) -> dict[str, Any]:
    """One run of W6 against the server at ``url``: what its records and summary say."""
    items, worker, limits = W6_RUNS[name]
    benchmark, store = Synthetic(items), ResultStore(storage)
    spec = registry.solution_spec("chat", {"temperature": 0}, "vllm:bench", benchmark, url)
    settings = RunSettings(worker=WorkerSpec(**worker), cache=cache, **limits)
    request = RunRequest(benchmark=benchmark, solution=spec, store=store, settings=settings, progress_bar=False,
                         fingerprint_fields={"benchmark": benchmark.name, "solution": "chat"})
    started = time.perf_counter()
    outcome = await execute_run(request)
    wall = time.perf_counter() - started
    summary = build_report(store, benchmark)
    usage = summary.usage.get("vllm:bench", {})
    endpoints = (summary.limits or {}).get("endpoints", {})
    limiter = next(iter(endpoints.values()), {})
    return {"workload": name, "n": items, "wall_s": round(wall, 3), "executed": outcome.executed,
            "errors": summary.errors, "score": summary.metrics["exact-match"].mean, "calls": usage.get("calls", 0),
            "cached_calls": usage.get("cached_calls", 0), "limiter_429s": limiter.get("rate_limited", 0),
            "limiter_pauses": limiter.get("pauses", 0), "limiter_decreases": limiter.get("decreases", 0),
            "limiter_rate_rpm": limiter.get("rate_rpm")}


def most_in_a_second(arrivals: list[float], since: float = -math.inf, until: float = math.inf) -> int:
    """The most of ``arrivals`` (seconds, sorted) within any one second ``[t, t + 1)`` that starts from ``since``
    and before ``until`` (the busiest such second starts at an arrival)."""
    most, last = 0, 0
    for first, at in enumerate(arrivals):
        last = max(last, first)
        while last < len(arrivals) and arrivals[last] < at + 1.0:
            last += 1
        if since <= at < until:
            most = max(most, last - first)
    return most


def refuse_later(server: Any, before: int, after: int, times: int) -> threading.Thread:
    """A thread that has ``server`` refuse ``times`` requests (429, ``Retry-After: 1``) once ``after`` requests
    arrived beyond the first ``before``."""

    def watch() -> None:
        while len(server.requests) < before + after:
            time.sleep(0.002)
        server.fail(429, times, retry_after="1", message="rate limit reached for a moment")
        while len(server.requests) < before + after + times:  # until they are answered
            time.sleep(0.002)

    thread = threading.Thread(target=watch, name="refuse-later", daemon=True)
    thread.start()
    return thread


def run_w6(tmp: str, env: dict[str, str], names: list[str]) -> dict[str, dict]:
    """W6's runs ``names``, each in a process of its own, against one rate-limited server in this process."""
    sys.path.insert(0, str(REPO))
    from tests.support.model_server import ScriptedModelServer

    results: dict[str, dict] = {}
    with ScriptedModelServer("echo") as server:
        server.limit_rate(W6_RATE, retry_after="1")
        server.latency = W6_LATENCY_S
        for name in names:
            before, refused_before = len(server.requests), server.rate_limited
            command = [sys.executable, __file__, "--child", name, "--storage", str(Path(tmp) / name),
                       "--server-url", server.url]
            if name in W6_CACHED:
                command += ["--cache", str(Path(tmp) / "W6-cache")]
            injected = refuse_later(server, before, *W6_REFUSED[name]) if name in W6_REFUSED else None
            done = subprocess.run(command, check=True, env=env, capture_output=True, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            arrivals = sorted(r.received_at for r in server.requests[before:] if r.path.endswith("/chat/completions"))
            requests = len(arrivals)
            refused = server.rate_limited - refused_before
            if injected is not None and not injected.is_alive():
                refused += W6_REFUSED[name][1]
            span, _ = _span_s(ResultStore(str(Path(tmp) / name)))
            first = arrivals[0] if arrivals else 0.0
            result.update(requests=requests, refused=refused, span_s=round(span, 3),
                          refused_share=round(refused / requests, 4) if requests else 0.0,
                          ok_per_s=round((requests - refused) / span, 1),
                          most_in_1s=most_in_a_second(arrivals),
                          most_in_1s_first=most_in_a_second(arrivals, until=first + 1.0),
                          most_in_1s_later=most_in_a_second(arrivals, since=first + 1.0),
                          per_second=[sum(1 for at in arrivals if second <= at - first < second + 1)
                                      for second in range(math.ceil(arrivals[-1] - first))] if arrivals else [])
            results[name] = result
            print(json.dumps(result), file=sys.stderr)
    return results


def w6_table(results: dict[str, dict]) -> str:
    """The Markdown table of W6's runs, with each target and whether it was met."""
    rows = ["| run | items | wall (with start-up) | requests | 429s | after start-up | most in 1 s (first, later) | "
            "score | errors | target | met |",
            "|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|"]
    rpm_score = results.get("W6rpm", {}).get("score")
    for name, r in results.items():
        if name in ("W6rpm", "W6short"):
            target = "<= 1 % 429s, >= 45 requests/s"
            met = r["refused_share"] <= 0.01 and r["ok_per_s"] >= 0.9 * W6_RATE
        elif name == "W6cache":
            target, met = "0 requests, the same score", r["requests"] == 0 and r["score"] == rpm_score
        elif name in W6_REFUSED:
            target, met = "the rate kept: a 1 s pause, no decrease", r["limiter_decreases"] == 0
        else:
            target, met = "(reference: 429s and wall time)", True
        after = f"{r['span_s']:.2f} s, {r['ok_per_s']:.1f} ok requests/s"
        rows.append(f"| {name} | {r['n']} | {r['wall_s']:.2f} s | {r['requests']} | {r['refused']} "
                    f"({100 * r['refused_share']:.1f} %) | {after} | {r['most_in_1s_first']}, {r['most_in_1s_later']} "
                    f"| {r['score']:.3f} | {r['errors']} | {target} | "
                    f"{'yes' if met else 'no'} |")
    return "\n".join(rows)


def table(results: dict[str, dict]) -> str:
    """The Markdown table of ``results`` (workload name -> measurements), with each target and whether it was met."""
    rows = ["| workload | N | end to end | after start-up | result | target | met |",
            "|---|---:|---:|---:|---|---|---|"]
    w1 = results.get("W1", {}).get("after_startup_per_s")
    for name, r in results.items():
        if name == "W1s":
            result, target, met = f"{r['after_startup_per_s']:.0f} tasks/s in one process", "(reference)", True
        elif name == "W1":
            result, target = f"{r['after_startup_per_s']:.0f} tasks/s", ">= 1000 tasks/s"
            met = r["after_startup_per_s"] >= 1000
        elif name == "W2":
            result = f"efficiency {r['efficiency']:.2f} ({r['span_s']:.2f} s vs ideal {r['ideal_s']:.3f} s)"
            target, met = ">= 0.9", r["efficiency"] >= 0.9
        elif name == "W3":
            result, target, met = f"{r['wall_s']:.2f} s, {r['executed']} executed", "< 2 s", r["wall_s"] < 2
        else:
            ratio = r["after_startup_per_s"] / w1 if w1 else None
            share = f", {ratio:.2f} x W1" if ratio else ""
            result = (f"driver peak RSS {r['driver_peak_rss_mb']:.0f} MB ({r['driver_peak_rss_with_report_mb']:.0f} MB "
                      f"with the report), {r['after_startup_per_s']:.0f} tasks/s{share}")
            target = "< 500 MB, >= 0.8 x W1"
            met = r["driver_peak_rss_mb"] < 500 and (ratio is None or ratio >= 0.8)
        e2e = f"{r['wall_s']:.2f} s" + (f" ({r['end_to_end_per_s']:.0f}/s)" if "end_to_end_per_s" in r else "")
        after = f"{r['span_s']:.2f} s" if "span_s" in r else "-"
        rows.append(f"| {name} | {r['n']} | {e2e} | {after} | {result} | {target} | {'yes' if met else 'no'} |")
    return "\n".join(rows)


W5_SIZES = (2000, 20_000)
W5_PHASES = ("run", "report", "resume")


def w5_child(phase: str, storage: str, n: int, compaction: bool) -> dict[str, Any]:
    """One phase of W5 (``run``, ``report`` or ``resume``) on the run at ``storage``, in this process: its seconds
    (imports and interpreter start-up excluded), the seconds of the store client's set-up among them (an S3
    client: its session, credentials and first connection, about 0.75 s here whatever the run's size) and the
    items it executed."""
    log.configure("json")
    benchmark, store = Synthetic(n), ResultStore(storage)
    started = time.perf_counter()
    connect = getattr(store.fs, "connect", None)  # s3fs: the client session, made at its first request otherwise
    if callable(connect):
        connect()
    set_up = time.perf_counter() - started
    executed = 0
    if phase in ("run", "resume"):
        settings = RunSettings(executor="sequential", shards="on" if compaction else "off")
        request = RunRequest(benchmark=benchmark, solution=SolutionSpec(instant, name="instant"), store=store,
                             settings=settings, progress_bar=False,
                             fingerprint_fields={"benchmark": benchmark.name, "solution": "instant"})
        executed = asyncio.run(execute_run(request)).executed
    if phase in ("report", "resume"):
        summary = build_report(store, benchmark)
        assert summary.completed == n, f"{summary.completed} records for {n} tasks"
    return {"seconds": round(time.perf_counter() - started, 3), "set_up_s": round(set_up, 3), "executed": executed}


def run_w5(tmp: Path, env: dict[str, str], sizes: Sequence[int], compaction: bool,
           store_url: str | None, emulators: Sequence[str] = ()) -> list[dict[str, Any]]:
    """W5 on local disk, on moto's S3 server behind the counting proxy, on ``store_url`` when given, and on each of
    ``emulators`` (``gcs``, ``azure``: started here by ``tests/support/emulators.py``): one row per (store, N) with
    each phase's seconds and, where counted, requests."""
    import contextlib

    from tests.support.emulators import start as start_emulator

    from moto.server import ThreadedMotoServer

    from tests.support.store_proxy import FaultyStoreProxy

    import boto3

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "bench",
          "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_DEFAULT_REGION": "us-east-1"}
    rows = []
    try:
        with contextlib.ExitStack() as stack, FaultyStoreProxy(s3["AWS_ENDPOINT_URL"]) as proxy:
            boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], aws_access_key_id="bench",
                         aws_secret_access_key="bench-secret", region_name="us-east-1").create_bucket(Bucket="runner-w5")
            stores = [("local disk", lambda n: str(tmp / f"W5-{n}"), env, None),
                      ("S3 (moto, loopback)", lambda n: f"s3://runner-w5/W5-{n}", {**env, **s3,
                                                                           "AWS_ENDPOINT_URL": proxy.url}, proxy)]
            if store_url:
                stores.append((store_url, lambda n: f"{store_url.rstrip('/')}/W5-{n}-{os.getpid()}", env, None))
            for name in emulators:
                emulator = stack.enter_context(start_emulator(name))
                bucket = emulator.bucket()
                label = {"gcs": "GCS (fake-gcs-server, loopback)", "azure": "Azure Blob (Azurite, loopback)"}[name]
                stores.append((label, lambda n, e=emulator, b=bucket: e.uri(b, f"W5-{n}"), {**env, **emulator.env},
                               None))
            for label, storage_of, store_env, counter in stores:
                for n in sizes:
                    row: dict[str, Any] = {"store": label, "n": n}
                    for phase in W5_PHASES:
                        before = len(counter.requests) if counter else 0
                        command = [sys.executable, __file__, "--child", f"W5{phase}", "--storage", storage_of(n),
                                   "--w5-n", str(n)]
                        if not compaction:
                            command.append("--w5-no-compaction")
                        done = subprocess.run(command, check=True, env=store_env, capture_output=True, text=True,
                                              cwd=REPO)
                        result = json.loads(done.stdout.strip().splitlines()[-1])
                        row[phase] = result["seconds"]
                        row[f"{phase}_set_up"] = result["set_up_s"]
                        if phase == "run":
                            assert result["executed"] == n, result
                        if phase == "resume":
                            assert result["executed"] == 0, result
                        if counter:
                            row[f"{phase}_requests"] = len(counter.requests) - before
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        server.stop()
    return rows


def w5_table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of W5, with its targets (report and resume at most 2 x local disk, requests at most
    N / 500 + 20) and whether they were met. Each time is the phase's, and in brackets the same without the store
    client's set-up (the same for any N; 0 on local disk); the ratios to local disk compare the latter."""
    local = {row["n"]: row for row in rows if row["store"] == "local disk"}
    lines = ["| store | N | run | report | resume | requests: run / report / resume | report, resume vs local | "
             "target | met |", "|---|---:|---:|---:|---:|---|---|---|---|"]

    def net(row: dict[str, Any], phase: str) -> float:
        return row[phase] - row[f"{phase}_set_up"]

    def shown(row: dict[str, Any], phase: str) -> str:
        return f"{row[phase]:.2f} s" + (f" ({net(row, phase):.2f} s)" if row[f"{phase}_set_up"] >= 0.005 else "")

    for row in rows:
        n, base = row["n"], local.get(row["n"])
        ratios = (net(row, "report") / net(base, "report"), net(row, "resume") / net(base, "resume")) \
            if base else None
        requests = " / ".join(f"{row[f'{phase}_requests']:,}" for phase in W5_PHASES) \
            if "run_requests" in row else "(not counted)"
        limit = n // 500 + 20
        met = (ratios is None or max(ratios) <= 2) and \
            ("run_requests" not in row or max(row["report_requests"], row["resume_requests"]) <= limit)
        versus = "-" if row["store"] == "local disk" or ratios is None else f"{ratios[0]:.2f} x, {ratios[1]:.2f} x"
        lines.append(f"| {row['store']} | {n:,} | {shown(row, 'run')} | {shown(row, 'report')} | "
                     f"{shown(row, 'resume')} | {requests} | {versus} | <= 2 x local; <= {limit} requests | "
                     f"{'yes' if met else 'no'} |")
    return "\n".join(lines)


def fault_child(storage: str, address: str, calls: str) -> dict[str, float | int]:
    """Run the fault workload's items on the cluster at ``address`` (each solution call logged to ``calls``); its
    measurements."""
    from tests.engine.ray_solutions import node_bound

    log.configure("json")
    benchmark = Synthetic(FAULT_N)
    spec = SolutionSpec(node_bound, {"log": calls, "fast_s": FAULT_SLEEP_S}, name="node_bound")
    settings = RunSettings(ray_address=address, worker=WorkerSpec())
    request = RunRequest(benchmark=benchmark, solution=spec, store=ResultStore(storage), settings=settings,
                         progress_bar=False, fingerprint_fields={"benchmark": benchmark.name, "solution": "node_bound"})
    started = time.perf_counter()
    outcome = asyncio.run(execute_run(request))
    return {"wall_s": round(time.perf_counter() - started, 3), "executed": outcome.executed}


def faults(tmp: Path) -> str:
    """Run F0 and F on one local cluster; the Markdown table."""
    from tests.engine.ray_solutions import NODE_VARIABLE
    from tests.support.ray_nodes import LocalCluster

    rows = ["| workload | items | node killed | records (lost) | second writes refused | solution calls per task | "
            "extra calls / in flight on the dead node | records at attempt 2 | wall time | vs F0 |",
            "|---|---:|---|---|---:|---|---|---:|---:|---:|"]
    baseline = None
    (tmp / "nodes").mkdir()
    with LocalCluster(tmp / "nodes", env={"PYTHONPATH": str(REPO)}) as cluster:
        for node, cpus in FAULT_NODES.items():
            cluster.add_node(node, cpus, env={NODE_VARIABLE: node})
        for name in ("F0", "F"):
            storage, calls, driver_log = tmp / name, tmp / f"{name}-calls.txt", tmp / f"{name}-driver.log"
            with open(driver_log, "wb") as out:
                driver = subprocess.Popen(
                    [sys.executable, __file__, "--child", name, "--storage", str(storage), "--address",
                     cluster.address, "--calls", str(calls)], cwd=REPO, env=cluster.env, stdout=subprocess.PIPE,
                    stderr=out, text=True)
            killed_at = None
            while name == "F" and driver.poll() is None and killed_at is None:
                done = len(os.listdir(storage / "records")) if (storage / "records").is_dir() else 0
                if done >= FAULT_KILL_AT * FAULT_N:
                    cluster.collect()
                    cluster.kill_raylet("a")
                    killed_at = done
                time.sleep(0.02)
            result = json.loads(driver.communicate()[0].strip().splitlines()[-1])
            assert driver.returncode == 0, driver_log.read_text()[-3000:]
            rows.append(_fault_row(name, result, storage, calls, driver_log, killed_at, baseline))
            baseline = baseline or result["wall_s"]
    return "\n".join(rows)


def _fault_row(name: str, result: dict, storage: Path, calls: Path, driver_log: Path, killed_at: int | None,
               baseline: float | None) -> str:
    attempts = [record.attempt for record in ResultStore(str(storage)).iter_records()]
    records = len(attempts)
    lines = driver_log.read_text().splitlines()
    refused = sum(1 for line in lines if '"item.exists"' in line or '"item.duplicate"' in line)
    in_flight = sum(json.loads(line[line.index("{"):]).get("in_flight", 0) for line in lines
                    if '"worker.died"' in line and "{" in line)
    per_task: dict[str, int] = {}
    for line in calls.read_text().splitlines():
        per_task[line.split()[0]] = per_task.get(line.split()[0], 0) + 1
    total = sum(per_task.values())
    killed = f"a at {killed_at} records ({killed_at / FAULT_N:.0%})" if killed_at else "-"
    versus = f"{result['wall_s'] / baseline:.2f} x" if baseline else "-"
    return (f"| {name} | {FAULT_N} | {killed} | {records} ({FAULT_N - records}) | {refused} | "
            f"{total / FAULT_N:.4f} ({total} calls, at most {max(per_task.values())} per task) | "
            f"{total - FAULT_N} / {in_flight} | {attempts.count(2)} | {result['wall_s']:.2f} s | {versus} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted({*WORKLOADS, *W6_RUNS, "W5", "W7", "F"}),
                        default=DEFAULT)
    parser.add_argument("--w5-n", type=int, nargs="+", default=list(W5_SIZES), help="W5's numbers of tasks")
    parser.add_argument("--w5-store", help="W5 also on this store URL (e.g. gs://bucket/prefix of an emulator)")
    parser.add_argument("--w5-emulators", nargs="*", choices=("gcs", "azure"), default=[],
                        help="W5 also on these emulators, started here (fake-gcs-server; Azurite from npm)")
    parser.add_argument("--w5-no-compaction", action="store_true", help="W5 without result shards (the baseline)")
    parser.add_argument("--child", choices=sorted([*WORKLOADS, *W6_RUNS, "F0", "F", *(f"W5{p}" for p in W5_PHASES)]),
                        help=argparse.SUPPRESS)
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    parser.add_argument("--server-url", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--calls", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if "W7" in args.only:  # its options (--w7-...) are bench_w7's
        import bench_w7

        bench_w7.main(rest)
        args.only = [name for name in args.only if name != "W7"]
        if not args.only:
            return 0
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.child in ("F0", "F"):
        print(json.dumps(fault_child(args.storage, args.address, args.calls)))
        return 0
    if args.child and args.child.startswith("W5"):
        print(json.dumps(w5_child(args.child[2:], args.storage, args.w5_n[0], not args.w5_no_compaction)))
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.storage, args.server_url, args.cache)))
        return 0
    if "F" in args.only:
        with tempfile.TemporaryDirectory(prefix="runner-bench-faults-") as tmp:
            print(faults(Path(tmp)), flush=True)
        args.only = [name for name in args.only if name != "F"]
        if not args.only:
            return 0
    env = {**os.environ, "RAY_DEDUP_LOGS": "1"}
    if "W5" in args.only:
        with tempfile.TemporaryDirectory(prefix="runner-bench-w5-") as tmp:
            print(w5_table(run_w5(Path(tmp), env, args.w5_n, not args.w5_no_compaction, args.w5_store,
                                  args.w5_emulators)), flush=True)
        args.only = [name for name in args.only if name != "W5"]
        if not args.only:
            return 0
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp:
        w6 = list(W6_RUNS) if "W6" in args.only else [name for name in W6_RUNS if name in args.only]
        if "W6cache" in w6 and "W6rpm" not in w6:
            w6.insert(w6.index("W6cache"), "W6rpm")  # its cache
        if w6:
            print(w6_table(run_w6(tmp, env, w6)), flush=True)
        for name in (name for name in args.only if name not in W6_RUNS):
            storage = str(Path(tmp) / ("W1" if name in ("W1", "W3") else name))  # W3 resumes W1's run
            if name == "W3" and "W1" not in results:
                subprocess.run([sys.executable, __file__, "--child", "W1", "--storage", storage], check=True,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            done = subprocess.run([sys.executable, __file__, "--child", name, "--storage", storage], check=True,
                                  env=env, capture_output=True, text=True)
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(results[name]), file=sys.stderr)
        # Before the clean-up, which takes minutes for W4's 100,000 record folders.
        if results:
            print(table(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
