"""The Ray mode's parts that need no cluster (sizing a pool, actor options, addresses, evaluator options), and the
priority of an embedded Ray that serves models (in a process of its own)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from runner import RayEvaluator, WorkerSpec
from runner.benchmarks.toy import ToyBenchmark
from runner.core.errors import ConfigError
from runner.core.config import bytes_text, resources_text
from runner.engine.ray.cluster import RayUnavailable, actor_options, check_reachable, demand, fit_count
from tests.support.cli import REPO

NODE_8CPU_2GPU = {"CPU": 8.0, "GPU": 2.0, "memory": 32 * 1024**3, "accelerator_type:A100": 1.0}


def test_importing_runner_does_not_import_ray() -> None:
    code = "import sys, runner; from runner import RayEvaluator; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_command_line_starts_without_ray_pyarrow_or_the_model_clients() -> None:
    """``python -m runner --help``, a status or a refused flag load none of the heavy libraries: Ray (the Ray
    executor), pyarrow and numpy (result shards), httpx and openai (model calls), each imported where it is used."""
    heavy = ("ray", "pyarrow", "numpy", "httpx", "openai", "torch")
    code = f"import sys; from runner.cli import main; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("spec", "nodes", "expected"),
    [
        (WorkerSpec(), [NODE_8CPU_2GPU], 8),
        (WorkerSpec(num_cpus=2), [NODE_8CPU_2GPU, {"CPU": 3.0}], 4 + 1),
        (WorkerSpec(num_cpus=1, num_gpus=1), [NODE_8CPU_2GPU, {"CPU": 16.0}], 2),
        (WorkerSpec(num_cpus=0, num_gpus=0.5), [NODE_8CPU_2GPU], 4),
        (WorkerSpec(num_cpus=0.1), [{"CPU": 1.0}], 10),
        (WorkerSpec(memory="12GiB"), [NODE_8CPU_2GPU], 2),
        (WorkerSpec(accelerator_type="A100"), [NODE_8CPU_2GPU, {"CPU": 8.0}], 8),
        (WorkerSpec(accelerator_type="H100"), [NODE_8CPU_2GPU], 0),
        (WorkerSpec(resources={"TPU": 4}), [{"CPU": 8.0, "TPU": 8.0}], 2),
        (WorkerSpec(num_cpus=0), [{"CPU": 3.0}], 3),
    ],
)
def test_fit_count(spec: WorkerSpec, nodes: list[dict[str, float]], expected: int) -> None:
    """Workers are packed node by node: a spec never spans nodes."""
    assert fit_count(spec, nodes) == expected


def test_actor_options_carry_every_resource() -> None:
    spec = WorkerSpec(num_cpus=2, num_gpus=0.5, memory="1GiB", resources={"TPU": 1}, accelerator_type="A100")
    assert actor_options(spec, 40) == {
        "num_cpus": 2.0,
        "num_gpus": 0.5,
        "memory": 1024**3,
        "resources": {"TPU": 1.0},
        "accelerator_type": "A100",
        "max_restarts": 0,
        "max_task_retries": 0,
        "max_concurrency": 40,
    }
    assert demand(spec) == {"CPU": 2.0, "GPU": 0.5, "memory": float(1024**3), "TPU": 1.0,
                            "accelerator_type:A100": 0.001}


@pytest.mark.parametrize(("memory", "shown"), [
    ("4TiB", "4TiB"), ("1000TiB", "1000TiB"), ("8GiB", "8GiB"), ("1.5GiB", "1.5GiB"), ("512MiB", "512MiB"),
    ("1.5GB", "1.5GB"), ("2048MiB", "2GiB"), ("12345678901", "11.50GiB"), ("100", "100B"),
])
def test_memory_is_printed_as_the_user_wrote_it_or_in_gib(memory: str, shown: str) -> None:
    """Not ``memory=4.39805e+12`` (issue 27)."""
    spec = WorkerSpec(num_cpus=2, memory=memory)
    assert resources_text(demand(spec)) == f"CPU=2, memory={shown}"
    assert bytes_text(float(spec.memory)) == shown


def test_unreachable_address_fails_fast() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The socket is closed again: nothing listens on the port.
    with pytest.raises(RayUnavailable, match=rf"cannot reach the Ray cluster at ray://127.0.0.1:{port}"):
        check_reachable(f"ray://127.0.0.1:{port}", timeout=2)


def test_ray_evaluator_worker_options() -> None:
    """AgentScope's worker counts and the keyword shortcuts land in the WorkerSpec; the shortcuts win over worker=."""
    benchmark = ToyBenchmark(n_tasks=2)
    assert RayEvaluator(benchmark=benchmark, max_workers=4).worker.num_workers == 4
    assert RayEvaluator("x", benchmark, 1, None, 3).worker.num_workers == 3
    evaluator = RayEvaluator(benchmark=benchmark, worker=WorkerSpec(num_gpus=1, max_attempts=5),
                             num_gpus=0.25, memory="2GiB", max_concurrency=8, solution_retries=2, placement_timeout=60)
    assert evaluator.worker.model_dump() == {
        "num_workers": None, "num_cpus": 1.0, "num_gpus": 0.25, "memory": 2 * 1024**3, "memory_limit": None,
        "resources": {},
        "accelerator_type": None, "max_concurrency": 8, "max_attempts": 5, "placement_timeout": 60.0,
    }
    assert (evaluator.settings.solution_retries, evaluator.settings.executor) == (2, "ray")
    assert evaluator.settings.worker == evaluator.worker
    with pytest.warns(FutureWarning, match="retry_errors= is deprecated; use solution_retries="):
        assert RayEvaluator(benchmark=benchmark, retry_errors=3).settings.solution_retries == 3


