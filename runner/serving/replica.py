"""One model replica: the engine's own OpenAI-compatible server as a subprocess on a loopback port, started,
checked, restarted and stopped.

Blocking calls (``start``, ``wait_ready``, ``check``, ``stop``) for a thread; from an event loop, call them through
``asyncio.to_thread``. :class:`~runner.serving.supervisor.ServedModels` runs a worker's replicas and restarts them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import structlog

from runner.core.errors import ReplicaStartError, one_line
from runner.core.loopback import bypass_loopback, tls_context
from runner.core.served import SERVED_MAX_TOKENS, ServedEndpoint, announce_tokenizer
from runner.serving import embedded, shepherd
from runner.serving.checkpoint_files import local_folder, same_architecture
from runner.serving.engines import ENGINES, HOST, NODE_PATHS, Launch
from runner.serving.start_failures import bind_failure, classify, listening, read_tail, tail_lines
from runner.serving.paths import CompileSlot
from runner.serving.spec import ReplicaSpec

POLL_S = 1.0
"""Seconds between readiness probes."""
PROBE_TIMEOUT_S = 5.0
"""Seconds a ``/health`` or ``/v1/models`` probe may take."""
CHAT_PROBE_TIMEOUT_S = 120.0
"""Seconds the 1-token chat probe may take (``transformers serve`` answered its first request after 32 s on 2 busy
CPU cores: continuous batching warms up on it)."""
PORT_RETRIES = 3
"""Fresh ports tried when the server finds its port taken (another process bound it after it was picked)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _probe_client(timeout: float) -> httpx.Client:
    """An HTTP client for a replica's probes, ``timeout`` seconds per request; never through a proxy of the
    environment, which cannot reach this machine's loopback, and with the process's one TLS context
    (:mod:`runner.core.loopback`)."""
    return httpx.Client(timeout=timeout, trust_env=False, verify=tls_context())


@dataclass(frozen=True)
class Health:
    """One look at a replica.

    Args:
        ok: the replica answers as it should.
        reason: what is wrong (``""`` when ``ok``): ``exited with status N``, ``/health answered 503``, ``no answer
            to /health within 30 s``...
        exit_status: the server's exit status when it exited, else ``None``.
    """

    ok: bool
    reason: str = ""
    exit_status: int | None = None


def replica_environment(driver: dict[str, str], launch: dict[str, str],
                        node: os._Environ[str] | dict[str, str] | None = None) -> dict[str, str]:
    """A server's environment: this node's (``node``, default ``os.environ``), the driver's model variables filling
    in what the node lacks (``HF_TOKEN`` does not reach a remote worker, ray#54812) except the cache paths the node
    sets itself (:data:`~runner.serving.engines.NODE_PATHS`: its pod's ``HF_HOME`` on the model-cache volume), then
    the launch's own (``CUDA_VISIBLE_DEVICES``, compile caches), and ``NO_PROXY``/``no_proxy`` naming loopback on top
    of the node's own entries (:func:`runner.core.loopback.bypass_loopback`): an engine's requests to itself (SGLang's
    warm-up) never go to a proxy of the environment, while its downloads from the Hub still do."""
    node = os.environ if node is None else node
    kept = {name: value for name, value in driver.items() if not (name in NODE_PATHS and node.get(name))}
    env = {**node, **kept, **launch}
    return {**env, **bypass_loopback(env)}


