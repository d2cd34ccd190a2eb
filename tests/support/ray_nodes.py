"""Several Ray nodes on this machine, for tests and ``scripts/bench.py``: a head and worker nodes on 127.0.0.1.

Each node is a ``ray start --block`` child of this process (started one after the other: two ``ray start`` at the
same instant crashed both), so stopping it is SIGTERM to that child, never a machine-wide ``ray stop`` (other Ray
clusters on the machine are left alone). A node's raylet can be killed (SIGKILL) to lose the node as a crashed or
preempted machine would. Token authentication is off (``RAY_AUTH_MODE=disabled``) for the nodes and for the drivers
given :attr:`LocalCluster.env`. The head's ``ray start`` writes its address to Ray's ``ray_current_cluster`` file
(what ``ray status`` and ``address="auto"`` read); stopping the cluster puts that file back as it was, so no later
command finds the address of a head that is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
# Where ``ray start --head`` records its address (``ray._common.utils.get_ray_temp_dir()``, without importing Ray).
CURRENT_CLUSTER = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray" / "ray_current_cluster"


@contextlib.contextmanager
def restoring_current_cluster() -> Iterator[None]:
    """Ray's ``ray_current_cluster`` as it was before the block, once it ends: a ``ray start --head`` inside writes
    its GCS address there (with the machine's IP, whatever ``--node-ip-address`` says), and a later ``ray status``
    or ``address="auto"`` would find a head that is gone."""
    try:
        before: str | None = CURRENT_CLUSTER.read_text()
    except OSError:
        before = None
    try:
        yield
    finally:
        if before is None:
            CURRENT_CLUSTER.unlink(missing_ok=True)
        else:
            CURRENT_CLUSTER.write_text(before)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def identity(pid: int) -> tuple[int, int] | None:
    """``(pid, start time in clock ticks since boot)``: names a process even after its pid is reused."""
    try:
        return pid, int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def command_line(pid: int) -> str:
    """The command line of process ``pid`` (empty if it is gone)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class Node:
    """One ``ray start --block`` child: its name, process, log and the processes it started."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    started: set[tuple[int, int]] = field(default_factory=set)

    def collect(self) -> set[int]:
        """The processes below the ``ray start`` child now, remembered (by pid and start time) for :meth:`stop`."""
        pids = descendants(self.process.pid)
        self.started |= {found for found in map(identity, pids) if found is not None}
        return pids

    def raylet(self) -> int:
        """The pid of the node's raylet."""
        pids = [pid for pid in self.collect() if "/raylet " in command_line(pid) + " "]
        assert len(pids) == 1, f"{self.name}: raylets {pids}"
        return pids[0]


class LocalCluster:
    """A head and worker nodes on 127.0.0.1 (see the module's docstring). Use as a context manager.

    Args:
        tmp: a folder for the nodes' logs.
        head_cpus: CPUs the head declares (0 keeps workers off it).
        env: extra environment of every node (and of :attr:`env`), e.g. ``PYTHONPATH`` for the workers.
    """

    def __init__(self, tmp: Path, head_cpus: float = 0, env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "RAY_AUTH_MODE": "disabled", **(env or {})}
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: dict[str, Node] = {}
        self._head_cpus = head_cpus
        self._current: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> LocalCluster:
        self._current = restoring_current_cluster()
        self._current.__enter__()
        self._start("head", ["--head", "--port", str(self.port), "--num-cpus", str(self._head_cpus),
                             "--dashboard-port", str(free_port()), "--include-dashboard", "false",
                             "--ray-client-server-port", str(free_port())], {})
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_node(self, name: str, num_cpus: float, env: dict[str, str] | None = None) -> Node:
        """Start a worker node called ``name`` with ``num_cpus`` CPUs; ``env`` reaches its workers."""
        return self._start(name, ["--address", self.address, "--num-cpus", str(num_cpus)], env or {})

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> Node:
        log = self.tmp / f"{name}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(BIN / "ray"), "start", "--block", "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
                 # Not Ray's fixed default (52365): another Ray on this machine may hold it, and a node whose
                 # agent cannot listen takes no job.
                 "--dashboard-agent-listen-port", str(free_port()), *args],
                env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT)
        node = self.nodes[name] = Node(name, process, log)
        deadline = time.monotonic() + 120
        while b"--block" not in log.read_bytes():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        node.collect()
        return node

    def kill_raylet(self, name: str) -> None:
        """SIGKILL node ``name``'s raylet: the node is lost as a crashed machine would be."""
        os.kill(self.nodes[name].raylet(), signal.SIGKILL)

    def collect(self) -> None:
        """Remember the processes every node has started so far (workers come and go)."""
        for node in self.nodes.values():
            node.collect()

    def stop(self) -> None:
        """Stop every node: SIGTERM to each ``ray start`` child (worker nodes first), then SIGKILL what they had
        started and left behind (each checked by pid and start time, so a reused pid is never hit)."""
        for node in reversed(list(self.nodes.values())):
            node.collect()
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                node.process.kill()
        for node in self.nodes.values():
            for pid, started in node.started:
                if identity(pid) == (pid, started):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        self.nodes.clear()
        if self._current is not None:
            self._current.__exit__(None, None, None)
            self._current = None
