"""A checkpoint sweep on real parts: the embedded model and two checkpoint folders made from it (``step_1`` its very
weights, ``step_2`` perturbed so that its answers differ), served by real ``transformers serve`` replicas and loaded
by lm-eval's ``HFLM`` in the workers, x a local lm-eval task (``include_path`` over the shared HotpotQA data) and
the built-in HotpotQA benchmark, on an embedded Ray.

The driver is SIGKILLed mid-matrix (once the swapped replica of ``step_2`` answered a question) and the same command
runs again with another number of workers. Checked: every cell done, no item run twice, at most one replica start
per (model, worker) in each invocation (from the run's own events), the swap of ``step_1``'s replica to ``step_2``'s
weights (the answers change), and each lm-eval cell equal, document by document, to ``python -m runner`` run alone
on the same settings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.benchmarks.lmeval.conftest import OFFLINE, write_tasks
from tests.support.cli import REPO, run_process

EMBEDDED = "transformers:smollm2-135m-instruct"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, embedded_dir: Path) -> Path:
    """``step_1``: the embedded model's files (links); ``step_2``: the same with every weight moved by Gaussian noise
    of a tenth of its tensor's standard deviation (seed 0)."""
    import torch
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("ckpts")
    for name in ("step_1", "step_2"):
        (root / name).mkdir()
        for source in embedded_dir.iterdir():
            if name == "step_1" or source.name != "model.safetensors":
                (root / name / source.name).symlink_to(source)
    weights = load_file(str(embedded_dir / "model.safetensors"))
    generator = torch.Generator().manual_seed(0)
    moved = {key: tensor + 0.1 * tensor.float().std() * torch.randn(tensor.shape, generator=generator)
             if tensor.is_floating_point() and tensor.numel() > 1 else tensor for key, tensor in weights.items()}
    save_file(moved, str(root / "step_2" / "model.safetensors"), metadata={"format": "pt"})
    return root


def events(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a driver's stderr, its workers' included (Ray forwards them behind a prefix)."""
    found = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            found.append(json.loads(line[start:]))
        except ValueError:
            continue
    return found


def cell_records(root: Path, path: str) -> dict[tuple[str, int], dict[str, Any]]:
    return {(record["task_id"], record["repeat"]): record
            for file in (root / path / "records").rglob("*.json")
            for record in [json.loads(file.read_text())]}


def starts_per_model(found: list[dict[str, Any]]) -> Counter[str]:
    """First starts of replicas (not restarts), by model: one per (model, worker) that loaded it."""
    return Counter(event["model"] for event in found if event.get("event") == "replica.start" and event.get("start") == 1)


@pytest.mark.timeout(900)
def test_a_checkpoint_sweep_on_served_replicas_resumes_after_its_driver_is_killed(
        tmp_path: Path, checkpoints: Path, shared_data: Path, embedded_dir: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks", shared_data, {"hotpot_yesno": 4})
    root = tmp_path / "sweep"
    config = tmp_path / "matrix.yaml"
    config.write_text(yaml.safe_dump({
        "models": [EMBEDDED, f"transformers:{checkpoints}/step_*"],
        "benchmarks": [
            {"benchmark": "lm-eval", "args": {"tasks": "hotpot_yesno", "include_path": str(tasks)}, "key": "yesno"},
            {"benchmark": "hotpotqa", "args": {"answer_only": True}, "solution": "hotpotqa-reader", "limit": 3,
             "data_dir": str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json"),
             "key": "hotpotqa"}],
        "baseline": EMBEDDED, "judge_model": "none", "storage": str(root), "log_format": "json",
        "progress": "off"}))
    command = [sys.executable, "-m", "runner", "matrix", "--config", str(config)]
    environment = {**os.environ, **OFFLINE}
    first_log = tmp_path / "first.log"
    swapped = root / "cells" / "step_2" / "hotpotqa" / "records"
    with open(first_log, "wb") as out:
        driver = subprocess.Popen([*command, "--workers", "1"], cwd=REPO, env=environment,
                                  stdout=subprocess.DEVNULL, stderr=out)
    try:
        deadline = time.monotonic() + 600
        while not (swapped.exists() and any(swapped.rglob("*.json"))):
            assert driver.poll() is None and time.monotonic() < deadline, first_log.read_text()[-3000:]
            time.sleep(0.2)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    first = events(first_log.read_text(errors="replace"))
    # One worker: the baseline's replica, step_1's, then step_2's weights loaded into step_1's server in place.
    assert starts_per_model(first) == {EMBEDDED: 1, f"transformers:{checkpoints}/step_1": 1}
    assert [event["previous"] for event in first if event.get("event") == "replica.swap"] == [
        f"transformers:{checkpoints}/step_1"]
    before = {path: len(cell_records(root, path)) for path in
              [f"cells/{model}/{bench}" for model in ("smollm2-135m-instruct", "step_1", "step_2")
               for bench in ("yesno", "hotpotqa")]}
    assert 0 < before["cells/step_2/hotpotqa"] < 3

    second = run_process(*command[3:], "--workers", "2", env=OFFLINE, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    found = events(second.stderr)
    manifest = json.loads((root / "matrix.json").read_text())
    assert {cell["path"]: cell["status"] for cell in manifest["cells"]} == {path: "done" for path in before}
    # No item ran twice: the second invocation ran exactly what the first had not finished.
    executed = sum(event["executed"] for event in found if event.get("event") == "run.finished")
    totals = {path: len(cell_records(root, path)) for path in before}
    assert executed == sum(totals.values()) - sum(before.values())
    assert totals == {path: 4 if path.endswith("yesno") else 3 for path in before}
    assert {record["attempt"] for path in before for record in cell_records(root, path).values()} == {1}
    # At most one replica start per (model, worker) in each invocation; the loads matrix.json counts agree.
    loads = [load for load in manifest["loads"] if load["invocation"] == 2]
    assert max(Counter((load["model"], load["worker"]) for load in loads).values()) == 1
    assert sum(load["replica_starts"] for load in loads) == sum(starts_per_model(found).values())
    assert all(count <= 2 for count in starts_per_model(found).values())
    # The perturbed checkpoint answers differently, on the swapped replica and in the worker's own HFLM.
    step_1, step_2 = cell_records(root, "cells/step_1/hotpotqa"), cell_records(root, "cells/step_2/hotpotqa")
    assert any(step_1[key]["output"] != step_2[key]["output"] for key in step_2)
    lm_1, lm_2 = cell_records(root, "cells/step_1/yesno"), cell_records(root, "cells/step_2/yesno")
    assert all(lm_1[key]["output"] != lm_2[key]["output"] for key in lm_2)
    # Each lm-eval cell is the run of the same settings, alone, document by document.
    for model, key in ((EMBEDDED, "smollm2-135m-instruct"), (f"transformers:{checkpoints}/step_2", "step_2")):
        alone = tmp_path / f"alone-{key}"
        done = run_process("-b", "lm-eval", "-B", "tasks=hotpot_yesno", "-B", f"include_path={tasks}",
                           "--model", model, "--judge-model", "none", "--sequential", "--storage", str(alone),
                           "--log-format", "json", env=OFFLINE, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        mine, theirs = cell_records(root, f"cells/{key}/yesno"), cell_records(alone, ".")
        assert mine.keys() == theirs.keys()
        for item, record in mine.items():
            assert record["output"] == theirs[item]["output"], item
            assert [m["result"] for m in record["metrics"]] == [m["result"] for m in theirs[item]["metrics"]], item
