"""Loading ACEBench's data: arguments, missing and corrupt files, and the pinned, checksummed download."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.benchmarks.acebench import ACEBenchmark
from runner.benchmarks.acebench.files import COMMIT, URL_ENV
from runner.core.errors import BenchmarkError

FILES = ["data_en/data_special_irrelevant.json", "data_en/possible_answer/data_special_irrelevant.json"]


def test_construction_reads_nothing_and_prepare_loads(data_copy: Path) -> None:
    benchmark = ACEBenchmark(data_dir=str(data_copy / "nowhere"), categories="special_irrelevant")
    with pytest.raises(BenchmarkError, match="data_special_irrelevant.json is missing"):
        benchmark.prepare()
    benchmark = ACEBenchmark(data_dir=str(data_copy), categories=["normal_atom_bool", "special_irrelevant"])
    assert len(benchmark) == 100
    task = next(iter(benchmark))
    assert task.tags == {"category": "normal_atom_bool", "language": "en"}
    assert task.input["functions"] and task.input["question"].startswith("user:")


def test_unknown_arguments_list_the_valid_ones() -> None:
    with pytest.raises(BenchmarkError, match="unknown ACEBench category 'normal_atom_boolean'.*normal_atom_bool"):
        ACEBenchmark(categories="normal_atom_boolean")
    with pytest.raises(BenchmarkError, match="unknown ACEBench language 'fr'; use one of: en, zh"):
        ACEBenchmark(language="fr")
    with pytest.raises(BenchmarkError, match="scoring"):
        ACEBenchmark(scoring="lenient")


def test_categories_accept_groups_and_keep_the_benchmark_order() -> None:
    assert ACEBenchmark(categories="agent, special_irrelevant").categories == (
        "special_irrelevant", "agent_multi_turn", "agent_multi_step")


def test_version_follows_commit_and_scoring() -> None:
    assert ACEBenchmark().version == "56dd66c-official"
    assert ACEBenchmark(scoring="strict").version == "56dd66c-strict"


def test_a_modified_file_is_refused_unless_verification_is_off(data_copy: Path) -> None:
    path = data_copy / "data_en/possible_answer/data_special_irrelevant.json"
    path.write_text(path.read_text().replace("cannot", "can not"))
    with pytest.raises(BenchmarkError, match="possible_answer/data_special_irrelevant.json is corrupt.*verify=false"):
        ACEBenchmark(data_dir=str(data_copy), categories="special_irrelevant").prepare()
    assert len(ACEBenchmark(data_dir=str(data_copy), categories="special_irrelevant", verify=False)) == 50


def test_misaligned_answers_are_refused(data_copy: Path) -> None:
    path = data_copy / "data_en/possible_answer/data_special_irrelevant.json"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[1:] + lines[:1]) + "\n")
    with pytest.raises(BenchmarkError, match="paired with answer"):
        ACEBenchmark(data_dir=str(data_copy), categories="special_irrelevant", verify=False).prepare()
    path.write_text("{not json\n")
    with pytest.raises(BenchmarkError, match="line 1 is not JSON"):
        ACEBenchmark(data_dir=str(data_copy), categories="special_irrelevant", verify=False).prepare()


def test_download_verifies_checksums_and_reuses_the_cache(acebench_dir: Path, http_root, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    served, url = http_root
    for relative in FILES:
        (served / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(acebench_dir / relative, served / relative)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "acebench" / COMMIT
    monkeypatch.setenv(URL_ENV, url)
    assert len(ACEBenchmark(categories="special_irrelevant")) == 50
    assert (cache / FILES[1]).read_bytes() == (acebench_dir / FILES[1]).read_bytes()
    for relative in FILES:
        (served / relative).unlink()
    assert len(ACEBenchmark(categories="special_irrelevant")) == 50  # from the cache, nothing served any more


def test_a_corrupt_download_names_the_file_and_writes_nothing(acebench_dir: Path, http_root, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    served, url = http_root
    for relative in FILES:
        (served / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(acebench_dir / relative, served / relative)
    record = json.loads((served / FILES[1]).read_text().splitlines()[0])
    (served / FILES[1]).write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "acebench" / COMMIT
    monkeypatch.setenv(URL_ENV, url)
    with pytest.raises(BenchmarkError, match=f"{url}/{FILES[1]} does not match its pinned sha256.*{URL_ENV}"):
        ACEBenchmark(categories="special_irrelevant").prepare()
    assert not (cache / FILES[1]).exists()
    with pytest.raises(BenchmarkError, match="cannot download .*data_special_incomplete.json"):
        ACEBenchmark(categories="special_incomplete").prepare()


def test_a_corrupt_cached_file_is_downloaded_again(acebench_dir: Path, http_root, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    served, url = http_root
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "acebench" / COMMIT
    for relative in FILES:
        for root in (served, cache):
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(acebench_dir / relative, root / relative)
    (cache / FILES[0]).write_text("{}\n")
    monkeypatch.setenv(URL_ENV, url)
    assert len(ACEBenchmark(categories="special_irrelevant")) == 50
    assert (cache / FILES[0]).read_bytes() == (acebench_dir / FILES[0]).read_bytes()
