"""The response cache in storage: entries written once, on a local disk and on a real S3 API (moto on loopback),
and a finished benchmark rerun into a new run directory with the same cache on S3: zero model calls, the same
scores. The scripted server stands in for a model server (no model can run here)."""

from __future__ import annotations

import json

import pytest

from runner.core.errors import StorageError
from runner.storage import ResultStore
from runner.storage.response_cache import StoredCache


@pytest.fixture(params=["path", "s3"])
def cache(request, tmp_path) -> StoredCache:
    if request.param == "path":
        return StoredCache(str(tmp_path / "cache"))
    return StoredCache(f"s3://{request.getfixturevalue('s3_bucket')}/cache")


def test_an_entry_is_written_once_and_read_back(cache):
    key = "ab" + "0" * 62
    assert cache.get(key) is None
    cache.put(key, {"reply": {"content": "first"}})
    cache.put(key, {"reply": {"content": "second writer"}})
    assert cache.get(key) == {"reply": {"content": "first"}}
    cache.check()


def test_an_entry_that_is_not_json_is_one_line(tmp_path):
    cache = StoredCache(str(tmp_path / "cache"))
    key = "cd" + "1" * 62
    (tmp_path / "cache" / "cd").mkdir(parents=True)
    (tmp_path / "cache" / "cd" / f"{key}.json").write_text("{half")
    with pytest.raises(StorageError, match=f"the --cache entry cd/{key}.json in .* is not JSON; delete it"):
        cache.get(key)


def _chat_run(cli, storage: str, url: str, cache: str):
    return cli("--benchmark", "toy", "--solution", "chat", "--model", "vllm:scripted", "--model-base-url", url,
               "-S", "temperature=0", "--sequential", "--storage", storage, "--cache", cache, "--limit", "12",
               "--log-format", "json")


def test_a_rerun_into_a_new_run_directory_makes_no_model_call(cli, model_server, s3_bucket, tmp_path):
    model_server.set_policy("echo")
    cache = f"s3://{s3_bucket}/cache"
    first = _chat_run(cli, str(tmp_path / "first"), model_server.url, cache)
    assert first.returncode == 0, first.stderr
    assert len(model_server.chat_requests) == 12

    second = _chat_run(cli, f"s3://{s3_bucket}/runs/second", model_server.url, cache)
    assert second.returncode == 0, second.stderr
    assert len(model_server.chat_requests) == 12  # none more

    before = json.loads((tmp_path / "first" / "summary.json").read_text())
    after = json.loads(ResultStore(f"s3://{s3_bucket}/runs/second").read_file("summary.json") or b"{}")
    assert after["metrics"] == before["metrics"] and after["completed"] == 12
    assert before["usage"]["vllm:scripted"]["cache_misses"] == 12
    assert after["usage"] == {"vllm:scripted": {"input_tokens": 0, "output_tokens": 0, "calls": 0, "cached_calls": 12}}
    for record in ResultStore(f"s3://{s3_bucket}/runs/second").iter_records():
        assert record.usage["vllm:scripted"].cached_calls == 1
    assert len(ResultStore(cache).fs.find(f"{s3_bucket}/cache")) == 12
    assert not [note for note in before["notes"] + after["notes"] if note.startswith("--cache")]


def test_a_cache_that_no_call_could_use_is_noted(cli, model_server, tmp_path):
    """Requests at the server's default temperature are not deterministic: with the default policy the cache holds
    nothing, and the report says why and what to set, instead of a rerun paying again in silence."""
    cache = str(tmp_path / "cache")
    result = cli("-b", "toy", "-s", "chat", "--model", "vllm:scripted", "--model-base-url", model_server.url,
                 "--sequential", "--storage", str(tmp_path / "run"), "--cache", cache, "--limit", "3")
    assert result.returncode == 0, result.stderr
    note = (f"--cache {cache} held no call: none of the 3 model calls was cacheable under the 'deterministic' policy "
            "(it keeps requests with temperature 0 or a seed; the mock model is never cached); set -S temperature=0 "
            "(or a seed), or --cache-policy always")
    assert note in json.loads((tmp_path / "run" / "summary.json").read_text())["notes"]
    assert f"note: {note}" in result.stdout + result.stderr


def test_a_cache_that_cannot_be_read_stops_the_run_before_anything_is_written(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", str(tmp_path / "run"),
                 "--cache", str(blocker / "cache"))
    result.error_line(f"cannot reach the cache at file://{blocker}/cache (NotADirectoryError",
                      "check the --cache URI and its credentials")
    assert not (tmp_path / "run").exists()


def test_a_cache_uri_of_no_known_protocol_is_one_line_naming_the_flag(cli, tmp_path):
    result = cli("-b", "toy", "-s", "calculator", "--sequential", "--storage", str(tmp_path / "run"),
                 "--cache", "nosuch://x")
    line = result.error_line("cannot open the --cache storage (ValueError: Protocol not known: nosuch)",
                             "check the --cache URI")
    assert "storage URI" not in line
    assert not (tmp_path / "run").exists()
