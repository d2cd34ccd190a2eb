"""The line an interrupted run prints says what is kept: nothing (stopped before its ``run.json``), no record yet,
or the finished records (tested in ``test_sigterm.py``). In this process: the test sends this process SIGTERM, which
the CLI handles as Ctrl-C, once the run reached the stage under test (a harmless SIGTERM handler is installed
around it, so a late signal cannot end the test session)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.model_server import ScriptedModelServer


@pytest.fixture
def terminate_when() -> Iterator[Callable[[Callable[[], bool]], None]]:
    """``terminate_when(condition)``: send this process SIGTERM once ``condition()`` holds (polled every 20 ms for up
    to 30 s, from a thread)."""
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    done = threading.Event()
    threads: list[threading.Thread] = []

    def arm(condition: Callable[[], bool]) -> None:
        def watch() -> None:
            deadline = time.monotonic() + 30
            while not done.is_set() and time.monotonic() < deadline:
                if condition():
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=watch, daemon=True)
        threads.append(thread)
        thread.start()

    try:
        yield arm
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=5)
        signal.signal(signal.SIGTERM, previous)


def _chat_run(storage: Path, server: ScriptedModelServer) -> list[str]:
    return ["-b", "toy", "-B", "n_tasks=3", "--sequential", "--storage", str(storage), "-s", "chat", "--model",
            "vllm:scripted", "--model-base-url", server.url]


def test_an_interrupt_before_anything_was_written_says_so(cli, tmp_path, model_server, terminate_when):
    """The issue's input: stopped during the preflight (a model server slow to list its models), the line said
    "finished records are kept" although nothing had been written."""
    model_server.drip(0.5, endpoint="models")
    terminate_when(lambda: bool(model_server.requests))
    result = cli(*_chat_run(tmp_path / "run", model_server))
    assert result.returncode == 143, result.stderr
    assert result.lines()[-1] == "terminated: nothing was written; run the same command again"
    assert not (tmp_path / "run").exists()


def test_an_interrupt_before_any_item_finished_says_no_record_was_written(cli, tmp_path, model_server,
                                                                          terminate_when):
    """A neighbour: run.json is written, the first item's model call is still waiting."""
    model_server.stall(10.0)
    terminate_when(lambda: len(model_server.chat_requests) > 0)
    result = cli(*_chat_run(tmp_path / "run", model_server), "--log-format", "json")
    assert result.returncode == 143, result.stderr
    assert result.lines()[-1] == ("terminated: no item had finished, so no record was written; run the same command "
                                  "again to start the run")
    assert (tmp_path / "run" / "run.json").is_file() and not list((tmp_path / "run").glob("records/*/*.json"))
