"""A task folder's own code reaches every Ray worker whole (lm-eval#2713): a task whose ``utils.py`` imports a sibling
module of its ``-B include_path`` folder (at import, and another inside ``process_results``) scores every document
on a real local Ray whose workers lack the folder on their Python path (the tests' shared Ray was started from the
repository, as a remote worker would be); a module that is no module of the folder and that the workers cannot
import is one line naming it, exit 2, before anything is written.

The model is the scripted server answering in vLLM's shapes (``engines.py``): every answer starts with " Paris", so a
document scores 1 when the folder's normalizer, run by ``process_results`` on the worker, reads "paris".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.lmeval.engines import Completions, models_list
from tests.support.local_code import drop_modules_of
from tests.support.model_server import ScriptedModelServer

N_QUESTIONS = 6

TASK = """\
task: paris_first
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: !function utils.prompt
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 8
process_results: !function utils.process_results
metric_list:
  - metric: first_word_paris
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

UTILS = '''\
"""The task's functions: they call the folder's own modules."""

import normalizer


def prompt(doc):
    return normalizer.clean("Question:   " + doc["question"] + "\\nAnswer:")


def process_results(doc, results):
    import vocabulary  # imported where the document is scored: on a Ray worker

    return {"first_word_paris": 1.0 if normalizer.first_word(results[0]) == vocabulary.CAPITAL else 0.0}
'''

NORMALIZER = '''\
def clean(text):
    return "[clean] " + " ".join(text.split(" ")).replace("  ", " ")


def first_word(text):
    words = text.strip().lower().split()
    return words[0] if words else ""
'''


@pytest.fixture
def task_folder(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The task folder, on this process's Python path as the working directory of ``python -m runner`` is, so the
    driver imports ``normalizer`` from it (the Ray workers' path does not hold it)."""
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    records = json.loads((shared_data / "hotpotqa_dev_sample" / "hotpot_dev_v1_simplified.json").read_text())
    data = folder / "questions.json"
    data.write_text(json.dumps([{"question": r["question"], "answer": r["answer"]} for r in records[:N_QUESTIONS]]))
    (folder / "paris_first.yaml").write_text(TASK.format(data=data))
    (folder / "utils.py").write_text(UTILS)
    (folder / "normalizer.py").write_text(NORMALIZER)
    (folder / "vocabulary.py").write_text('CAPITAL = "paris"\n')
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    drop_modules_of(folder)


@pytest.fixture
def vllm_like() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer(models=["scripted"])
    server.completions = Completions()
    server.answer(models_list(), endpoint="models", times=None)
    with server:
        yield server


def command(folder: Path, server: ScriptedModelServer, storage: Path, tokenizer: Path) -> list[str]:
    return ["-b", "lm-eval", "-B", "tasks=paris_first", "-B", f"include_path={folder}", "-B",
            f"model_args=tokenizer={tokenizer}", "--model", "vllm:scripted", "--model-base-url", server.url,
            "--workers", "2", "--storage", str(storage)]


def test_a_task_whose_utils_import_the_folders_modules_scores_on_ray_workers(cli, ray_session, task_folder: Path,
                                                                             vllm_like, embedded_dir: Path,
                                                                             tmp_path: Path) -> None:
    done = cli(*command(task_folder, vllm_like, tmp_path / "run", embedded_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(path.read_text()) for path in (tmp_path / "run").glob("records/*/0.json")]
    assert len(records) == N_QUESTIONS and {record["status"] for record in records} == {"ok"}
    assert {record["metrics"][0]["result"] for record in records} == {1.0}
    # The prompt is the folder's normalizer's (built on the driver); the score its process_results' (on a worker).
    assert all(record["input"]["requests"][0]["arguments"][0].startswith("[clean] Question: ") for record in records)
    assert len({record["worker"]["pid"] for record in records}) >= 1
    results = json.loads((tmp_path / "run" / "lm_eval" / "results.json").read_text())
    assert results["results"]["paris_first"]["first_word_paris,none"] == 1.0


def test_a_module_the_workers_cannot_import_is_one_line_before_anything_is_written(
        cli, ray_session, task_folder: Path, vllm_like, embedded_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``utils.py`` imports a module of another folder on the driver's path: the run sends the task folder only, so
    the workers cannot import it."""
    elsewhere = tmp_path / "site_of_the_driver"
    elsewhere.mkdir()
    (elsewhere / "house_style.py").write_text("PREFIX = 'Q: '\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    (task_folder / "utils.py").write_text("import house_style\n" + UTILS)
    try:
        done = cli(*command(task_folder, vllm_like, tmp_path / "run", embedded_dir))
    finally:
        drop_modules_of(elsewhere)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), done.stderr[-3000:]
    assert f"{task_folder / 'utils.py'} imports 'house_style', which cannot be imported on the worker" in last
    assert "install it where the workers run" in last and "--sequential" in last
    assert not (tmp_path / "run").exists()
    assert vllm_like.completions.bodies == []  # no document was sent to the model
