"""structlog set-up: console lines on a terminal, JSON lines elsewhere, context bound once.

The engine binds ``run_id`` for a run and ``task_id``/``repeat`` for each item with structlog's context variables,
so every event carries them without repeating them in each call. The CLI configures structlog for each command; the
evaluators of the Python API do it only when nothing has (:func:`configure_unless_configured`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import structlog

LogFormat = Literal["console", "json"]


class _Stderr:
    """Writes to whatever ``sys.stderr`` is at write time, so a progress bar that redirects it keeps working."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def default_format() -> LogFormat:
    """``console`` when stderr is a terminal, else ``json``."""
    return "console" if sys.stderr.isatty() else "json"


def configure(log_format: LogFormat | None = None, level: int = logging.INFO) -> LogFormat:
    """Configure structlog for this process and return the format chosen.

    Args:
        log_format: ``console`` (human-readable lines) or ``json`` (one JSON object per line); ``None`` picks
            :func:`default_format`.
        level: the lowest level emitted (a ``logging`` level number).
    """
    chosen: LogFormat = log_format or default_format()
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if chosen == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=False,
    )
    return chosen



API_LEVEL = logging.WARNING
"""The lowest level the evaluators emit when they configure structlog themselves: their summary is what a script
prints, and warnings (a storage outage, a lease taken over) still show."""


def configure_unless_configured(level: int = API_LEVEL) -> None:
    """Configure structlog (:func:`configure`, at ``level``) if nothing in this process has yet: unconfigured, its
    defaults print every event, debug ones included (an ``item.done`` line per item). A program that configured
    structlog itself keeps its configuration."""
    if not structlog.is_configured():
        configure(level=level)
