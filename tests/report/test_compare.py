"""compare: alignment on (task, repeat), the statistics against a hand computation and scipy run directly, partial
runs, refusals and warnings, the CLI and its files."""

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from runner.cli import main
from runner.core.errors import CompareError
from runner.report import compare_runs, render_comparison
from runner.storage import ResultStore
from tests.support.runs import make_record, write_run

# acc per task over repeats 0 and 1; t0-t2 easy, t3-t5 hard
ACC_A = {"t0": (1, 1), "t1": (1, 0), "t2": (1, 1), "t3": (0, 0), "t4": (1, 0), "t5": (0, 1)}
ACC_B = {"t0": (1, 1), "t1": (1, 1), "t2": (0, 1), "t3": (1, 1), "t4": (1, 1), "t5": (1, 1)}
F1_A = {"t0": (0.5, 0.7), "t1": (0.2, 0.4), "t2": (0.9, 0.9), "t3": (0.1, 0.3), "t4": (0.6, 0.2), "t5": (0.3, 0.3)}
F1_B = {"t0": (0.6, 0.9), "t1": (0.5, 0.5), "t2": (0.8, 0.9), "t3": (0.6, 0.7), "t4": (0.9, 0.8), "t5": (0.4, 0.6)}


def records(acc, f1):
    for task, values in acc.items():
        category = "easy" if task in ("t0", "t1", "t2") else "hard"
        for repeat, value in enumerate(values):
            yield make_record(task, repeat, {"acc": float(value), "f1": f1[task][repeat]}, category)


@pytest.fixture
def runs(tmp_path):
    a = write_run(str(tmp_path / "base"), records(ACC_A, F1_A), n_tasks=6, n_repeats=2, solution="a")
    b = write_run(str(tmp_path / "new"), records(ACC_B, F1_B), n_tasks=6, n_repeats=2, solution="b")
    return a, b


def row(comparison, metric, category=None):
    return next(r for r in comparison.rows if r.metric == metric and r.category == category)


def test_means_differences_and_mcnemar_by_hand(runs):
    comparison = compare_runs(runs)
    assert comparison.aligned == 12 and comparison.baseline == "base" and not comparison.warnings
    acc = row(comparison, "acc")
    assert (acc.n, acc.n_tasks, acc.excluded) == (12, 6, 0)
    assert [e.mean for e in acc.runs] == [pytest.approx(7 / 12), pytest.approx(11 / 12)]
    diff = acc.differences[0]
    assert diff.run == "new" and diff.diff == pytest.approx(4 / 12) and diff.test == "mcnemar-exact"
    # discordant items: right in the baseline only t2 r0; in the new run only t1 r1, t3 r0, t3 r1, t4 r1, t5 r0
    assert (diff.only_baseline, diff.only_run) == (1, 5)
    assert diff.p_value == pytest.approx(stats.binomtest(5, 6, 0.5).pvalue) == pytest.approx(14 / 64)
    assert row(comparison, "acc", "easy").differences[0].diff == pytest.approx(0.0)
    assert row(comparison, "acc", "hard").differences[0].diff == pytest.approx(4 / 6)
    assert [r.category for r in comparison.rows] == [None, "easy", "hard", None, "easy", "hard"]


def test_wilcoxon_runs_on_per_task_mean_differences(runs):
    f1 = row(compare_runs(runs), "f1").differences[0]
    per_task = [round(np.mean(F1_B[t]) - np.mean(F1_A[t]), 12) for t in F1_A]
    assert f1.test == "wilcoxon"
    assert f1.p_value == pytest.approx(stats.wilcoxon(per_task).pvalue)
    assert f1.diff == pytest.approx(np.mean(per_task))


def test_bootstrap_intervals_agree_with_scipy_within_monte_carlo_error(tmp_path):
    """60 tasks x 2 repeats: the task-clustered interval is scipy's percentile bootstrap of the per-task means
    (every task has 2 items), here drawn again with 20,000 resamples and another seed."""
    rng = random.Random(7)
    acc_a = {f"t{i:02}": (rng.random() < 0.55, rng.random() < 0.55) for i in range(60)}
    acc_b = {t: (rng.random() < 0.75, rng.random() < 0.7) for t in acc_a}
    zeros = {t: (0.0, 0.0) for t in acc_a}
    a = write_run(str(tmp_path / "a"), records(acc_a, zeros), n_tasks=60, n_repeats=2)
    b = write_run(str(tmp_path / "b"), records(acc_b, zeros), n_tasks=60, n_repeats=2, solution="b")
    acc = row(compare_runs([a, b], seed=3), "acc")

    def scipy_interval(per_task):
        result = stats.bootstrap((np.asarray(per_task),), np.mean, method="percentile", n_resamples=20000,
                                 rng=np.random.default_rng(12345))
        return result.confidence_interval.low, result.confidence_interval.high

    per_task_a = [np.mean(acc_a[t]) for t in acc_a]
    per_task_diff = [np.mean(acc_b[t]) - np.mean(acc_a[t]) for t in acc_a]
    assert acc.runs[0].ci == pytest.approx(scipy_interval(per_task_a), abs=0.02)
    assert acc.differences[0].ci == pytest.approx(scipy_interval(per_task_diff), abs=0.02)
    assert acc.differences[0].significant == (acc.differences[0].ci[0] > 0 or acc.differences[0].ci[1] < 0)


