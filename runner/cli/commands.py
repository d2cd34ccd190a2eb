"""The CLI's commands: wiring only; the work is in the layers below."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import structlog
from rich.console import Console

from runner import log
from runner.cli.args import config_from_args
from runner.cli.model_flags import (
    judge_args,
    preflight_models,
    provider_lines,
    with_judge_default,
    with_model_default,
)
from runner.core.config import RunConfig
from runner.core.errors import ConfigError, RunnerError
from runner.engine.plugins import available_benchmarks, available_solutions, build_benchmark, resolve, solution_spec
from runner.evaluators import EvaluatorBase, GeneralEvaluator, RayEvaluator
from runner.report import PlanScope, build_report, count_stored, render, scope_notes
from runner.storage.store import ResultStore


def make_evaluator(config: RunConfig) -> EvaluatorBase:
    """The evaluator of ``config``: sequential, or Ray (the default).

    Raises:
        RunnerError: an unknown benchmark or solution, bad arguments, or Ray unavailable.
    """
    # The model and judge are settled from the benchmark's class first: the judge decides which metrics its
    # tasks carry, so the benchmark is built with it.
    target, _ = resolve(config.benchmark, available_benchmarks(), "benchmark")
    config = with_judge_default(with_model_default(config, target), target)
    benchmark = build_benchmark(config.benchmark, {**config.benchmark_args, **judge_args(config)}, config.data_dir)
    spec = solution_spec(config.solution, config.solution_args, config.model, benchmark, config.model_base_url,
                         config.user_model, config.user_model_base_url)
    store = ResultStore(config.storage, config.storage_options)
    options: dict[str, Any] = {
        "timeout": config.timeout,
        "limit": config.limit,
        "retry_errors": config.worker.retry_errors,
        "force": config.force,
        "rerun_errors": config.rerun_errors,
        "fingerprint_fields": config.fingerprint_fields(),
        "config": config.model_dump(mode="json", exclude={"storage_options", "force", "rerun_errors"}),
        "solution_func": spec,
    }
    if config.sequential:
        return GeneralEvaluator(name=benchmark.name, benchmark=benchmark, n_repeat=config.repeats, storage=store,
                                **options)
    return RayEvaluator(name=benchmark.name, benchmark=benchmark, n_repeat=config.repeats, storage=store,
                        worker=config.worker, ray_address=config.ray_address, **options)


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: execute (or resume) a benchmark run and print its summary."""
    config = config_from_args(args)
    log.configure(config.log_format)
    evaluator = make_evaluator(config)
    effective = evaluator.config or {}
    preflight_models(*(effective.get(name) for name in ("model", "model_base_url", "user_model",
                                                        "user_model_base_url", "judge_model", "judge_base_url")))
    asyncio.run(evaluator.run())
    return 0


def _store(args: argparse.Namespace) -> ResultStore:
    return ResultStore(args.uri, args.storage_options or {})


def cmd_report(args: argparse.Namespace) -> int:
    """``report URI``: re-aggregate a run's records (a partial run too) into summary.json and results.csv."""
    log.configure(args.log_format)
    store = _store(args)
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(f"no run at {store.uri} (no run.json); check the URI")
    benchmark = None
    config = manifest.config
    if config.get("benchmark"):
        try:
            benchmark = build_benchmark(config["benchmark"], config.get("benchmark_args"), config.get("data_dir"))
        except RunnerError as exc:
            structlog.get_logger("runner").warning("report.no_headline_score", reason=str(exc))
    summary = build_report(store, benchmark)
    if args.json:
        print(json.dumps(summary.model_dump(mode="json"), indent=2))
    else:
        render(summary, Console(), storage=store.uri)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``status URI``: how far a run is, from its manifest and one listing of its records.

    Counts the records of the current plan, as the report does (:mod:`runner.report.scope`); it reads records
    only when the run's limit was lowered below one an earlier run used, to tell the tasks past it.
    """
    store = _store(args)
    manifest = store.read_manifest()
    if manifest is None:
        raise ConfigError(f"no run at {store.uri} (no run.json); check the URI")
    scope = PlanScope.of(manifest)
    stored = count_stored(store, scope)
    done = stored.done
    n_tasks = manifest.benchmark.n_tasks
    expected = (n_tasks - manifest.benchmark.duplicate_tasks) * manifest.n_repeats if n_tasks is not None else None
    has_summary = store.read_file("summary.json") is not None
    status = {
        "run_id": manifest.run_id,
        "benchmark": manifest.benchmark.name,
        "storage": store.uri,
        "done": done,
        "expected": expected,
        "fraction": round(done / expected, 4) if expected else None,
        "complete": expected is not None and done >= expected,
        "outside_plan": sum(stored.outside.values()),
        "duplicate_tasks": manifest.benchmark.duplicate_tasks,
        "summary": has_summary,
        "updated_at": manifest.updated_at,
    }
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        share = f" ({100 * done / expected:.1f}%)" if expected else ""
        state = "complete" if status["complete"] else "incomplete"
        print(f"{manifest.benchmark.name} run {manifest.run_id}: {done}/{expected if expected is not None else '?'} "
              f"items{share}, {state}; summary.json {'present' if has_summary else 'absent'} ({store.uri})")
        for note in scope_notes(scope, stored.outside, manifest.benchmark.duplicate_tasks):
            print(f"note: {note}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: the benchmarks, solutions and model providers this installation knows."""
    console = Console()
    console.print("[bold]benchmarks[/bold]")
    for name, path in sorted(available_benchmarks().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]solutions[/bold]")
    for name, path in sorted(available_solutions().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]model providers[/bold] (--model provider:model)")
    for line in provider_lines():
        console.print(line, markup=False, soft_wrap=True)
    return 0
