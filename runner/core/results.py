"""Aggregated results handed to a benchmark's headline score, and what the score returns.

Pure data: the report builds these from records; :meth:`BenchmarkBase.score` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultRow:
    """One (task, repeat) as the report sees it.

    Args:
        task_id: the task's id.
        repeat: the repeat index (0-based).
        status: ``"ok"``, ``"error"`` or ``"timeout"``.
        tags: the task's tags.
        scores: metric name -> result, for the metrics that produced one (a metric that raised is absent); a
            result may be one the report cannot use (NaN, ``None``, a string: see ``unusable`` in the summary).
        tries: the solution tries the item took (more than 1 when it needed solution retries).
    """

    task_id: str
    repeat: int
    status: str
    tags: dict[str, str]
    scores: dict[str, Any]
    tries: int = 1


@dataclass
class RunResults:
    """What a headline score may read.

    Args:
        rows: every (task, repeat) that has a record.
        metrics: metric name -> its aggregate as in ``summary.json`` (``mean``, ``stderr``, ``n``, ...).
        by_category: category -> metric name -> ``{"mean", "n"}``.
    """

    rows: list[ResultRow]
    metrics: dict[str, dict[str, Any]]
    by_category: dict[str, dict[str, dict[str, Any]]]


@dataclass
class Headline:
    """A benchmark's headline result.

    Args:
        score: the one number a leaderboard shows (or ``None``).
        stderr: its standard error, where the benchmark's own aggregation gives one (a mean's, clustered by task;
            lm-eval's ``<metric>_stderr``); ``None`` where it gives none (a weighted sum of sections): the matrix's
            page then draws no interval for it.
        components: named sub-scores (e.g. ACEBench's Normal, Special, Agent), merged into ``summary.json`` as
            ``score_components``.
        by_category: category -> metric name -> ``{"mean", "n", ...}`` entries added to (or replacing) the generic
            per-category table, for benchmarks whose official unit is not the task (e.g. a whole dialogue).
        left_out: items of the run that the score and its components do not count, because the benchmark's own
            aggregation cannot take a failed item (lm-eval has no miss for a log-likelihood); the terminal and the
            page say so in the score's line. 0: every item is in the score's denominator.
        left_out_why: why they are left out, in a few words (``their requests failed``).
        notes: lines for the summary's notes (e.g. that the repeats share one sampling seed).
    """

    score: float | None
    stderr: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    by_category: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    left_out: int = 0
    left_out_why: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReportFile:
    """A file a benchmark adds to a run's report (:meth:`BenchmarkBase.report_files
    <runner.core.benchmark.BenchmarkBase.report_files>`), written beside ``summary.json``.

    Args:
        name: the file's name in the run directory: a plain name (``submission.jsonl``), or one folder and a plain
            name (``lm_eval/results.json``); no hidden parts, no ``..``.
        data: its bytes.
        note: what the file is, for ``summary.json``'s notes, the terminal and ``report.html``; the report writes
            ``<the file's URI>: <note>``.
    """

    name: str
    data: bytes
    note: str
