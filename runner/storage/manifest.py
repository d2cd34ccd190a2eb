"""``run.json``: what a run is, so that a resume can tell whether it may continue it."""

from __future__ import annotations

import datetime as _dt
import uuid
from typing import Any

from pydantic import BaseModel, Field

MANIFEST_SCHEMA_VERSION = 1


def utc_now() -> str:
    """The current time, ISO-8601 UTC with milliseconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    """A fresh run id: UTC timestamp plus 8 random hex digits, sortable by creation time."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


class BenchmarkInfo(BaseModel):
    """The benchmark of a run, as its latest run planned it.

    Args:
        name, version: identity (``version`` may be ``None``).
        scoring_version: what runs must share to be compared item by item (their items and scoring, whatever their
            model: :attr:`BenchmarkBase.scoring_version <runner.core.benchmark.BenchmarkBase.scoring_version>`);
            ``None`` in runs written before it was kept, which are compared by ``version``.
        n_tasks: task positions planned, after ``limit`` (duplicates included); ``None`` until known.
        limit: the latest run's ``limit`` (``None``: every task).
        widest_limit: the highest ``limit`` of any run of this directory; ``None`` when one ran without a limit
            (or the manifest predates this field). Records past the current limit can exist only when it is
            above ``limit``, so ``status`` reads records only then.
        duplicate_tasks: task positions whose id an earlier position already had, counted by the latest run
            that went through the whole plan (each such position's items find their records written).
    """

    name: str
    version: str | None = None
    scoring_version: str | None = None
    n_tasks: int | None = None
    limit: int | None = None
    widest_limit: int | None = None
    duplicate_tasks: int = 0


class RunManifest(BaseModel):
    """The content of ``run.json``.

    Args:
        run_id: stable for the life of the run directory (a resume keeps it).
        fingerprint: sha256 of ``fingerprint_fields``; a run with another fingerprint is refused.
        fingerprint_fields: what the fingerprint covers, kept to say what differs.
        benchmark: name, version and number of tasks.
        n_repeats: repeats per task.
        config: the run configuration without storage options (never credentials), so ``report`` can rebuild the
            benchmark.
        runner_version: the package version that created or last resumed the run.
    """

    schema_version: int = MANIFEST_SCHEMA_VERSION
    run_id: str
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    fingerprint: str
    fingerprint_fields: dict[str, Any]
    benchmark: BenchmarkInfo
    n_repeats: int
    config: dict[str, Any] = Field(default_factory=dict)
    runner_version: str


def describe_difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short text naming the fingerprint fields that differ, e.g. ``solution: 'a' -> 'b'``."""
    changes = []
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            changes.append(f"{name}: {_short(old.get(name))} -> {_short(new.get(name))}")
    return "; ".join(changes) or "fingerprint differs"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
