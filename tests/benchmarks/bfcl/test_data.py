"""Loading BFCL's data: categories and their refusals, checksums, the slice of a few items per category, and the
download of the pinned wheel (against a wheel of our own on a loopback server)."""

from __future__ import annotations

import hashlib
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from runner.benchmarks.bfcl import BFCLBenchmark, files, languages
from runner.benchmarks.bfcl.categories import CATEGORIES, parse_categories
from runner.core.errors import BenchmarkError
from tests.benchmarks.bfcl.conftest import _QuietHandler


def test_construction_reads_nothing_and_prepare_loads_every_offline_item(bfcl_dir: Path) -> None:
    benchmark = BFCLBenchmark(data_dir=str(bfcl_dir / "nowhere"))
    assert benchmark.categories == CATEGORIES and benchmark.version == "2026.3.23"
    with pytest.raises(BenchmarkError, match="is missing; --data-dir must be a copy of bfcl-eval's bfcl_eval/data"):
        benchmark.prepare()
    assert len(BFCLBenchmark(data_dir=str(bfcl_dir))) == 4441


def test_tasks_carry_bfcl_ids_categories_and_what_the_model_sees(bfcl_tasks) -> None:
    live = bfcl_tasks["live_multiple"][46]
    assert live.id == "live_multiple_46-18-1" and live.tags == {"category": "live_multiple", "group": "live",
                                                               "language": "python"}
    java = bfcl_tasks["simple_java"][0]
    description = java.input["functions"][0]["description"]
    assert description.endswith("Note that the provided function is in Java 8 SDK syntax.")
    assert java.input["functions"][0]["parameters"]["properties"]["controller"]["type"] == "string"
    miss = bfcl_tasks["multi_turn_miss_func"][0]
    assert miss.id == "multi_turn_miss_func_0" and set(miss.input["missed_function"]) == {"3"}
    assert [doc["name"] for doc in miss.input["missed_function"]["3"]] == ["sort"]
    assert "sort" not in [doc["name"] for doc in miss.input["functions"]]
    assert len(miss.ground_truth) == len(miss.input["question"])


@pytest.mark.parametrize(("name", "reason"), [("web_search_base", "needs the internet"),
                                              ("memory_kv", "needs its own memory store"),
                                              ("agentic", "needs the internet"),
                                              ("format_sensitivity", "non-scoring")])
def test_categories_that_need_the_internet_or_a_store_are_refused_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(BenchmarkError, match=reason) as refused:
        BFCLBenchmark(categories=f"simple_python,{name}")
    assert str(refused.value).startswith(f"BFCL category '{name}' does not run here: it ")


def test_groups_and_unknown_names() -> None:
    assert parse_categories("live,multi_turn_base") == ("live_simple", "live_multiple", "live_parallel",
                                                       "live_parallel_multiple", "live_irrelevance", "live_relevance",
                                                       "multi_turn_base")
    assert parse_categories(["non_python"]) == ("simple_java", "simple_javascript")
    with pytest.raises(BenchmarkError, match="unknown BFCL category 'simple'; use any of: simple_python"):
        parse_categories("simple")


def test_a_slice_of_each_category(bfcl_dir: Path) -> None:
    tasks = list(BFCLBenchmark(data_dir=str(bfcl_dir), categories="simple_java,multi_turn_base", per_category=2))
    assert [task.id for task in tasks] == ["simple_java_0", "simple_java_1", "multi_turn_base_0", "multi_turn_base_1"]
    with pytest.raises(BenchmarkError, match="per_category=0"):
        BFCLBenchmark(per_category=0)


def _copy(bfcl_dir: Path, root: Path, relatives: list[str]) -> None:
    for relative in relatives:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bfcl_dir / relative, root / relative)


