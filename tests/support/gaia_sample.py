"""A small GAIA-shaped dataset of our own making (the real one is gated and may not be redistributed): six tasks
over the three levels, four with attached files of the kinds GAIA has (a text note, a spreadsheet, a CSV table, a
PDF, a Word letter), written in the hub's layout (``2023/<split>/metadata.jsonl`` or ``metadata.parquet`` and the
files beside it).

What the ``mock:gaia`` agent answers, and so what a run of it scores (the answers are chosen to exercise each tool
and each branch of the scorer):

- ``l1-calc`` (level 1, no file): the calculator gives 84: right (a number);
- ``l1-note`` (level 1, ``.txt``): the note's last word ``heron.``: right (a string: punctuation ignored);
- ``l2-sales`` (level 2, ``.xlsx``): Python sums the cells: 300.0: right (a number);
- ``l2-cities`` (level 2, ``.csv``): the populations' sum: wrong (a list is asked for);
- ``l3-report`` (level 3, ``.pdf``): the sum 2023 + 7: wrong;
- ``l3-letter`` (level 3, ``.docx``): the letter's last word ``Babbage``: wrong.

Accuracy 0.5: level 1 1.0, level 2 0.5, level 3 0.0.
"""

from __future__ import annotations

import json
from pathlib import Path

TASKS = [
    {"task_id": "l1-calc", "Question": "What is 12 * (3 + 4)?", "Level": 1, "Final answer": "84", "file_name": ""},
    {"task_id": "l1-note", "Question": "What is the code word written in the attached note?", "Level": 1,
     "Final answer": "heron", "file_name": "l1-note.txt"},
    {"task_id": "l2-sales", "Question": "What were the shop's total sales in USD, according to the attached "
                                        "spreadsheet?", "Level": 2, "Final answer": "300", "file_name": "l2-sales.xlsx"},
    {"task_id": "l2-cities", "Question": "Which cities of the attached table have more than a million inhabitants? "
                                         "Give them in the table's order, comma separated.", "Level": 2,
     "Final answer": "Paris, Rome", "file_name": "l2-cities.csv"},
    {"task_id": "l3-report", "Question": "How many pages does the attached report have?", "Level": 3,
     "Final answer": "1", "file_name": "l3-report.pdf"},
    {"task_id": "l3-letter", "Question": "Who signed the attached letter?", "Level": 3,
     "Final answer": "Charles Babbage", "file_name": "l3-letter.docx"},
]
MOCK_ACCURACY = {"overall": 0.5, "level1": 1.0, "level2": 0.5, "level3": 0.0}
MOCK_ANSWERS = {"l1-calc": "84", "l1-note": "heron.", "l2-sales": "300.0", "l2-cities": "6246085",
                "l3-report": "2030", "l3-letter": "Babbage"}
SALES = [("North", 120), ("South", 80.5), ("East", 99.5)]
CITIES = "city,population\nLyon,522250\nParis,2102650\nMarseille,873076\nRome,2748109\n"
NOTE = "Remember the code word: heron."
REPORT = ["Annual report 2023", "There were 7 incidents."]
LETTER = ["Dear Ada,", "The engine is ready.", "Charles Babbage"]


def minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF showing ``lines`` in Helvetica (hand-built: catalog, pages, page, content stream, font, and a
    cross-reference table with the objects' byte offsets)."""
    text = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
    content = f"BT /F1 12 Tf 72 720 Td {text} ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def write_files(folder: Path) -> None:
    """The attached files of :data:`TASKS` in ``folder``."""
    import docx
    import openpyxl

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "l1-note.txt").write_text(NOTE, encoding="utf-8")
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Sales"
    sheet.append(["Region", "Sales"])
    for row in SALES:
        sheet.append(list(row))
    workbook.save(folder / "l2-sales.xlsx")
    (folder / "l2-cities.csv").write_text(CITIES, encoding="utf-8")
    (folder / "l3-report.pdf").write_bytes(minimal_pdf(REPORT))
    document = docx.Document()
    for line in LETTER:
        document.add_paragraph(line)
    document.save(str(folder / "l3-letter.docx"))


def write_sample(root: Path, split: str = "validation", metadata: str = "jsonl") -> Path:
    """The sample in the hub's layout under ``root`` (``root/2023/<split>/``); returns ``root``.

    Args:
        split: ``validation`` (answers given) or ``test`` (every ``Final answer`` is ``"?"``, as on the hub).
        metadata: ``jsonl`` (the layout until October 2025) or ``parquet`` (the hub's layout since).
    """
    folder = root / "2023" / split
    write_files(folder)
    rows = [{**task, "Final answer": task["Final answer"] if split == "validation" else "?",
             "Annotator Metadata": {"Steps": "made up for the tests", "Tools": "none"}} for task in TASKS]
    if metadata == "jsonl":
        (folder / "metadata.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for row in rows:
            row["file_path"] = f"2023/{split}/{row['file_name']}" if row["file_name"] else ""
        pq.write_table(pa.Table.from_pylist(rows), folder / "metadata.parquet")
    return root
