"""Result shards: consolidation by the Compactor, reading shards plus the records no shard holds, every crash point
of a compaction, a merge and a retirement, two drivers compacting at once, and the shards as a Parquet results
format (DuckDB, Polars, pandas)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from runner.core.record import ErrorInfo, TaskRecord
from runner.report import PlanScope, build_report, count_stored
from runner.storage import ResultStore, compaction, shards
from runner.storage.compaction import Compactor
from runner.storage.store import UnusableFiles
from tests.support.runs import make_record, write_run

N = 30
LARGE = "x" * (shards.INLINE_RECORD_BYTES + 10)


class Killed(BaseException):
    """Stands for the process dying at this point: nothing after it runs (a ``BaseException``, which the
    compactor's failure handling does not catch)."""


def _records(n: int = N) -> list[TaskRecord]:
    """``n`` records of tasks t00..; every fifth is an error, t07 is large (its own object stays)."""
    out = []
    for i in range(n):
        failed = i % 5 == 4
        fields = {"status": "error", "error": ErrorInfo(type="ValueError", message="bad")} if failed else {}
        if i == 7:
            fields["output"] = LARGE
        out.append(make_record(f"t{i:02d}", 0, {"exact": 0.0 if failed else 1.0, "f1": i / n},
                               category="even" if i % 2 == 0 else "odd", write_id=f"w{i}", task_index=i,
                               input={"question": i}, **fields))
    return out


@pytest.fixture(params=["local", "s3"])
def uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "run")
    return f"s3://{request.getfixturevalue('s3_bucket')}/runs/one"


def _run(uri: str, records: list[TaskRecord] | None = None) -> ResultStore:
    return write_run(uri, _records() if records is None else records, n_tasks=N)


def _by_item(store: ResultStore, full: bool = True) -> dict[tuple[str, int], TaskRecord]:
    records = list(store.iter_records(full=full))
    by_item = {(r.task_id, r.repeat): r for r in records}
    assert len(by_item) == len(records), "an item was read twice"
    return by_item


def _drive(store: ResultStore, records: list[TaskRecord], **options) -> Compactor:
    """Feed ``records``' items to a compactor the way the driver does (add, then maybe_compact, per acknowledged
    item); not finished."""
    compactor = Compactor(store, headline=("exact",), **options)
    for record in records:
        compactor.add(record.task_id, record.repeat)
        compactor.maybe_compact()
    return compactor


def _objects(store: ResultStore) -> list[str]:
    return [path.rsplit("/", 2)[-2] for path in store.list_record_paths()]


def test_a_compacted_run_reads_exactly_as_before_from_a_few_shards(uri):
    store = _run(uri)
    before = _by_item(store)
    failed, summary = store.failed_items(), build_report(store)
    compactor = _drive(store, _records(), every_records=10)
    compactor.finish()

    assert _objects(store) == ["t07"]             # the large record keeps its object; the others are in shards
    assert len(store.shard_sizes()) == 1          # three shards of 10, merged at the end
    assert compactor.records == N
    assert _by_item(store) == before
    assert store.done_items() == {(f"t{i:02d}", 0) for i in range(N)}
    assert store.failed_items() == failed == {(f"t{i:02d}", 0) for i in range(4, N, 5)}
    again = build_report(store)
    assert again.model_dump(exclude={"runner_version"}) == summary.model_dump(exclude={"runner_version"})
    slim = _by_item(store, full=False)[("t07", 0)]
    assert (slim.output, slim.input, slim.status, slim.metrics) == (None, None, "ok", before[("t07", 0)].metrics)


