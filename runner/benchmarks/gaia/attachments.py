"""A GAIA task's attached file: its local path on whichever machine runs the task, and its text where a well-kept
library reads the format.

Readers (the ``gaia`` extra installs the libraries: ``pip install 'ray-bench-runner[gaia]'``):

- text formats (``.txt``, ``.csv``, ``.json``, ``.jsonld``, ``.xml``, ``.py``, ``.md``, ``.html``, ``.pdb``...):
  the file decoded as UTF-8 (undecodable bytes replaced);
- ``.xlsx``/``.xlsm``: every sheet's cells by rows (openpyxl; formulas as their last computed values), one
  ``## sheet <name>`` block per sheet, cells separated by commas as CSV writes them;
- ``.pdf``: every page's text (pypdf), pages marked ``## page <n>``;
- ``.docx``: paragraphs, then tables row by row (python-docx);
- ``.pptx``: each slide's text frames and tables (python-pptx), slides marked ``## slide <n>``;
- ``.zip``: the names and sizes of its members (the standard library); their content is for a tool that unpacks.

Images, audio, video and other binary formats have no text here: a solution gets their path (a model that reads
images or audio can be given the file). Without the library of a format, the text is ``None`` and the note says
which package to install.
"""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from runner.benchmarks.gaia.data import INSTALL_HINT, SplitLocation, local_copy

TEXT_SUFFIXES = frozenset({
    ".txt", ".csv", ".tsv", ".json", ".jsonl", ".jsonld", ".xml", ".py", ".md", ".html", ".htm", ".yaml", ".yml",
    ".sql", ".log", ".pdb", ".tex", ".js", ".css", ".ini", ".cfg", ".toml", ".srt",
})
"""Suffixes read as UTF-8 text."""

MEDIA_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".svg",
    ".mp3", ".wav", ".m4a", ".flac", ".ogg", ".mp4", ".mov", ".avi", ".mkv", ".webm",
})
"""Image, audio and video suffixes: no text reader, the path only."""


@dataclass(frozen=True)
class AttachmentText:
    """What a reader made of a file.

    Args:
        text: the file's text, or ``None`` when there is no reader for it here.
        reader: the library or method used (``utf-8``, ``openpyxl``, ``pypdf``, ``python-docx``, ``python-pptx``,
            ``zipfile``) or ``none``.
        note: why there is no text (or what the text leaves out), for the solution and the model; ``None`` if all
            went well.
    """

    text: str | None
    reader: str
    note: str | None = None


def _missing(package: str, suffix: str) -> AttachmentText:
    return AttachmentText(None, "none", f"reading {suffix} files as text needs {package} ({INSTALL_HINT}); the "
                                        "file is available by its path")


def _csv_line(values: list[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["" if value is None else value for value in values])
    return buffer.getvalue()


def _xlsx(path: Path) -> AttachmentText:
    try:
        import openpyxl
    except ImportError:
        return _missing("openpyxl", path.suffix)
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        blocks = []
        for sheet in workbook.worksheets:
            rows = [_csv_line(list(row)) for row in sheet.iter_rows(values_only=True)]
            blocks.append(f"## sheet {sheet.title}\n" + "\n".join(rows))
    finally:
        workbook.close()
    return AttachmentText("\n\n".join(blocks), "openpyxl",
                          "cell values only (formulas as their last computed values; no formatting or colours)")


def _pdf(path: Path) -> AttachmentText:
    try:
        import pypdf
    except ImportError:
        return _missing("pypdf", path.suffix)
    reader = pypdf.PdfReader(str(path))
    pages = [f"## page {number}\n{(page.extract_text() or '').strip()}"
             for number, page in enumerate(reader.pages, start=1)]
    return AttachmentText("\n\n".join(pages), "pypdf")


def _docx(path: Path) -> AttachmentText:
    try:
        import docx
    except ImportError:
        return _missing("python-docx", path.suffix)
    document = docx.Document(str(path))
    lines = [paragraph.text for paragraph in document.paragraphs]
    for number, table in enumerate(document.tables, start=1):
        lines.append(f"## table {number}")
        lines.extend(_csv_line([cell.text for cell in row.cells]) for row in table.rows)
    return AttachmentText("\n".join(lines), "python-docx")


def _pptx(path: Path) -> AttachmentText:
    try:
        import pptx
    except ImportError:
        return _missing("python-pptx", path.suffix)
    presentation = pptx.Presentation(str(path))
    blocks = []
    for number, slide in enumerate(presentation.slides, start=1):
        lines = [f"## slide {number}"]
        for shape in slide.shapes:
            if shape.has_text_frame:
                lines.extend(p.text for p in shape.text_frame.paragraphs if p.text)
            if getattr(shape, "has_table", False) and shape.has_table:
                lines.extend(_csv_line([cell.text for cell in row.cells]) for row in shape.table.rows)
        blocks.append("\n".join(lines))
    return AttachmentText("\n\n".join(blocks), "python-pptx")


def _zip(path: Path) -> AttachmentText:
    with zipfile.ZipFile(path) as archive:
        lines = [f"{info.filename}\t{info.file_size} bytes" for info in archive.infolist()]
    return AttachmentText("\n".join(lines), "zipfile", "the archive's member names and sizes; unpack it to read them")


_READERS = {".xlsx": _xlsx, ".xlsm": _xlsx, ".pdf": _pdf, ".docx": _docx, ".pptx": _pptx, ".zip": _zip}


def read_text(path: Path) -> AttachmentText:
    """The text of the file at ``path`` (see the module docstring for the readers).

    A file the reader of its format cannot parse (damaged, or not what its suffix says) gives no text and a note
    saying why; this function raises only for a file that cannot be opened.

    Raises:
        OSError: the file cannot be opened.
    """
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return AttachmentText(path.read_bytes().decode("utf-8", errors="replace"), "utf-8")
    reader = _READERS.get(suffix)
    if reader is None:
        kind = "an image, audio or video file" if suffix in MEDIA_SUFFIXES else f"a {suffix or 'suffix-less'} file"
        return AttachmentText(None, "none", f"{kind}: no text reader here; the file is available by its path")
    try:
        return reader(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file must not fail the task: the solution hears why
        return AttachmentText(None, "none", f"{reader.__name__.lstrip('_')} reader could not read {path.name} "
                                            f"({type(exc).__name__}: {exc}); the file is available by its path")


@dataclass
class Attachment:
    """A task's attached file, resolved where the task runs.

    Args:
        name: the file's name in the split folder (GAIA's ``file_name``).
        location: the split folder it lives in.

    A task carries it in ``metadata["attachment"]``; copies of the task (one per repeat, one per Ray worker) each
    resolve and read it at most once.
    """

    name: str
    location: SplitLocation
    _text: AttachmentText | None = field(default=None, repr=False, compare=False)

    @property
    def suffix(self) -> str:
        """The file's suffix in lower case, without the dot (``"xlsx"``), or ``""``."""
        return Path(self.name).suffix.lower().lstrip(".")

    def path(self) -> Path:
        """The file's local path on this machine (fetched first from a remote ``--data-dir`` or from the hub: see
        :func:`runner.benchmarks.gaia.data.local_copy`).

        Raises:
            FileNotFoundError: the file cannot be found or fetched.
        """
        return local_copy(self.name, self.location)

    def text(self) -> AttachmentText:
        """The file's text (:func:`read_text`), read once.

        Raises:
            FileNotFoundError, OSError: the file cannot be found, fetched or opened.
        """
        if self._text is None:
            self._text = read_text(self.path())
        return self._text
