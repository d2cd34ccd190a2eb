"""The command line with ACEBench: bad input ends with exit status 2, one line, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

ACE = ["--benchmark", "acebench", "--solution", "reference", "--sequential"]


def test_unknown_category_or_language(cli, tmp_path: Path) -> None:
    cli(*ACE, "-B", "categories=normal_atom_boolean", "--storage", str(tmp_path / "run")).error_line(
        "unknown ACEBench category 'normal_atom_boolean'")
    line = cli(*ACE, "-B", "language=fr", "--storage", str(tmp_path / "run")).error_line()
    assert line == "error: unknown ACEBench language 'fr'; use one of: en, zh"
    assert not (tmp_path / "run").exists()


def test_data_folder_missing_a_file(cli, data_copy: Path, tmp_path: Path) -> None:
    (data_copy / "data_en/possible_answer/data_special_irrelevant.json").unlink()
    cli(*ACE, "--data-dir", str(data_copy), "-B", "categories=normal_atom_bool,special_irrelevant",
        "--storage", str(tmp_path / "run")).error_line("possible_answer/data_special_irrelevant.json is missing")
    assert not (tmp_path / "run").exists()


def test_a_small_run_through_the_cli(cli, data_copy: Path, tmp_path: Path) -> None:
    result = cli(*ACE, "--data-dir", str(data_copy), "-B", "categories=normal_atom_bool,special_irrelevant",
                 "-B", "scoring=strict", "--storage", str(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.returncode == 0 and summary["benchmark_version"] == "56dd66c-strict"
    assert summary["by_category"]["normal_atom_bool"]["accuracy"]["mean"] == 1.0
    assert summary["score"] is None and summary["score_components"] == {}
