"""The probe of conditional writes on each object store: moto, fake-gcs-server and Azurite honour their store's
condition (``If-None-Match: *`` on S3 and Azure, ``ifGenerationMatch=0`` on GCS), as the requests the proxy of
``tests/support/store_proxy.py`` saw show; the proxy plays a store that ignores the condition (it strips it) and one
that answers 501."""

import pytest
import structlog

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.storage import ResultStore
from runner.storage.probe import PROBE_PREFIX, check_conditional_writes

CONDITION = {"s3": "If-None-Match: *", "gcs": "ifGenerationMatch=0", "azure": "If-None-Match: *"}


def _record(output: str) -> TaskRecord:
    return TaskRecord(run_id="r", task_id="a", repeat=0, status="ok", output=output,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


def _carries_the_condition(name: str, seen) -> bool:
    """Whether a write the proxy saw carries the store's own condition, as the store's API spells it."""
    if name == "gcs":
        return "ifGenerationMatch=0" in seen.path and "if-none-match" not in seen.headers
    return seen.headers.get("if-none-match") == "*"


@pytest.fixture
def store(object_store):
    return ResultStore(object_store.uri("run"))


def test_a_store_that_honours_conditional_writes_passes_and_keeps_no_probe(store, object_store):
    assert check_conditional_writes(store) and store.conditional
    probes = [seen for seen in object_store.proxy.requests if PROBE_PREFIX in seen.key]
    assert [seen.op for seen in probes] == ["write", "write", "delete"]
    assert all(_carries_the_condition(object_store.name, seen) for seen in probes[:2])
    assert store.fs.find(store.root) == []


@pytest.mark.parametrize("fault, problem", [
    ("ignore_precondition", "a second write of one key with {condition} replaced the first"),
    ("reject_precondition", "it answered a write with {condition} with 501 Not Implemented ("),
])
def test_a_store_that_does_not_honour_them_is_refused_in_one_line(store, object_store, fault, problem):
    condition = CONDITION[object_store.name]
    object_store.proxy.inject(fault)
    with pytest.raises(StorageError) as caught:
        check_conditional_writes(store)
    message = str(caught.value)
    assert message.startswith(f"storage {store.uri} does not honour conditional writes: "
                              f"{problem.format(condition=condition)}")
    assert message.endswith("so records could be overwritten and a second driver on the run would not be refused; "
                            f"use a store that honours {condition} (Amazon S3, Google Cloud Storage and Azure Blob "
                            "Storage do), or pass --allow-overwriting-store to write each record after an existence "
                            "check instead")
    assert "credentials" not in message and "\n" not in message
    assert store.fs.find(store.root) == []


@pytest.mark.parametrize("fault", ["ignore_precondition", "reject_precondition"])
def test_allowing_an_overwriting_store_warns_and_checks_existence_before_each_write(store, object_store, fault):
    object_store.proxy.inject(fault)
    with structlog.testing.capture_logs() as logs:
        assert not check_conditional_writes(store, allow_overwriting=True)
    warning = next(e for e in logs if e["event"] == "storage.unconditional")
    assert warning["log_level"] == "warning" and "two writers can race" in warning["detail"]
    assert not store.conditional
    assert store.write_record(_record("first")) and not store.write_record(_record("second"))
    assert [r.output for r in store.iter_records()] == ["first"]
    record_writes = [seen for seen in object_store.proxy.requests if seen.op == "write" and "/records/" in seen.key]
    assert len(record_writes) == 1 and not record_writes[0].conditional


def test_a_local_disk_that_makes_hard_links_passes_and_keeps_nothing(tmp_path):
    """On a local disk the probe is one hard link (tests/storage/test_hard_links.py: a filesystem without them),
    made where the run will write and removed: the run's folder is not made yet."""
    store = ResultStore(str(tmp_path / "run"))
    assert check_conditional_writes(store)
    assert list(tmp_path.iterdir()) == []
