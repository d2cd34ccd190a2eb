"""report.html: valid HTML5, self-contained, task text escaped, the numbers of summary.json, bounded item detail."""

import json
import re
import shutil

import html5lib
import pytest

from runner.cli import main
from runner.core.record import ErrorInfo, Timings, TokenUsage
from runner.report import build_report, write_html_report
from runner.report.items import item_table
from runner.report.scope import PlanScope
from tests.support.runs import make_record, write_run

ATTACK = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
NS = "{http://www.w3.org/1999/xhtml}"


def run_records():
    for index in range(12):
        for repeat in range(2):
            value = float((index + repeat) % 3 != 0)
            fields = {"input": {"question": f"q{index}", "html": ATTACK}, "output": ATTACK,
                      "trajectory": [{"tool": "t", "result": ATTACK}],
                      "timings": Timings(solution_s=0.1 * (index + 1), total_s=0.1 * (index + 1) + 0.05),
                      "usage": {"openai:gpt-4o": TokenUsage(input_tokens=100 + index, output_tokens=10, calls=1)}}
            if index == 11 and repeat == 1:
                fields.update(status="error", error=ErrorInfo(type="ValueError", message=ATTACK, traceback=ATTACK))
            category = ATTACK if index == 0 else ("easy" if index % 2 else "hard")
            yield make_record(f"task-{index}", repeat, {"acc": value, "f1": 0.25 * (index % 5)}, category, **fields)


@pytest.fixture
def page(tmp_path):
    store = write_run(str(tmp_path / "run"), run_records(), n_tasks=12, n_repeats=2, model="openai:gpt-4o")
    summary = build_report(store)
    uri = write_html_report(store, summary)
    assert uri == f"{store.uri}/report.html"
    return (tmp_path / "run" / "report.html").read_text(encoding="utf-8"), store


def parse(text):
    """Parse strictly as HTML5: html5lib raises on any parse error."""
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=True).parse(text)


def scripts(document):
    return [(s.get("type"), s.text or "") for s in document.iter(f"{NS}script")]


def test_the_page_parses_as_html5(page):
    document = parse(page[0])
    assert document.find(f"{NS}head/{NS}title").text.startswith("demo")
    assert len(list(document.iter("{http://www.w3.org/2000/svg}svg"))) == 4  # acc, f1 by category; repeats; pass@k


def test_the_page_references_nothing_outside_itself(page):
    document = parse(page[0])
    for element in document.iter():
        for name, value in element.attrib.items():
            if name.rsplit("}", 1)[-1] in ("src", "href", "action", "data", "poster", "srcset"):
                assert value.startswith("#"), (element.tag, name, value)
    assert not [e for e in document.iter(f"{NS}link")]
    assert all(kind in ("application/json", None) for kind, _ in scripts(document))
    styles = " ".join(s.text or "" for s in document.iter(f"{NS}style"))
    assert "@import" not in styles and not re.search(r"url\((?!#)", page[0])
    csp = document.find(f".//{NS}meta[@http-equiv='Content-Security-Policy']").get("content")
    assert csp.startswith("default-src 'none'")


def test_task_text_cannot_run_script_in_the_page(page):
    text = page[0]
    assert "<script>alert" not in text and "<img src=x" not in text
    document = parse(text)
    # four scripts: three JSON data blocks and the page's own code; the task's markup made none
    assert [kind for kind, _ in scripts(document)] == ["application/json"] * 3 + [None]
    assert not list(document.iter(f"{NS}img"))
    data = {s.get("id"): json.loads(s.text) for s in document.iter(f"{NS}script") if s.get("type")}
    detail = data["items-detail"][0]
    assert detail["output"] == ATTACK and json.loads(detail["input"])["html"] == ATTACK
    assert json.loads(detail["trajectory"])[0]["result"] == ATTACK
    assert ATTACK in data["items-data"]["categories"]
    # the category name in the chart is SVG text, escaped by matplotlib
    svg_text = [t.text for t in document.iter("{http://www.w3.org/2000/svg}text") if t.text]
    assert ATTACK in svg_text


def test_the_page_carries_the_numbers_of_summary_json(page):
    text, store = page
    stored = json.loads(store.read_file("summary.json"))
    document = parse(text)
    embedded = json.loads(document.find(f".//{NS}script[@id='summary-data']").text)
    assert embedded == stored
    visible = " ".join(document.find(f"{NS}body").itertext())
    acc = stored["metrics"]["acc"]
    assert f"{acc['mean']:.4f}" in visible and f"{acc['stderr']:.4f}" in visible
    assert f"[{acc['mean'] - 1.959964 * acc['stderr']:.3f}, {acc['mean'] + 1.959964 * acc['stderr']:.3f}]" in visible
    assert f"{stored['by_category']['easy']['acc']['mean']:.3f}" in visible
    p90 = stored["latency"]["solution_s"]["p90"]
    assert p90 == pytest.approx(1.1) and "1.1 s" in visible
    assert f"{stored['pass_at_k']['acc']['2']:.3f}" in visible
    assert "openai:gpt-4o" in visible and f"{stored['tokens_per_item']['openai:gpt-4o']['input_tokens']:.1f}" in visible
    assert "ValueError" in visible  # errors by type
    rows = json.loads(document.find(f".//{NS}script[@id='items-data']").text)["rows"]
    assert len(rows) == stored["completed"] == 24
    assert [r[0] for r in rows[:4]] == ["task-0", "task-0", "task-1", "task-1"]  # task-2 before task-10


