"""A worker's model replicas: started together, published to the model layer once ready, watched, restarted a
bounded number of times, and stopped on every way out.

The engine's side (a Ray worker actor, or the sequential executor in the driver)::

    served = ServedModels(replica_specs(config), gpu_ids=ray.get_gpu_ids(), log_dir=scratch / "replicas",
                          env=context.model_env)
    served.start()          # blocks until every replica is ready; ReplicaStartError (exit 2) otherwise
    ...                     # items: ChatModel.from_name(spec.model) reaches this worker's replica
    served.raise_if_failed()   # ReplicaFailed (exit 3) once a replica is past its restarts
    served.stop()           # also on Ctrl-C, SIGTERM, exceptions; a SIGKILLed owner is covered by the shepherds
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import structlog

from runner.core import served
from runner.core.errors import ReplicaFailed, RunnerError
from runner.serving.replica import Health, Replica
from runner.serving.spec import ReplicaSpec

CHECK_INTERVAL_S = 5.0
"""Seconds between two health checks of a replica."""
CHECK_TIMEOUT_S = 30.0
"""Seconds a health check's probe may take before the replica counts as not answering."""
FAILED_CHECKS = 3
"""Health checks in a row that a replica may fail (not answering, or answering 5xx) before it is restarted; an
exited process is restarted at once."""
GENERATE_INTERVAL_S = 60.0
"""Seconds between two 1-token chat probes: an engine whose ``/health`` still answers while generation is stuck (an
NCCL hang with tensor parallelism, a ``transformers serve`` whose ``/health`` always says ok) is caught by them."""
GENERATE_TIMEOUT_S = 300.0
"""Seconds a 1-token chat probe may wait: it queues behind a full batch, which a busy engine clears in seconds."""

_live: weakref.WeakSet[ServedModels] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stop what is still running when the interpreter exits normally (a forgotten ``stop``)."""
    for group in list(_live):
        group.stop()


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica as a progress line shows it.

    Args:
        model: ``provider:model``.
        served_name: the replica's name.
        state: ``starting``, ``ready``, ``restarting``, ``failed`` or ``stopped``.
        restarts: restarts so far.
        url: its API root while it has one.
        log_path: its log.
    """

    model: str
    served_name: str
    state: str
    restarts: int
    url: str | None
    log_path: str


