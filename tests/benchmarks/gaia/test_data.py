"""Reading GAIA as the hub lays it out: both metadata formats, the split folder itself, a remote ``--data-dir``, the
levels as categories, the attached files' text, and a one-line error naming what is missing for each broken layout."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import fsspec
import pytest

from runner.benchmarks.gaia import GAIABenchmark, read_text
from runner.benchmarks.gaia.data import HUB_REPO, HUB_REVISION
from runner.core.errors import BenchmarkError
from tests.support.gaia_sample import CITIES, LETTER, NOTE, SALES, TASKS


def test_the_validation_split_reads_as_tasks_with_levels_as_categories(gaia_root):
    benchmark = GAIABenchmark(str(gaia_root))
    tasks = list(benchmark)
    assert [t.id for t in tasks] == [task["task_id"] for task in TASKS]
    assert [t.tags["category"] for t in tasks] == ["level1", "level1", "level2", "level2", "level3", "level3"]
    assert [t.tags["file"] for t in tasks] == ["none", "txt", "xlsx", "csv", "pdf", "docx"]
    assert tasks[0].input == "What is 12 * (3 + 4)?" and tasks[0].ground_truth == "84"
    assert tasks[0].metadata["attachment"] is None
    assert [m.name for m in tasks[0].metrics] == ["accuracy"]
    note = tasks[1].metadata["attachment"]
    assert note.path() == gaia_root / "2023" / "validation" / "l1-note.txt" and note.text().text == NOTE


def test_the_test_split_in_parquet_has_no_answers_and_counts_answers_only(gaia_test_root):
    tasks = list(GAIABenchmark(str(gaia_test_root), split="test"))
    assert len(tasks) == 6 and all(t.ground_truth is None for t in tasks)
    assert {m.name for t in tasks for m in t.metrics} == {"answered"}


def test_the_split_folder_itself_and_a_level_filter(gaia_root):
    benchmark = GAIABenchmark(str(gaia_root / "2023" / "validation"), levels="3,1")
    assert [t.id for t in benchmark] == ["l1-calc", "l1-note", "l3-report", "l3-letter"]
    assert [t.id for t in GAIABenchmark(str(gaia_root), levels=["level2"])] == ["l2-sales", "l2-cities"]


def test_a_remote_data_dir_is_read_through_fsspec_and_its_files_fetched_once(gaia_root, runner_cache):
    memory = fsspec.filesystem("memory")
    for path in (gaia_root / "2023" / "validation").iterdir():
        memory.pipe(f"/gaia-remote/2023/validation/{path.name}", path.read_bytes())
    try:
        tasks = {t.id: t for t in GAIABenchmark("memory://gaia-remote")}
        attachment = tasks["l2-cities"].metadata["attachment"]
        local = attachment.path()
        assert local.is_relative_to(runner_cache) and local.read_text() == CITIES
        assert attachment.text().text == CITIES and attachment.path() == local
    finally:
        memory.rm("/gaia-remote", recursive=True)


def test_attached_files_are_read_as_text_by_their_format(gaia_root):
    folder = gaia_root / "2023" / "validation"
    sheet = read_text(folder / "l2-sales.xlsx")
    assert sheet.reader == "openpyxl"
    assert sheet.text == "## sheet Sales\nRegion,Sales\n" + "\n".join(f"{r},{v}" for r, v in SALES)
    pdf = read_text(folder / "l3-report.pdf")
    assert pdf.reader == "pypdf" and "Annual report 2023" in pdf.text and "7 incidents" in pdf.text
    assert pdf.text.startswith("## page 1\n")
    letter = read_text(folder / "l3-letter.docx")
    assert letter.reader == "python-docx" and letter.text.splitlines() == LETTER
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Crustaceans"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for row, cells in enumerate((("animal", "legs"), ("crab", "10"))):
        for column, text in enumerate(cells):
            table.cell(row, column).text = text
    deck.save(str(folder / "slides.pptx"))
    slides = read_text(folder / "slides.pptx")
    assert slides.reader == "python-pptx" and slides.text == "## slide 1\nCrustaceans\nanimal,legs\ncrab,10"
    with zipfile.ZipFile(folder / "bundle.zip", "w") as archive:
        archive.writestr("inner/data.txt", "12345")
    assert read_text(folder / "bundle.zip").text == "inner/data.txt\t5 bytes"
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    image = read_text(folder / "photo.png")
    assert image.text is None and "image, audio or video" in image.note
    (folder / "broken.xlsx").write_bytes(b"not a workbook")
    broken = read_text(folder / "broken.xlsx")
    assert broken.text is None and "could not read broken.xlsx" in broken.note


def test_without_a_formats_library_the_text_is_none_and_the_note_says_what_to_install(gaia_root, monkeypatch):
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    text = read_text(gaia_root / "2023" / "validation" / "l2-sales.xlsx")
    assert text.text is None and "needs openpyxl (pip install 'ray-bench-runner[gaia]')" in text.note


def _error(data_dir: str, **kwargs) -> str:
    with pytest.raises(BenchmarkError) as caught:
        GAIABenchmark(data_dir, **kwargs).prepare()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_each_broken_layout_is_one_line_naming_what_is_missing(gaia_root, tmp_path):
    assert "no such folder" in _error(str(tmp_path / "nowhere"))
    assert "has no 2023/test/metadata.jsonl or metadata.parquet (it holds: 2023/validation)" in _error(str(gaia_root),
                                                                                           split="test")
    folder = gaia_root / "2023" / "validation"
    (folder / "l2-sales.xlsx").unlink()
    (folder / "l3-letter.docx").unlink()
    message = _error(str(gaia_root))
    assert "lacks 2 of the 5 attached files the metadata names (l2-sales.xlsx, l3-letter.docx)" in message
    rows = [json.loads(line) for line in (folder / "metadata.jsonl").read_text().splitlines()]
    rows[2]["Level"] = 4
    (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert "task l2-sales: Level 4 is not 1, 2 or 3" in _error(str(gaia_root))
    del rows[0]["Final answer"]
    (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert "record 0: no Final answer" in _error(str(gaia_root))
    (folder / "metadata.jsonl").write_text('{"task_id": "x"}\nnot json\n')
    assert "line 2 is not JSON" in _error(str(gaia_root))


def test_a_parquet_file_needs_pyarrow_and_says_so(gaia_test_root, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert "is Parquet, which needs pyarrow: pip install 'ray-bench-runner[gaia]'" in _error(str(gaia_test_root),
                                                                                          split="test")


def test_bad_arguments_are_refused_when_the_benchmark_is_built(gaia_root):
    with pytest.raises(BenchmarkError, match="unknown GAIA split 'dev'"):
        GAIABenchmark(str(gaia_root), split="dev")
    with pytest.raises(BenchmarkError, match="unknown GAIA level '4'"):
        GAIABenchmark(str(gaia_root), levels="1,4")
    with pytest.raises(BenchmarkError, match="revision= picks what to download"):
        GAIABenchmark(str(gaia_root), revision="main")


class FakeHub:
    """Stands in for the Hugging Face hub, which cannot be reached here: ``snapshot_download`` records its
    arguments and copies the sample's split folder into ``local_dir`` as the real client would, or raises the hub
    client's own error."""

    def __init__(self, source: Path, error: Exception | None = None) -> None:
        self.source, self.error, self.calls = source, error, []

    def snapshot_download(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        split = kwargs["allow_patterns"][0].split("/")[1]
        shutil.copytree(self.source / "2023" / split, Path(kwargs["local_dir"]) / "2023" / split)
        return kwargs["local_dir"]


def test_without_a_data_dir_the_split_is_downloaded_once_with_the_users_token(gaia_root, runner_cache, monkeypatch):
    import huggingface_hub

    hub = FakeHub(gaia_root)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub.snapshot_download)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    tasks = list(GAIABenchmark())
    assert len(tasks) == 6
    call = hub.calls[0]
    assert call["repo_id"] == HUB_REPO and call["repo_type"] == "dataset" and call["revision"] == HUB_REVISION
    assert call["allow_patterns"] == ["2023/validation/*"] and call["token"] == "hf_test_token"
    assert call["local_dir"] == str(runner_cache / "gaia" / HUB_REVISION)
    assert tasks[2].metadata["attachment"].path().is_relative_to(runner_cache)
    assert len(list(GAIABenchmark())) == 6 and len(hub.calls) == 1, "a complete download is not fetched again"


def test_a_download_without_a_token_or_access_says_how_to_get_one(gaia_root, monkeypatch, tmp_path):
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert "GAIA is gated: set HF_TOKEN to a token of a Hugging Face account that accepted the terms at " \
           "https://huggingface.co/datasets/gaia-benchmark/GAIA" in _error(None)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    response = type("Response", (), {"status_code": 403, "headers": {}, "url": "https://huggingface.co",
                                     "request": None})()
    try:
        gated = GatedRepoError("Access to dataset gaia-benchmark/GAIA is restricted", response=response)
    except TypeError:
        gated = GatedRepoError("Access to dataset gaia-benchmark/GAIA is restricted")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", FakeHub(gaia_root, gated).snapshot_download)
    assert "refused GAIA to this HF_TOKEN's account: accept the terms at" in _error(None)
