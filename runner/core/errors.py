"""Errors that reach the user.

Every error a user can fix by changing their input derives from :class:`RunnerError`. The CLI turns one into a
single line on stderr and exit status 2, without a traceback. A fault after the run started writing (the storage
stayed down, another driver took the run over) is a :class:`RunInterrupted`: one line and exit status 3, and the
records written so far are kept. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re


class RunnerError(Exception):
    """Bad input the user can fix: the message names the problem and the way out, in one line."""


class ConfigError(RunnerError):
    """A run configuration (flags, config file, constructor arguments) that does not validate."""


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


class RunInterrupted(Exception):
    """A fault after the run started writing records: not bad input (not a :class:`RunnerError`), and records
    written so far are kept. The message is one line naming what failed and the way on."""


class StorageOutage(RunInterrupted):
    """The storage failed with errors that look temporary (server errors, timeouts, connection resets) for longer
    than the run's outage limit (``--storage-outage``); the same command resumes once it answers."""


class LeaseLost(RunInterrupted):
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
