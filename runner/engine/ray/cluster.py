"""Attaching to Ray, and sizing the worker pool from a :class:`WorkerSpec` and the cluster's nodes.

``connect`` follows Ray's own rule (``ray.init``): an explicit address, else ``RAY_ADDRESS`` (which ``ray job submit``
and KubeRay set for the driver), else a new embedded Ray on this machine. An address that cannot be reached is
refused within seconds with one line, instead of Ray's long retry loop.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import logging
import json
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import structlog

from runner.core.config import WorkerSpec, resources_text
from runner.core.errors import ConfigError, RunnerError, RunStopped, exception_line

_CONNECT_TIMEOUT_S = 5.0
# Ray's resource name for an accelerator type constraint (ray/_common/utils.py RESOURCE_CONSTRAINT_PREFIX).
_ACCELERATOR_PREFIX = "accelerator_type:"
# The amount Ray requests of the accelerator-type resource for ``accelerator_type=`` (ray/_private/utils.py).
_ACCELERATOR_AMOUNT = 0.001


class RayUnavailable(RunnerError):
    """Ray is not installed, or the cluster at the given address cannot be reached."""


class RayStartFailed(RunStopped):
    """Ray failed as it started or attached, for a reason of the moment rather than of the input (a node that timed
    out during start-up on a busy machine, a GCS that did not answer): exit status 3, one line, and the same command
    resumes."""


_MISSING = "Ray is not installed; install it with pip install 'ray[default]==2.60.0', or run with --sequential"


def _require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(_MISSING) from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port``, ``ray://host:port`` or ``http://host:port`` address; ``None`` for
    ``auto``/``local`` or an address without a port."""
    if address in ("auto", "local"):
        return None
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.hostname is None or parts.port is None:
        return None
    return parts.hostname, parts.port


def check_reachable(address: str, timeout: float = _CONNECT_TIMEOUT_S) -> None:
    """Open (and close) a TCP connection to ``address`` so a wrong address fails fast.

    Raises:
        RayUnavailable: nothing accepts connections there within ``timeout`` seconds.
    """
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {address} ({reason}); check --ray-address / RAY_ADDRESS "
            "(the head's GCS port, default 6379), or leave both unset for an embedded Ray"
        ) from None


def cluster_address(address: str | None) -> str | None:
    """The cluster to attach to: ``address``, else ``RAY_ADDRESS``; ``None`` means an embedded Ray."""
    return address or os.environ.get("RAY_ADDRESS") or None


def preflight(address: str | None) -> None:
    """Check, in seconds and without starting anything, that Ray imports and the cluster address answers.

    Raises:
        RayUnavailable: Ray missing, or the address (``address`` or ``RAY_ADDRESS``) unreachable.
    """
    target = cluster_address(address)
    if target:
        _require_ray()
        check_reachable(target)
    elif importlib.util.find_spec("ray") is None:
        _require_ray()


def connect(address: str | None, serving: bool = False) -> bool:
    """Attach to the Ray cluster of ``address`` (or ``RAY_ADDRESS``), or start an embedded one.

    An already initialised Ray in this process (a notebook, a test session) is used as it is. The process keeps its
    own SIGTERM handling (:func:`_keeping_sigterm`). With ``serving`` (the run starts model replicas on its workers),
    an embedded Ray's processes yield this machine's cores to the replicas (:func:`_yielding_to_replicas`).

    Returns:
        whether this call initialised Ray in this process, embedded or attached (the caller then shuts it down when
        the run ends, which stops an embedded Ray and only detaches from a cluster).

    Raises:
        RayUnavailable: Ray missing, the address unreachable, or the machine refused what Ray needs (exit status 2).
        RayStartFailed: Ray failed as it started (an embedded one twice: a node that timed out during start-up on a
            busy machine is tried once more) or attached, for any other reason (exit status 3).
    """
    ray = _require_ray()
    if ray.is_initialized():
        return False
    target = cluster_address(address)
    if target:
        check_reachable(target)
    for attempt in (1, 2):
        try:
            _init(ray, target, serving)
            return True
        except (OSError, ValueError) as exc:
            _refused(exc, target)
        except Exception as exc:  # noqa: BLE001 - Ray raises a plain Exception for a node that timed out starting
            with contextlib.suppress(Exception):
                ray.shutdown()  # what started of it, so that the retry (or the next command) starts clean
            detail = exception_line(exc)
            if attempt == 1 and not target:
                structlog.get_logger("runner").warning("ray.start_retried", error=detail[:300],
                                                       detail="the embedded Ray failed as it started; trying once more")
                continue
            where = f"attach to the Ray cluster at {target}" if target else "start an embedded Ray (twice)"
            raise RayStartFailed(f"could not {where} ({detail}); the machine or the cluster may be busy: run the same "
                                 "command again, it resumes (or --sequential, which needs no Ray)") from None
    return True  # pragma: no cover - the loop returns or raises


