"""Errors that reach the user.

Every error that ends a run as one line derives from :class:`RunnerError`: the CLI prints ``<label>: <message>``
on stderr and returns its :attr:`~RunnerError.exit_status`, without a traceback (ARCHITECTURE.md's statuses: 2 bad
input with nothing written, 3 a fault after writing started, 4 a spent budget). Anything else is a bug and keeps
its traceback (exit status 1).
"""

from __future__ import annotations

import re
from typing import ClassVar


class RunnerError(Exception):
    """An error the user can act on: the message names the problem and the way out, in one line. As such, bad input
    found before anything is written (exit status 2); subclasses stand for the other ends of a run."""

    exit_status: ClassVar[int] = 2
    """The CLI's exit status for this error."""
    label: ClassVar[str] = "error"
    """The word before the message on the CLI's line."""


class RunStopped(RunnerError):
    """A fault after the run started writing records (exit status 3): the records written so far are kept and, once
    the cause is fixed, the same command resumes. The message is one line naming what failed and the way on.
    Subclasses: a model server that fails every call the same way (:class:`ServerStop`), the storage."""

    exit_status: ClassVar[int] = 3


class ServerStop(RunStopped):
    """The run stopped because its model server fails every call the same way (:mod:`runner.engine.watch`): the
    same command, once the cause is fixed, with ``--rerun-failed`` redoes the items that failed. The summary of the
    records written so far is written first."""


class ProtocolStop(ServerStop):
    """The model server speaks another protocol: fix its URL."""


class RefusalStop(ServerStop):
    """The model server keeps refusing calls with HTTP 429: its quota is gone, or its rate limit holds every call
    back."""


class ConfigError(RunnerError):
    """A run configuration (flags, config file, constructor arguments) that does not validate."""


class CodeImportError(ConfigError):
    """A module of the run's own code (its solution's module, lm-eval's task files, or what they import) cannot be
    imported on a worker, which found it out while it was built, before any item ran (exit status 2): the message
    names the module and the way out (:mod:`runner.core.local_code`)."""


class ResourcesBusy(RunnerError):
    """No worker of the run could get its resources within the placement bound (``--placement-timeout``): the
    cluster has them on paper, but other jobs or runs hold them now. Exit status 2 before the run wrote anything
    (the same command starts it once they are free); :class:`WorkersLost` once it had."""


class WorkersLost(RunStopped):
    """Every worker of a run that had started writing is gone, and none of their replacements could get its
    resources within the placement bound (exit status 3: the same command resumes)."""


class PluginError(RunnerError):
    """A benchmark or solution name that is unknown, or an import path that does not import."""


class StorageError(RunnerError):
    """A storage URI that cannot be reached or written, or a run directory that cannot be resumed."""


class FingerprintMismatch(StorageError):
    """The run directory holds records of a different configuration; resuming would mix the two."""


class LeaseHeld(StorageError):
    """Another driver owns the run (its lease is alive), or owned it and its lease lapsed while ``--take-over`` was
    not given: nothing is written."""


class BenchmarkError(RunnerError):
    """Benchmark data that is missing, corrupt, or asked for with unknown arguments."""


class InvalidTask(BenchmarkError, ValueError):
    """A task that cannot be built (an empty id, two metrics with one name). A ``ValueError`` too, as
    :class:`~runner.core.task.Task` has always raised; the plan adds the task's position to the message."""


class CompareError(RunnerError):
    """Runs that cannot be compared: fewer than two, or of different benchmarks or benchmark versions."""


class ReplicaStartError(RunnerError):
    """A model the run serves could not start (:mod:`runner.serving`): out of memory, missing or gated weights, an
    unknown architecture, a context length larger than the model's, a bad engine flag, no GPU for a GPU engine, or
    no answer within ``--model-startup-timeout``. Exit status 2, before any record is written; never retried. The
    message is one line with the server's own error line and the path of its log.

    Args:
        message: the line.
        log_path: the server's log (``None`` when it never started).
        cause: what the log says went wrong, one of ``out_of_memory``, ``weights``, ``architecture``,
            ``context_length``, ``engine_flag``, ``no_gpu``, ``not_installed``, ``chat_template``, ``port_taken``
            (on every port tried), ``timeout`` (still loading), ``unreachable`` (its log says it listens, the
            runner's probe did not pass), ``exited``.
    """

    def __init__(self, message: str, *, log_path: str | None = None, cause: str = "exited") -> None:
        super().__init__(message)
        self.log_path = log_path
        self.cause = cause


class ReplicaFailed(RunStopped):
    """A replica of a model the run serves kept exiting or stopped answering during the run, past its restarts
    (``--replica-restarts``); exit status 3: the records written so far stay, and the same command resumes."""


class BudgetExhausted(RunnerError):
    """The run stopped because its budget (``--max-tokens``, ``--max-cost``) is spent: no new item started, the
    items in flight finished and were written. Exit status 4; the message is one line saying what was spent, how
    many items are done and that the same command with a larger budget resumes."""

    exit_status: ClassVar[int] = 4
    label: ClassVar[str] = "stopped"


class MatrixIncomplete(RunStopped):
    """An evaluation matrix ended with cells that could not finish (a model that did not load, a server that failed
    every call the same way, a solution that could not be built), while the others did: exit status 3; the same
    command resumes the cells left, once their cause is fixed."""


class StorageOutage(RunStopped):
    """The storage failed with errors that look temporary (server errors, timeouts, connection resets) for longer
    than the run's outage limit (``--storage-outage``); the same command resumes once it answers."""


class LeaseLost(RunStopped):
    """Another driver took the run over after this driver's lease lapsed (it could not renew it in time)."""


_RAISED_LINE = re.compile(r"^[\w.]+(Error|Exception|Exit|Interrupt|Warning): ")


def one_line(text: object, limit: int = 300) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` characters (for error messages)."""
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def exception_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line: ``Type: first line of its message`` (``Type`` alone for an empty message).

    An exception that wraps a traceback in its message (Ray's ``RayTaskError``, ``RayActorError``) is named by the
    last ``SomeError: message`` line of it, the original exception's.
    """
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = [line.strip() for line in text.splitlines()]
    raised = [line for line in lines[1:] if _RAISED_LINE.match(line)]
    return one_line(raised[-1] if raised else f"{type(exc).__name__}: {lines[0]}", limit)