def test_report_and_resume_read_each_shard_once_and_no_record(s3_bucket, proxied_s3_env, s3_proxy):
    """Counted by the proxy in front of the S3 server: every request the store sends."""
    store = _run(f"s3://{s3_bucket}/runs/counted", [r for r in _records() if r.task_id != "t07"])
    _drive(store, _records(), every_records=10).finish()

    def gets(action) -> list[str]:
        before = len(s3_proxy.requests)
        action()
        return [seen.path.rsplit("/", 2)[-2] for seen in s3_proxy.requests[before:]
                if seen.method == "GET" and "list-type" not in seen.path]

    assert gets(lambda: len(store.done_items()) == N - 1) == ["shards"]
    assert gets(lambda: build_report(store)) == ["counted", "shards"]       # run.json, then the one shard
    assert build_report(store).completed == N - 1


def test_a_compaction_is_due_every_so_many_records_or_seconds(tmp_path):
    from tests.support.clock import FakeClock

    store = _run(str(tmp_path / "run"))
    clock = FakeClock()
    compactor = Compactor(store, every_records=10, every_s=60.0, clock=clock)
    for record in _records()[:13]:
        compactor.add(record.task_id, record.repeat)
        compactor.maybe_compact()
    compactor.wait()
    assert compactor.records == 10             # the first ten; three wait
    clock.now += 59.0
    compactor.maybe_compact()
    compactor.wait()
    assert compactor.records == 10
    clock.now += 1.0                           # the oldest waiting item is 60 s old
    compactor.maybe_compact()
    compactor.wait()
    assert compactor.records == 13
    assert len(store.list_record_paths()) == N - 13 + 1     # t07 is large: its object stays


def test_the_rows_point_to_the_large_records_own_object(tmp_path):
    store = _run(str(tmp_path / "run"))
    _drive(store, _records()).finish()
    [shard] = store.shard_sizes()
    table = shards.read(store, shard)
    by_id = {row["task_id"]: row for row in table.to_pylist()}
    assert by_id["t07"]["record_path"] == "records/t07/0.json"
    assert by_id["t08"]["record_path"] is None
    assert TaskRecord.model_validate_json(by_id["t08"]["record"]) == _records()[8]
    assert len(by_id["t07"]["record"]) < 2000
    assert (by_id["t04"]["status"], by_id["t04"]["error_type"], by_id["t04"]["score"]) == ("error", "ValueError", 0.0)
    assert by_id["t03"]["score_metric"] == "exact"
    assert {m["name"]: m["value"] for m in by_id["t03"]["metrics"]} == {"exact": 1.0, "f1": 0.1}
    assert _by_item(store)[("t07", 0)].output == LARGE
    store.fs.rm_file(store.path("records", "t07", "0.json"))      # from outside the runner
    kept = _by_item(store)[("t07", 0)]
    assert (kept.output, kept.status, len(_by_item(store))) == (None, "ok", N)


def test_a_reader_holds_at_most_one_shard_file_and_one_row_group_of_16_mib(tmp_path):
    """300 records of 60 KiB (inline: under 64 KiB) make 18 MB of record JSON: a compaction cuts its shard at 16 MiB,
    and a merge keeps the row groups as they are, so no row group a reader decodes holds more."""
    import pyarrow.parquet as pq

    records = [make_record(f"t{i:03d}", 0, {"exact": 1.0}, output="y" * 60_000, write_id=f"w{i}")
               for i in range(300)]
    store = write_run(str(tmp_path / "run"), records, n_tasks=300)
    compactor = Compactor(store, every_records=1000)
    for record in records:
        compactor.add(record.task_id, record.repeat)
    compactor.finish()
    assert compactor.written >= 2 and store.list_record_paths() == []
    for path, size in store.shard_sizes().items():
        assert size <= shards.SHARD_BYTES
        parsed = pq.ParquetFile(path)
        for group in range(parsed.num_row_groups):
            texts = parsed.read_row_group(group, columns=["record"]).column("record").to_pylist()
            assert sum(map(len, texts)) <= shards.SHARD_BYTES + 61_000
    assert len(store.done_items()) == 300


# -- the way the engine drives it -------------------------------------------------------------------------------

