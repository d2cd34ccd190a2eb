"""Running ``python -m runner`` in tests: in this process (``main([...])``, fast) or as a real subprocess (one per
CLI exit path, and where a test needs a process to kill).

Both give a :class:`CliResult` with the exit status and what was printed, so a test reads the same either way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

RAY_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t[A-Z]+ \S+:\d+ -- |^(\x1b\[\d+m)?\((\w+ )?pid=")
"""Ray's own lines: its start-up lines (``2026-01-01 00:00:00,000\tINFO worker.py:2038 -- Started a local Ray
instance.``), and the lines it forwards to a driver from the session's Ray processes (``(pid=gcs_server) ...``,
``(EvalWorker pid=123) ...``, coloured on a terminal), which can reach any later in-process run's stderr."""


@dataclass
class CliResult:
    """What one command did: ``returncode``, and its ``stdout`` and ``stderr`` text."""

    returncode: int
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        """The lines of stderr that are not Ray's own start-up lines."""
        return [line for line in self.stderr.strip().splitlines() if line and not RAY_LOG_LINE.match(line)]

    def error_line(self, *fragments: str, status: int = 2) -> str:
        """The one ``error: ...`` line of a refused or stopped command (exit ``status``, no traceback), holding
        ``fragments``."""
        assert self.returncode == status, self.stderr
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.lines()
        errors = [line for line in lines if line.startswith("error: ")]
        # Refused input (2) prints nothing else; a run that stopped (3, 4) logged what it did before its last line.
        assert len(errors) == 1 and (lines == errors if status == 2 else lines[-1] == errors[0]), self.stderr
        for fragment in fragments:
            assert fragment in errors[0], errors[0]
        return errors[0]

    def fault_line(self, *fragments: str) -> str:
        """The ``error: ...`` line that ends a run stopped by a fault after it started writing (exit status 3, no
        traceback; the run's log lines come before it), holding ``fragments``."""
        assert self.returncode == 3, self.stderr
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.lines()
        assert lines and lines[-1].startswith("error: "), self.stderr
        assert not [line for line in lines[:-1] if line.startswith("error: ")], self.stderr
        for fragment in fragments:
            assert fragment in lines[-1], lines[-1]
        return lines[-1]

    def events(self) -> list[dict[str, Any]]:
        """The JSON log events on stderr (``--log-format json``), in order."""
        events = []
        for line in self.lines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                events.append(event)
        return events

    def event(self, name: str) -> dict[str, Any]:
        """The first log event called ``name``."""
        return next(event for event in self.events() if event["event"] == name)


def run_in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str,
                   env: dict[str, str] | None = None) -> CliResult:
    """``main(args)`` in this process, with ``env`` set for the call (an empty value unsets the variable)."""
    from runner.cli import main

    capsys.readouterr()
    with monkeypatch.context() as patch:
        for key, value in (env or {}).items():
            if value:
                patch.setenv(key, value)
            else:
                patch.delenv(key, raising=False)
        try:
            status = main(list(args))
        except SystemExit as exit_:          # argparse's own errors and --help
            status = exit_.code if isinstance(exit_.code, int) else 2
    captured = capsys.readouterr()
    return CliResult(status, captured.out, captured.err)


def run_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                cwd: Path | str = REPO) -> CliResult:
    """``python -m runner ARGS`` as a subprocess, by default from the repository root (so ``tests.support`` imports),
    with ``env`` over this process's environment."""
    done = subprocess.run([sys.executable, "-m", "runner", *args], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    return CliResult(done.returncode, done.stdout, done.stderr)