def test_the_same_seed_gives_the_same_numbers(runs):
    first, second = (compare_runs(runs, seed=11).model_dump(exclude={"created_at"}) for _ in range(2))
    assert first == second


def test_partial_runs_compare_on_the_items_they_share(tmp_path):
    base = write_run(str(tmp_path / "base"), records(ACC_A, F1_A), n_tasks=6, n_repeats=2)
    kept = [r for r in records(ACC_B, F1_B) if (r.task_id, r.repeat) not in {("t5", 0), ("t5", 1), ("t4", 1)}]
    extra = [make_record("t6", 0, {"acc": 1.0, "f1": 1.0}, "hard"),
             make_record("t0", 2, {"acc": 0.0, "f1": 0.0}, "easy")]  # repeat 2: outside a 2-repeat plan
    # in the new run, t0 r1's f1 metric raised: the item stays in acc and leaves f1
    kept[1] = make_record("t0", 1, {"acc": 1.0, "f1": RuntimeError("judge down")}, "easy")
    new = write_run(str(tmp_path / "new"), kept + extra, n_tasks=7, n_repeats=2, solution="b")
    comparison = compare_runs([base, new])
    assert comparison.aligned == 9
    runs = {run.label: run for run in comparison.runs}
    assert (runs["base"].records, runs["base"].left_out) == (12, 3)
    assert runs["base"].left_out_because == {"absent from new": 3}
    assert (runs["new"].records, runs["new"].left_out, runs["new"].left_out_because) == (10, 1, {"absent from base": 1})
    assert runs["new"].outside_plan == 1
    assert (row(comparison, "acc").n, row(comparison, "f1").n, row(comparison, "f1").excluded) == (9, 8, 1)


def test_a_value_no_mean_can_use_leaves_its_item_out_of_that_metric_only(tmp_path, cli):
    """An integer no float can hold (``abs(int(answer) - gold)`` for 400 nines) stopped compare with an
    ``OverflowError``; a neighbour, NaN, went into the means as NaN. Both leave their item out of that metric, counted
    in ``excluded``, as a metric that raised does; the item stays in the others."""
    base = write_run(str(tmp_path / "base"), records(ACC_A, F1_A), n_tasks=6, n_repeats=2)
    changed = {("t0", 1): int("9" * 400), ("t3", 0): float("nan")}
    new = write_run(str(tmp_path / "new"), [
        make_record(r.task_id, r.repeat, {"acc": r.metrics[0].result, "f1": changed[(r.task_id, r.repeat)]},
                    r.tags["category"]) if (r.task_id, r.repeat) in changed else r
        for r in records(ACC_B, F1_B)], n_tasks=6, n_repeats=2, solution="b")
    comparison = compare_runs([base, new])
    assert (row(comparison, "acc").n, row(comparison, "f1").n, row(comparison, "f1").excluded) == (12, 10, 2)
    kept = [(t, r) for t in F1_A for r in (0, 1) if (t, r) not in changed]
    assert row(comparison, "f1").runs[1].mean == pytest.approx(np.mean([F1_B[t][r] for t, r in kept]))
    result = cli("compare", base.uri, new.uri, "--out", str(tmp_path / "out"), "--html")
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "out" / "compare.json").read_text())["rows"]
    assert next(r for r in rows if r["metric"] == "f1" and r["category"] is None)["excluded"] == 2


def test_three_runs_are_each_compared_with_the_first(tmp_path, runs):
    third = write_run(str(tmp_path / "third"), records(ACC_A, F1_A), n_tasks=6, n_repeats=2, solution="c")
    comparison = compare_runs([*runs, third])
    assert comparison.notes == ["2 runs are each compared with the first, base (the baseline)"]
    acc = row(comparison, "acc")
    assert [d.run for d in acc.differences] == ["new", "third"]
    assert acc.differences[1].diff == 0.0 and acc.differences[1].p_value == 1.0 and not acc.differences[1].significant


def test_runs_of_other_benchmarks_or_versions_are_refused(tmp_path, runs):
    other = write_run(str(tmp_path / "other"), records(ACC_A, F1_A), benchmark="toy")
    later = write_run(str(tmp_path / "later"), records(ACC_A, F1_A), version="2")
    with pytest.raises(CompareError, match="cannot compare base .demo version 1. with other .toy version 1.: they "
                                           "are runs of different benchmarks; compare runs of one benchmark version"):
        compare_runs([runs[0], other])
    with pytest.raises(CompareError, match="version 2.: their items or their scoring differ"):
        compare_runs([runs[0], later])
    with pytest.raises(CompareError, match="two runs or more"):
        compare_runs(runs[:1])


