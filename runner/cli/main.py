"""The command line's entry point: the parser (:func:`build_parser`), :func:`main`, and how a run stopped by Ctrl-C
or SIGTERM says what is kept. The commands themselves are in :mod:`runner.cli.commands`,
:mod:`runner.cli.report_commands` and :mod:`runner.cli.k8s`; the run's flags in :mod:`runner.cli.args`."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from runner._version import __version__
from runner.cli.args import add_run_arguments, json_object, unrecognized
from runner.core.errors import RunnerError
from runner.engine.run import interrupted_line, runs_started

COMMANDS = ("run", "matrix", "report", "status", "compare", "list", "submit", "k8s")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2, and the closest flag suggested for a mistyped one."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = _chosen_parser(self, parsed)
            flags = [flag for action in chosen._actions for flag in action.option_strings]
            chosen.error(unrecognized(extras, flags, COMMANDS))
        return parsed


def _chosen_parser(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)command parser that read ``parsed`` (``run``, ``k8s status``...): the one whose flags a
    mistyped flag was meant for."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            if chosen is not None:
                return _chosen_parser(chosen, parsed)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The full command-line parser."""
    parser = _Parser(prog="python -m runner", description="Distributed benchmark runner for LLM and agent evaluations.")
    parser.add_argument("--version", action="version", version=f"runner {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    from runner.cli import commands, report_commands

    run = sub.add_parser("run", help="run or resume a benchmark (the default command)")
    add_run_arguments(run)
    run.add_argument("--html", action="store_true", help="also write report.html, a self-contained page, in the run "
                     "directory and print where it is")
    run.set_defaults(handler=commands.cmd_run)

    from runner.cli import matrix

    matrix.add_command(sub)

    for name, handler, text in (
        ("report", commands.cmd_report,
         "re-aggregate a run (a partial one too) into summary.json and results.csv"),
        ("status", commands.cmd_status, "say how far a run is"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("uri", help="the run's storage URI")
        command.add_argument("--storage-options", type=json_object, metavar="JSON", help="fsspec options")
        command.add_argument("--json", action="store_true", help="print JSON instead of a table")
        if name == "status":
            command.add_argument("--watch", nargs="?", type=float, const=5.0, metavar="SECONDS",
                                 help="say it again every SECONDS (default 5) until the run ends")
        if name == "report":
            command.add_argument("--log-format", choices=("console", "json"))
            command.add_argument("--html", action="store_true", help="also write report.html in the run directory")
        command.set_defaults(handler=handler)

    report_commands.add_commands(sub)
    listing = sub.add_parser("list", help="list built-in benchmarks and solutions")
    listing.set_defaults(handler=commands.cmd_list)

    from runner.cli import k8s

    k8s.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "run")
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    terminated = threading.Event()
    written_before = runs_started()
    try:
        with warnings.catch_warnings(), _sigterm_as_interrupt(terminated):
            warnings.showwarning = _warning_line
            return handler(args)
    except RunnerError as exc:
        print(f"{exc.label}: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        word, status = ("terminated", 128 + signal.SIGTERM) if terminated.is_set() else ("interrupted", 130)
        if args.command in ("run", "matrix"):
            word = interrupted_line(word, since=written_before)
        print(word, file=sys.stderr)
        return status


@contextlib.contextmanager
def _sigterm_as_interrupt(received: threading.Event) -> Iterator[None]:
    """Handle SIGTERM as Ctrl-C while the command runs, setting ``received``: this process's SIGINT handler is
    called (asyncio's, while a run executes: it cancels the run, whose ``finally`` blocks release the lease and
    stop the executor, then ``asyncio.run`` raises ``KeyboardInterrupt``; Python's default one raises it at once).
    The previous SIGTERM handler is put back afterwards. Only the main thread can handle signals; from another,
    SIGTERM is left as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        received.set()
        interrupt = signal.getsignal(signal.SIGINT)
        if not callable(interrupt):  # SIGINT ignored (a background job): SIGTERM still stops the command
            raise KeyboardInterrupt
        interrupt(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A warning (a deprecated setting in a config file...) as one line on stderr, without the code location."""
    print(f"warning: {message}", file=sys.stderr)
