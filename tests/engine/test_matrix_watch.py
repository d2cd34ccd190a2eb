"""A watch of a training run's checkpoints on real ``transformers serve`` replicas (one Ray worker): a checkpoint
that appears after the start is evaluated once its ``ready_file`` exists (not before); one whose ``config.json`` is
broken is ``load_failed`` with the engine's own line, is not counted as evaluated, and is evaluated at a later look
once fixed; the ``until`` file ends the watch once every cell is done."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.support.cli import REPO

READY, UNTIL = "STABLE", "DONE"


def make_checkpoint(folder: Path, embedded: Path, *, broken: bool = False) -> None:
    folder.mkdir()
    for source in embedded.iterdir():
        if broken and source.name == "config.json":
            (folder / "config.json").write_text("{this is not json")
        else:
            (folder / source.name).symlink_to(source)


def fix_checkpoint(folder: Path, embedded: Path) -> None:
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(embedded / "config.json")


def records(cell: Path) -> list[dict]:
    return [json.loads(file.read_text()) for file in (cell / "records").rglob("*.json")] if cell.exists() else []


@contextlib.contextmanager
def watching(config: Path, log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m runner matrix --config CONFIG`` running, its stderr in ``log``; killed on the way out if it still
    runs (the test failed before it ended)."""
    with open(log, "wb") as out:
        driver = subprocess.Popen([sys.executable, "-m", "runner", "matrix", "--config", str(config)], cwd=REPO,
                                  env=env, stdout=subprocess.DEVNULL, stderr=out)
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()


def wait_for(condition, driver: subprocess.Popen[bytes], log: Path, seconds: float = 300) -> None:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not condition():
        assert driver.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.25)


@pytest.mark.timeout(900)
def test_a_watch_evaluates_checkpoints_as_they_become_ready_and_retries_one_that_failed_to_load(
        tmp_path: Path, embedded_dir: Path) -> None:
    ckpts, root, log = tmp_path / "ckpts", tmp_path / "sweep", tmp_path / "driver.log"
    ckpts.mkdir()
    make_checkpoint(ckpts / "step_1", embedded_dir)
    (ckpts / "step_1" / READY).touch()
    config = tmp_path / "matrix.yaml"
    config.write_text(yaml.safe_dump({
        "models": [f"transformers:{ckpts}/step_*"],
        "benchmarks": [{"benchmark": "toy", "args": {"n_tasks": 2}, "solution": "chat",
                        "solution_args": {"max_tokens": 4}}],
        "watch": {"every": 1, "ready_file": READY, "until": UNTIL},
        "storage": str(root), "worker": {"num_workers": 1}, "log_format": "json", "progress": "off"}))
    with watching(config, log, os.environ.copy()) as driver:
        wait_for(lambda: len(records(root / "cells" / "step_1" / "toy")) == 2, driver, log)
        make_checkpoint(ckpts / "step_2", embedded_dir)           # appears, but is not ready yet
        make_checkpoint(ckpts / "step_3", embedded_dir, broken=True)
        (ckpts / "step_3" / READY).touch()
        wait_for(lambda: "worker.load_failed" in log.read_text(errors="replace"), driver, log)
        assert not (root / "cells" / "step_2").exists()
        ready_at = time.time()
        (ckpts / "step_2" / READY).touch()
        wait_for(lambda: len(records(root / "cells" / "step_2" / "toy")) == 2, driver, log)
        fix_checkpoint(ckpts / "step_3", embedded_dir)
        wait_for(lambda: len(records(root / "cells" / "step_3" / "toy")) == 2, driver, log)
        (ckpts / UNTIL).touch()
        driver.wait(timeout=120)
    text = log.read_text(errors="replace")
    assert driver.returncode == 0, text[-3000:]
    manifest = json.loads((root / "matrix.json").read_text())
    assert {cell["path"]: cell["status"] for cell in manifest["cells"]} == {
        f"cells/step_{n}/toy": "done" for n in (1, 2, 3)}
    assert [(model["key"], model["step"], model["status"]) for model in manifest["models"]] == [
        ("step_1", 1, "ok"), ("step_3", 3, "ok"), ("step_2", 2, "ok")]
    failed = [json.loads(line[line.index("{"):]) for line in text.splitlines() if "worker.load_failed" in line]
    assert failed and all(event["model"].endswith("/step_3") for event in failed)
    assert "config.json" in failed[0]["error"] or "JSON" in failed[0]["error"] or "json" in failed[0]["error"]
    started = min(record["started_at"] for record in records(root / "cells" / "step_2" / "toy"))
    from datetime import datetime

    assert datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() > ready_at
    shutil.rmtree(ckpts)