def test_a_modified_file_is_refused_unless_verification_is_off(bfcl_dir: Path, tmp_path: Path) -> None:
    relatives = files.needed_files(("simple_javascript",))
    _copy(bfcl_dir, tmp_path, relatives)
    path = tmp_path / "possible_answer" / "BFCL_v4_simple_javascript.json"
    path.write_text(path.read_text().replace('"userInputField"', '"userInput"'))
    with pytest.raises(BenchmarkError, match="is corrupt or of another version .* -B verify=false"):
        BFCLBenchmark(data_dir=str(tmp_path), categories="simple_javascript").prepare()
    benchmark = BFCLBenchmark(data_dir=str(tmp_path), categories="simple_javascript", verify=False)
    assert benchmark.version == "2026.3.23-unverified" and len(benchmark) == 50


def _wheel(bfcl_dir: Path, target: Path, relatives: list[str]) -> tuple[str, int]:
    """A wheel-shaped zip holding ``relatives`` under ``bfcl_eval/data/``; returns its sha256 and size."""
    with zipfile.ZipFile(target, "w") as bundle:
        for relative in relatives:
            bundle.write(bfcl_dir / relative, f"{files.WHEEL_DATA}/{relative}")
    data = target.read_bytes()
    return hashlib.sha256(data).hexdigest(), len(data)


def test_the_download_is_verified_unpacked_and_cached(bfcl_dir: Path, http_root, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    served, url = http_root
    relatives = files.needed_files(("simple_javascript", "multi_turn_base"))
    digest, size = _wheel(bfcl_dir, served / "bfcl.whl", relatives)
    monkeypatch.setattr(files, "WHEEL_SHA256", digest)
    monkeypatch.setattr(files, "WHEEL_SIZE", size)
    monkeypatch.setenv(files.URL_ENV, f"{url}/bfcl.whl")
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    _QuietHandler.requests.clear()
    benchmark = BFCLBenchmark(categories="simple_javascript,multi_turn_base")
    assert len(benchmark) == 250 and _QuietHandler.requests == ["/bfcl.whl"]
    cached = tmp_path / "cache" / "bfcl" / files.VERSION / "data"
    assert (cached / "multi_turn_func_doc" / "vehicle_control.json").is_file()
    assert len(BFCLBenchmark(categories="simple_javascript")) == 50 and _QuietHandler.requests == ["/bfcl.whl"]
    # A cached file that no longer verifies is unpacked again from the cached wheel, with no new download.
    (cached / "BFCL_v4_simple_javascript.json").write_text("{}\n")
    assert len(BFCLBenchmark(categories="simple_javascript")) == 50 and _QuietHandler.requests == ["/bfcl.whl"]


def test_a_wheel_that_does_not_verify_is_refused_and_not_kept(bfcl_dir: Path, http_root, tmp_path: Path) -> None:
    served, url = http_root
    relatives = files.needed_files(("simple_javascript",))
    _wheel(bfcl_dir, served / "bfcl.whl", relatives)
    with pytest.raises(BenchmarkError, match="does not match its pinned sha256"):
        files.ensure_downloaded(relatives, cache_dir=tmp_path / "cache", url=f"{url}/bfcl.whl")
    assert not list((tmp_path / "cache").glob("*.whl*"))


def test_a_wheel_without_a_needed_file_is_named(bfcl_dir: Path, http_root, tmp_path: Path) -> None:
    served, url = http_root
    digest, size = _wheel(bfcl_dir, served / "bfcl.whl", files.needed_files(("simple_javascript",)))
    with pytest.raises(BenchmarkError, match="has no bfcl_eval/data/BFCL_v4_live_simple.json"):
        files.ensure_downloaded(files.needed_files(("live_simple",)), cache_dir=tmp_path / "cache",
                                url=f"{url}/bfcl.whl", wheel_sha256=digest, wheel_size=size)


def test_java_items_without_tree_sitter_name_the_extra(bfcl_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter_java", None)
    languages._parser.cache_clear()
    try:
        with pytest.raises(BenchmarkError, match=r"pip install 'ray-bench-runner\[bfcl\]'"):
            BFCLBenchmark(data_dir=str(bfcl_dir), categories="simple_java").prepare()
    finally:
        languages._parser.cache_clear()
