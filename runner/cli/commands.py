"""The CLI's commands: wiring only; the work is in the layers below."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import datetime, timezone
from typing import Any

import structlog

from runner import log
from runner.cli.args import config_from_args
from runner.cli.model_flags import preflight_models, provider_lines
from runner.core.benchmark import BenchmarkBase
from runner.core.errors import ConfigError, RunnerError
from runner.engine.request import RunRequest
from runner.evaluators import evaluate
from runner.registry import available_benchmarks, available_executors, available_solutions, build_benchmark
from runner.report import PlanScope, build_report, count_stored, render, scope_notes, summary_json, write_html_report
from runner.report.table import default_console
from runner.storage.lease import Lease, read_lease
from runner.storage.manifest import RunManifest
from runner.storage.store import PROGRESS_FILE, ResultStore


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: execute (or resume) a benchmark run and print its summary (and with ``--html`` where its
    report.html is)."""
    config = config_from_args(args)
    log.configure(config.log_format)
    request = RunRequest.from_config(config)
    preflight_models(**request.models())
    asyncio.run(evaluate(request, html=args.html))
    return 0


def _store(args: argparse.Namespace) -> ResultStore:
    return ResultStore(args.uri, args.storage_options or {})


def cmd_report(args: argparse.Namespace) -> int:
    """``report URI [--html]``: re-aggregate a run's records (a partial run too) into summary.json and results.csv,
    and with ``--html`` a self-contained report.html beside them."""
    log.configure(args.log_format)
    store = _store(args)
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(f"no run at {store.uri} (no run.json); check the URI")
    benchmark, problem = _benchmark_of(manifest)
    if problem is not None:
        structlog.get_logger("runner").warning("report.no_headline_score", reason=problem)
    summary = build_report(store, benchmark)
    if args.json:
        print(summary_json(summary).decode(), end="")
    else:
        render(summary, default_console(), storage=store.uri)
    if args.html:
        print(f"report: {write_html_report(store, summary)}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _benchmark_of(manifest: RunManifest) -> tuple[BenchmarkBase | None, str | None]:
    """The run's benchmark rebuilt from ``run.json``'s configuration, or ``None`` and why not (a run of the Python
    API names no built-in benchmark; its data may be missing here)."""
    config = manifest.config
    if not config.get("benchmark"):
        return None, "run.json names no benchmark"
    try:
        return build_benchmark(config["benchmark"], config.get("benchmark_args"), config.get("data_dir")), None
    except RunnerError as exc:
        return None, str(exc)


def cmd_status(args: argparse.Namespace) -> int:
    """``status URI [--watch [SECONDS]]``: how far a run is, from its manifest, one listing of its records, its
    lease and its ``progress.json``.

    Counts the records of the current plan, as the report does (:mod:`runner.report.scope`): record files of task
    ids the run's benchmark does not have are left out when the benchmark can be rebuilt here from ``run.json``;
    records are read only when the run's limit was lowered below one an earlier run used, to tell the tasks past
    it. Says which driver owns the run (``lease.json``) and whether its lease is alive, and, while a driver executes
    it, what that driver last said (``progress.json``: rate, ETA, running means) and how long ago. ``--watch`` says
    it again every few seconds until no driver executes the run (or Ctrl-C).
    """
    store = _store(args)
    benchmarks: dict[str, tuple[Any, str | None]] = {}
    if args.watch is None:
        status, lines = _status(store, benchmarks)
        print(json.dumps(status, indent=2) if args.json else "\n".join(lines))
        return 0
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    every = max(args.watch, 0.5)
    with Live(auto_refresh=False, console=default_console()) as live:
        while True:
            status, lines = _status(store, benchmarks)
            body = json.dumps(status, indent=2) if args.json else "\n".join(lines)
            live.update(Group(Text(body), Text(f"(every {every:g} s; Ctrl-C to stop watching)", style="dim")),
                        refresh=True)
            # Until no driver executes it: it ended (or was abandoned; status says so).
            if status["driver"] is None or (status.get("progress") or {}).get("state") == "ended":
                return 0
            time.sleep(every)


def _status(store: ResultStore, benchmarks: dict[str, tuple[Any, str | None]]) -> tuple[dict[str, Any], list[str]]:
    """The status of the run at ``store``, as JSON-ready data and as lines for people. ``benchmarks`` keeps the
    run's benchmark (rebuilt from ``run.json`` to know its task ids) from one call to the next, by run id.

    Raises:
        ConfigError: no run at that URI.
    """
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(f"no run at {store.uri} (no run.json); check the URI")
    if manifest.run_id not in benchmarks:
        benchmarks[manifest.run_id] = _benchmark_of(manifest)
    benchmark, problem = benchmarks[manifest.run_id]
    scope = PlanScope.of(manifest, benchmark)
    stored = count_stored(store, scope)
    done = stored.done
    n_tasks = manifest.benchmark.n_tasks
    expected = (n_tasks - manifest.benchmark.duplicate_tasks) * manifest.n_repeats if n_tasks is not None else None
    has_summary = store.read_file("summary.json") is not None
    owner = read_lease(store)
    progress = _progress(store)
    status = {
        "run_id": manifest.run_id,
        "benchmark": manifest.benchmark.name,
        "storage": store.uri,
        "done": done,
        "expected": expected,
        "fraction": round(done / expected, 4) if expected else None,
        "complete": expected is not None and done >= expected,
        "outside_plan": sum(stored.outside.values()),
        "task_ids_checked": scope.task_keys is not None,
        "duplicate_tasks": manifest.benchmark.duplicate_tasks,
        "summary": has_summary,
        "updated_at": manifest.updated_at,
        "driver": owner.describe() if owner is not None else None,
        "progress": progress,
    }
    share = f" ({100 * done / expected:.1f}%)" if expected else ""
    state = "complete" if status["complete"] else "incomplete"
    lines = [f"{manifest.benchmark.name} run {manifest.run_id}: {done}/{expected if expected is not None else '?'} "
             f"items{share}, {state}; summary.json {'present' if has_summary else 'absent'} ({store.uri})",
             _driver_line(owner)]
    if progress is not None:
        lines.append(_progress_line(progress))
    notes = scope_notes(scope, stored.outside, manifest.benchmark.duplicate_tasks)
    if scope.task_keys is None and expected is not None and done > expected:
        why = problem or "its tasks cannot be read here"
        notes.append(f"{done - expected} more record files than items: some are of task ids the plan does not "
                     f"have, which cannot be told apart without the run's benchmark ({why})")
    lines += [f"note: {note}" for note in notes]
    return status, lines


def _progress(store: ResultStore) -> dict[str, Any] | None:
    """The run's ``progress.json`` with ``age_s`` (seconds since its driver wrote it), or ``None`` without one."""
    data = store.read_file(PROGRESS_FILE)
    if data is None:
        return None
    try:
        progress = json.loads(data)
        written = datetime.fromisoformat(progress["updated_at"])
    except (ValueError, KeyError, TypeError):
        return None
    progress["age_s"] = round((datetime.now(timezone.utc) - written).total_seconds(), 1)
    return progress


def _progress_line(progress: dict[str, Any]) -> str:
    """What the driver last said, in one line: counts, rate, ETA and the headline metric's running mean."""
    parts = [f"{progress.get('done')}/{progress.get('total') if progress.get('total') is not None else '?'} items "
             f"this invocation", f"errors {progress.get('errors', 0)}"]
    if progress.get("rate") is not None:
        parts.append(f"{progress['rate']:g} items/s")
    if progress.get("eta_s") is not None and progress.get("state") == "running":
        parts.append(f"ETA {progress['eta_s']:.0f} s")
    headline = progress.get("headline")
    metric = (progress.get("metrics") or {}).get(headline) if headline else None
    if metric:
        interval = metric.get("ci95")
        bounds = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
        parts.append(f"{headline} {metric['mean']:.3f}{bounds} (n {metric['n']})")
    return (f"progress ({progress.get('state', '?')}, written {progress['age_s']:.0f} s ago): " + ", ".join(parts))


def _driver_line(owner: Lease | None) -> str:
    """Who drives the run, in one line: no driver, a live one, or one whose lease lapsed, with how the run goes on
    (:func:`runner.storage.lease.acquire`'s rules)."""
    if owner is None:
        return "driver: none (no driver holds the run)"
    state = owner.state()
    if state == "driver gone":
        return (f"driver: {owner.owner()}, its process is gone (killed); the same command on this host resumes "
                "(it takes the lease over)")
    if state == "alive":
        return (f"driver: {owner.owner()}, alive (last heartbeat {owner.heartbeat_at}, lease until "
                f"{owner.expires_at})")
    return (f"driver: {owner.owner()}, its lease expired at {owner.expires_at} (killed, or cut off from the "
            "storage); if it no longer runs, the same command with --take-over resumes")


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: the benchmarks, solutions, executors and model providers this installation knows."""
    console = default_console()
    console.print("[bold]benchmarks[/bold]")
    for name, path in sorted(available_benchmarks().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]solutions[/bold]")
    for name, path in sorted(available_solutions().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]executors[/bold] (--executor NAME; --sequential is short for --executor sequential)")
    for name, path in sorted(available_executors().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]model providers[/bold] (--model provider:model)")
    for line in provider_lines():
        console.print(line, markup=False, soft_wrap=True)
    return 0