class Replica:
    """One replica of a served model (:class:`ReplicaSpec`) on the given GPUs.

    Args:
        spec: the model, engine, engine flags, GPU share, deadlines and restart bound.
        gpu_ids: the GPUs it may use, as Ray gives them (``ray.get_gpu_ids()``), set as ``CUDA_VISIBLE_DEVICES``;
            empty: none (``transformers serve`` then runs on the CPU; vLLM and SGLang are refused). Their number is
            the tensor-parallel size.
        log_dir: where its log goes: ``<log_dir>/<served_name>.log``, one file per replica, appended by each
            (re)start. The engine copies it into the run directory's ``replicas/`` (see ``docs/models.md``).
        env: variables for the server's environment over this process's (e.g. :func:`model_environment` captured
            on the driver: ``HF_TOKEN``, ``HF_HOME``).
        compile_root: the root of the compile caches (default ``<cache root>/compile``).

    Attributes:
        served_name: the name it answers to: ``<model slug>-<8 random hex>``, unique per replica, so that a request
            that reaches another server on the same port (vLLM binds with SO_REUSEPORT, vllm#39762) is refused,
            and readiness confirms that the answering server is this one. For ``transformers serve``, the path it
            is forced to serve (see :class:`~runner.serving.engines.TransformersServe`).
        log_path: the log file.
        starts: how many times it was started.
    """

    def __init__(self, spec: ReplicaSpec, gpu_ids: Sequence[str | int] = (), log_dir: str | Path = ".", *,
                 env: Mapping[str, str] | None = None, compile_root: Path | None = None) -> None:
        self.spec = spec
        self.engine = ENGINES[spec.engine]
        self.gpu_ids = [str(gpu) for gpu in gpu_ids]
        self.env = dict(env or {})
        self.name = f"{spec.slug}-{secrets.token_hex(4)}"
        self.served_name = self.name
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.name}.log"
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._compile_root = compile_root
        self._slot: CompileSlot | None = None
        self._work_dir: Path | None = None
        self._shepherd: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self._source = spec.source
        self._preloaded = False
        self._log = structlog.get_logger("runner.serving").bind(model=spec.model, replica=self.name)

    @property
    def base_url(self) -> str:
        """The API root, ``http://127.0.0.1:PORT/v1``.

        Raises:
            RuntimeError: the replica was never started.
        """
        if self.port is None:
            raise RuntimeError(f"replica {self.name} was not started")
        return f"http://{HOST}:{self.port}/v1"

    @property
    def endpoint(self) -> ServedEndpoint:
        """What the model layer needs to reach it (:func:`runner.core.served.publish`): its tokenizer when the engine
        does not check the context, streamed calls when it cancels only streams, and the engine's default output
        limit (:data:`~runner.core.served.SERVED_MAX_TOKENS`)."""
        return ServedEndpoint(model=self.spec.model, base_url=self.base_url, served_name=self.served_name,
                              tokenizer=None if self.engine.facts.checks_context else self.served_name,
                              stream=not self.engine.facts.cancels_on_disconnect,
                              max_tokens=SERVED_MAX_TOKENS.get(self.spec.engine))

    @property
    def exit_status(self) -> int | None:
        """The server's exit status once it exited (negative: killed by that signal), else ``None``."""
        return None if self.process is None else self.process.poll()

    def start(self) -> None:
        """Start the server (without waiting for it: :meth:`wait_ready`): a free loopback port, output appended to
        :attr:`log_path`, a session of its own, and a shepherd that stops it if this process dies. The embedded
        model is converted first if this machine has not done it yet (about 70 s on 2 cores, once).

        Raises:
            ReplicaStartError: the engine is not installed, needs a GPU and has none, or the embedded model's
                weights cannot be had.
        """
        if self.spec.embedded and not self._source:
            self._source = str(embedded.model_dir(self.log_path))
        self._source = local_folder(self._source, self.spec.source_options)
        if self._work_dir is None:
            self._work_dir = Path(tempfile.mkdtemp(prefix=f"runner-replica-{self.name}-"))
        if self._slot is None:
            self._slot = CompileSlot(self.spec, self._compile_root)
        self.port = free_port()
        launch = self.engine.launch(self.spec, source=self._source, served_name=self.name, port=self.port,
                                    gpu_ids=self.gpu_ids, work_dir=self._work_dir, cache_dir=self._slot.path)
        self.served_name = launch.served_name
        if not self.engine.facts.checks_context:
            # The model layer counts each prompt with this tokenizer (core/served.py): loaded while the server starts.
            announce_tokenizer(self.served_name)
        self._spawn(launch)

    def _spawn(self, launch: Launch) -> None:
        self._preloaded = False
        env = replica_environment(self.env, launch.env)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            header = (f"=== runner: start {self.starts} of {self.spec.model} as {self.served_name} on port "
                      f"{self.port}, CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}: {' '.join(launch.argv)}\n")
            log.write(header.encode())
            log.flush()
            # Output to a file, never a pipe: an unread pipe blocks the server once 64 KB are buffered.
            self.process = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=env, cwd=self._work_dir,
                                            start_new_session=True)
        owner = psutil.Process()
        self._shepherd = subprocess.Popen(
            [sys.executable, shepherd.__file__, str(owner.pid), repr(owner.create_time()), str(self.process.pid),
             str(self.spec.stop_grace), str(self._work_dir)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._log.info("replica.start", served_name=self.served_name, port=self.port, gpus=self.gpu_ids,
                       pid=self.process.pid, log=str(self.log_path), start=self.starts)

    def wait_ready(self, deadline: float | None = None) -> None:
        """Block until the replica is ready: its process alive, ``/health`` 200, ``/v1/models`` listing
        :attr:`served_name` (for engines that list it), and a 1-token chat request answered (it catches a model
        without a chat template, which vLLM refuses only at the first chat request, vllm#39279).

        Args:
            deadline: a ``time.monotonic()`` instant; default: :attr:`ReplicaSpec.startup_timeout` from now.

        Raises:
            ReplicaStartError: the server exited (the cause and its own error line from the log's end, and the
                log's path), found its port taken on :data:`PORT_RETRIES` fresh ports too (``port_taken``), refused
                the chat request, or was not ready by the deadline (``timeout``; ``unreachable`` when its log says
                that it listens); it is stopped first.
        """
        deadline = deadline if deadline is not None else time.monotonic() + self.spec.startup_timeout
        port_retries = PORT_RETRIES
        with _probe_client(PROBE_TIMEOUT_S) as client:
            while True:
                status = self.exit_status
                if status is not None:
                    tail = read_tail(self.log_path, self._log_offset)
                    taken = bind_failure(tail)
                    if taken is not None and port_retries > 0:
                        port_retries -= 1
                        self._log.warning("replica.port_taken", port=self.port, detail="starting on another port")
                        self._reap()
                        self.start()
                        continue
                    if taken is not None:
                        raise self._port_error(status, *taken)
                    raise self._start_error(status, tail)
                if self._probe_ready(client, deadline):
                    self._log.info("replica.ready", served_name=self.served_name, url=self.base_url,
                                   start=self.starts)
                    return
                if time.monotonic() >= deadline:
                    raise self._late(client)
                time.sleep(POLL_S)

    def _late(self, client: httpx.Client) -> ReplicaStartError:
        """The error for a replica not ready by its deadline (it is stopped first): still loading (raise
        ``--model-startup-timeout``), or, when its log says that it listens, unreachable by the runner's probe, with
        what the probe met and where the server says it listens."""
        tail = read_tail(self.log_path, self._log_offset)
        said = listening(tail)
        why = self._unreachable(client) if said is not None else ""
        self.stop()
        where = f"http://{HOST}:{self.port}"
        if said is None:
            line = next(reversed(tail_lines(tail, 1)), "")
            return ReplicaStartError(
                f"{self.spec.model}: the {self.spec.engine} server was not ready within "
                f"{self.spec.startup_timeout:g} s (its last line: {one_line(line, 200)!r}); raise "
                f"--model-startup-timeout if it was still loading; its log: {self.log_path}",
                log_path=str(self.log_path), cause="timeout")
        line, address = said
        if address is not None and not address.rstrip("/").endswith(f":{self.port}"):
            fix = (f"it listens at {address}, not on the port the runner gave it: drop the engine flag that moves it "
                   "(--engine-arg)")
        else:
            fix = (f"something between the runner and {HOST} keeps the probe from it (an HTTP proxy in HTTP_PROXY "
                   f"without {HOST} in NO_PROXY?) or the server does not answer there")
        return ReplicaStartError(
            f"{self.spec.model}: the {self.spec.engine} server is up (its log: {line!r}), but the runner's probe of "
            f"{where} did not pass within {self.spec.startup_timeout:g} s ({why}); {fix}; its log: {self.log_path}",
            log_path=str(self.log_path), cause="unreachable")

    def _unreachable(self, client: httpx.Client) -> str:
        """What one more probe of a replica that should be up meets, in words: a failed connection, a status, a
        model list without its name, or a chat request not answered."""
        root = f"http://{HOST}:{self.port}"
        try:
            health = client.get(f"{root}/health")
            if health.status_code != 200:
                return f"GET /health answered {health.status_code}"
            if self.engine.facts.lists_served_name:
                served = _model_ids(client.get(f"{root}/v1/models"))
                if self.served_name not in served:
                    return f"GET /v1/models does not list {self.served_name} ({', '.join(served[:3]) or 'nothing'})"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {one_line(exc, 120)}"
        return "its /health answers, its 1-token chat request did not"

    def _port_error(self, status: int, line: str, address: str | None) -> ReplicaStartError:
        """The error for a server that found its port taken on every port tried (:data:`PORT_RETRIES` more): the
        address, and the engine flags given, which may set a port of their own."""
        self._reap()
        given = (f"; an engine flag given with --engine-arg ({' '.join(self.spec.engine_args)}) may set a port of its "
                 "own: drop it or give it a free one") if self.spec.engine_args else ""
        return ReplicaStartError(
            f"{self.spec.model}: the {self.spec.engine} server exited with status {status}: it could not listen on "
            f"{address or f'{HOST}:{self.port}'}, which another process holds ({line}), on {PORT_RETRIES + 1} ports "
            f"in a row{given}; otherwise find what takes the node's ports; its log: {self.log_path}",
            log_path=str(self.log_path), cause="port_taken")

    def _lists_its_name(self, client: httpx.Client, root: str) -> bool:
        """Whether ``/v1/models`` lists this replica's served name, where its engine lists it
        (:attr:`EngineFacts.lists_served_name <runner.core.engines.EngineFacts.lists_served_name>`); ``True`` where
        it does not (the chat request that names it is the check then). A name missing there means another server
        answers on the port."""
        return not self.engine.facts.lists_served_name or self.served_name in _model_ids(
            client.get(f"{root}/v1/models"))

    def _probe_ready(self, client: httpx.Client, deadline: float) -> bool:
        """One readiness probe: ``True`` when ready; ``False`` while it is loading or answers as another server.

        Raises:
            ReplicaStartError: the chat request was refused with an error about the model (no chat template).
        """
        root = f"http://{HOST}:{self.port}"
        try:
            if client.get(f"{root}/health").status_code != 200:
                return False
            if not self._lists_its_name(client, root):
                return False
            if not self._preloaded:
                try:
                    with _probe_client(max(1.0, deadline - time.monotonic())) as loading:
                        self.engine.preload(loading, root, self.spec, self.served_name)
                except ReplicaStartError as exc:
                    self.stop()
                    raise ReplicaStartError(f"{exc}; its log: {self.log_path}", log_path=str(self.log_path),
                                            cause=exc.cause) from None
                self._preloaded = True
            timeout = max(1.0, min(CHAT_PROBE_TIMEOUT_S, deadline - time.monotonic()))
            answer = client.post(f"{root}/v1/chat/completions", json=self._probe_body(), timeout=timeout)
        except httpx.HTTPError:
            return False
        if answer.status_code == 200:
            return True
        detail = _detail(answer)
        if answer.status_code == 400 and "pinned to" not in detail:
            self.stop()
            raise ReplicaStartError(
                f"{self.spec.model}: the {self.spec.engine} server started but refused a chat request: "
                f"{one_line(detail, 240)} (a model without a chat template cannot chat: serve an instruction-tuned "
                f"model, or give one with --engine-arg=--chat-template=FILE); its log: {self.log_path}",
                log_path=str(self.log_path), cause="chat_template")
        return False

    def _probe_body(self) -> dict[str, object]:
        return {"model": self.served_name, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
                "temperature": 0}

    def _start_error(self, status: int, tail: str) -> ReplicaStartError:
        fault = classify(tail)
        self._reap()
        return ReplicaStartError(
            f"{self.spec.model}: the {self.spec.engine} server exited with status {status} while starting "
            f"({fault.cause.replace('_', ' ')}): {fault.line or '(no output)'}; {fault.fix}; its log: {self.log_path}",
            log_path=str(self.log_path), cause=fault.cause)

    def check(self, timeout: float = 30.0, generate: bool = False) -> Health:
        """Whether the running replica still serves: its process alive, ``/health`` 200 within ``timeout`` (a hung
        API server prints nothing: the deadline catches it), its served name still listed, and with ``generate`` a
        1-token chat request answered within ``timeout`` (an engine stuck in an NCCL hang, or ``transformers
        serve``, whose ``/health`` always says ok, still answers ``/health``).

        Args:
            timeout: seconds each probe may take.
            generate: also send the 1-token chat request.
        """
        status = self.exit_status
        if status is not None:
            return Health(False, f"exited with status {status}", status)
        root = f"http://{HOST}:{self.port}"
        try:
            with _probe_client(timeout) as client:
                health = client.get(f"{root}/health")
                if health.status_code != 200:
                    return Health(False, f"/health answered {health.status_code}")
                if not self._lists_its_name(client, root):
                    return Health(False, f"/v1/models does not list {self.served_name}: another server answers on "
                                         f"port {self.port}")
                if generate:
                    answer = client.post(f"{root}/v1/chat/completions", json=self._probe_body())
                    if answer.status_code != 200:
                        return Health(False, f"a 1-token chat request answered {answer.status_code}: "
                                             f"{one_line(_detail(answer), 120)}")
        except httpx.TimeoutException:
            return Health(False, f"no answer within {timeout:g} s")
        except httpx.HTTPError as exc:
            return Health(False, f"unreachable ({one_line(exc, 120)})")
        return Health(True)

    def log_tail(self, lines: int = 5) -> str:
        """The last ``lines`` non-blank lines of the current start's log, joined by `` | `` (for one log line)."""
        return " | ".join(one_line(line, 200) for line in tail_lines(read_tail(self.log_path, self._log_offset), lines))

    @property
    def source(self) -> str:
        """What the server loaded: a local folder (the embedded model's and a URL's are resolved at start) or a
        Hugging Face id."""
        return self._source

    def can_swap(self, spec: ReplicaSpec) -> bool:
        """Whether this running replica can load ``spec``'s weights in place of its own (:meth:`swap`): its engine
        reloads in place, it was started :attr:`~ReplicaSpec.swappable`, ``spec`` is another model of the same
        engine, engine flags and GPU share, and both are local checkpoints of one architecture."""
        if not (self.engine.facts.reloads_in_place and self.spec.swappable and spec.swappable) or self.process is None:
            return False
        if (spec.engine, spec.engine_args, spec.gpu_share) != (self.spec.engine, self.spec.engine_args,
                                                               self.spec.gpu_share):
            return False
        try:
            source = local_folder(spec.source, spec.source_options)
        except ReplicaStartError:
            return False
        return same_architecture(self._source, source)

    def swap(self, spec: ReplicaSpec, timeout: float | None = None) -> None:
        """Load ``spec``'s weights into the running server in place of its model's (:meth:`Engine.swap
        <runner.serving.engines.Engine.swap>`), keeping its process, port and log, then check it as at start (a
        1-token chat request naming it).

        Args:
            timeout: seconds the reload and the check may take (default: ``spec.startup_timeout``).

        Raises:
            ReplicaStartError: the engine refused or failed the reload, or the replica did not answer afterwards;
                the caller stops it.
        """
        timeout = timeout if timeout is not None else spec.startup_timeout
        source = local_folder(spec.source, spec.source_options)
        assert self._work_dir is not None and self.port is not None, "start() first"
        with _probe_client(timeout) as client:
            name = self.engine.swap(client, f"http://{HOST}:{self.port}", spec, source=source,
                                    served_name=self.served_name, work_dir=self._work_dir)
        previous = self.spec.model
        self.spec, self._source, self.served_name = spec, source, name
        self._log = self._log.bind(model=spec.model)
        if not self.engine.facts.checks_context:
            announce_tokenizer(self.served_name)
        with open(self.log_path, "ab") as log:
            log.write(f"=== runner: swapped {previous} for {spec.model} ({source}) as {name}\n".encode())
        deadline = time.monotonic() + timeout
        with _probe_client(PROBE_TIMEOUT_S) as client:
            while not self._probe_ready(client, deadline):
                if self.exit_status is not None or time.monotonic() >= deadline:
                    raise ReplicaStartError(f"{spec.model}: the {spec.engine} server did not answer after loading "
                                            f"{source} in place; its log: {self.log_path}", cause="swap_failed")
                time.sleep(POLL_S)
        self._log.info("replica.swap", served_name=self.served_name, previous=previous, source=source)

    def restart(self, deadline: float | None = None) -> None:
        """Stop the server (whatever state it is in) and start it again on a fresh port, then wait until ready.

        Raises:
            ReplicaStartError: as :meth:`start` and :meth:`wait_ready`.
        """
        self._stop_process()
        self.start()
        self.wait_ready(deadline)

    def stop(self) -> list[int]:
        """Stop the server and every process of its session: SIGTERM, :attr:`ReplicaSpec.stop_grace` seconds, then
        SIGKILL (:func:`runner.serving.shepherd.stop_session`); then release its compile cache and work directory.
        Safe to call twice.

        Returns:
            the pids that survived (logged; normally none).
        """
        survivors = self._stop_process()
        if self._slot is not None:
            self._slot.close()
            self._slot = None
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None
        return survivors

    def _stop_process(self) -> list[int]:
        if self.process is None:
            return []
        process = self.process
        try:
            descendants = psutil.Process(process.pid).children(recursive=True)
        except psutil.Error:
            descendants = []
        survivors = shepherd.stop_session(process.pid, self.spec.stop_grace, descendants)
        self._reap()
        if survivors:
            self._log.error("replica.survivors", pids=survivors,
                            detail="processes of the server outlived SIGKILL (stuck in the kernel?)")
        else:
            self._log.info("replica.stopped", served_name=self.served_name, exit_status=process.returncode)
        return survivors

    def _reap(self) -> None:
        """Collect the exit status of the server and of its shepherd (which ends once the session is empty)."""
        if self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._shepherd is not None:
            try:
                self._shepherd.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._shepherd.kill()
                self._shepherd.wait()
            self._shepherd = None


def _model_ids(response: httpx.Response) -> list[str]:
    """The ``id``s of an OpenAI ``/v1/models`` answer (empty for any other answer)."""
    if response.status_code != 200:
        return []
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return []
    return [str(item.get("id")) for item in data or [] if isinstance(item, dict)]


def _detail(response: httpx.Response) -> str:
    """An error answer's message: OpenAI's ``error.message``, vLLM's ``message``, FastAPI's ``detail``, or the
    text."""
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    return response.text
