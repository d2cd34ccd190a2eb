"""Stopping a model server's whole process session, and the shepherd: a tiny process that does it when the server's
owner dies without stopping it (SIGKILL, an OOM kill, a crashed Ray worker).

A server runs in a session of its own (``start_new_session=True``), so that a Ctrl-C in the owner's terminal does not
reach it half-way and its processes can be found again. Walking the tree from the server's pid is not enough: vLLM's
``EngineCore`` and ``Worker_TP*`` processes survive a SIGKILL of its API server (vllm#55510) and SGLang's schedulers
are reparented to PID 1 (sglang#31645), but both keep the session id, so :func:`stop_session` signals every process
of the session (and the leader's descendants that left it). Ray's own cleanup skips processes that started their own
session, and ``PR_SET_PDEATHSIG`` covers one process only: hence the shepherd, one per server, in a session of its
own, which polls its owner every 0.2 s and stops the server's session when the owner is gone; it exits when the
session is empty (the owner stopped the server itself). Having stopped a dead owner's server, it also removes the
server's work directory (``WORK_DIR``), which the owner would have removed.

This file imports only the standard library and psutil: the shepherd runs it as a script
(``python .../shepherd.py OWNER_PID OWNER_START SID GRACE [WORK_DIR]``), about 15 MB and 0.2 s, not the whole
runner.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

import psutil

POLL_S = 0.2
"""Seconds between the shepherd's looks at its owner and at the session."""


def gone(process: psutil.Process) -> bool:
    """Whether ``process`` has ended: it no longer exists, or it is a zombie (which still passes ``os.kill(pid,
    0)``, and waits for a parent that may never reap it)."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return True


def session_processes(sid: int) -> list[psutil.Process]:
    """Every live process of session ``sid`` (zombies left out), this process excluded."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if os.getsid(process.pid) == sid and not gone(process):
                found.append(process)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def stop_session(sid: int, grace: float, also: list[psutil.Process] | None = None) -> list[int]:
    """Stop every process of session ``sid`` (and ``also``): SIGTERM to each, up to ``grace`` seconds for them to
    end, then SIGKILL to those left and up to 5 s more.

    Args:
        sid: the session id (the pid of the server started with ``start_new_session=True``).
        grace: seconds between SIGTERM and SIGKILL.
        also: more processes to stop (descendants of the server that left its session).

    Returns:
        the pids still alive at the end (empty when all ended: the normal case).
    """
    targets = {process.pid: process for process in [*session_processes(sid), *(also or [])] if not gone(process)}
    _signal_all(targets.values(), signal.SIGTERM, sid)
    _wait(targets.values(), grace)
    left = [process for process in targets.values() if not gone(process)]
    # A process may have been forked into the session after the first look.
    left += [process for process in session_processes(sid) if process.pid not in targets]
    if left:
        _signal_all(left, signal.SIGKILL, sid)
        _wait(left, 5.0)
    return [process.pid for process in [*left, *session_processes(sid)] if not gone(process)]


def _signal_all(processes: object, signum: int, sid: int) -> None:
    try:
        os.killpg(sid, signum)  # the leader's group, in one call (its members are the usual bulk)
    except (ProcessLookupError, PermissionError):
        pass
    for process in processes:  # type: ignore[attr-defined]
        try:
            process.send_signal(signum)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def _wait(processes: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    pending = list(processes)  # type: ignore[call-overload]
    while pending and time.monotonic() < deadline:
        pending = [process for process in pending if not gone(process)]
        if pending:
            time.sleep(0.05)


def owner_alive(pid: int, started: float) -> bool:
    """Whether the process ``pid`` that started at ``started`` (psutil's ``create_time``) still runs: a reused pid
    has another start time."""
    try:
        process = psutil.Process(pid)
        return abs(process.create_time() - started) < 0.01 and not gone(process)
    except psutil.NoSuchProcess:
        return False


def leader_alive(sid: int) -> bool:
    """Whether the leader of session ``sid`` (the process whose pid is ``sid``) still runs in it: then the session
    is not empty, and nothing needs to look at every process of the machine to know it."""
    try:
        return os.getsid(sid) == sid and not gone(psutil.Process(sid))
    except (ProcessLookupError, PermissionError, psutil.Error):
        return False


def shepherd(owner: int, started: float, sid: int, grace: float, work_dir: str | None = None) -> int:
    """Watch ``owner``; when it is gone, stop session ``sid`` and remove ``work_dir`` (if given). Returns when the
    session is empty (exit status 0), or after stopping it (1 when some process survived)."""
    for name in ("SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)  # a terminal's Ctrl-C is the owner's business
    while True:
        if not leader_alive(sid) and not session_processes(sid):
            return 0
        if not owner_alive(owner, started):
            survivors = stop_session(sid, grace)
            if work_dir:
                shutil.rmtree(work_dir, ignore_errors=True)
            return 1 if survivors else 0
        time.sleep(POLL_S)


if __name__ == "__main__":
    owner_pid, owner_start, session_id, grace_s = sys.argv[1:5]
    sys.exit(shepherd(int(owner_pid), float(owner_start), int(session_id), float(grace_s),
                      sys.argv[5] if len(sys.argv) > 5 else None))
