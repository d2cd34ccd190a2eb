"""lm-eval's progress bars stay off the runner's output (issue 37: lm-eval printed a bar to stderr for each document,
between the run's own lines): on ``local-completions``, where it was found (its request loops take no
``disable_tqdm``), and on ``HFLM`` in the run's own process (its rolling log-likelihoods pass ``disable_tqdm=False``
on), each with every request type."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lm_eval.models.huggingface as huggingface
import pytest
from tqdm import tqdm

from runner.benchmarks.lmeval.bars import no_bars
from tests.benchmarks.lmeval.conftest import EMBEDDED, LEAVES, TASKS
from tests.benchmarks.lmeval.engines import Completions, models_list
from tests.support.model_server import ScriptedModelServer

PROGRESS_BAR = re.compile(r"\d+%\|[^|\n]*\||\d+it \[|it/s\]|s/it\]")
"""What a tqdm bar writes (``Requesting API: 100%|██████████| 1/1 [00:00<00:00, 9.8it/s]``)."""


@pytest.fixture
def server() -> Iterator[tuple[ScriptedModelServer, Completions]]:
    """A completions endpoint answering as vLLM does."""
    completions = Completions()
    scripted = ScriptedModelServer(models=["scripted"])
    scripted.completions = completions
    scripted.answer(models_list(), endpoint="models", times=None)
    with scripted:
        yield scripted, completions


def run(cli: Any, lm_tasks: Path, storage: Path, *flags: str) -> Any:
    """Two documents of every local task (generation, multiple choice, a group, rolling log-likelihoods), sequential."""
    done = cli("-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={lm_tasks}", "-B", "limit=2",
               "--sequential", "--storage", str(storage), *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list(storage.glob("records/*/0.json"))) == 2 * len(LEAVES)
    return done


def test_local_completions_draws_no_progress_bar(cli, lm_tasks: Path, embedded_dir: Path, server, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    scripted, completions = server
    monkeypatch.chdir(lm_tasks)
    done = run(cli, lm_tasks, tmp_path / "run", "-B", f"model_args=tokenizer={embedded_dir}", "--model",
               "vllm:scripted", "--model-base-url", scripted.url)
    assert {"echo" in body for body in completions.bodies} == {True, False}  # scored and generated
    assert not PROGRESS_BAR.search(done.stderr), done.stderr[-2000:]
    assert not PROGRESS_BAR.search(done.stdout), done.stdout[-2000:]


def test_hflm_in_the_runs_process_draws_no_progress_bar(cli, lm_tasks: Path, embedded_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's load draws transformers' own ``Loading weights`` bar, once per worker, as every path that loads a
    model does; no request draws one."""
    monkeypatch.chdir(lm_tasks)
    done = run(cli, lm_tasks, tmp_path / "run", "--model", EMBEDDED)
    drawn = [part for part in re.split(r"[\r\n]", done.stderr + done.stdout) if PROGRESS_BAR.search(part)]
    assert all(part.startswith("Loading weights: ") for part in drawn), drawn
    # The same class, drawn as lm-eval draws it outside the runner's calls.
    assert issubclass(huggingface.tqdm, tqdm) and huggingface.tqdm is not tqdm
    with no_bars():
        assert huggingface.tqdm(range(3), disable=False, file=io.StringIO()).disable
    assert not huggingface.tqdm(range(3), disable=False, file=io.StringIO()).disable
