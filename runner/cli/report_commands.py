"""The CLI's ``compare`` command: wiring only; the work is in :mod:`runner.report.compare`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from runner.cli.args import json_object
from runner.report.paired import N_RESAMPLES
from runner.report.table import default_console


def _resamples(text: str) -> int:
    """argparse type for ``--resamples``: an integer of at least 100."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 100:
        raise argparse.ArgumentTypeError(f"needs at least 100 resamples for a 95 % interval, got {value}")
    return value


def add_commands(sub: Any) -> None:
    """Add ``compare`` to the subcommands ``sub`` (argparse's ``add_subparsers`` result)."""
    compare = sub.add_parser("compare", help="compare runs of one benchmark version item by item (the first run is "
                             "the baseline)")
    compare.add_argument("runs", nargs="+", metavar="RUN", help="storage URIs of two or more runs (any fsspec URL)")
    compare.add_argument("--out", metavar="DIR", default=".",
                         help="where compare.json (and compare.html) go; any fsspec URL (default: the working "
                         "directory)")
    compare.add_argument("--html", action="store_true", help="also write compare.html, a self-contained page")
    compare.add_argument("--json", action="store_true", help="print compare.json instead of a table")
    compare.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    compare.add_argument("--resamples", type=_resamples, default=N_RESAMPLES,
                         help=f"bootstrap resamples per interval (default {N_RESAMPLES})")
    compare.add_argument("--storage-options", type=json_object, metavar="JSON",
                         help="fsspec options, for every run and --out")
    compare.set_defaults(handler=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """``compare RUN_A RUN_B [...]``: print the comparison and write ``compare.json`` (and ``compare.html``)."""
    from runner.report.compare import compare_runs
    from runner.report.files import write_comparison
    from runner.report.table import render_comparison

    options = args.storage_options or {}
    comparison = compare_runs(args.runs, seed=args.seed, n_resamples=args.resamples, storage_options=options)
    written = write_comparison(comparison, args.out, options, html=args.html)
    if args.json:
        print(json.dumps(comparison.model_dump(mode="json"), indent=2))
    else:
        render_comparison(comparison, default_console())
    for path in written:
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return 0