def test_a_run_driven_by_the_engine_compacts_and_its_resume_runs_nothing(cli, tmp_path, monkeypatch):
    """The engine's calls on a real sequential run of 40 toy tasks (``--shards on`` on a local disk; a compaction
    every 15 items): shards written as the run goes, merged at its end, no record read back."""
    monkeypatch.setattr(compaction, "COMPACT_RECORDS", 15)
    fetch, read_back = Compactor._fetch, []
    monkeypatch.setattr(Compactor, "_fetch", lambda self, paths: read_back.extend(paths) or fetch(self, paths))
    write_shard, shards_written = Compactor._write_shard, []

    def counted(self, data, items):
        shards_written.append(write_shard(self, data, items))
        return shards_written[-1]

    monkeypatch.setattr(Compactor, "_write_shard", counted)
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage),
            "--limit", "40", "--shards", "on"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert read_back == []         # the driver wrote every record itself: none is read back
    store = ResultStore(str(storage))
    assert store.list_record_paths() == []
    assert len(shards_written) == 4          # 15 + 15 + 10, then the merge of the three at the run's end
    assert len(store.shard_sizes()) == 1
    assert sum(1 for _ in store.iter_records()) == 40

    again = cli(*args)
    assert again.returncode == 0
    assert again.event("run.finished")["executed"] == 0
    status = cli("status", str(storage), "--json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["done"] == 40 and json.loads(status.stdout)["complete"] is True


def test_rerun_failed_retires_records_that_shards_hold(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "COMPACT_RECORDS", 7)
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "tests.support.solutions:flaky_calculator", "--sequential",
            "--storage", str(storage), "--limit", "20", "--shards", "on"]
    assert cli(*args, env={"RUNNER_TEST_FAIL": "1"}).returncode == 0
    store = ResultStore(str(storage))
    assert store.list_record_paths() == [] and store.shard_sizes()
    assert len(store.failed_items()) == 2

    rerun = cli(*args, "--rerun-failed")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.event("run.rerun_failed")["retired"] == 2
    assert rerun.event("run.finished")["executed"] == 2
    summary = build_report(store)
    assert (summary.completed, summary.errors) == (20, 0)
    retired = sorted(p.parent.name for p in (storage / "retired").rglob("*.json"))
    assert retired == ["toy-003", "toy-013"]
    assert all(TaskRecord.model_validate_json(p.read_text()).status == "error"
               for p in (storage / "retired").rglob("*.json"))
    assert store.failed_items() == set()


def test_force_deletes_the_shards_too(cli, tmp_path, monkeypatch):
    storage = tmp_path / "run"
    args = ["--benchmark", "toy", "--solution", "calculator", "--sequential", "--storage", str(storage),
            "--limit", "5", "--shards", "on"]
    assert cli(*args).returncode == 0
    old = set(ResultStore(str(storage)).shard_sizes())
    assert cli(*args, "--force").event("run.finished")["executed"] == 5
    assert not old & set(ResultStore(str(storage)).shard_sizes())


def test_an_item_written_but_not_acknowledged_keeps_its_object_for_the_retry(tmp_path):
    """A Ray worker that died after writing its record and before its acknowledgement: the driver retries the item,
    and the retry must find the record (``record_status``). Only acknowledged items are consolidated, so it does."""
    store = _run(str(tmp_path / "run"))
    acknowledged, unacknowledged = _records()[:20], _records()[20:]
    compactor = _drive(store, acknowledged, every_records=10)
    compactor.close()
    for record in unacknowledged:
        assert store.record_status(record.task_id, record.repeat) == record.status
    assert store.done_items() == {(f"t{i:02d}", 0) for i in range(N)}