def test_ray_evaluator_rejects_bad_worker_options() -> None:
    with pytest.raises(ConfigError, match="max_concurrency"):
        RayEvaluator(benchmark=ToyBenchmark(n_tasks=2), max_concurrency=0)
    with pytest.raises(ConfigError, match="num_workers"):
        RayEvaluator(benchmark=ToyBenchmark(n_tasks=2), max_workers=0)


def test_a_sigterm_during_ray_init_is_the_processs_own_and_stops_what_ray_started():
    """Ray's handler, installed by ``ray.init`` halfway, turns a SIGTERM into ``SystemExit(15)``: the block gives
    the process's own handler its turn instead (the CLI's: one line, exit 143) and calls ``ray.shutdown``."""
    import signal

    from runner.engine.ray.cluster import _keeping_sigterm

    seen, stopped = [], []

    def own(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, own)
    try:
        with pytest.raises(KeyboardInterrupt), _keeping_sigterm(on_ray_exit=lambda: stopped.append(True)):
            signal.signal(signal.SIGTERM, lambda *_: None)  # what ray.init does
            raise SystemExit(signal.SIGTERM)
        assert seen == [signal.SIGTERM] and stopped == [True]
        assert signal.getsignal(signal.SIGTERM) is own
        with pytest.raises(SystemExit), _keeping_sigterm(on_ray_exit=lambda: stopped.append(True)):
            raise SystemExit(2)  # another exit is not a signal's
        assert stopped == [True]
    finally:
        signal.signal(signal.SIGTERM, previous)


PRIORITY_PROBE = r'''
import json, os, subprocess, sys
import ray
import ray._private.services as services
from runner.engine.ray.cluster import connect

def autogroup():
    return open("/proc/self/autogroup").read().strip() if os.path.exists("/proc/self/autogroup") else None

before, console_popen = autogroup(), services.ConsolePopen
connect(None, serving=sys.argv[1] == "serving")

@ray.remote(num_cpus=0)
def start_server():
    """What a worker does when it starts a replica: a server in a session of its own (runner/serving/replica.py)."""
    server = subprocess.run([sys.executable, "-c", "import os; print(open('/proc/self/autogroup').read().strip() "
                             "if os.path.exists('/proc/self/autogroup') else None)"],
                            capture_output=True, text=True, start_new_session=True, check=True)
    return {"worker": autogroup(), "worker_sid": os.getsid(0), "server": server.stdout.strip()}

seen = ray.get(start_server.remote())
print(json.dumps({"driver_before": before, "driver_after": autogroup(), "driver_sid": os.getsid(0),
                  "restored": services.ConsolePopen is console_popen, **seen}))
ray.shutdown()
'''