def test_item_detail_is_bounded_and_chosen_by_kind(tmp_path):
    """Of 300 items, details go to a sample of the failing ones, the 5 slowest and a sample of all, at most
    4 + 5 + 6; each text field is cut."""
    store = write_run(str(tmp_path / "run"), (
        make_record(f"t{i}", 0, {"acc": float(i % 10 != 0)}, input="x" * 50_000, timings=Timings(solution_s=i / 100))
        for i in range(300)), n_tasks=300)
    table = item_table(store.iter_records(), PlanScope.of(store.read_manifest()), failing=4, slowest=5, sample=6,
                       field_chars=1000)
    assert (table.total, len(table.rows), table.failing) == (300, 300, 30)
    assert 9 <= len(table.details) <= 15
    chosen = {row[0]: table.details[row[7]] for row in table.rows if row[7] >= 0}
    assert {t for t, d in chosen.items() if "slowest" in d["why"]} == {"t295", "t296", "t297", "t298", "t299"}
    failing = [t for t, d in chosen.items() if "failing" in d["why"]]
    assert len(failing) == 4 and all(int(t[1:]) % 10 == 0 for t in failing)
    assert all(len(d["input"]) < 1100 and d["input"].endswith("more characters in the record)")
               for d in chosen.values())
    again = item_table(store.iter_records(), PlanScope.of(store.read_manifest()), failing=4, slowest=5, sample=6)
    assert [r[7] >= 0 for r in again.rows] == [r[7] >= 0 for r in table.rows]  # seeded


def test_a_large_run_gives_a_small_page(tmp_path):
    """2,000 items with 20 kB inputs: the page keeps the detail of ~180 of them, cut to 4,000 characters a field."""
    store = write_run(str(tmp_path / "run"), (
        make_record(f"t{i}", 0, {"acc": float(i % 4 != 0)}, f"c{i % 7}", input="y" * 20_000, output="z" * 20_000)
        for i in range(2000)), n_tasks=2000)
    write_html_report(store, build_report(store))
    size = len(store.read_file("report.html"))
    assert size < 2_000_000


def test_report_html_of_a_partial_run_from_the_command_line(tmp_path, capsys):
    """12 of 20 planned tasks have their records: the page says 24 of 40 items."""
    store = write_run(str(tmp_path / "run"), run_records(), n_tasks=20, n_repeats=2)
    assert main(["report", store.uri, "--html"]) == 0
    assert f"report: {store.uri}/report.html" in capsys.readouterr().out
    document = parse(store.read_file("report.html").decode())
    visible = " ".join(document.find(f"{NS}body").itertext())
    assert "60 % of 40" in visible
    assert json.loads(store.read_file("summary.json"))["missing"] == 16


def test_a_run_with_html_prints_where_its_page_is(tmp_path, cli):
    storage = tmp_path / "run"
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--limit", "4", "--storage", str(storage), "--html")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"report: file://{storage}/report.html"
    visible = " ".join(parse((storage / "report.html").read_text()).find(f"{NS}body").itertext())
    assert "1.000" in visible and "toy" in visible


def test_a_partial_runs_score_says_which_items_it_covers(tmp_path, cli):
    """5 of 100 items have records (the run was stopped): summary.json, the terminal and the page say that the score
    covers those 5 only, the page right beside the score."""
    storage = tmp_path / "run"
    assert cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", str(storage)).returncode == 0
    for folder in sorted((storage / "records").iterdir())[5:]:
        shutil.rmtree(folder)
    result = cli("report", str(storage), "--html")
    assert result.returncode == 0, result.stderr
    note = "95 of 100 items have no record yet: the score and the metrics cover the 5 items done"
    assert json.loads((storage / "summary.json").read_text())["notes"] == [note]
    assert f"note: {note}" in result.stdout.splitlines()
    assert "score 1.000  of 5/100 items" in result.stdout.splitlines()
    main_figure = next(div for div in parse((storage / "report.html").read_text()).iter(f"{NS}div")
                       if div.get("class") == "kpi main")
    visible = " ".join(" ".join(main_figure.itertext()).split())
    assert visible.startswith("score 1.000")
    assert visible.endswith("partial: 95 of 100 items have no record yet; this covers the 5 items done")


def _item_note(tmp_path, name, records):
    store = write_run(str(tmp_path / name), records, n_tasks=4)
    write_html_report(store, build_report(store))
    document = parse((tmp_path / name / "report.html").read_text(encoding="utf-8"))
    [note] = [text for text in (" ".join(p.itertext()) for p in document.iter(f"{NS}p")) if "carry their input" in text]
    return note


def test_the_item_note_calls_items_failing_only_when_they_are(tmp_path):
    """Issue 37: a run with 0 errors whose 20 items scored 0 said "failing items (20 in the run)"."""
    zeros = [make_record(f"t{i}", 0, {"em": 0.0}) for i in range(4)]
    note = _item_note(tmp_path, "zeros", zeros)
    assert "items that scored 0 on a metric (4 in the run; none ended in an error or a timeout)" in note
    assert "failing" not in note
    mixed = [make_record("t0", 0, {"em": 0.0}, status="error", error=ErrorInfo(type="ValueError", message="x")),
             make_record("t1", 0, {"em": 0.0}), make_record("t2", 0, {"em": 1.0}), make_record("t3", 0, {"em": 1.0})]
    assert ("failing items (1 ended in an error or a timeout, 1 more scored 0 on a metric), the slowest, and a sample"
            in _item_note(tmp_path, "mixed", mixed))
    right = [make_record(f"t{i}", 0, {"em": 1.0}) for i in range(4)]
    assert ("the slowest and a sample (no item ended in an error or a timeout, none scored 0 on a metric)"
            in _item_note(tmp_path, "right", right))
