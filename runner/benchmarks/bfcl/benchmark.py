"""The ``bfcl`` benchmark: the Berkeley Function Calling Leaderboard v4 (``bfcl-eval`` 2026.3.23), the 17
categories that run offline, scored as the leaderboard scores them."""

from __future__ import annotations

from typing import Any

from runner.benchmarks.bfcl import files
from runner.benchmarks.bfcl.apis import FUNC_DOC_FILES, api_class
from runner.benchmarks.bfcl.categories import (
    LIVE,
    MULTI_TURN,
    is_multi_turn,
    kind_of,
    language_of,
    parse_categories,
)
from runner.benchmarks.bfcl.headline import score_rows
from runner.benchmarks.bfcl.languages import check_available
from runner.benchmarks.bfcl.metrics import BFCLAccuracy
from runner.benchmarks.bfcl.preprocess import multi_turn_functions, with_language_hints
from runner.benchmarks.bfcl.reference import reference_output
from runner.core.benchmark import RecordsBenchmark
from runner.core.errors import BenchmarkError
from runner.core.plugin import declare
from runner.core.results import Headline, RunResults
from runner.core.solution import SolutionOutput
from runner.core.task import Task


def group_of(category: str) -> str:
    """``non_live``, ``live`` or ``multi_turn``: the leaderboard section of a category."""
    if category in MULTI_TURN:
        return "multi_turn"
    return "live" if category in LIVE else "non_live"


Record = tuple[str, dict[str, Any], Any]
"""One task's data: its category, its question line and its ground truth (``None`` without a possible answer)."""