def test_status_counts_the_rows_of_shards(tmp_path):
    store = _run(str(tmp_path / "run"))
    _drive(store, _records()[:12]).finish()     # the run's end also adopts the other 18
    manifest = store.read_manifest()
    assert count_stored(store, PlanScope.of(manifest)).done == N
    lowered = manifest.model_copy(update={"n_repeats": 1, "benchmark": manifest.benchmark.model_copy(
        update={"n_tasks": 10, "limit": 10, "widest_limit": None})})
    counted = count_stored(store, PlanScope.of(lowered))
    assert (counted.done, dict(counted.outside)) == (10, {"limit": 20})


# -- crash points -------------------------------------------------------------------------------------------------

def _kill_at(monkeypatch, target, name, when=lambda *args, **kwargs: True):
    original = getattr(target, name)

    def dying(*args, **kwargs):
        if when(*args, **kwargs):
            raise Killed(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, dying)


def _assert_whole(store: ResultStore, expected: dict) -> None:
    """Every record once, each as it was written; the report and resume agree."""
    assert _by_item(store) == expected
    assert store.done_items() == {(task, repeat) for task, repeat in expected}
    summary = build_report(store)
    assert (summary.completed, summary.errors) == (len(expected), 6)


def test_killed_after_the_shard_is_written_and_before_any_record_is_deleted(uri, monkeypatch):
    """The listing of shards/ is the manifest: once the shard's conditional write returned, it is listed. So
    "between the shard and the manifest" and "between the manifest and the deletion" are this one point."""
    store = _run(uri)
    expected = _by_item(store)
    with monkeypatch.context() as patch:
        _kill_at(patch, Compactor, "_delete")
        with pytest.raises(Killed):
            _drive(store, _records(), every_records=N + 1).finish()
    assert len(store.shard_sizes()) == 1 and len(store.list_record_paths()) == N   # both: a shard and every object
    _assert_whole(store, expected)
    assert store.failed_items() == {(f"t{i:02d}", 0) for i in range(4, N, 5)}

    resumed = Compactor(store)        # the next run's end deletes what the shard holds, keeps the large one
    resumed.finish()
    assert _objects(store) == ["t07"]
    _assert_whole(store, expected)


