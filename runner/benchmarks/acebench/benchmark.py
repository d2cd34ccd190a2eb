"""The ``acebench`` benchmark: ACEBench (Chen et al., 2025, arXiv:2501.12851), all 17 categories, English or Chinese."""

from __future__ import annotations

from typing import Any

from runner.benchmarks.acebench import files
from runner.benchmarks.acebench.answer_checks import is_multi_turn
from runner.benchmarks.acebench.environment import ACEEnvironment
from runner.benchmarks.acebench.headline import score_rows
from runner.benchmarks.acebench.metrics import AgentAccuracy, NormalAccuracy, ProcessAccuracy, SpecialAccuracy
from runner.benchmarks.acebench.reference import reference_output
from runner.core.benchmark import RecordsBenchmark
from runner.core.errors import BenchmarkError
from runner.core.plugin import declare
from runner.core.results import Headline, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task

SCORINGS = ("official", "strict")
GROUP_ALIASES = {"normal": files.NORMAL_CATEGORIES, "special": files.SPECIAL_CATEGORIES,
                 "agent": files.AGENT_CATEGORIES}


def parse_categories(categories: Any) -> tuple[str, ...]:
    """Categories from a list or a comma-separated string (group names ``normal``, ``special``, ``agent`` allowed),
    in the benchmark's order; ``None`` means all 17.

    Raises:
        BenchmarkError: an unknown category (the message lists the valid ones).
    """
    if categories is None or categories == "" or categories == []:
        return files.CATEGORIES
    names = categories.split(",") if isinstance(categories, str) else list(categories)
    chosen: set[str] = set()
    for raw in names:
        name = str(raw).strip()
        if name in GROUP_ALIASES:
            chosen.update(GROUP_ALIASES[name])
        elif name in files.CATEGORIES:
            chosen.add(name)
        else:
            raise BenchmarkError(f"unknown ACEBench category {name!r}; use any of: {', '.join(files.CATEGORIES)} "
                                 f"(or a group: normal, special, agent)")
    return tuple(c for c in files.CATEGORIES if c in chosen)


Record = tuple[str, dict[str, Any], dict[str, Any]]
"""One task's data: its category, its prompt line and its answer line."""


