"""The command line with ACEBench: bad input ends with exit status 2, one line, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["--benchmark", "acebench", "--solution", "reference", "--sequential", *args])
    return status, capsys.readouterr().err.strip()


def test_unknown_category_or_language(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, err = run(["-B", "categories=normal_atom_boolean", "--storage", str(tmp_path / "run")], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "unknown ACEBench category 'normal_atom_boolean'" in err
    status, err = run(["-B", "language=fr", "--storage", str(tmp_path / "run")], capsys)
    assert status == 2 and err == "error: unknown ACEBench language 'fr'; use one of: en, zh"
    assert not (tmp_path / "run").exists()


def test_data_folder_missing_a_file(capsys: pytest.CaptureFixture[str], data_copy: Path, tmp_path: Path) -> None:
    (data_copy / "data_en/possible_answer/data_special_irrelevant.json").unlink()
    status, err = run(["--data-dir", str(data_copy), "-B", "categories=normal_atom_bool,special_irrelevant",
                       "--storage", str(tmp_path / "run")], capsys)
    assert status == 2 and len(err.splitlines()) == 1
    assert "possible_answer/data_special_irrelevant.json is missing" in err
    assert not (tmp_path / "run").exists()


def test_a_small_run_through_the_cli(capsys: pytest.CaptureFixture[str], data_copy: Path, tmp_path: Path) -> None:
    status, _ = run(["--data-dir", str(data_copy), "-B", "categories=normal_atom_bool,special_irrelevant",
                     "-B", "scoring=strict", "--storage", str(tmp_path / "run")], capsys)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert status == 0 and summary["benchmark_version"] == "56dd66c-strict"
    assert summary["by_category"]["normal_atom_bool"]["accuracy"]["mean"] == 1.0
    assert summary["score"] is None and summary["score_components"] == {}