class ServedModels:
    """The replicas of one worker (one per :class:`ReplicaSpec`), and the threads that watch them.

    Args:
        specs: what to serve (:func:`~runner.serving.spec.replica_specs`); none: nothing to do.
        gpu_ids: the worker's GPUs (``ray.get_gpu_ids()``; empty: the CPU), shared by its replicas.
        log_dir: where the replicas' logs go (``<served name>.log``).
        env: variables for every server (``model_environment()`` captured on the driver: ``HF_TOKEN``...).
        publish: publish each ready replica to the model layer (:mod:`runner.core.served`); ``False`` for a
            caller that routes requests itself.
        on_event: called with ``(event, details)`` for ``ready``, ``restart`` and ``failed`` (e.g. to update a
            progress line); from the watching threads.
    """

    def __init__(self, specs: Sequence[ReplicaSpec], gpu_ids: Sequence[str | int] = (),
                 log_dir: str | Path = "replicas", *, env: Mapping[str, str] | None = None, publish: bool = True,
                 on_event: Callable[[str, dict[str, object]], None] | None = None) -> None:
        self.replicas = [Replica(spec, gpu_ids, log_dir, env=env) for spec in specs]
        self.publish = publish
        self.on_event = on_event
        self.failure: ReplicaFailed | None = None
        self._states = {replica.name: "new" for replica in self.replicas}
        self._restarts = {replica.name: 0 for replica in self.replicas}
        self._stopping = threading.Event()
        self._changed = threading.Condition()
        self._watchers: list[threading.Thread] = []
        self._lock = threading.Lock()
        # Held by a swap for its whole length and by each health check: the watcher never probes a replica whose
        # weights are being swapped (its probe would name the old served name, which transformers serve then loads
        # again on demand, racing the swap: "Unknown modality for: NoneType", and a needless fresh start).
        self._busy = {replica.name: threading.Lock() for replica in self.replicas}
        self._log = structlog.get_logger("runner.serving")
        _live.add(self)

    def __enter__(self) -> ServedModels:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def log_paths(self) -> list[Path]:
        """Every replica's log: what the engine copies into the run directory's ``replicas/``."""
        return [replica.log_path for replica in self.replicas]

    def start(self) -> None:
        """Start every replica at once (they load in parallel), wait until all are ready (each within its
        ``startup_timeout``), publish them, and start watching them.

        Raises:
            ReplicaStartError: a replica could not start (the first one's error; every replica is stopped first).
        """
        if not self.replicas:
            return
        if self.publish:
            for replica in self.replicas:
                served.expect(replica.spec.model, replica.spec.startup_timeout)
        try:
            for replica in self.replicas:
                self._set(replica, "starting")
                replica.start()
            with ThreadPoolExecutor(max_workers=len(self.replicas), thread_name_prefix="replica-start") as pool:
                for future in [pool.submit(replica.wait_ready) for replica in self.replicas]:
                    future.result()
        except BaseException:
            self.stop()
            raise
        for replica in self.replicas:
            self._ready(replica)
            watcher = threading.Thread(target=self._watch, args=(replica,), name=f"watch-{replica.name}",
                                       daemon=True)
            watcher.start()
            self._watchers.append(watcher)

    def statuses(self) -> list[ReplicaStatus]:
        """Each replica's state, restarts, URL and log (for a progress line: how many are ready, how many are
        starting)."""
        with self._lock:
            return [ReplicaStatus(replica.spec.model, replica.served_name, self._states[replica.name],
                                  self._restarts[replica.name],
                                  replica.base_url if replica.port is not None else None, str(replica.log_path))
                    for replica in self.replicas]

    def ready(self) -> bool:
        """Whether every replica is ready now (none restarting or failed)."""
        return all(status.state == "ready" for status in self.statuses())

    def raise_if_failed(self) -> None:
        """Raise the failure of a replica that is past its restarts.

        Raises:
            ReplicaFailed: one line naming the model, its last exit status or symptom, and the log.
        """
        if self.failure is not None:
            raise self.failure

    def stop(self) -> None:
        """Stop watching, withdraw the replicas from the model layer and stop every server and its session.
        Safe to call more than once and from any thread."""
        self._stopping.set()
        for replica in self.replicas:
            if self.publish:
                served.forget(replica.spec.model)
            replica.stop()
            self._set(replica, "stopped")
        for watcher in self._watchers:
            if watcher is not threading.current_thread():
                watcher.join(timeout=1.0)
        _live.discard(self)

    def can_swap(self, specs: Sequence[ReplicaSpec]) -> bool:
        """Whether every replica can load the weights of the spec in its place in ``specs`` (one per replica) in
        place of its own (:meth:`Replica.can_swap <runner.serving.replica.Replica.can_swap>`), none failed."""
        return (self.failure is None and len(specs) == len(self.replicas) > 0
                and all(replica.can_swap(spec) for replica, spec in zip(self.replicas, specs)))

    def swap(self, specs: Sequence[ReplicaSpec]) -> None:
        """Swap each replica to the spec in its place in ``specs`` (see :meth:`can_swap`): its old model withdrawn
        from the model layer, its weights reloaded in place, the new model published once it answers.

        Raises:
            ReplicaStartError: a reload failed (every replica is stopped first; start new ones instead).
        """
        for replica, spec in zip(self.replicas, specs):
            if self.publish:
                served.forget(replica.spec.model)
                served.expect(spec.model, spec.startup_timeout)
            with self._busy[replica.name]:
                self._set(replica, "starting")
                try:
                    replica.swap(spec)
                except BaseException:
                    self.stop()
                    raise
                self._ready(replica)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until every replica is ready (a worker holds its items while one restarts); ``False`` when
        ``timeout`` seconds passed first.

        Raises:
            ReplicaFailed: a replica is past its restarts.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                self.raise_if_failed()
                if self.ready():
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._stopping.is_set():
                    return False
                self._changed.wait(left if left is not None else 1.0)

    def _set(self, replica: Replica, state: str) -> None:
        with self._lock:
            self._states[replica.name] = state
        with self._changed:
            self._changed.notify_all()

    def _ready(self, replica: Replica) -> None:
        self._set(replica, "ready")
        if self.publish:
            served.publish(replica.endpoint)
        self._emit("ready", replica)

    def _emit(self, event: str, replica: Replica, **details: object) -> None:
        if self.on_event is not None:
            self.on_event(event, {"model": replica.spec.model, "served_name": replica.served_name, **details})

    def _watch(self, replica: Replica) -> None:
        """Check ``replica`` every :data:`CHECK_INTERVAL_S` until stopped (never while its weights are swapped);
        restart it when it exited, failed :data:`FAILED_CHECKS` checks in a row, or failed a chat probe; past its
        restarts, record the failure."""
        failed = 0
        next_generate = time.monotonic() + GENERATE_INTERVAL_S
        while not self._stopping.wait(CHECK_INTERVAL_S):
            generate = time.monotonic() >= next_generate
            with self._busy[replica.name]:
                if self._states.get(replica.name) != "ready":
                    continue  # being swapped: checked again once its new weights answer
                health = replica.check(GENERATE_TIMEOUT_S if generate else CHECK_TIMEOUT_S, generate=generate)
            if self._stopping.is_set():
                return
            if generate:
                next_generate = time.monotonic() + GENERATE_INTERVAL_S
            if health.ok:
                failed = 0
                continue
            failed += 1
            if health.exit_status is None and not generate and failed < FAILED_CHECKS:
                continue
            if not self._restart(replica, health):
                return
            failed = 0
            next_generate = time.monotonic() + GENERATE_INTERVAL_S

    def _restart(self, replica: Replica, health: Health) -> bool:
        """Restart ``replica`` after ``health`` said it failed; ``False`` when it is past its restarts or could not
        start again (the failure is recorded)."""
        count = self._restarts[replica.name] + 1
        tail = replica.log_tail()
        if self.publish:
            served.withdraw(replica.spec.model)
        if count > replica.spec.max_restarts:
            return self._fail(replica, health.reason, tail)
        with self._lock:
            self._restarts[replica.name] = count
            self._states[replica.name] = "restarting"
        # One line: what happened, the exit status, the log's last lines.
        self._log.warning("replica.restart", model=replica.spec.model, served_name=replica.served_name,
                          reason=health.reason, exit_status=health.exit_status, restart=count,
                          restarts=replica.spec.max_restarts, log_tail=tail, log=str(replica.log_path))
        self._emit("restart", replica, reason=health.reason, exit_status=health.exit_status, restart=count)
        try:
            if not self._stopping.is_set():
                replica.restart()
        except RunnerError as exc:
            if not self._stopping.is_set():
                return self._fail(replica, f"its restart failed: {exc}", "")
        if self._stopping.is_set():
            # stop() ran while this thread restarted the server: what it started is stopped here.
            replica.stop()
            return False
        self._ready(replica)
        return True

    def _fail(self, replica: Replica, reason: str, tail: str) -> bool:
        self._set(replica, "failed")
        if self.publish:
            served.fail(replica.spec.model, f"its replica failed after {replica.spec.max_restarts} restart(s): "
                        f"{reason}")
        restarts = replica.spec.max_restarts
        shown = f"; its log ends: {tail}" if tail else ""
        self.failure = ReplicaFailed(
            f"{replica.spec.model}: its replica {replica.served_name} failed after {restarts} restart(s) "
            f"({reason}){shown}; log: {replica.log_path}; fix the cause (GPU memory, the engine's log), then run the "
            "same command to resume")
        with self._changed:
            self._changed.notify_all()
        self._log.error("replica.failed", model=replica.spec.model, served_name=replica.served_name, reason=reason,
                        log=str(replica.log_path))
        self._emit("failed", replica, reason=reason)
        replica.stop()
        return False