@declare("bfcl", needs={"data_dir"}, default_solution="bfcl")
class BFCLBenchmark(RecordsBenchmark[Record]):
    """BFCL v4: function calling, single-turn (AST and relevance checks) and multi-turn (simulated APIs).

    Args:
        data_dir: any fsspec path or URL holding a copy of the package's ``bfcl_eval/data`` folder; ``None``
            downloads the pinned ``bfcl-eval`` wheel into ``~/.cache/runner/bfcl/<version>/`` (``$RUNNER_CACHE_DIR``
            moves it) and unpacks the files the run needs.
        categories: a list or comma-separated string of categories or groups (``non_live``, ``live``,
            ``multi_turn``, ``single_turn``, ``python``, ``non_python``, ``all``); ``None`` for the 17 offline ones.
            Web search, memory and format sensitivity are refused with the reason.
        per_category: only the first N items of each chosen category (a quick slice across categories, e.g.
            ``-B per_category=3``); ``None`` for all.
        verify: check every file against the pinned sha256 (turn off only to run modified data).
        storage_options: fsspec options for ``data_dir``.

    Construction reads nothing; :meth:`prepare` (or the first iteration) loads and checks the data.

    Tasks: BFCL's own ids (``simple_python_12``, ``live_multiple_46-18-1``, ``multi_turn_base_27``); ``tags``:
    ``category`` (BFCL's), ``group`` (``non_live``, ``live``, ``multi_turn``) and ``language``; ``input``: a dict
    with ``category``, ``language``, ``question`` (a list of turns, each a list of messages), ``functions`` (the
    docs as BFCL shows them to the model: language notes added, held-out functions removed) and, for multi-turn
    items, ``missed_function`` (turn -> docs added at that turn), ``involved_classes`` and ``initial_config``;
    ``ground_truth``: the possible answers (or, multi-turn, the calls per turn; ``None`` for relevance items).
    Metric: ``accuracy`` (:class:`BFCLAccuracy`).

    Raises:
        BenchmarkError: an unknown or refused category, or a ``per_category`` below 1.
    """

    headline_metrics = ("accuracy",)

    def __init__(self, data_dir: str | None = None, categories: Any = None, per_category: int | None = None,
                 verify: bool = True, storage_options: dict[str, Any] | None = None) -> None:
        super().__init__(name="bfcl", description="Berkeley Function Calling Leaderboard v4 (offline categories)")
        if per_category is not None and (isinstance(per_category, bool) or per_category < 1):
            raise BenchmarkError(f"BFCL per_category={per_category!r}; use -B per_category=N with a whole N of at "
                                 "least 1, or leave it out for every item")
        self.data_dir = data_dir
        self.categories = parse_categories(categories)
        self.per_category = per_category
        self.verify = bool(verify)
        self.storage_options = dict(storage_options or {})
        self.version = files.VERSION + ("" if self.verify else "-unverified")
        self._docs: dict[str, list[dict[str, Any]]] = {}

    def load_records(self) -> list[Record]:
        """Load and check every file of the chosen categories (downloading them first with no ``data_dir``), and
        the libraries they need (tree-sitter for Java and JavaScript, ``mpmath`` for multi-turn).

        Raises:
            BenchmarkError: a file is missing, unreadable, corrupt, of another version or misaligned with its
                answers, or a needed library is missing; nothing of the run has been written then.
        """
        for language in {language_of(c) for c in self.categories} - {"python"}:
            check_available(language)
        if any(is_multi_turn(c) for c in self.categories):
            api_class("MathAPI")
        relatives = files.needed_files(self.categories)
        root = str(files.ensure_downloaded(relatives)) if self.data_dir is None else self.data_dir
        docs = {}
        if any(is_multi_turn(c) for c in self.categories):
            docs = {name: self._read(root, files.func_doc_path(name)) for name in FUNC_DOC_FILES}
        records = []
        for category in self.categories:
            prompts = self._read(root, files.prompt_path(category))
            answers = self._read(root, files.answer_path(category)) if files.has_answers(category) else None
            if answers is not None and len(prompts) != len(answers):
                raise BenchmarkError(f"BFCL {category}: {len(prompts)} questions but {len(answers)} possible answers; "
                                     f"the data folder is inconsistent, replace its files")
            for index, prompt in enumerate(prompts[: self.per_category]):
                answer = answers[index] if answers is not None else None
                if answer is not None and answer.get("id") != prompt.get("id"):
                    raise BenchmarkError(f"BFCL {category}: question {prompt.get('id')!r} is paired with answer "
                                         f"{answer.get('id')!r}; replace the data files")
                records.append((category, prompt, answer.get("ground_truth") if answer is not None else None))
        self._docs = docs
        return records

    def _read(self, root: str, relative: str) -> list[dict[str, Any]]:
        return files.DATA.load(root, relative, self.storage_options, verify=self.verify)

    def make_task(self, record: Record) -> Task:
        """The task of one question and its ground truth (see the class docstring)."""
        category, prompt, ground_truth = record
        task_id = str(prompt["id"])
        language, kind = language_of(category), kind_of(category)
        tags = {"category": category, "group": group_of(category), "language": language}
        inputs: dict[str, Any] = {"category": category, "language": language, "question": prompt["question"]}
        if kind == "multi_turn":
            functions, missed = multi_turn_functions(prompt, self._docs)
            entry = {"id": task_id, "initial_config": prompt.get("initial_config") or {},
                     "involved_classes": list(prompt["involved_classes"])}
            inputs.update(functions=with_language_hints(functions, category), missed_function=missed,
                          involved_classes=entry["involved_classes"], initial_config=entry["initial_config"])
            metric = BFCLAccuracy(kind, category, language, ground_truth=ground_truth, entry=entry)
        else:
            raw = prompt.get("function") or []
            inputs["functions"] = with_language_hints(raw, category)
            metric = BFCLAccuracy(kind, category, language, functions=raw, ground_truth=ground_truth)
        return Task(id=task_id, input=inputs, ground_truth=ground_truth, metrics=[metric], tags=tags,
                    metadata={"functions": prompt.get("function") or []} if kind != "multi_turn" else {})

    def reference(self, task: Task) -> SolutionOutput:
        """The gold answer of ``task`` in BFCL's prompting format (see :mod:`.reference`)."""
        return reference_output(task)

    def score(self, results: RunResults) -> Headline:
        """Section accuracies and Overall Acc, as the leaderboard computes them (see :mod:`.headline`)."""
        return score_rows(results.rows)
