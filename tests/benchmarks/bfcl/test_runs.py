"""BFCL with the rest of the runner, on a slice of a few items per category: on Ray as sequentially, resumed,
repeated (pass@k and pass^k), compared, and in the HTML report with its per-category chart."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.benchmarks.bfcl.categories import CATEGORIES

SLICE = ["--benchmark", "bfcl", "-B", "per_category=1"]


def _records(folder: Path) -> dict[tuple[str, int], dict]:
    records = {}
    for path in (folder / "records").glob("*/*.json"):
        record = json.loads(path.read_text())
        records[(record["task_id"], record["repeat"])] = record
    return records


def test_the_mock_model_on_ray_scores_as_sequentially(ray_session, cli, bfcl_dir: Path, tmp_path: Path) -> None:
    runs = {}
    for name, flags in (("sequential", ["--sequential"]), ("ray", ["--workers", "2"])):
        result = cli(*SLICE, "--data-dir", str(bfcl_dir), "--model", "mock", *flags, "--storage", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        runs[name] = _records(tmp_path / name)
    assert len(runs["ray"]) == len(CATEGORIES)
    for key, record in runs["sequential"].items():
        on_ray = runs["ray"][key]
        assert on_ray["output"] == record["output"] and on_ray["metrics"][0]["result"] == record["metrics"][0]["result"]
    assert all(record["worker"].get("actor_id") for record in runs["ray"].values())


def test_a_stopped_run_resumes_and_a_finished_one_does_nothing(cli, bfcl_dir: Path, tmp_path: Path) -> None:
    storage = tmp_path / "run"
    command = [*SLICE, "--data-dir", str(bfcl_dir), "--solution", "reference", "--sequential",
               "--storage", str(storage)]
    assert cli(*command).returncode == 0
    first = json.loads((storage / "summary.json").read_text())
    removed = sorted((storage / "records").iterdir())[:5]
    kept = {path.name: (path / "0.json").stat().st_mtime_ns for path in (storage / "records").iterdir()
            if path not in removed}
    for folder in removed:
        shutil.rmtree(folder)
    assert cli(*command).returncode == 0
    again = json.loads((storage / "summary.json").read_text())
    assert again["completed"] == first["completed"] == len(CATEGORIES)
    assert again["score_components"] == first["score_components"]
    assert all((storage / "records" / name / "0.json").stat().st_mtime_ns == mtime for name, mtime in kept.items())
    result = cli(*command, "--log-format", "json")
    assert "run.nothing_to_do" in result.stderr + result.stdout


def test_repeats_give_pass_at_k_and_compare_and_the_page_show_every_category(cli, bfcl_dir: Path,
                                                                            tmp_path: Path) -> None:
    reference, mock = tmp_path / "reference", tmp_path / "mock"
    common = [*SLICE, "--data-dir", str(bfcl_dir), "--sequential", "--repeats", "2"]
    assert cli(*common, "--solution", "reference", "--storage", str(reference)).returncode == 0
    assert cli(*common, "--model", "mock", "--storage", str(mock), "--html").returncode == 0
    summary = json.loads((mock / "summary.json").read_text())
    accuracy = summary["metrics"]["accuracy"]["mean"]
    # The mock answers alike in both repeats: pass@2 and pass^2 equal the accuracy.
    assert summary["pass_at_k"]["accuracy"]["2"] == pytest.approx(accuracy)
    assert summary["pass_hat_k"]["accuracy"]["2"] == pytest.approx(accuracy)
    page = (mock / "report.html").read_text()
    assert all(category in page for category in CATEGORIES) and "Overall Acc" in page

    result = cli("compare", str(reference), str(mock), "--out", str(tmp_path / "compare"))
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "compare" / "compare.json").read_text())["rows"]
    categories = {row["category"] for row in rows if row["metric"] == "accuracy"}
    assert categories == {None, *CATEGORIES}
    overall = next(row for row in rows if row["metric"] == "accuracy" and row["category"] is None)
    assert overall["n"] == 2 * len(CATEGORIES) and overall["differences"][0]["diff"] < 0
