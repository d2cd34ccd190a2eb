"""A watch of a training run's checkpoints on real ``transformers serve`` replicas (one Ray worker): a checkpoint
that appears after the start is evaluated once its ``ready_file`` exists (not before); one whose ``config.json`` is
broken is ``load_failed`` with the engine's own line, is not counted as evaluated, and is evaluated at a later look
once fixed; the ``until`` file ends the watch once every cell is done."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
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
    with open(log, "wb") as out:
        driver = subprocess.Popen([sys.executable, "-m", "runner", "matrix", "--config", str(config)], cwd=REPO,
                                  env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=out)
    try:
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
    finally:
        if driver.poll() is None:
            driver.kill()
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
