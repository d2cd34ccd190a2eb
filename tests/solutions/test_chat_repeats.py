"""Repeats of the ``chat`` solution are samples (issue 37's neighbour of lm-eval's chat route): without a seed of the
user's its requests carry none, so a server that honours seeds samples each repeat on its own; a seed the user gives
(``-S seed=N``) is sent as it is in every repeat, and the report says that the repeats share it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.model_server import ScriptedModelServer


def _run(cli, tmp_path: Path, server: ScriptedModelServer, *flags: str) -> dict:
    done = cli("-b", "toy", "-B", "n_tasks=3", "-s", "chat", "--model", "vllm:scripted", "--model-base-url",
               server.url, "-S", "temperature=1.0", "--repeats", "2", "--sequential", "--storage",
               str(tmp_path / "run"), *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "run" / "summary.json").read_text())


def test_without_a_seed_the_repeats_send_none(cli, tmp_path: Path, model_server: ScriptedModelServer) -> None:
    summary = _run(cli, tmp_path, model_server)
    assert len(model_server.chat_requests) == 6
    assert {request.seed for request in model_server.chat_requests} == {None}
    assert not any("share the sampling seed" in note for note in summary["notes"])


def test_a_users_seed_is_sent_in_every_repeat_and_the_report_says_so(cli, tmp_path: Path,
                                                                     model_server: ScriptedModelServer) -> None:
    summary = _run(cli, tmp_path, model_server, "-S", "seed=5")
    assert {request.seed for request in model_server.chat_requests} == {5}
    assert "the 2 repeats share the sampling seed 5 (-S seed=5): a server that honours seeds (vLLM) answers a " \
           "sampled request alike in every repeat" in " ".join(summary["notes"])