def _nice(autogroup: str | None) -> int | None:
    """The niceness in a ``/proc/PID/autogroup`` line (``/autogroup-12 nice 10``)."""
    return None if autogroup is None else int(autogroup.rsplit(" ", 1)[1])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("serving", [True, False])
def test_an_embedded_ray_that_serves_models_yields_the_cores_to_the_replicas(serving: bool) -> None:
    """With model replicas to serve (``serving``), the embedded Ray's workers run in a session whose autogroup has
    niceness ``RAY_NICE`` (where the kernel has autogroups), a server the worker starts in a session of its own runs
    at niceness 0, and the driver keeps its own session and priority; without replicas, Ray's workers share the
    driver's session as Ray starts them."""
    from runner.engine.ray.cluster import RAY_NICE

    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}  # an embedded Ray, always
    done = subprocess.run([sys.executable, "-c", PRIORITY_PROBE, "serving" if serving else "plain"],
                          capture_output=True, text=True, timeout=170, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["driver_after"] == seen["driver_before"]
    assert seen["restored"]                  # Ray's later process starts are its own again
    if serving and seen["driver_before"] is not None:
        assert seen["worker_sid"] != seen["driver_sid"]
        assert _nice(seen["worker"]) == RAY_NICE
        assert _nice(seen["server"]) == 0
    else:
        assert seen["worker_sid"] == seen["driver_sid"]
        assert seen["worker"] == seen["driver_before"]


BUSY_MACHINE = r'''
import sys
import ray
from runner.cli import main

real, calls, failures = ray.init, [], int(sys.argv[1])

def init(*args, **kwargs):
    calls.append(kwargs.get("address"))
    if len(calls) <= failures:
        raise Exception("The current node timed out during startup. This could happen because some of the Ray "
                        "processes failed to startup.")
    return real(*args, **kwargs)

ray.init = init
status = main(sys.argv[2:])
print("inits", calls, file=sys.stderr)
sys.exit(status)
'''


@pytest.mark.parametrize("failures", [1, 2])
def test_a_node_that_times_out_starting_is_tried_once_more_then_is_one_line_and_exit_3(tmp_path, failures) -> None:
    """Issue 42: on a machine at load 15 to 20, ``ray.init`` raised Ray's plain ``Exception`` ("The current node
    timed out during startup"), which ended a run with Ray's traceback and exit 1. Now an embedded Ray is started
    once more; a second failure is one line, exit 3 (the same command resumes), nothing written. ``ray.init`` is
    wrapped to fail first (a test double: a busy machine cannot be made to time out Ray on demand); the second
    start is Ray's own."""
    storage = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", BUSY_MACHINE, str(failures), "-b", "toy", "-B", "n_tasks=3",
                           "-s", "reference", "--workers", "1", "--storage", str(storage), "--log-format", "json"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "ray.start_retried" in done.stderr and "The current node timed out during startup" in done.stderr
    if failures == 1:
        assert done.returncode == 0, done.stderr[-3000:]
        assert "inits ['local', 'local']" in done.stderr and len(list((storage / "records").rglob("*.json"))) == 3
        return
    assert done.returncode == 3, done.stderr[-3000:]
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line == ("error: could not start an embedded Ray (twice) (Exception: The current node timed out during "
                    "startup. This could happen because some of the Ray processes failed to startup.); the machine or "
                    "the cluster may be busy: run the same command again, it resumes (or --sequential, which needs no "
                    "Ray)")
    assert not storage.exists()
