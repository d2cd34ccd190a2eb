"""GAIA from the command line on the sample: the gold answers score 1.0, the ``mock:gaia`` agent scores what its
tools give, a test-split run writes the leaderboard's submission file instead of a score, and a run resumes, repeats
(pass@k, pass^k), compares and renders its HTML report with the levels as categories. Bad data is refused with one
line and nothing written (a real subprocess for that exit path)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.gaia_sample import MOCK_ACCURACY, MOCK_ANSWERS, TASKS

GAIA = ["--benchmark", "gaia", "--sequential"]


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_gold_answers_score_one_on_every_level(cli, gaia_root, tmp_path):
    run = tmp_path / "run"
    result = cli(*GAIA, "--data-dir", str(gaia_root), "-s", "reference", "--storage", str(run))
    assert result.returncode == 0, result.stderr
    summary = _summary(run)
    assert summary["score"] == 1.0 and summary["metrics"]["accuracy"]["n"] == 6
    assert summary["score_components"] == {"level1": 1.0, "level2": 1.0, "level3": 1.0}
    submission = _lines(run / "submission.jsonl")
    assert [(line["task_id"], line["model_answer"]) for line in submission] == \
        [(task["task_id"], task["Final answer"]) for task in TASKS]
    assert f"file://{run}/submission.jsonl: the leaderboard's submission of repeat 0 (6 answers)" in summary["notes"]


def test_the_mock_agent_uses_its_tools_and_scores_what_they_give(cli, gaia_root, tmp_path):
    run = tmp_path / "run"
    result = cli(*GAIA, "--data-dir", str(gaia_root), "--model", "mock", "--storage", str(run))
    assert result.returncode == 0, result.stderr
    summary = _summary(run)
    assert summary["errors"] == 0 and summary["score"] == MOCK_ACCURACY["overall"]
    assert {c: e["accuracy"]["mean"] for c, e in summary["by_category"].items()} == \
        {c: v for c, v in MOCK_ACCURACY.items() if c != "overall"}
    answers = {line["task_id"]: line["model_answer"] for line in _lines(run / "submission.jsonl")}
    assert answers == MOCK_ANSWERS
    record = json.loads((run / "records" / "l2-sales" / "0.json").read_text())
    calls = [step for step in record["trajectory"] if step["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["read_file", "python"]
    assert calls[0]["result"]["reader"] == "openpyxl" and calls[1]["result"]["stdout"] == "300.0\n"
    assert record["output"]["model_answer"] == "300.0" and record["metrics"][0]["metadata"] == {
        "model_answer": "300.0", "answer_type": "number"}


def test_a_test_split_run_writes_the_submission_file_instead_of_a_score(cli, gaia_test_root, tmp_path):
    run = tmp_path / "run"
    result = cli(*GAIA, "--data-dir", str(gaia_test_root), "-B", "split=test", "--model", "mock",
                 "--storage", str(run))
    assert result.returncode == 0, result.stderr
    summary = _summary(run)
    assert summary["score"] is None and set(summary["metrics"]) == {"answered"}
    assert summary["metrics"]["answered"]["mean"] == 1.0
    submission = _lines(run / "submission.jsonl")
    assert {line["task_id"]: line["model_answer"] for line in submission} == MOCK_ANSWERS
    assert all(set(line) == {"task_id", "model_answer", "reasoning_trace"} for line in submission)
    note = (f"file://{run}/submission.jsonl: the leaderboard's submission of repeat 0 (6 answers); the test split's "
            "answers are private: upload this file at https://huggingface.co/spaces/gaia-benchmark/leaderboard for the "
            "score")
    assert note in summary["notes"]
    assert f"note: {note}" in result.stdout


def test_a_run_resumes_repeats_and_rebuilds_its_submission(cli, gaia_root, tmp_path):
    run = tmp_path / "run"
    common = (*GAIA, "--data-dir", str(gaia_root), "--model", "mock", "--storage", str(run))
    assert cli(*common, "--limit", "3").returncode == 0
    first = {p: p.stat().st_mtime_ns for p in run.glob("records/*/0.json")}
    assert len(first) == 3 and len(_lines(run / "submission.jsonl")) == 3
    result = cli(*common, "--repeats", "2")
    assert result.returncode == 0, result.stderr
    assert {p: p.stat().st_mtime_ns for p in first} == first, "a resume never runs a finished item again"
    summary = _summary(run)
    assert summary["completed"] == 12 and summary["score"] == MOCK_ACCURACY["overall"]
    assert summary["pass_at_k"]["accuracy"] == {"1": 0.5, "2": 0.5}
    assert summary["pass_hat_k"]["accuracy"] == {"1": 0.5, "2": 0.5}
    assert len(_lines(run / "submission.jsonl")) == 6 and len(_lines(run / "submission.repeat-1.jsonl")) == 6


def test_compare_and_the_html_report_show_the_levels(cli, gaia_root, tmp_path, monkeypatch):
    gold, mock = tmp_path / "gold", tmp_path / "mock"
    assert cli(*GAIA, "--data-dir", str(gaia_root), "-s", "reference", "--storage", str(gold)).returncode == 0
    assert cli(*GAIA, "--data-dir", str(gaia_root), "--model", "mock", "--storage", str(mock),
               "--html").returncode == 0
    page = (mock / "report.html").read_text()
    assert all(f"level{n}" in page for n in (1, 2, 3)) and "submission.jsonl" in page
    monkeypatch.chdir(tmp_path)
    result = cli("compare", str(gold), str(mock))
    assert result.returncode == 0, result.stderr
    comparison = json.loads((tmp_path / "compare.json").read_text())
    text = json.dumps(comparison)
    assert "level3" in text and "-0.5" in text


def test_a_data_folder_without_the_split_is_one_line_and_nothing_written(cli_process, gaia_root, tmp_path):
    run = tmp_path / "run"
    result = cli_process(*GAIA, "--data-dir", str(gaia_root), "-B", "split=test", "-s", "reference",
                         "--storage", str(run))
    result.error_line("GAIA --data-dir", "has no 2023/test/metadata.jsonl or metadata.parquet (it holds: 2023/validation)")
    assert not run.exists()
