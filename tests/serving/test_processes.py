"""Stopping a server's whole session, and the shepherd that does it when the server's owner is SIGKILLed.

The first two tests use a shell "server" shaped like vLLM's process tree after its API server dies (vllm#55510: the
engine processes survive in the session, reparented to PID 1): a stand-in for the GPU engine, which cannot run here.
The last one starts the real ``transformers serve`` from a child process and SIGKILLs that child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.serving import shepherd
from tests.conftest import worker_pythonpath

# The leader starts a child in its group and a grandchild that a subshell orphans (reparented to PID 1, as SGLang's
# schedulers are), both in its session; it prints their pids and waits.
VLLM_SHAPED = "sleep 600 & a=$!; (sleep 600 & echo $! > orphan) ; echo $a > child; wait"


def start_server(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    process = subprocess.Popen(["sh", "-c", VLLM_SHAPED], cwd=tmp_path, start_new_session=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not ((tmp_path / "orphan").exists() and (tmp_path / "child").exists()):
        assert time.monotonic() < deadline, "the stand-in server did not start"
        time.sleep(0.05)
    time.sleep(0.1)
    pids = [int((tmp_path / name).read_text()) for name in ("child", "orphan")]
    return process, pids


def alive(pid: int) -> bool:
    try:
        return not shepherd.gone(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def test_processes_that_outlive_the_server_in_its_session_are_stopped(tmp_path: Path) -> None:
    server, (child, orphan) = start_server(tmp_path)
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    assert alive(child) and alive(orphan)  # as vLLM's EngineCore after a SIGKILL of its API server
    assert psutil.Process(orphan).ppid() != server.pid
    assert shepherd.stop_session(server.pid, grace=2.0) == []
    assert not alive(child) and not alive(orphan)
    assert shepherd.session_processes(server.pid) == []


def test_the_shepherd_stops_the_session_when_its_owner_is_killed(tmp_path: Path) -> None:
    server, (child, orphan) = start_server(tmp_path)
    owner = subprocess.Popen(["sleep", "600"])
    started = psutil.Process(owner.pid).create_time()
    guard = subprocess.Popen([sys.executable, shepherd.__file__, str(owner.pid), repr(started), str(server.pid), "2"],
                             start_new_session=True)
    time.sleep(0.5)
    assert guard.poll() is None  # the owner lives: the shepherd waits
    owner.kill()
    owner.wait()
    assert guard.wait(timeout=15) == 0
    server.wait(timeout=5)
    assert not alive(child) and not alive(orphan)


OWNER = """
import sys, time
from pathlib import Path
from runner.core.config import EMBEDDED_MODEL
from runner.serving import Replica, ReplicaSpec
spec = ReplicaSpec(model=EMBEDDED_MODEL, engine="transformers", source=sys.argv[1], stop_grace=5.0)
replica = Replica(spec, [], sys.argv[2])
replica.start()
print("server", replica.process.pid, replica._work_dir, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(600)  # it may convert the embedded model first (see conftest.py)
def test_a_replica_whose_owner_is_sigkilled_leaves_no_process(tmp_path: Path, embedded_dir: Path) -> None:
    """The worker (here a child process) dies by SIGKILL, so nothing in it can stop its server or remove its work
    directory: the shepherd does, within its poll (0.2 s) and the grace period."""
    env = {**os.environ, "PYTHONPATH": worker_pythonpath()}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(embedded_dir), str(tmp_path / "logs")], env=env,
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert owner.stdout is not None
    # structlog's lines come first (on stdout, unconfigured)
    _, pid, work_dir = next(line.split() for line in owner.stdout if line.startswith(b"server "))
    server, work = int(pid), Path(work_dir.decode())
    time.sleep(3)  # the server is importing transformers and loading the model
    assert shepherd.session_processes(server), "the server should be running"
    assert work.is_dir()
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 20
    while shepherd.session_processes(server):
        assert time.monotonic() < deadline, [p.cmdline() for p in shepherd.session_processes(server)]
        time.sleep(0.2)
    assert not alive(server)
    deadline = time.monotonic() + 20
    while work.exists():  # removed once the session is stopped
        assert time.monotonic() < deadline, sorted(work.iterdir())
        time.sleep(0.2)
