"""The runner's lm-eval numbers are lm-eval's: the ``lm_eval`` command itself runs the local tasks on the embedded
model's weights at batch size 1, and the runner's ``lm_eval/results.json`` and ``lm_eval/samples_<task>.jsonl``
hold the same values, document by document and aggregate by aggregate, sequentially and on a local Ray cluster
with 2 workers.

On Ray each worker's torch runs one thread (Ray sets ``OMP_NUM_THREADS`` to its one CPU) where ``lm_eval`` runs two,
so its float sums may differ in the last digits (a word perplexity of 108.20662670939161 against 108.20659376970396
was seen): the Ray comparison allows a relative 1e-4, the sequential one 1e-6.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.lmeval.compare import assert_same_as_lm_eval
from tests.benchmarks.lmeval.conftest import EMBEDDED, N_DOCS, TASKS


def run_args(tasks: Path, run: Path, *extra: str) -> list[str]:
    return ["-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={tasks}", "--model", EMBEDDED,
            "--storage", str(run), *extra]


def assert_headline_is_lm_evals(run: Path, reference: dict) -> None:
    """summary.json's headline: each top-level task's and group's first metric, with lm-eval's values; the per-task
    and per-group table holds lm-eval's aggregates."""
    summary = json.loads((run / "summary.json").read_text())
    results = reference["results"]
    assert summary["score"] is None  # three top-level entries: lm-eval gives no overall number
    assert list(summary["score_components"]) == ["hotpot_gen exact_match,strict-match", "hotpot_mc acc,none",
                                                 "hotpot_ppl word_perplexity,none"]
    assert summary["score_components"]["hotpot_mc acc,none"] == pytest.approx(results["hotpot_mc"]["acc,none"])
    assert summary["by_category"]["hotpot_ppl"]["word_perplexity,none"]["mean"] == pytest.approx(
        results["hotpot_ppl"]["word_perplexity,none"], rel=1e-4)
    assert summary["by_category"]["hotpot_yesno"]["acc,none"]["stderr"] == pytest.approx(
        results["hotpot_yesno"]["acc_stderr,none"])
    assert summary["metrics"]["word_perplexity,none"]["type"] == "corpus"
    assert summary["metrics"]["word_perplexity,none"]["mean"] is None
    assert summary["completed"] == sum(N_DOCS.values()) and summary["errors"] == 0


def test_a_sequential_run_holds_lm_evals_values(cli, lm_tasks: Path, lm_eval_reference, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(lm_tasks)  # hotpot_ppl's data_files are relative, as lm_eval read them
    done = cli(*run_args(lm_tasks, tmp_path / "run", "--sequential"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_as_lm_eval(tmp_path / "run", lm_eval_reference, rel=1e-6)
    assert_headline_is_lm_evals(tmp_path / "run", lm_eval_reference[0])
    record = json.loads((tmp_path / "run" / "records" / "hotpot_yesno%2F3" / "0.json").read_text())
    assert record["tags"] == {"category": "hotpot_yesno", "group": "hotpot_mc"}
    assert record["input"]["requests"][1]["arguments"][1] == " no"
    assert [m["name"] for m in record["metrics"]] == ["acc,none", "acc_norm,none"]


def test_a_ray_run_with_two_workers_holds_lm_evals_values(cli, ray_session, lm_tasks: Path, lm_eval_reference,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers never read the datasets (hotpot_ppl's relative data_files would not be found from their working
    directory) and score hotpot_type with the task folder's own utils.py, which they cannot import by name."""
    monkeypatch.chdir(lm_tasks)
    done = cli(*run_args(lm_tasks, tmp_path / "run", "--workers", "2"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_as_lm_eval(tmp_path / "run", lm_eval_reference, rel=1e-4)
    assert_headline_is_lm_evals(tmp_path / "run", lm_eval_reference[0])
    workers = {json.loads(path.read_text())["worker"].get("actor_id") for path in (tmp_path / "run").glob(
        "records/*/0.json")}
    assert len(workers) == 2
