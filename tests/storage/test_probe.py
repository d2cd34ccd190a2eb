"""The probe of conditional writes: moto honours ``If-None-Match: *``; the proxy of ``tests/support/s3_proxy.py``
plays a store that ignores it (it strips the header) and one that answers 501."""

import pytest
import structlog

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.storage import ResultStore
from runner.storage.probe import PROBE_PREFIX, check_conditional_writes


def _record(output: str) -> TaskRecord:
    return TaskRecord(run_id="r", task_id="a", repeat=0, status="ok", output=output,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


@pytest.fixture
def store(s3_bucket, proxied_s3_env):
    return ResultStore(f"s3://{s3_bucket}/run")


def test_a_store_that_honours_conditional_writes_passes_and_keeps_no_probe(store, s3_proxy):
    assert check_conditional_writes(store) and store.conditional
    probes = [seen for seen in s3_proxy.requests if PROBE_PREFIX in seen.path]
    assert [seen.method for seen in probes] == ["PUT", "PUT", "DELETE"]
    assert all(seen.headers.get("if-none-match") == "*" for seen in probes[:2])
    assert store.fs.find(store.root) == []


@pytest.mark.parametrize("fault, problem", [
    ("ignore_if_none_match", "a second write of one key with If-None-Match: * replaced the first"),
    ("reject_if_none_match", "it answered a write with If-None-Match: * with 501 Not Implemented (OSError: "),
])
def test_a_store_that_does_not_honour_them_is_refused_in_one_line(store, s3_proxy, fault, problem):
    s3_proxy.inject(fault)
    with pytest.raises(StorageError) as caught:
        check_conditional_writes(store)
    message = str(caught.value)
    assert message.startswith(f"storage {store.uri} does not honour conditional writes: {problem}")
    assert message.endswith("so records could be overwritten and a second driver on the run would not be refused; "
                            "use a store that honours If-None-Match: * (AWS S3 does), or pass "
                            "--allow-overwriting-store to write each record after an existence check instead")
    assert "credentials" not in message
    assert store.fs.find(store.root) == []


@pytest.mark.parametrize("fault", ["ignore_if_none_match", "reject_if_none_match"])
def test_allowing_an_overwriting_store_warns_and_checks_existence_before_each_write(store, s3_proxy, fault):
    s3_proxy.inject(fault)
    with structlog.testing.capture_logs() as logs:
        assert not check_conditional_writes(store, allow_overwriting=True)
    warning = next(e for e in logs if e["event"] == "storage.unconditional")
    assert warning["log_level"] == "warning" and "two writers can race" in warning["detail"]
    assert not store.conditional
    assert store.write_record(_record("first")) and not store.write_record(_record("second"))
    assert [r.output for r in store.iter_records()] == ["first"]
    record_puts = [seen for seen in s3_proxy.requests if seen.method == "PUT" and "/records/" in seen.path]
    assert len(record_puts) == 1 and "if-none-match" not in record_puts[0].headers


def test_a_local_disk_is_not_probed(tmp_path):
    store = ResultStore(str(tmp_path / "run"))
    assert check_conditional_writes(store) and not (tmp_path / "run").exists()
