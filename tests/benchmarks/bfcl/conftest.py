"""Fixtures for the BFCL tests: the shared data, the benchmark's tasks, and the official evaluator as the reference
scorer (``official.py``), with one function that scores an output the official way."""

from __future__ import annotations

import copy
import functools
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.benchmarks.bfcl import BFCLBenchmark
from runner.core.task import Task
from tests.benchmarks.bfcl import official
from tests.benchmarks.bfcl.outputs import official_fc


@pytest.fixture(scope="session")
def bfcl_dir(shared_data: Path) -> Path:
    """``../shared/data/bfcl``: a copy of ``bfcl-eval`` 2026.3.23's data folder."""
    return shared_data / "bfcl"


@pytest.fixture(scope="session")
def bfcl_tasks(bfcl_dir: Path) -> dict[str, list[Task]]:
    """Every offline task, by category (loaded once)."""
    by_category: dict[str, list[Task]] = {}
    for task in BFCLBenchmark(data_dir=str(bfcl_dir)):
        by_category.setdefault(task.tags["category"], []).append(task)
    return by_category


@pytest.fixture(scope="session")
def reference_scorer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The official evaluator's modules (``official.load``)."""
    return official.load(tmp_path_factory.mktemp("bfcl_eval"))


@pytest.fixture(scope="session")
def official_entries(reference_scorer: Any) -> Callable[[str], dict[str, dict[str, Any]]]:
    """``entries(category)``: id -> the item as the official evaluator loads it for scoring (no language notes)."""
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def entries(category: str) -> dict[str, dict[str, Any]]:
        if category not in cache:
            loaded = reference_scorer.utils.load_dataset_entry(category, include_prereq=False,
                                                               include_language_specific_hint=False)
            cache[category] = {entry["id"]: entry for entry in loaded}
        return cache[category]

    return entries


@pytest.fixture(scope="session")
def official_verdict(reference_scorer: Any, official_entries: Any) -> Callable[[Task, Any], dict[str, Any]]:
    """``verdict(task, output)``: the official evaluator's verdict on ``output`` (a text or our tool calls),
    ``{"valid", "error_type"}``,
    through ``_evaluate_single_ast_entry``, ``_evaluate_single_relevance_entry`` or
    ``_evaluate_single_multi_turn_entry`` with the OpenAI-compatible handler (function-calling for tool calls,
    prompting for text), its simulated API instances cleared first (they live in its module's globals)."""
    from bfcl_eval.constants.enums import Language, ReturnFormat

    runner_module = reference_scorer.eval_runner
    languages = {"java": (Language.JAVA, ReturnFormat.JAVA),
                 "javascript": (Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT),
                 "python": (Language.PYTHON, ReturnFormat.PYTHON)}

    def fresh_instances() -> None:
        state = vars(reference_scorer.multi_turn_utils)
        for name in [name for name in state if name.endswith("_instance")]:
            del state[name]

    def verdict(task: Task, output: Any) -> dict[str, Any]:
        result = raw_verdict(task, output)
        error = result.get("error")
        error_type = result.get("error_type") or (error.get("error_type") if isinstance(error, dict) else None)
        return {"valid": result["valid"], "error_type": None if result["valid"] else error_type}

    def raw_verdict(task: Task, output: Any) -> dict[str, Any]:
        category = task.tags["category"]
        entry = copy.deepcopy(official_entries(category)[task.id])
        if "multi_turn" in category:
            fresh_instances()
            steps_fc = any(isinstance(step, list) for turn in output if isinstance(turn, list) for step in turn)
            handler, model = (reference_scorer.fc, official.FC_MODEL) if steps_fc else \
                (reference_scorer.prompting, official.PROMPT_MODEL)
            if steps_fc:
                output = [[official_fc(step) if isinstance(step, list) else step for step in turn] for turn in output]
            return runner_module._evaluate_single_multi_turn_entry(handler, task.id, copy.deepcopy(output),
                                                                    copy.deepcopy(task.ground_truth), entry, model,
                                                                    category)
        fc = isinstance(output, list)
        handler, model = (reference_scorer.fc, official.FC_MODEL) if fc else \
            (reference_scorer.prompting, official.PROMPT_MODEL)
        if fc:
            output = official_fc(output)
        if "relevance" in category:
            return runner_module._evaluate_single_relevance_entry(handler, task.id, output, entry, model, category)
        language, return_format = languages[task.tags["language"]]
        return runner_module._evaluate_single_ast_entry(handler, task.id, output, copy.deepcopy(task.ground_truth),
                                                        entry, model, category, language=language,
                                                        return_format=return_format)

    return verdict


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """An HTTP server on 127.0.0.1 serving a folder; yields (folder, base URL). Stopped after the test."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        """Keep the GET requests' paths instead of printing them (fsspec also sends HEAD requests)."""
        if self.command == "GET":
            _QuietHandler.requests.append(self.path)