def logged(log: Path) -> list[dict]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


@pytest.mark.timeout(900)
def test_a_checkpoint_whose_in_process_build_failed_is_retried_and_finished_ones_are_never_loaded(
        tmp_path: Path, embedded_dir: Path, shared_data: Path) -> None:
    """Issue 42, on lm-eval's ``HFLM`` in the driver's own process (sequential): step_100 and step_300 evaluated;
    the resumed watch finds step_400 with its ``config.json`` cut short. Its build is its load: ``load_failed`` (a
    warning with the loader's line), tried again at the next look, evaluated once mended. The finished checkpoints
    are never loaded again (placement's rule 3): every ``worker.load`` of the resume is step_400's."""
    from tests.benchmarks.lmeval.conftest import OFFLINE, write_tasks

    tasks = write_tasks(tmp_path / "tasks", shared_data, {"hotpot_yesno": 2})
    ckpts, root = tmp_path / "ckpts", tmp_path / "sweep"
    ckpts.mkdir()
    for step in (100, 300):
        make_checkpoint(ckpts / f"step_{step}", embedded_dir)
        (ckpts / f"step_{step}" / READY).touch()
    settings = {"models": [f"transformers:{ckpts}/step_*"],
                "benchmarks": [{"benchmark": "lm-eval", "args": {"tasks": "hotpot_yesno", "include_path": str(tasks)},
                                "key": "yesno"}],
                "executor": "sequential", "storage": str(root), "log_format": "json", "progress": "off",
                "replica_restarts": 1000}
    config = tmp_path / "matrix.yaml"
    config.write_text(yaml.safe_dump(settings))
    environment = {**os.environ, **OFFLINE}
    first = subprocess.run([sys.executable, "-m", "runner", "matrix", "--config", str(config)], cwd=REPO,
                           env=environment, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    make_checkpoint(ckpts / "step_400", embedded_dir)
    (ckpts / "step_400" / "config.json").unlink()
    (ckpts / "step_400" / "config.json").write_text((embedded_dir / "config.json").read_text()[:40])  # cut short
    (ckpts / "step_400" / READY).touch()
    config.write_text(yaml.safe_dump({**settings, "watch": {"every": 1, "ready_file": READY, "until": UNTIL}}))
    log = tmp_path / "watch.log"
    with watching(config, log, environment) as driver:
        wait_for(lambda: any(event.get("event") == "worker.load_failed" for event in logged(log)), driver, log)
        fix_checkpoint(ckpts / "step_400", embedded_dir)
        wait_for(lambda: len(records(root / "cells" / "step_400" / "yesno")) == 2, driver, log)
        (ckpts / UNTIL).touch()
        driver.wait(timeout=120)
    assert driver.returncode == 0, log.read_text(errors="replace")[-3000:]
    found = logged(log)
    failed = [event for event in found if event.get("event") == "worker.load_failed"]
    assert failed[0]["level"] == "warning" and failed[0]["model"].endswith("/step_400")
    assert "could not be built" in failed[0]["error"]
    loads = [event["model"] for event in found if event.get("event") in ("worker.loaded", "worker.load_failed")]
    assert loads and all(model.endswith("/step_400") for model in loads), loads
    assert loads.count(f"transformers:{ckpts}/step_400") >= 2  # failed, then loaded once mended
    manifest = json.loads((root / "matrix.json").read_text())
    assert {cell["path"]: cell["status"] for cell in manifest["cells"]} == {
        f"cells/step_{step}/yesno": "done" for step in (100, 300, 400)}
    assert {model["key"]: model["status"] for model in manifest["models"]} == {
        f"step_{step}": "ok" for step in (100, 300, 400)}


@pytest.mark.timeout(600)
def test_a_watch_over_s3_checkpoints_reads_them_with_the_matrix_storage_options(tmp_path: Path, emulators) -> None:
    """Issue 42: checkpoints on an S3-compatible store (moto's server) reached only through the matrix's
    ``storage_options`` (endpoint and keys, as for MinIO or R2; no ``AWS_*`` in the environment), watched: the
    checkpoint written after the start is seen at a later look (fsspec's cached listing is dropped at each look),
    and the ``until`` file ends the watch. Without options, the glob cannot be listed: one line, exit 2, nothing
    written."""
    import boto3

    s3 = emulators.get("s3")
    bucket = s3.bucket()
    client = boto3.client("s3", endpoint_url=s3.url, aws_access_key_id="testing",
                          aws_secret_access_key="testing-secret", region_name="us-east-1")

    def upload(step: int) -> None:
        for name, body in (("config.json", b'{"model_type": "llama"}'), ("model.safetensors", b"w%d" % step),
                           (READY, b"")):
            client.put_object(Bucket=bucket, Key=f"run42/step_{step}/{name}", Body=body)

    from tests.support.model_server import ScriptedModelServer

    upload(100)
    glob = f"vllm:s3://{bucket}/run42/step_*"
    server = ScriptedModelServer(models=[f"s3://{bucket}/run42/step_{step}" for step in (100, 200)]).start()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    settings = {"models": [{"model": glob, "model_base_url": server.url}],
                "benchmarks": [{"benchmark": "toy", "args": {"n_tasks": 3}}],
                "solution": "tests.support.solutions:model_skill", "executor": "sequential",
                "storage": f"s3://{bucket}/sweep", "storage_options": s3.storage_options(), "log_format": "json",
                "progress": "off", "watch": {"every": 1, "ready_file": READY, "until": UNTIL}}
    config, log = tmp_path / "matrix.yaml", tmp_path / "driver.log"
    try:
        # Without the options (the storage local, nothing in the environment): refused before anything is written.
        config.write_text(yaml.safe_dump({**settings, "storage": str(tmp_path / "local"), "storage_options": {}}))
        refused = subprocess.run([sys.executable, "-m", "runner", "matrix", "--config", str(config)], cwd=REPO,
                                 env=environment, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip().splitlines() == [
            f"error: the checkpoints s3://{bucket}/run42/step_* cannot be listed (NoCredentialsError: Unable to "
            "locate credentials); check the path and the store's credentials"]
        assert not (tmp_path / "local").exists()
        config.write_text(yaml.safe_dump(settings))

        def cell_records(step: int) -> int:
            listed = client.list_objects_v2(Bucket=bucket, Prefix=f"sweep/cells/step_{step}/toy/records/")
            return listed.get("KeyCount", 0)

        with watching(config, log, environment) as driver:
            wait_for(lambda: cell_records(100) == 3, driver, log, 180)
            upload(200)
            wait_for(lambda: cell_records(200) == 3, driver, log, 180)
            client.put_object(Bucket=bucket, Key=f"run42/{UNTIL}", Body=b"")
            driver.wait(timeout=120)
    finally:
        server.stop()
    text = log.read_text(errors="replace")
    assert driver.returncode == 0, text[-3000:]
    assert "NoCredentialsError" not in text and "matrix.checkpoints_unreadable" not in text
    manifest = json.loads(client.get_object(Bucket=bucket, Key="sweep/matrix.json")["Body"].read())
    assert {cell["path"]: cell["status"] for cell in manifest["cells"]} == {
        "cells/step_100/toy": "done", "cells/step_200/toy": "done"}