def _init(ray: Any, target: str | None, serving: bool) -> None:
    """``ray.init`` of the cluster at ``target`` or of an embedded one (see :func:`connect`)."""
    # Ray's own INFO lines ("Started a local Ray instance") would stand before a run's one-line error: the run logs
    # what it does itself (ray.pool, worker.ready).
    with _keeping_sigterm(on_ray_exit=ray.shutdown):
        if target:
            ray.init(address=target, logging_level=logging.WARNING)
        else:
            # "local": a new Ray of our own, never a cluster some earlier `ray start` left in /tmp/ray. Its notice that
            # the new cluster uses token authentication (Ray's secure default) would stand before every run's first
            # line; the embedded cluster ends with the run.
            with _quiet(AUTH_NOTICE_LOGGER), _yielding_to_replicas(serving):
                ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING)


def _refused(exc: BaseException, target: str | None) -> None:
    """Raise the one line of a Ray that the machine or the address refused (exit status 2: the input is to fix).

    OSError: the machine refused what Ray needs (a socket path over AF_UNIX's 107 bytes under a long TMPDIR, a temp
    folder that is a file or not writable, no free port); ConnectionError and TimeoutError are OSErrors.

    Raises:
        RayUnavailable: always.
    """
    detail = exception_line(exc)
    if not target:
        raise RayUnavailable(
            f"cannot start an embedded Ray ({detail}); if the temp folder is the cause, set RAY_TMPDIR to a short, "
            f"writable folder (e.g. RAY_TMPDIR=/tmp; Ray uses it, else TMPDIR, now {_temp_root()}), or run with "
            "--sequential") from None
    hint = "" if os.environ.get("RAY_AUTH_MODE") == "token" else (
        "; if the cluster uses token authentication (on by default for clusters started by Ray 2.60), "
        "set RAY_AUTH_MODE=token and provide the token (RAY_AUTH_TOKEN, or ~/.ray/auth_token)"
    )
    raise RayUnavailable(f"cannot attach to the Ray cluster at {target} ({detail}){hint}") from None


RAY_NICE = 19
"""The niceness of the scheduling groups (Linux's autogroups, one per session) of an embedded Ray's processes when the
run serves models on this machine: where the replica's threads fill the cores, Ray's workers, actors and daemons get
about 3 % of a core while those threads run (weights 15 against 512 a core), and whatever the threads leave. At 10
(weight 110) W7 measured no gain (docs/performance.md)."""


@contextlib.contextmanager
def _yielding_to_replicas(serving: bool) -> Iterator[None]:
    """Inside the block, each process Ray starts itself (its GCS, raylet, dashboard and monitors) starts a session
    of its own, whose autogroup has niceness :data:`RAY_NICE`; the raylet's workers, actors and agents are in the
    raylet's session, so at that niceness too. Without ``serving``, or without autogroups in the kernel
    (``/proc/self/autogroup``), the block changes nothing.

    Why: Linux shares the cores between sessions (``CONFIG_SCHED_AUTOGROUP``, on by default), wherever the processes
    are in the root CPU cgroup (as on this 2-core VM; not in a container's or a Kubernetes pod's cgroup, nor under
    ``sched_autogroup_enabled=0``, where the daemons still start sessions of their own but the niceness has no
    effect), and a replica's server runs in a session of its own (:mod:`runner.serving.shepherd`). Its threads fill
    the cores, so each core holds half of its group's weight, and any other session's process waking there (each of
    Ray's processes wakes about a hundred times a second: its core worker looks for signals every 10 ms) weighs a
    whole group's, taking up to two thirds of that core while it runs. A replica's server, a new session, starts at
    niceness 0 whatever the worker's, so the model keeps the cores; this process (the driver) keeps its own session
    and priority. The run yields to this machine's other sessions too, as under ``nice``. W7 in docs/performance.md
    measures what it gains.

    Ray starts its processes through ``ray._private.services.ConsolePopen`` (Ray 2.60, pinned); without it the block
    changes nothing. A process the raylet starts later (a worker replacing a dead one) inherits the niceness: it takes
    what the replicas leave of the cores, which a dead worker's own replica, stopped with it, has left.
    """
    services = None
    if serving:
        with contextlib.suppress(ImportError):
            services = importlib.import_module("ray._private.services")
    console_popen = getattr(services, "ConsolePopen", None)
    if console_popen is None or not os.path.exists("/proc/self/autogroup"):
        yield
        return

    class NicedPopen(console_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["start_new_session"] = True
            kwargs["preexec_fn"] = functools.partial(_niced_session, kwargs.get("preexec_fn"))
            super().__init__(*args, **kwargs)

    services.ConsolePopen = NicedPopen  # type: ignore[union-attr]
    try:
        yield
    finally:
        services.ConsolePopen = console_popen  # type: ignore[union-attr]


def _niced_session(then: Any) -> None:
    """In a child Ray starts, after ``setsid`` and before ``exec``: Ray's own ``preexec_fn`` (``then``), then the
    niceness :data:`RAY_NICE` for the child's new autogroup (``/proc/self/autogroup``; an unprivileged process may
    lower its priority there at most every 0.1 s, machine-wide, hence the retries; a refusal leaves the priority as
    it was)."""
    if then is not None:
        then()
    for _ in range(20):
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(RAY_NICE))
            return
        except BlockingIOError:
            time.sleep(0.05)
        except OSError:
            return


