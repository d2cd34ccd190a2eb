import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pytest

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.storage import ResultStore, normalize_uri
from runner.storage.reading import read_batches
from tests.support.emulators import STORES


def _record(task_id: str, repeat: int = 0, output: object = 1) -> TaskRecord:
    return TaskRecord(run_id="r", task_id=task_id, repeat=repeat, status="ok", output=output,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


@pytest.fixture(params=["path", "file", "memory", *STORES])
def store(request, tmp_path):
    if request.param == "path":
        return ResultStore(str(tmp_path / "run"))
    if request.param == "file":
        return ResultStore(f"file://{tmp_path}/run")
    if request.param == "memory":
        return ResultStore(f"memory://runner-tests/{tmp_path.name}")
    return ResultStore(request.getfixturevalue("object_stores").open(request.param).uri("runs/one"))


def test_records_are_written_once_and_listed_in_one_pass(store):
    assert store.write_record(_record("a/b", 0))
    assert store.write_record(_record("a/b", 1))
    assert store.write_record(_record("C", 0))
    assert not store.write_record(_record("a/b", 0, output="second writer"))
    assert store.done_items() == {("a%2Fb", 0), ("a%2Fb", 1), ("%43", 0)}
    records = {(r.task_id, r.repeat): r for r in store.iter_records()}
    assert set(records) == {("a/b", 0), ("a/b", 1), ("C", 0)}
    assert records[("a/b", 0)].output == 1


def test_clear_removes_only_this_runs_files(store):
    store.write_record(_record("x"))
    store.write_file("summary.json", b"{}")
    store.fs.pipe_file(store.path("notes.txt"), b"keep me")
    store.clear()
    assert store.done_items() == set()
    assert store.read_file("summary.json") is None
    assert store.read_file("notes.txt") == b"keep me"


def test_plain_paths_become_absolute_file_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_uri("runs/x/") == f"file://{tmp_path}/runs/x"
    assert normalize_uri("s3://b/p/") == "s3://b/p"


def test_unreachable_bucket_is_a_storage_error_without_credentials(s3_env):
    store = ResultStore("s3://no-such-bucket-here/run", {"secret": "sup3r-s3cret-value"})
    with pytest.raises(StorageError) as caught:
        store.write_record(_record("a"))
    assert "sup3r-s3cret-value" not in str(caught.value)
    assert "no-such-bucket-here" in str(caught.value)


def test_store_pickles_without_its_filesystem(tmp_path):
    import pickle

    store = ResultStore(str(tmp_path))
    store.write_record(_record("a"))
    clone = pickle.loads(pickle.dumps(store))
    assert clone.done_items() == {("a", 0)}


WRITER = textwrap.dedent(
    """
    import sys
    from runner.core.record import TaskRecord
    from runner.storage import ResultStore
    store = ResultStore(sys.argv[1])
    record = TaskRecord(run_id="r", task_id="big", repeat=0, status="ok", output="x" * (200 * 1024 * 1024),
                        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")
    print("writing", flush=True)
    store.write_record(record)
    print("written", flush=True)
    """
)


@pytest.mark.parametrize("backend", ["local", *STORES])
def test_a_writer_killed_mid_write_leaves_no_half_record(backend, tmp_path, request):
    """SIGKILL a process while it writes a 200 MB record (a multipart upload on S3, a resumable one on GCS, blocks
    on Azure): afterwards the record is absent or whole."""
    if backend == "local":
        uri = str(tmp_path / "run")
        env = dict(os.environ)
    else:
        reached = request.getfixturevalue("object_stores").open(backend)
        uri = reached.uri("run")
        env = {**os.environ, **reached.env}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, uri], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultStore(uri)
    path = store.record_path("big", 0)
    if store.fs.exists(path):
        record = TaskRecord.model_validate_json(store.fs.cat_file(path))
        assert len(record.output) == 200 * 1024 * 1024
    else:
        assert store.done_items() == set()
    if backend == "local":
        leftovers = [p for p in Path(tmp_path / "run").rglob("*") if p.is_file()]
        assert all(p.name.startswith(".") for p in leftovers if p.name != "0.json")


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_storage_errors_mask_secret_options_and_show_the_endpoint():
    """s3fs options: key, secret and the client's secret are masked; the endpoint, a plain option, stays readable."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    store = ResultStore("s3://bucket/x", {
        "key": "AKIAEXAMPLEKEY", "secret": "sup3r-s3cret-value",
        "client_kwargs": {"endpoint_url": endpoint, "aws_session_token": "session-token-value"},
        "config_kwargs": {"retries": {"max_attempts": 1}},
    })
    with pytest.raises(StorageError) as caught:
        store.read_manifest()
    message = str(caught.value)
    assert f'cannot reach storage s3://bucket/x (EndpointConnectionError: Could not connect to the endpoint URL: ' \
           f'"{endpoint}/bucket/x/run.json")' in message
    assert message.endswith("check the storage URI and its credentials (AWS_* variables or --storage-options)")
    masked = store.explain("cannot write", OSError("AKIAEXAMPLEKEY sup3r-s3cret-value session-token-value"))
    assert "cannot write (OSError: *** *** ***)" in masked


def test_an_http_uri_is_shown_once_with_advice_for_http():
    uri = f"http://127.0.0.1:{_closed_port()}/x"
    with pytest.raises(StorageError) as caught:
        ResultStore(uri).read_manifest()
    message = str(caught.value)
    assert message.startswith(f"cannot reach storage {uri} (")
    assert "http://http://" not in message and "AWS_" not in message
    assert message.endswith("(the http filesystem's credentials or --storage-options)")


@pytest.mark.parametrize("uri, advice", [
    ("s3://b/run", "check the storage URI and its credentials (AWS_* variables or --storage-options)"),
    ("gs://b/run", "check the storage URI and its credentials (Application Default Credentials: "
                   "GOOGLE_APPLICATION_CREDENTIALS, 'gcloud auth application-default login' or the pod's Workload "
                   "Identity; or --storage-options)"),
    ("az://c/run", "check the storage URI and its credentials (AZURE_STORAGE_ACCOUNT_NAME with DefaultAzureCredential "
                   "(AZURE_CLIENT_ID..., the pod's Workload Identity), AZURE_STORAGE_CONNECTION_STRING, or "
                   "--storage-options)"),
    ("abfs://c/run", "check the storage URI and its credentials (AZURE_STORAGE_ACCOUNT_NAME with "
                     "DefaultAzureCredential (AZURE_CLIENT_ID..., the pod's Workload Identity), "
                     "AZURE_STORAGE_CONNECTION_STRING, or --storage-options)"),
    ("/tmp/run", "check the storage URI and that this process can write there"),
])
def test_storage_advice_fits_the_protocol(uri, advice):
    assert ResultStore(uri).explain("cannot write", OSError("denied")) == f"cannot write (OSError: denied); {advice}"


def test_read_batches_are_bounded_by_bytes_and_count():
    sizes = [("a", 4), ("b", 4), ("c", 3), ("huge", 50), ("d", 1), ("e", 1), ("f", 1)]
    assert list(read_batches(sizes, max_bytes=10, max_count=2)) == [["a", "b"], ["c"], ["huge"], ["d", "e"], ["f"]]
    assert list(read_batches(sizes, max_bytes=10, max_count=256)) == [["a", "b"], ["c"], ["huge"], ["d", "e", "f"]]
    assert list(read_batches([], max_bytes=10)) == []


@pytest.mark.parametrize("backend", ["local", *STORES])
def test_reading_records_never_holds_more_than_a_batch_of_bytes(backend, tmp_path, request, monkeypatch):
    """The report's memory must not grow with the number or size of records beyond one batch (issue 11): every fetch
    of record bytes stays within READ_BATCH_BYTES (a record larger than that is fetched alone), whatever the run."""
    import runner.storage.reading as reading

    store = ResultStore(str(tmp_path / "run")) if backend == "local" else \
        ResultStore(request.getfixturevalue("object_stores").open(backend).uri("run"))
    mib = 2**20
    for index in range(10):
        store.write_record(_record(f"t{index}", output="x" * mib))
    store.write_record(_record("big", output="y" * 4 * mib))
    monkeypatch.setattr(reading, "READ_BATCH_BYTES", 3 * mib)
    fetched: list[int] = []
    fetch = reading._fetch
    monkeypatch.setattr(reading, "_fetch", lambda fs, batch: _counted(fetched, fetch(fs, batch)))

    outputs = sorted(len(record.output) for record in store.iter_records())
    assert outputs == [mib] * 10 + [4 * mib]
    assert max(fetched) <= 4 * mib + 1024          # the large record, alone
    assert sorted(fetched)[-2] <= 3 * mib          # every other batch within the limit
    assert len(fetched) >= 5


def _counted(fetched: list[int], contents: dict) -> dict:
    fetched.append(sum(len(data) for data in contents.values()))
    return contents


LISTING_PAGE = {"s3": 1000, "gcs": 1000, "azure": 5000}
"""The most keys one listing request returns: S3's ListObjectsV2 (``MaxKeys``, at most 1,000), GCS's objects.list
(gcsfs asks for ``maxResults=1000``, the API's most), Azure's List Blobs (``maxresults`` left to the service: 5,000)."""


@pytest.mark.parametrize("name", STORES)
def test_resume_lists_records_past_one_listing_page(name, object_stores):
    """One more record than a listing page holds: resume finds every record, through more than one listing request
    (the records are read back by the other tests; reading 5,001 of them from Azurite would take a minute here)."""
    reached = object_stores.open(name)
    store = ResultStore(reached.uri("runs/big"))
    n = LISTING_PAGE[name] + 1
    records = [_record(f"task-{index:05d}") for index in range(n)]
    # Written straight to the emulator, many at once (the proxy serves one request at a time per connection).
    direct, _ = fsspec.url_to_fs(reached.uri(), **reached.emulator.storage_options())
    direct.pipe({store.record_path(r.task_id, r.repeat): r.model_dump_json().encode() for r in records})

    assert store.done_items() == {(f"task-{index:05d}", 0) for index in range(n)}
    listings = [seen for seen in reached.proxy.requests if seen.op == "list"]
    assert len(listings) >= 2
