"""The command line with BFCL: bad input ends with exit status 2, one line, and nothing written; ``--model`` alone
picks the ``bfcl`` solution."""

from __future__ import annotations

import json
from pathlib import Path


def test_a_category_that_needs_the_internet_is_refused_before_anything_is_written(cli, bfcl_dir: Path,
                                                                                 tmp_path: Path) -> None:
    result = cli("--benchmark", "bfcl", "--solution", "reference", "--data-dir", str(bfcl_dir), "-B",
                 "categories=live_simple,web_search_no_snippet", "--sequential", "--storage", str(tmp_path / "run"))
    assert result.returncode == 2
    result.error_line("BFCL category 'web_search_no_snippet' does not run here: it needs the internet")
    assert not (tmp_path / "run").exists()


def test_a_bad_mode_and_a_bad_slice_are_refused(cli, bfcl_dir: Path, tmp_path: Path) -> None:
    common = ["--benchmark", "bfcl", "--data-dir", str(bfcl_dir), "--sequential", "--storage", str(tmp_path / "run")]
    assert cli(*common, "--model", "mock", "-S", "mode=json").error_line() == \
        "error: bfcl: mode='json'; use -S mode=prompting or -S mode=native"
    cli(*common, "--solution", "reference", "-B", "per_category=0").error_line("BFCL per_category=0")
    assert not (tmp_path / "run").exists()


def test_the_model_alone_runs_the_bfcl_solution(cli, bfcl_dir: Path, tmp_path: Path) -> None:
    result = cli("--benchmark", "bfcl", "--data-dir", str(bfcl_dir), "-B", "categories=multi_turn_base",
                 "-B", "per_category=1", "--model", "mock", "-S", "mode=native", "--sequential",
                 "--storage", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "run" / "records" / "multi_turn_base_0" / "0.json").read_text())
    assert record["solution_meta"]["mode"] == "native" and record["usage"]["mock"]["calls"] == 8
    assert record["output"][0][0][0]["name"] == record["input"]["functions"][0]["name"] and record["output"][0][1] == []