AUTH_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
"""The logger of Ray's notice that a cluster it starts enables token authentication (Ray 2.60)."""


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The Python logger ``name`` says nothing below ERROR inside the block."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _temp_root() -> str:
    """The folder an embedded Ray puts its sessions and sockets under: ``RAY_TMPDIR``, else ``TMPDIR`` (Linux),
    else ``/tmp`` (ray/_common/utils.py ``get_default_system_temp_dir``)."""
    return os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"


@contextlib.contextmanager
def _keeping_sigterm(on_ray_exit: Any = None) -> Iterator[None]:
    """Put this process's SIGTERM handler back after ``ray.init`` replaced it.

    ``ray.init`` sets a Python handler that exits with status 15 (``sys.exit(signum)``, ray/_private/worker.py
    ``init``), and the driver's core worker then installs absl's failure signal handler, which prints a C++ stack
    dump ("SIGTERM received ... epoll_wait") before calling it. Setting the previous handler again with
    :func:`signal.signal` replaces both at the OS level, so SIGTERM does what the process said (the CLI: stop the
    run like Ctrl-C). Signal handlers belong to the main thread; from any other, nothing is changed.

    A SIGTERM that arrives while the block runs meets Ray's handler: its ``SystemExit(15)`` is caught here,
    ``on_ray_exit`` is called (``ray.shutdown``: stop what ``ray.init`` had started, rather than leave its agents
    behind), the previous handler is called as the signal would have called it, and ``KeyboardInterrupt`` is raised
    (``ray.init`` did not finish; the CLI then prints its one line and exits with 143); with no handler of the
    process's own, the ``SystemExit`` goes on.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        if on_ray_exit is not None:
            with contextlib.suppress(Exception):
                on_ray_exit()
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        if not callable(previous):
            raise
        previous(signal.SIGTERM, None)  # the CLI's notes the SIGTERM; under asyncio it only cancels the run's task
        raise KeyboardInterrupt from None  # ray.init did not finish: nothing can go on
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def actor_options(spec: WorkerSpec, calls_per_actor: int) -> dict[str, Any]:
    """The ``ActorClass.options(...)`` of one worker: its resources, and room for ``calls_per_actor`` calls.

    ``max_restarts=0``: the driver itself replaces a dead worker and retries its items with the attempt counted,
    which Ray's own restarts would hide.
    """
    options: dict[str, Any] = {
        "num_cpus": spec.num_cpus,
        "num_gpus": spec.num_gpus,
        "max_restarts": 0,
        "max_task_retries": 0,
        "max_concurrency": calls_per_actor,
    }
    if spec.memory is not None:
        options["memory"] = int(spec.memory)
    if spec.resources:
        options["resources"] = dict(spec.resources)
    if spec.accelerator_type:
        options["accelerator_type"] = spec.accelerator_type
    return options


def demand(spec: WorkerSpec) -> dict[str, float]:
    """The Ray resources one worker of ``spec`` reserves (name -> amount; memory in bytes)."""
    wanted = {"CPU": spec.num_cpus, "GPU": spec.num_gpus, **spec.resources}
    if spec.memory is not None:
        wanted["memory"] = float(spec.memory)
    if spec.accelerator_type:
        wanted[f"{_ACCELERATOR_PREFIX}{spec.accelerator_type}"] = _ACCELERATOR_AMOUNT
    return {name: amount for name, amount in wanted.items() if amount > 0}


def fit_count(spec: WorkerSpec, nodes: list[dict[str, float]]) -> int:
    """How many workers of ``spec`` fit on ``nodes`` (each a node's total resources), node by node.

    A spec that asks for nothing (``num_cpus=0`` and no other resource) is counted one per CPU.
    """
    wanted = demand(spec) or {"CPU": 1.0}
    total = 0
    for node in nodes:
        # A small epsilon keeps 1.0 / 0.1 from flooring to 9.
        total += min(math.floor(node.get(name, 0.0) / amount + 1e-9) for name, amount in wanted.items())
    return total


def cluster_nodes() -> list[dict[str, float]]:
    """The total resources of every alive node of the connected cluster."""
    ray = _require_ray()
    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def free_nodes() -> list[dict[str, float]]:
    """The free resources of every alive node of the connected cluster now (the GCS's per-node view,
    ``ray._private.state.available_resources_per_node``; if it cannot be read, the cluster's free total as one
    node)."""
    ray = _require_ray()
    try:
        from ray._private import state

        return [dict(free) for free in state.available_resources_per_node().values()]
    except Exception:  # noqa: BLE001 - a private API, read defensively; the total is a fair stand-in
        return [dict(ray.available_resources())]


def pool_size(spec: WorkerSpec, items: int | None) -> int:
    """The number of workers for a run of ``items`` items (``None``: unknown).

    ``spec.num_workers`` when given; else as many as the alive nodes fit, never more than there are items. More
    workers than the nodes fit now is allowed (an autoscaling cluster may add nodes; the pool gives work only to
    workers Ray has started), with a ``ray.workers_pending`` warning.

    Raises:
        ConfigError: no alive node has the resources of even one worker.
    """
    nodes = cluster_nodes()
    fits = fit_count(spec, nodes)
    if fits == 0:
        wanted = resources_text(demand(spec))
        knobs = "--num-cpus / --num-gpus / --memory / --resources" + (
            " / --accelerator-type" if spec.accelerator_type else "")
        raise ConfigError(
            f"no node of the Ray cluster has the resources of one worker ({wanted}); lower or drop {knobs}, "
            "or add nodes that have them"
        )
    count = spec.num_workers or fits
    if items is not None:
        count = min(count, max(items, 1))
    free = fit_count(spec, free_nodes())
    if free < min(count, fits):
        wanted = resources_text(demand(spec))
        structlog.get_logger("runner").warning(
            "ray.resources_busy", workers=count, fit_total=fits, fit_free_now=free,
            detail=f"the cluster's nodes hold {fits} workers of this spec ({wanted} each), but only {free} fit in "
            "what is free now: other jobs or runs hold the rest; the others wait (pool.waiting says what for), up to "
            "--placement-timeout with none running",
        )
    if count > fits:
        structlog.get_logger("runner").warning(
            "ray.workers_pending", workers=count, fit_now=fits,
            detail=f"the cluster's nodes fit {fits} of the {count} workers now; the others start if resources free "
            "up or nodes are added, and the run goes on with those that started",
        )
    return max(count, 1)


JOB_ENVIRONMENT = ("RAY_JOB_CONFIG_JSON_ENV_VAR", "RAY_JOB_SUBMISSION_ID", "RAY_JOB_ID")
"""Variables that say this process is a Ray job's driver: Ray's job supervisor gives the entrypoint
``RAY_JOB_CONFIG_JSON_ENV_VAR`` (a JSON job config whose ``metadata.job_submission_id`` is the submission id;
ray/dashboard/modules/job/job_supervisor.py); KubeRay's submitter sets ``RAY_JOB_SUBMISSION_ID``; Ray workers have
``RAY_JOB_ID``."""


def ray_job() -> str | None:
    """The Ray job this process runs in (its submission id when known, else the variable that says so), or
    ``None``."""
    config = os.environ.get(JOB_ENVIRONMENT[0])
    if config:
        try:
            submission = json.loads(config).get("metadata", {}).get("job_submission_id")
        except (ValueError, AttributeError):
            submission = None
        return str(submission or JOB_ENVIRONMENT[0])
    for name in JOB_ENVIRONMENT[1:]:
        if os.environ.get(name):
            return os.environ[name]
    return None


def gcs_address() -> str:
    """The address of the connected cluster's GCS (for logs)."""
    return _require_ray().get_runtime_context().gcs_address


def shutdown() -> None:
    """Stop Ray in this process (the embedded cluster too, when this process started it)."""
    ray = _require_ray()
    ray.shutdown()