def test_killed_while_deleting_the_records_of_a_durable_shard(uri, monkeypatch):
    store = _run(uri)
    expected = _by_item(store)
    delete = Compactor._delete

    def half(compactor, paths):
        delete(compactor, paths[: len(paths) // 2])
        raise Killed("rm")

    with monkeypatch.context() as patch:
        patch.setattr(Compactor, "_delete", half)
        with pytest.raises(Killed):
            _drive(store, _records(), every_records=N + 1).finish()
    assert 0 < len(store.list_record_paths()) < N
    _assert_whole(store, expected)
    Compactor(store).finish()
    assert _objects(store) == ["t07"]
    _assert_whole(store, expected)


def test_killed_before_the_shard_is_durable_loses_nothing(tmp_path, monkeypatch):
    """A local write killed mid-way leaves a temp file (``.<name>.<uuid>.tmp``), never a shard; on S3 an
    interrupted upload is not an object at all. And a file cut short under a shard's name (a store that is not
    atomic, a copy from outside) is named by the report and not counted: its records are still objects."""
    store = _run(str(tmp_path / "run"))
    expected = _by_item(store)
    with monkeypatch.context() as patch:
        _kill_at(patch, type(store), "create", lambda self, path, data: "/shards/" in path)
        with pytest.raises(Killed):
            _drive(store, _records(), every_records=N + 1).finish()
    folder = Path(store.path(shards.SHARDS))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".0a1b.parquet.5f2e.tmp").write_bytes(b"PAR1\x00\x00")
    good = _by_item(store)
    assert good == expected
    (folder / f"{'e' * 40}.parquet").write_bytes(b"PAR1 cut short")
    left_out = UnusableFiles()
    assert {(r.task_id, r.repeat) for r in store.iter_records(left_out)} == set(expected)
    assert len(left_out.unreadable_shards) == 1
    summary = build_report(store)
    assert (summary.completed, summary.unreadable_shards) == (N, 1)
    assert any("not result shards" in note for note in summary.notes)
    Compactor(store).finish()                  # the next run consolidates them
    assert _objects(store) == ["t07"]
    assert _by_item(store) == expected


def test_two_drivers_compacting_the_same_records_at_once_count_each_once(uri):
    """A driver that lost its lease and the one that took over both consolidate (overlapping) records."""
    store = _run(uri)
    expected = _by_item(store)
    records = _records()
    other = ResultStore(uri)
    barrier = threading.Barrier(2)

    def drive(on: ResultStore, part: list[TaskRecord]) -> None:
        barrier.wait()
        _drive(on, part, every_records=7).finish()

    threads = [threading.Thread(target=drive, args=(store, records[:20])),
               threading.Thread(target=drive, args=(other, records[10:]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _assert_whole(store, expected)
    assert _objects(store) == ["t07"]
    Compactor(store).finish()                   # merges what the two left
    assert len(store.shard_sizes()) == 1
    _assert_whole(store, expected)


def test_killed_between_a_merged_shard_and_the_deletion_of_its_parts(uri, monkeypatch):
    store = _run(uri)
    expected = _by_item(store)
    with monkeypatch.context() as patch:
        _kill_at(patch, Compactor, "_delete", lambda self, paths: any("/shards/" in path for path in paths))
        with pytest.raises(Killed):
            _drive(store, _records(), every_records=10).finish()
    assert len(store.shard_sizes()) == 4         # three parts and the merged one: each row twice
    _assert_whole(store, expected)
    Compactor(store).finish()
    assert len(store.shard_sizes()) == 1
    _assert_whole(store, expected)


def test_a_report_during_a_compaction_and_a_merge_sees_every_record_once(uri):
    """A reader lists, then a compaction moves records into a new shard and a merge replaces the listed shards
    before the reader reads them: the records and shards it listed are gone, and it finds them in the new ones."""
    from runner.storage.reading import Scan

    store = _run(uri)
    _drive(store, _records()[:20], every_records=10).wait()          # two shards; ten records still objects
    scan = Scan(store, ("status",))
    assert (len(scan.shards), len(scan.objects)) == (2, N - 20 + 1)
    Compactor(store).finish()                                          # consolidates the ten, merges all three
    assert len(store.shard_sizes()) == 1
    found = [stored.item for stored in scan]
    assert sorted(found) == [(f"t{i:02d}", 0) for i in range(N)]


def test_a_retirement_killed_midway_leaves_each_item_failed_or_retired(uri, monkeypatch):
    store = _run(uri)
    _drive(store, _records(), every_records=10).finish()
    failed = store.failed_items()
    with monkeypatch.context() as patch:
        _kill_at(patch, compaction, "write_shard")      # the copies are written, no shard rewritten yet
        with pytest.raises(Killed):
            store.retire(failed)
    assert store.failed_items() == failed
    assert len(store.done_items()) == N
    store.retire(failed)
    assert store.failed_items() == set()
    assert store.done_items() == {(f"t{i:02d}", 0) for i in range(N)} - failed
    retired = store.fs.find(store.path("retired"))
    assert len(retired) == 2 * len(failed)      # one copy per attempt at retiring: the audit trail keeps both


def test_a_compaction_that_fails_loses_nothing_and_is_tried_again(tmp_path, monkeypatch, capsys):
    store = _run(str(tmp_path / "run"))
    expected = _by_item(store)
    compactor = Compactor(store, every_records=10)
    with monkeypatch.context() as patch:
        original = type(store).create

        def failing(self, path, data):
            if "/shards/" in path:
                raise OSError(5, "Input/output error")
            return original(self, path, data)

        patch.setattr(type(store), "create", failing)
        for record in _records():
            compactor.add(record.task_id, record.repeat)
            compactor.maybe_compact()
        compactor.wait()
        assert store.shard_sizes() == {}
    assert "store.compaction_failed" in capsys.readouterr().out
    compactor.finish()
    assert _objects(store) == ["t07"]
    assert _by_item(store) == expected


# -- Parquet for users ----------------------------------------------------------------------------------------------

def test_text_and_integers_a_store_cannot_take_as_they_are_survive_a_shard(tmp_path):
    """The issue's values in a shard: text with half of a surrogate pair (pyarrow refuses it in a string column) and
    an integer no float can hold (the ``value`` column is a float64), in the output, the trajectory's tool arguments
    and a metric. The row keeps the record exactly; the integer's digits are its ``label``; the report from the
    shard is the report from the records."""
    nines = int("9" * 400)
    records = [make_record("t0", 0, {"exact": 0.0, "distance": nines - 49}, output="\ud835" + "9" * 400,
                           trajectory=[{"tool": "echo", "arguments": {"text": "\ud835"}}], write_id="w0",
                           task_index=0),
               make_record("t1", 0, {"exact": 1.0, "distance": 0}, output="1", write_id="w1", task_index=1)]
    store = write_run(str(tmp_path / "run"), records, n_tasks=2)
    before = build_report(store)
    _drive(store, records).finish()
    assert store.list_record_paths() == [] and len(store.shard_sizes()) == 1
    (shard,) = (tmp_path / "run" / "shards").glob("*.parquet")
    import pyarrow.parquet as pq

    rows = {row["task_id"]: row for row in pq.read_table(shard).to_pylist()}
    assert rows["t0"]["metrics"][1] == {"name": "distance", "value": None, "label": str(nines - 49), "error": None}
    assert rows["t1"]["metrics"][1] == {"name": "distance", "value": 0.0, "label": None, "error": None}
    assert rows["t0"]["score"] == 0.0 and rows["t0"]["score_metric"] == "exact"
    record = _by_item(store)[("t0", 0)]
    assert (record.output, record.trajectory[0]["arguments"], record.metrics[1].result) == (
        "\ufffd" + "9" * 400, {"text": "\ufffd"}, nines - 49)
    after = build_report(store)
    assert after.model_dump(exclude={"runner_version"}) == before.model_dump(exclude={"runner_version"})
    assert after.metrics["distance"].unusable["too_large"] == 1 and after.metrics["distance"].n == 1


def test_duckdb_and_polars_query_the_shards(tmp_path):
    import duckdb
    import polars as pl

    store = _run(str(tmp_path / "run"))
    _drive(store, _records(), every_records=10).wait()     # three shards: queried as one table
    assert len(store.shard_sizes()) == 3
    pattern = f"{store.path('shards')}/*.parquet"
    rows = duckdb.sql(f"select category, avg(score), count(*) from '{pattern}' group by 1 order by 1").fetchall()
    assert rows == [("even", 0.8, 15), ("odd", 0.8, 15)]
    [(f1,)] = duckdb.sql(f"select avg(m.value) from (select unnest(metrics) as m from '{pattern}') "
                         "where m.name = 'f1'").fetchall()
    assert f1 == pytest.approx(sum(i / N for i in range(N)) / N)
    frame = pl.read_parquet(pattern)
    assert frame.height == N
    assert frame.filter(pl.col("status") == "error")["error_type"].to_list() == ["ValueError"] * 6


def test_pandas_reads_the_shards_straight_from_the_bucket(s3_bucket, s3_env):
    import pandas as pd

    uri = f"s3://{s3_bucket}/runs/pandas"
    store = _run(uri)
    _drive(store, _records(), every_records=10).finish()
    frame = pd.read_parquet(f"{uri}/shards/", storage_options={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    assert len(frame) == N
    assert frame.groupby("category")["score"].mean().to_dict() == {"even": 0.8, "odd": 0.8}
    assert frame.loc[frame.task_id == "t07", "record_path"].item() == "records/t07/0.json"
