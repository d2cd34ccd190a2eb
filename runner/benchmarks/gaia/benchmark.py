"""The ``gaia`` benchmark: GAIA (Mialon et al., 2023, arXiv:2311.12983), validation or test split, levels 1 to 3."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from runner.benchmarks.gaia.attachments import Attachment
from runner.benchmarks.gaia.data import (
    HUB_REVISION,
    LEVELS,
    SPLITS,
    GAIARecord,
    SplitLocation,
    download_split,
    load_split,
    locate_split,
)
from runner.benchmarks.gaia.metrics import ACCURACY, Answered, GAIAAccuracy
from runner.benchmarks.gaia.submission import submission_bytes, submission_file, submission_line
from runner.core.benchmark import RecordsBenchmark
from runner.core.errors import BenchmarkError
from runner.core.plugin import declare
from runner.core.record import TaskRecord
from runner.core.results import Headline, ReportFile, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task

LEADERBOARD_URL = "https://huggingface.co/spaces/gaia-benchmark/leaderboard"


def level_category(level: str) -> str:
    """The category of a level in reports: ``level1``, ``level2``, ``level3`` (the hub's config names
    ``2023_level1``...)."""
    return f"level{level}"


def parse_levels(levels: Any) -> tuple[str, ...]:
    """Levels from ``1``, ``"1,3"``, ``[1, 2]`` or ``"level2"``; ``None`` (or empty) means all three.

    Raises:
        BenchmarkError: a level other than 1, 2 or 3.
    """
    if levels is None or levels == "" or levels == []:
        return LEVELS
    items = levels.split(",") if isinstance(levels, str) else levels if isinstance(levels, (list, tuple)) \
        else [levels]
    chosen = set()
    for item in items:
        text = str(item).strip().lower().removeprefix("level").strip()
        if text not in LEVELS:
            raise BenchmarkError(f"unknown GAIA level {item!r}; use any of 1, 2, 3 (e.g. -B levels=1,2)")
        chosen.add(text)
    return tuple(level for level in LEVELS if level in chosen)


@declare("gaia", needs={"data_dir"}, default_solution="gaia-agent")
class GAIABenchmark(RecordsBenchmark[GAIARecord]):
    """GAIA: questions for tool-using assistants, with attached files, scored by the leaderboard's quasi exact match.

    Args:
        data_dir: the user's copy (a local folder or any fsspec URL) laid out as the hub has it
            (:mod:`runner.benchmarks.gaia.data`); ``None`` downloads the split from the hub with ``HF_TOKEN``
            into ``$RUNNER_CACHE_DIR/gaia/<revision>/`` (the token's account must have accepted GAIA's terms).
        split: ``validation`` (165 tasks with public answers: scored here) or ``test`` (301 tasks, answers private:
            the run writes the leaderboard's submission file, see :meth:`report_files`).
        levels: the levels to run (``1``, ``"1,3"``, a list); ``None``: all three.
        revision: the hub commit to download (default: :data:`~runner.benchmarks.gaia.data.HUB_REVISION`; ``main``
            for the newest); only without ``data_dir``.
        storage_options: fsspec options for ``data_dir``.

    Construction reads nothing; :meth:`prepare` (or the first iteration) finds, reads and checks the split: the
    metadata, and that every attached file is there.

    Tasks: ``id`` is GAIA's ``task_id``; ``input`` the question (text); ``ground_truth`` the final answer
    (``None`` on the test split); ``tags``: ``category`` (``level1``..``level3``) and ``file`` (the attachment's
    suffix, ``none`` without one); ``metadata``: ``level``, ``file_name`` and ``attachment`` (an
    :class:`~runner.benchmarks.gaia.attachments.Attachment`: ``.path()`` gives the file's local path on the machine
    running the task, ``.text()`` its text where a library reads the format), or ``None``.

    Metrics: ``accuracy`` on the validation split (:class:`~runner.benchmarks.gaia.metrics.GAIAAccuracy`); ``answered``
    on the test split. Headline (validation): the mean accuracy, with the mean per level as components, as the
    leaderboard shows them.

    Raises:
        BenchmarkError: an unknown split or level, ``revision`` with ``data_dir``, or (from :meth:`prepare`) data
            that is missing or not GAIA's, each in one line with the fix.
    """

    headline_metrics = ("accuracy", "answered")
    # Ray workers receive the benchmark for reference() and the headline only: its arguments, not the data.
    transient = ("_location",)

    def __init__(self, data_dir: str | None = None, split: str = "validation", levels: Any = None,
                 revision: str | None = None, storage_options: dict[str, Any] | None = None) -> None:
        super().__init__(name="gaia", description="GAIA: general AI assistants (Mialon et al., 2023)")
        if split not in SPLITS:
            raise BenchmarkError(f"unknown GAIA split {split!r}; use validation (scored here) or test (a submission "
                                 "file for the leaderboard)")
        if revision is not None and data_dir is not None:
            raise BenchmarkError("GAIA's revision= picks what to download; with --data-dir your copy is read as it "
                                 "is: drop one of them")
        self.data_dir = data_dir
        self.split = split
        self.levels = parse_levels(levels)
        self.revision = revision or HUB_REVISION
        self.storage_options = dict(storage_options or {})
        self.version = "1"
        self._location: SplitLocation | None = None

    @property
    def scored(self) -> bool:
        """Whether the split's answers are public (validation), so the run scores them."""
        return self.split == "validation"

    def load_records(self) -> list[GAIARecord]:
        """Find, read and check the split (downloading it first without ``data_dir``); its records of the chosen
        levels, in the metadata's order.

        Raises:
            BenchmarkError: see the class docstring; nothing of the run has been written then.
        """
        if self.data_dir is None:
            location = download_split(self.split, self.revision)
        else:
            location = locate_split(self.data_dir, self.split, self.storage_options)
        records = load_split(location)
        chosen = [record for record in records if record.level in self.levels]
        if not chosen:
            raise BenchmarkError(f"GAIA {self.split} has no task of level {', '.join(self.levels)} in "
                                 f"{location.url}; check -B levels")
        self._location = location
        return chosen

    def make_task(self, record: GAIARecord) -> Task:
        """The task of one record (see the class docstring)."""
        assert self._location is not None
        attachment = Attachment(record.file_name, self._location) if record.file_name else None
        metrics = [GAIAAccuracy(record.final_answer)] if self.scored and record.final_answer is not None \
            else [Answered()]
        return Task(
            id=record.task_id,
            input=record.question,
            ground_truth=record.final_answer,
            metrics=metrics,
            tags={"category": level_category(record.level),
                  "file": (attachment.suffix or "other") if attachment else "none"},
            metadata={"level": record.level, "file_name": record.file_name, "attachment": attachment},
        )

    def reference(self, task: Task) -> SolutionOutput:
        """The task's final answer as a submission would hold it (``{"model_answer": ...}``).

        Raises:
            BenchmarkError: on the test split, whose answers are private.
        """
        if task.ground_truth is None:
            raise BenchmarkError(f"the GAIA {self.split} split has no public answers: --solution reference works on "
                                 "the validation split only")
        return SolutionOutput(success=True, output={"model_answer": task.ground_truth,
                                                    "reasoning_trace": "the dataset's final answer"})

    def score(self, results: RunResults) -> Headline:
        """Validation: the mean ``accuracy`` over every scored item (the leaderboard's average score), with its
        standard error, and its mean per level as components (``level1``..``level3``); test: no score (the
        leaderboard scores the submission file)."""
        if not self.scored:
            return Headline(score=None)
        overall = results.metrics.get(ACCURACY, {})
        components = {category: entry[ACCURACY]["mean"] for category, entry in sorted(results.by_category.items())
                      if ACCURACY in entry and entry[ACCURACY].get("mean") is not None}
        return Headline(score=overall.get("mean"), stderr=overall.get("stderr"), components=components)

    def report_files(self, records: Iterable[TaskRecord]) -> list[ReportFile]:
        """The leaderboard's submission files, written beside ``summary.json``: ``submission.jsonl`` (repeat 0)
        and ``submission.repeat-<k>.jsonl`` for each further repeat, one line per task that has a record
        (``{"task_id", "model_answer", "reasoning_trace"}``, :func:`~runner.benchmarks.gaia.submission.submission_line`;
        an error record's line has the answer its output holds, usually ``null``), in the benchmark's task order.

        Each file's note says how many answers it holds and, on the test split, that it is the run's result: to be
        uploaded at the leaderboard (:data:`LEADERBOARD_URL`).
        """
        by_repeat: dict[int, list[TaskRecord]] = defaultdict(list)
        for record in records:
            by_repeat[record.repeat].append(record)
        files = []
        for repeat in sorted(by_repeat):
            chosen = sorted(by_repeat[repeat], key=lambda r: (r.task_index if r.task_index is not None else 0,
                                                              r.task_id))
            without = sum(1 for r in chosen if submission_line(r.task_id, r.output)["model_answer"] is None)
            gaps = f", {without} without an answer" if without else ""
            use = (f"; the test split's answers are private: upload this file at {LEADERBOARD_URL} for the score"
                   if not self.scored else "")
            files.append(ReportFile(
                name=submission_file(repeat),
                data=submission_bytes(submission_line(r.task_id, r.output) for r in chosen),
                note=f"the leaderboard's submission of repeat {repeat} ({len(chosen)} answers{gaps}){use}",
            ))
        return files