@declare("acebench", needs={"data_dir"}, default_solution="acebench")
class ACEBenchmark(RecordsBenchmark[Record]):
    """ACEBench: tool use in normal, special and agent settings.

    Args:
        data_dir: any fsspec path or URL holding the repository's ``data_all/`` layout
            (``data_<lang>/data_<category>.json`` and ``data_<lang>/possible_answer/...``); ``None`` downloads the
            pinned files into ``~/.cache/runner/acebench/<commit>/`` (``$RUNNER_CACHE_DIR`` moves it) and verifies them.
        language: ``en`` or ``zh``.
        categories: a list or comma-separated string of categories or groups; ``None`` for all 17.
        scoring: ``official`` (the authors' checker, quirks included) or ``strict`` (see ``docs/acebench.md``).
        verify: check every file against the pinned sha256 (turn off only to run modified data).
        storage_options: fsspec options for ``data_dir``.

    Construction reads nothing; :meth:`prepare` (or the first iteration) loads and checks the data.

    Tasks: ids as in the data (``normal_atom_bool_3``, ``normal_multi_turn_user_adjust_4_1``, ``agent_multi_step_0``);
    ``tags``: ``category``, ``language`` and, for multi-turn normal turns, ``dialogue``; ``input``: a dict with
    ``category``, ``language``, ``question``, ``functions`` (the data's schemas), ``time``, ``profile`` and, for agent
    tasks, ``initial_config`` and ``involved_classes``; agent tasks carry their :class:`ACEEnvironment` in
    ``metadata["environment"]``. Metrics: ``accuracy`` and, for agent tasks, ``process_accuracy``.

    Raises:
        BenchmarkError: an unknown language, category or scoring mode.
    """

    headline_metrics = ("accuracy",)

    def __init__(self, data_dir: str | None = None, language: str = "en", categories: Any = None,
                 scoring: str = "official", verify: bool = True,
                 storage_options: dict[str, Any] | None = None) -> None:
        super().__init__(name="acebench", description="ACEBench tool-use benchmark (Chen et al., 2025)")
        if language not in files.LANGUAGES:
            raise BenchmarkError(f"unknown ACEBench language {language!r}; use one of: {', '.join(files.LANGUAGES)}")
        if scoring not in SCORINGS:
            raise BenchmarkError(f"unknown ACEBench scoring {scoring!r}; use one of: {', '.join(SCORINGS)}")
        self.data_dir = data_dir
        self.language = language
        self.categories = parse_categories(categories)
        self.scoring = scoring
        self.verify = bool(verify)
        self.storage_options = dict(storage_options or {})
        self.version = f"{files.COMMIT[:7]}-{scoring}" + ("" if self.verify else "-unverified")

    @property
    def strict(self) -> bool:
        """Whether the strict rules apply."""
        return self.scoring == "strict"

    def load_records(self) -> list[Record]:
        """Load and check every file of the chosen categories (downloading them first with no ``data_dir``).

        Raises:
            BenchmarkError: a file is missing, unreadable, corrupt, of another version, or misaligned with its
                answers; nothing of the run has been written then.
        """
        relatives = files.needed_files(self.language, self.categories)
        if self.data_dir is None:
            root = str(files.ensure_downloaded(relatives))
        else:
            root = self.data_dir
        records = []
        for category in self.categories:
            prompts = self._read(root, files.prompt_path(self.language, category))
            answers = self._read(root, files.answer_path(self.language, category))
            if len(prompts) != len(answers):
                raise BenchmarkError(f"ACEBench {self.language}/{category}: {len(prompts)} prompts but "
                                     f"{len(answers)} answers; the data folder is inconsistent, replace its files")
            for prompt, answer in zip(prompts, answers):
                if prompt.get("id") != answer.get("id"):
                    raise BenchmarkError(f"ACEBench {self.language}/{category}: prompt {prompt.get('id')!r} is "
                                         f"paired with answer {answer.get('id')!r}; replace the data files")
                records.append((category, prompt, answer))
        return records

    def _read(self, root: str, relative: str) -> list[dict[str, Any]]:
        return files.DATA.load(root, relative, self.storage_options, verify=self.verify)

    def make_task(self, record: Record) -> Task:
        """The task of one prompt and its answer (see the class docstring)."""
        category, prompt, answer = record
        task_id = str(prompt["id"])
        functions = prompt.get("function") or []
        ground_truth = answer.get("ground_truth")
        tags = {"category": category, "language": self.language}
        inputs: dict[str, Any] = {
            "category": category, "language": self.language, "question": prompt.get("question", ""),
            "functions": functions, "time": prompt.get("time", ""), "profile": prompt.get("profile", ""),
        }
        metadata: dict[str, Any] = {}
        if category in files.AGENT_CATEGORIES:
            inputs["initial_config"] = prompt.get("initial_config") or {}
            inputs["involved_classes"] = prompt.get("involved_classes") or []
            environment = ACEEnvironment(inputs["involved_classes"], inputs["initial_config"], functions,
                                         self.language)
            milestones = answer.get("mile_stone") or []
            metadata = {"environment": environment, "milestones": milestones}
            metrics = [AgentAccuracy(environment, ground_truth, self.strict),
                       ProcessAccuracy(environment, ground_truth, milestones, self.strict)]
        elif category in files.SPECIAL_CATEGORIES:
            metrics = [SpecialAccuracy(ground_truth, category, self.strict)]
        else:
            if is_multi_turn(category):
                dialogue, turn = task_id.rsplit("_", 1)
                tags["dialogue"] = dialogue
                metadata = {"dialogue": dialogue, "turn": int(turn)}
            metrics = [NormalAccuracy(functions, ground_truth, category, self.strict)]
        return Task(id=task_id, input=inputs, ground_truth=ground_truth, metrics=metrics, tags=tags,
                    metadata=metadata)

    def reference(self, task: Task) -> SolutionOutput:
        """The gold answer of ``task`` in the official output format (see :mod:`reference`)."""
        return reference_output(task)

    def score(self, results: RunResults) -> Headline:
        """Per-category accuracies, Normal/Special/Agent and Overall (see :mod:`headline`)."""
        return score_rows(results.rows)
