"""The CLI's commands: wiring only; the work is in the layers below."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator
from typing import Any


from runner import log
from runner.cli.args import config_from_args
from runner.engine.request import RunRequest
from runner.evaluators import evaluate
from runner.models import PROVIDERS
from runner.registry import available_benchmarks, available_executors, available_solutions, plugin_lines
from runner.report import render, render_matrix, report_matrix, report_run, summary_json
from runner.report.status import is_matrix, matrix_status, run_status
from runner.report.table import default_console


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: execute (or resume) a benchmark run and print its summary (and with ``--html`` where its
    report.html is)."""
    config = config_from_args(args)
    log.configure(config.log_format)
    request = RunRequest.from_config(config)
    asyncio.run(evaluate(request, html=args.html))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``report URI [--html]``: re-aggregate a run's records (a partial run too) into summary.json and results.csv,
    and with ``--html`` a self-contained report.html beside them (:func:`runner.report.report_run`)."""
    log.configure(args.log_format)
    if is_matrix(args.uri, args.storage_options):
        report = report_matrix(args.uri, args.storage_options)
        if args.json:
            print(report.manifest.model_dump_json(indent=1))
        else:
            render_matrix(report, default_console())
        if args.html and report.page:
            print(f"report: {report.page}", file=sys.stderr if args.json else sys.stdout)
        return 0
    done = report_run(args.uri, args.storage_options, html=args.html)
    if args.json:
        print(summary_json(done.summary).decode(), end="")
    else:
        render(done.summary, default_console(), storage=done.uri)
    if done.page:
        print(f"report: {done.page}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``status URI [--watch [SECONDS]]``: how far a run is (:func:`runner.report.status.run_status`). ``--watch``
    says it again every few seconds until no driver executes the run (or Ctrl-C); on a run no driver executes, it
    shows that final state once and says so."""
    benchmarks: dict[str, Any] = {}
    look = matrix_status if is_matrix(args.uri, args.storage_options) else run_status
    status = look(args.uri, args.storage_options, benchmarks=benchmarks)
    if args.watch is None or not status.executing:
        print(json.dumps(status.data, indent=2) if args.json else "\n".join(status.lines))
        if args.watch is not None and not args.json:
            print("(no driver executes this run: this is its final state; nothing to watch)")
        return 0
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    every = max(args.watch, 0.5)
    with Live(auto_refresh=False, console=default_console(), vertical_overflow="visible") as live:
        while True:
            body = json.dumps(status.data, indent=2) if args.json else "\n".join(status.lines)
            footer = f"(every {every:g} s; Ctrl-C to stop watching)" if status.executing else "(the run ended)"
            live.update(Group(Text(body), Text(footer, style="dim")), refresh=True)
            if not status.executing:
                return 0
            time.sleep(every)
            status = look(args.uri, args.storage_options, benchmarks=benchmarks)


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: the benchmarks and solutions this installation knows, each with what it needs from the run and its
    arguments (:func:`runner.registry.plugin_lines`), then the executors and model providers."""
    console = default_console()
    for kind, table in (("benchmark", available_benchmarks()), ("solution", available_solutions())):
        console.print(f"[bold]{kind}s[/bold] (-{'B' if kind == 'benchmark' else 'S'} NAME=VALUE sets an argument)")
        for name, path in sorted(table.items()):
            console.print(f"  {name:<16} {path}", markup=False, soft_wrap=True)
            for line in plugin_lines(kind, name, path):
                console.print(f"  {'':<16}   {line}", markup=False, soft_wrap=True)
    console.print("[bold]executors[/bold] (--executor NAME; --sequential is short for --executor sequential)")
    for name, path in sorted(available_executors().items()):
        console.print(f"  {name:<16} {path}")
    console.print("[bold]model providers[/bold] (--model provider:model)")
    for line in provider_lines():
        console.print(line, markup=False, soft_wrap=True)
    return 0


def provider_lines() -> Iterator[str]:
    """Lines for ``list``: each provider's name and description, then its default URL and the variables it reads."""
    for name, provider in sorted(PROVIDERS.items()):
        yield f"  {name:<16} {provider.description}"
        variables = [v for v in (provider.api_key_env, provider.base_url_env) if v]
        details = [provider.default_base_url or "", f"env: {', '.join(variables)}" if variables else ""]
        if any(details):
            yield f"  {'':<16} " + "  ".join(d for d in details if d)
