"""The shared reader of pinned benchmark data files (runner.benchmarks.datafiles): each error names the benchmark,
the file and the way out; the ACEBench and BFCL messages read as they did before the reader was shared."""

from __future__ import annotations

import pytest

from runner.benchmarks.acebench import files as acebench_files
from runner.benchmarks.bfcl import files as bfcl_files
from runner.benchmarks.datafiles import DataFiles, sha256_hex
from runner.core.errors import BenchmarkError

GOOD = b'{"id": 1}\n\n{"id": 2}\n'
FILES = DataFiles(label="Demo", sha256={"a.json": sha256_hex(GOOD)}, pinned="demo 1.0", pinned_file="that file",
                  layout="pass the demo folder, or leave out --data-dir to download it")


def test_load_reads_checks_and_decodes(tmp_path):
    (tmp_path / "a.json").write_bytes(GOOD)
    assert FILES.load(str(tmp_path), "a.json") == [{"id": 1}, {"id": 2}]


def test_errors_name_the_benchmark_the_file_and_the_way_out(tmp_path):
    with pytest.raises(BenchmarkError, match=r"^Demo file .*/a.json is missing; pass the demo folder"):
        FILES.load(str(tmp_path), "a.json")
    (tmp_path / "a.json").write_bytes(b'{"id": 1}\n[2]\n')
    with pytest.raises(BenchmarkError, match=r"for demo 1.0\); replace it with that file, or pass -B verify=false"):
        FILES.load(str(tmp_path), "a.json")
    with pytest.raises(BenchmarkError, match=r"a.json line 2 is not a JSON object; replace the file$"):
        FILES.load(str(tmp_path), "a.json", verify=False)
    with pytest.raises(BenchmarkError, match=r"line 1 is not JSON \(Expecting value\); the file is corrupt"):
        FILES.parse_jsonl(b"nope\n", "x.json")


@pytest.mark.parametrize(("module", "relative", "pinned", "fix"), [
    (acebench_files, "data_en/data_special_irrelevant.json", "commit 56dd66c", "the file of that commit"),
    (bfcl_files, "BFCL_v4_simple_python.json", "bfcl-eval 2026.3.23", "that version's file"),
])
def test_the_benchmarks_messages_are_unchanged(module, relative, pinned, fix):
    with pytest.raises(BenchmarkError) as error:
        module.DATA.verify(relative, b"", "here")
    assert str(error.value) == (
        f"{module.DATA.label} file here is corrupt or of another version (sha256 {sha256_hex(b'')[:16]}..., "
        f"expected {module.SHA256[relative][:16]}... for {pinned}); replace it with {fix}, or pass -B verify=false "
        "to use modified data (its results are then not comparable)")