def test_a_difference_beyond_solution_and_model_is_warned(tmp_path, runs):
    judged = write_run(str(tmp_path / "judged"), records(ACC_B, F1_B), n_repeats=2, solution="z", model="mock",
                       fingerprint_extra={"judge_model": "openai:gpt-4o"})
    comparison = compare_runs([runs[0], judged])
    assert comparison.warnings == ["judged differs from base in more than the solution and model (judge_model: None "
                                   "-> 'openai:gpt-4o')"]
    assert not compare_runs(runs).warnings  # solution a vs b only
    hurried = write_run(str(tmp_path / "hurried"), records(ACC_B, F1_B), n_repeats=2, solution="b")
    manifest = hurried.read_manifest()
    hurried.write_manifest(manifest.model_copy(update={"config": {**manifest.config, "timeout": 5.0}}))
    assert compare_runs([runs[0], hurried]).warnings == [
        "hurried differs from base in more than the solution and model (timeout: None -> 5.0)"]


def test_cli_prints_the_table_and_writes_compare_json_and_html(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", runs[0].uri, runs[1].uri, "--out", str(out), "--html", "--seed", "5"]) == 0
    printed = capsys.readouterr().out
    assert "baseline base" in printed and "- base" in printed and f"wrote {out}/compare.json" in printed
    stored = json.loads((out / "compare.json").read_text())
    assert stored["rows"][0]["differences"][0]["p_value"] == pytest.approx(14 / 64) and stored["seed"] == 5
    page = (out / "compare.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "new − base" in page


def test_cli_refuses_different_benchmarks_in_one_line(tmp_path, runs, capsys):
    other = write_run(str(tmp_path / "other"), records(ACC_A, F1_A), benchmark="toy")
    assert main(["compare", runs[0].uri, other.uri, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot compare base (demo version 1) with other (toy version 1)")
    assert err.count("\n") == 1 and not (tmp_path / "compare.json").exists()


def test_the_command_line_refuses_with_exit_status_2(cli, tmp_path, runs, monkeypatch):
    """``python -m runner compare`` exits 2 with one line on stderr and writes nothing."""
    monkeypatch.chdir(tmp_path)
    other = write_run(str(tmp_path / "other"), records(ACC_A, F1_A), version="2")
    cli("compare", runs[0].uri, other.uri).error_line("compare runs of one benchmark version")
    assert not (tmp_path / "compare.json").exists()


def test_runs_and_output_on_s3(s3_bucket, runs):
    copies = [write_run(f"s3://{s3_bucket}/{name}", store.iter_records(), n_tasks=6, n_repeats=2, solution=name)
              for name, store in zip(("a", "b"), runs)]
    assert main(["compare", *(c.uri for c in copies), "--out", f"s3://{s3_bucket}/cmp", "--json"]) == 0
    stored = json.loads(ResultStore(f"s3://{s3_bucket}/cmp").read_file("compare.json"))
    assert stored["aligned"] == 12 and stored["runs"][0]["uri"] == f"s3://{s3_bucket}/a"


def test_the_table_colours_a_difference_only_where_its_interval_excludes_zero(runs):
    buffer = io.StringIO()
    render_comparison(compare_runs(runs), Console(file=buffer, force_terminal=True, color_system="standard",
                                                  width=160))
    lines = {}  # first column -> the first such line (acc's rows come before f1's)
    for line in buffer.getvalue().splitlines():
        if line.count("│") > 3:
            lines.setdefault(line.split("│")[1].strip(), line)
    green = "\x1b[32m"
    # hard: per-task differences 1, 0.5, 0.5 -> the interval is above 0; easy: 0, 0.5, -0.5 -> it holds 0
    assert green in lines["hard"] and "+0.667 [0.500, 1.000]" in lines["hard"]
    assert green not in lines["easy"] and "\x1b[31m" not in lines["easy"]
    narrow = io.StringIO()
    render_comparison(compare_runs(runs), Console(file=narrow, width=80))
    assert all(len(line) <= 80 for line in narrow.getvalue().splitlines() if "│" in line)
    assert "[0.500, 1.000]" in narrow.getvalue()  # two lines a cell, nothing cut


def test_the_docs_example_hasty_against_the_calculator(tmp_path, monkeypatch, capsys):
    """The README's compare example, in process: the calculator against docs/examples/hasty.py on the toy benchmark."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
    for name, solution in (("toy-calculator", "calculator"), ("toy-hasty", "hasty:hasty")):
        assert main(["-b", "toy", "-s", solution, "--sequential", "--storage", str(tmp_path / name)]) == 0
    assert main(["compare", str(tmp_path / "toy-calculator"), str(tmp_path / "toy-hasty"), "--out", str(tmp_path),
                 "--json"]) == 0
    capsys.readouterr()
    rows = {r["category"]: r for r in json.loads((tmp_path / "compare.json").read_text())["rows"]}
    assert rows[None]["runs"][1]["mean"] == pytest.approx(0.57)
    assert rows[None]["differences"][0]["ci"] == pytest.approx([-0.53, -0.34], abs=0.02)
    assert rows["subtraction"]["differences"][0]["p_value"] == pytest.approx(2 / 1024)
    assert rows["division"]["differences"][0]["diff"] == 0 and not rows["division"]["differences"][0]["significant"]
