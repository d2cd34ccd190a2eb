"""One rule for secrets (runner.core.secrets) over a table of secret shapes: what it finds, what it masks, and what
the store's messages and a run's files (run.json, records, reports, logs) hold. The RayJob's ConfigMap, the chart
and ``submit --dry-run`` are checked over the same table in tests/kuberay/test_secrets.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.cli import main
from runner.core.config import RunConfig
from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.core.secrets import find, is_secret_name, mask
from runner.storage import BenchmarkInfo, ResultStore, RunManifest, new_run_id
from tests.support.secret_shapes import NOT_SECRET, SHAPES

# (id, storage options, where the first secret is, the secret strings that must never be shown or written).
# Every secret string is path-safe, so a store can be made to echo it in a real error message.
def _record(task_id: str = "a") -> TaskRecord:
    return TaskRecord(run_id="r", task_id=task_id, repeat=0, status="ok", output=1,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


@pytest.mark.parametrize("options, where, values", [row[1:] for row in SHAPES], ids=[row[0] for row in SHAPES])
def test_every_shape_is_found_at_its_path(options, where, values):
    found = find(options)
    assert found[0].path == where
    assert {secret.value for secret in found} == set(values)


def test_options_that_are_not_secrets_are_not_found():
    assert find(NOT_SECRET) == []
    assert [name for name in ("keyring", "max_tokens", "tokenizer", "sasl", "use_ssl", "endpoint_url")
            if is_secret_name(name)] == []


@pytest.mark.parametrize("options, where, values", [row[1:] for row in SHAPES], ids=[row[0] for row in SHAPES])
def test_mask_hides_every_secret_and_keeps_the_rest(options, where, values):
    text = f"failed with {' and '.join(values)} at http://minio.minio:9000 in eu-west-1"
    masked = mask(text, options)
    assert not [value for value in values if value in masked]
    assert masked.endswith("at http://minio.minio:9000 in eu-west-1")


def test_mask_hides_credentials_in_the_text_itself():
    text = "cannot reach ftp://evals:pa55word@ftp.example.com/runs (AccountKey=abc123==; region eu)"
    assert mask(text) == "cannot reach ftp://evals:***@ftp.example.com/runs (AccountKey=***; region eu)"


@pytest.mark.parametrize("options, where, values", [row[1:] for row in SHAPES], ids=[row[0] for row in SHAPES])
def test_store_messages_never_show_a_secret(tmp_path, options, where, values):
    """A real failure whose message echoes the secrets: the run directory's name holds them, under a file."""
    (tmp_path / "blocked").write_text("a file, not a directory")
    store = ResultStore(str(tmp_path / "blocked" / f"run-{'-'.join(values)}"), options)
    with pytest.raises(StorageError) as caught:
        store.write_record(_record())
    message = str(caught.value)
    assert "Not a directory" in message and "/blocked/run-***" in message
    assert not [value for value in values if value in message]


def test_store_messages_mask_the_password_of_a_storage_url():
    store = ResultStore("http://evals:url-pass-14@127.0.0.1:9/runs")
    with pytest.raises(StorageError) as caught:
        store.write_record(_record())
    assert "http://evals:***@127.0.0.1:9/runs/records/a/0.json" in str(caught.value)
    assert "url-pass-14" not in str(caught.value)


def test_a_run_writes_no_storage_option_to_its_files_or_logs(tmp_path, capsys):
    options = {}
    for _, shape, _, _ in SHAPES:
        options.update(shape)
    values = [value for row in SHAPES for value in row[3]]
    run = tmp_path / "run"
    rc = main(["run", "-b", "toy", "-s", "calculator", "--sequential", "--limit", "3", "--log-format", "json",
               "--storage", str(run), "--storage-options", json.dumps(options)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["config"]["benchmark"] == "toy" and "storage_options" not in manifest["config"]
    written = [path for path in Path(run).rglob("*") if path.is_file()]
    assert {path.name for path in written} >= {"run.json", "summary.json", "results.csv", "0.json"}
    for text in [captured.out, captured.err, *(path.read_text() for path in written)]:
        assert not [value for value in values if value in text]


def test_a_model_url_with_a_password_is_masked_in_messages(tmp_path, cli):
    url = "http://evals:pw-secret-2@judge.invalid:8000/v1"
    line = cli("-b", "toy", "-s", "chat", "--model", "vllm:judge", "--model-base-url", url, "--sequential",
               "--storage", str(tmp_path / "run")).error_line("cannot connect to the model server")
    assert "http://evals:***@judge.invalid:8000/v1" in line and "pw-secret-2" not in line


def test_run_json_holds_no_password_of_a_url_or_secret_argument(tmp_path):
    """A URL's password and a secret-named benchmark argument reach run.json masked; the manifest object (and so the
    fingerprint, computed from the real values) keeps them."""
    url = "http://evals:pw-secret-2@vllm.internal:8000/v1"
    config = RunConfig(benchmark="toy", solution="chat", model="vllm:m", model_base_url=url,
                       data_dir="s3://reader:pw-secret-3@minio/data.json", benchmark_args={"api_token": "tok-secret-1"})
    manifest = RunManifest(run_id=new_run_id(), fingerprint="f", fingerprint_fields=config.fingerprint_fields(),
                           benchmark=BenchmarkInfo(name="toy"), n_repeats=1, config=config.model_dump(mode="json"),
                           runner_version="x")
    ResultStore(str(tmp_path / "run")).write_manifest(manifest)
    text = (tmp_path / "run" / "run.json").read_text()
    assert not [secret for secret in ("tok-secret-1", "pw-secret-2", "pw-secret-3") if secret in text]
    stored = json.loads(text)
    assert stored["config"]["model_base_url"] == "http://evals:***@vllm.internal:8000/v1"
    assert stored["fingerprint_fields"]["data_dir"] == "s3://reader:***@minio/data.json"
    assert stored["config"]["benchmark_args"] == {"api_token": "***"}
    assert manifest.config["model_base_url"] == url
