"""A real ``transformers serve`` with the real embedded model (SmolLM2-135M-Instruct) on the CPU: readiness and answers
past a proxy of the environment, an answer through the model layer, an abandoned call whose generation stops, a
killed server restarted, a bad engine flag and a start-up timeout refused in one line, and no process left behind.
One replica is shared by the module's tests (a start costs 30 to 90 s on 2 busy cores)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from structlog.testing import capture_logs

from runner.core import served
from runner.core.config import EMBEDDED_MODEL
from runner.core.errors import ReplicaStartError
from runner.core.usage import usage_scope
from runner.models import ChatModel
from runner.serving import Replica, ReplicaSpec, ServedModels, replica, replica_specs, shepherd, supervisor
from runner.core.config import RunConfig
from tests.support.http_proxy import ForwardProxy


# The first test converts the embedded model if this machine never did (about two minutes on 2 busy cores) and starts
# the shared replica; the restart test waits for a second start.
pytestmark = pytest.mark.timeout(900)


def spec(source: Path, **changes: object) -> ReplicaSpec:
    settings: dict[str, object] = {"model": EMBEDDED_MODEL, "engine": "transformers", "source": str(source),
                                   "startup_timeout": 600.0, "max_restarts": 2, "stop_grace": 5.0}
    return ReplicaSpec(**{**settings, **changes})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def proxy() -> Iterator[ForwardProxy]:
    """A cluster's egress proxy, which cannot reach this machine's loopback (it answers 502 to everything)."""
    with ForwardProxy() as forward:
        yield forward


@pytest.fixture(scope="module")
def group(embedded_dir: Path, tmp_path_factory: pytest.TempPathFactory,
          proxy: ForwardProxy) -> Iterator[ServedModels]:
    """The embedded model's replica, started as a run starts it (from the run's configuration), watched every
    0.5 s, with :func:`proxy` set in the environment in every spelling and no ``NO_PROXY`` (issue 27: the readiness
    probe went to such a proxy until the start-up timeout)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in proxy.environment().items():
            patch.setenv(name, value)
        for name in ("NO_PROXY", "no_proxy"):
            patch.delenv(name, raising=False)
        patch.setattr(supervisor, "CHECK_INTERVAL_S", 0.5)
        [replica_spec] = replica_specs(RunConfig(benchmark="toy", model=EMBEDDED_MODEL))
        assert replica_spec.embedded
        served_models = ServedModels([replica_spec], gpu_ids=[], log_dir=tmp_path_factory.mktemp("replicas"))
        served_models.start()
        try:
            yield served_models
        finally:
            served_models.stop()


def test_a_ready_replica_answers_through_the_model_layer(group: ServedModels) -> None:
    [replica] = group.replicas
    [status] = group.statuses()
    assert status.state == "ready" and status.url == replica.base_url
    assert served.served_endpoint(EMBEDDED_MODEL) == replica.endpoint
    model = ChatModel.from_name(EMBEDDED_MODEL, temperature=0, max_tokens=16)
    with usage_scope() as usage:
        reply = model.chat_sync("What is the capital of France?")
    assert "Paris" in reply.text
    assert reply.finish_reason == "stop"
    assert usage[EMBEDDED_MODEL].input_tokens > 10 and usage[EMBEDDED_MODEL].output_tokens > 0
    log = replica.log_path.read_text()
    assert log.startswith(f"=== runner: start 1 of {EMBEDDED_MODEL} as {replica.served_name} on port {replica.port}")
    assert "CUDA_VISIBLE_DEVICES=''" in log.splitlines()[0]


def test_the_replica_is_ready_and_answers_with_the_proxy_receiving_nothing(group: ServedModels,
                                                                           proxy: ForwardProxy) -> None:
    """The readiness probes, the supervisor's health checks (every 0.5 s here) and the model layer's calls reach the
    replica directly; the proxy variables stay in the environment of the server, which gets loopback in NO_PROXY."""
    [replica] = group.replicas
    assert os.environ["HTTP_PROXY"] == os.environ["all_proxy"] == proxy.url
    reply = ChatModel.from_name(EMBEDDED_MODEL, temperature=0, max_tokens=8).chat_sync("Say hello.")
    assert reply.text
    assert replica.check(timeout=120, generate=True).ok
    assert proxy.requests == []
    environ = psutil.Process(replica.process.pid).environ()
    assert environ["HTTPS_PROXY"] == proxy.url and "127.0.0.1" in environ["no_proxy"].split(",")


def test_the_replica_answers_only_to_its_own_name(group: ServedModels) -> None:
    [replica] = group.replicas
    assert replica.check(timeout=120, generate=True).ok
    other = httpx.post(f"{replica.base_url}/chat/completions", timeout=60, trust_env=False,
                       json={"model": "another-model", "messages": [{"role": "user", "content": "hi"}],
                             "max_tokens": 1})
    assert other.status_code == 400 and "pinned to" in other.text


def test_a_conversation_over_the_context_is_answered_without_reaching_the_server(group: ServedModels) -> None:
    """``transformers serve`` would hang on it (and grow until it stops answering): the replica is published with its
    tokenizer, and the model layer answers ``context_length_exceeded`` itself; the replica goes on answering."""
    [replica] = group.replicas
    starts = replica.starts
    assert served.served_endpoint(EMBEDDED_MODEL).tokenizer == replica.served_name
    model = ChatModel.from_name(EMBEDDED_MODEL, temperature=0, max_tokens=16)
    with usage_scope() as usage:
        reply = model.chat_sync("word " * 9000)
    assert reply.finish_reason == "context_length_exceeded" and reply.text == ""
    assert EMBEDDED_MODEL not in usage or usage[EMBEDDED_MODEL].input_tokens == 0
    assert "Paris" in model.chat_sync("What is the capital of France?").text
    assert replica.starts == starts and group.failure is None


@pytest.mark.parametrize("question, max_tokens", [("What is the capital of France?", 64),
                                                  ("Write a long story about a dragon.", 24)])
def test_the_runners_own_count_of_a_call_is_the_servers(group: ServedModels, question: str, max_tokens: int) -> None:
    """Where a replica's stream carries no usage, the model layer counts the call with the model's tokenizer
    (runner/models/_counting.py). This release of the server reports its own: counted again as if it had not, an
    answer that ends by itself and one cut at ``max_tokens`` get the server's numbers."""
    from runner.models import Usage
    from runner.models._counting import with_counted_usage

    tokenizer = served.served_endpoint(EMBEDDED_MODEL).tokenizer
    reply = ChatModel.from_name(EMBEDDED_MODEL, temperature=0, max_tokens=max_tokens).chat_sync(question)
    assert reply.usage.counted_by == "server" and reply.finish_reason == ("stop" if max_tokens == 64 else "length")
    counted = with_counted_usage(tokenizer, reply.model_copy(update={"usage": Usage()}),
                                 [{"role": "user", "content": question}], None)
    assert counted.usage == Usage(input_tokens=reply.usage.input_tokens, output_tokens=reply.usage.output_tokens,
                                  counted_by="runner")


def _cpu_share(process: psutil.Process, window_s: float = 0.5) -> float:
    """The CPU ``process`` used over the next ``window_s`` seconds, in cores (its threads together)."""
    before, started = process.cpu_times(), time.monotonic()
    time.sleep(window_s)
    after = process.cpu_times()
    return (after.user + after.system - before.user - before.system) / (time.monotonic() - started)


def test_an_abandoned_call_stops_generating_on_the_replica(group: ServedModels) -> None:
    """Issue 27: ``transformers serve`` cancels a generation whose client went away only for a streamed answer; a
    plain request went on generating after its timeout, and each retry added one more. The model layer streams to
    this replica, so abandoning a call (cancelled here; a timeout closes it the same way) ends its generation: the
    server's CPU, busy with a 2,000-token story, falls back to idle, and a 1-token probe is answered."""
    [replica] = group.replicas
    server = psutil.Process(replica.process.pid)
    assert served.served_endpoint(EMBEDDED_MODEL).stream
    model = ChatModel.from_name(EMBEDDED_MODEL, temperature=0.8, max_tokens=2000, timeout=600)
    busy: list[float] = []
    quiet: list[float] = []

    async def main() -> None:
        call = asyncio.ensure_future(model.chat("Write a very long story about a dragon, in many chapters."))
        # The event: the server generates (its CPU over a window above a third of a core). 2,000 tokens take
        # minutes here, so it still generates when the call is abandoned.
        for _ in range(240):
            busy.append(await asyncio.to_thread(_cpu_share, server))
            if busy[-1] > 0.33 or call.done():
                break
        assert not call.done(), "the 2,000-token answer ended before the call was abandoned"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # From the event on: windows until one is idle, at most 20 (the story had minutes to go).
        for _ in range(20):
            quiet.append(await asyncio.to_thread(_cpu_share, server))
            if quiet[-1] < 0.1:
                break
        await model.aclose()

    asyncio.run(main())
    assert busy[-1] > 0.33, busy
    assert quiet[-1] < 0.1, quiet
    assert replica.check(timeout=120, generate=True).ok
    assert group.failure is None and replica.exit_status is None


def test_a_killed_server_is_restarted_and_its_restart_logged(group: ServedModels, proxy: ForwardProxy) -> None:
    [replica] = group.replicas
    old_pid, old_url = replica.process.pid, replica.base_url
    with capture_logs() as logs:
        os.kill(old_pid, signal.SIGKILL)
        deadline = time.monotonic() + 600
        while replica.starts < 2:  # the watcher saw the exit and started the server again
            assert time.monotonic() < deadline and group.failure is None, group.statuses()
            time.sleep(0.2)
        assert group.statuses()[0].state == "restarting"
        assert group.wait_ready(timeout=600)
    [restart] = [entry for entry in logs if entry["event"] == "replica.restart"]
    assert restart["exit_status"] == -signal.SIGKILL and restart["reason"] == "exited with status -9"
    assert restart["restart"] == 1 and restart["restarts"] == 3 and restart["log_tail"]
    assert group.statuses()[0].restarts == 1
    assert served.served_endpoint(EMBEDDED_MODEL).base_url == replica.base_url != old_url
    reply = ChatModel.from_name(EMBEDDED_MODEL, temperature=0, max_tokens=8).chat_sync("Say hello.")
    assert reply.text
    assert replica.log_path.read_text().count("=== runner: start") == 2
    assert proxy.requests == []  # the restart's readiness probes too


def test_a_bad_engine_flag_is_refused_with_the_servers_own_line(embedded_dir: Path, tmp_path: Path) -> None:
    replica = Replica(spec(embedded_dir, engine_args=("--no-such-flag",)), [], tmp_path)
    replica.start()
    with pytest.raises(ReplicaStartError) as refused:
        replica.wait_ready()
    message = str(refused.value)
    assert refused.value.cause == "engine_flag" and refused.value.exit_status == 2
    assert message.startswith(f"{EMBEDDED_MODEL}: the transformers server exited with status 2 while starting "
                              "(engine flag): Error: No such option: --no-such-flag; fix the engine flag")
    assert message.endswith(f"its log: {replica.log_path}") and "\n" not in message
    assert replica.exit_status == 2


def test_a_server_not_ready_in_time_is_stopped_and_refused(embedded_dir: Path, tmp_path: Path) -> None:
    replica = Replica(spec(embedded_dir, startup_timeout=2.0), [], tmp_path)
    replica.start()
    pid = replica.process.pid
    with pytest.raises(ReplicaStartError, match=r"was not ready within 2 s .*raise --model-startup-timeout") as late:
        replica.wait_ready()
    assert late.value.cause == "timeout"
    assert shepherd.session_processes(pid) == []
    assert replica.stop() == []  # a second stop is harmless


def test_stop_leaves_no_process(embedded_dir: Path, tmp_path: Path) -> None:
    replica = Replica(spec(embedded_dir), [], tmp_path)
    replica.start()
    pid = replica.process.pid
    time.sleep(2)
    assert shepherd.session_processes(pid)
    assert replica.stop() == []
    assert shepherd.session_processes(pid) == [] and replica.exit_status is not None


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another process holds (a listening socket of this test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_taken_by_another_process_is_retried_on_a_new_port(embedded_dir: Path, tmp_path: Path,
                                                                   held_port: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The port picked for the server is taken before it binds it (another process got there first): it is started
    again on a fresh port, once, and becomes ready there."""
    picks = iter([held_port])
    fresh = replica.free_port
    monkeypatch.setattr(replica, "free_port", lambda: next(picks, None) or fresh())
    server = Replica(spec(embedded_dir), [], tmp_path)
    try:
        with capture_logs() as logs:
            server.start()
            server.wait_ready()
        [taken] = [entry for entry in logs if entry["event"] == "replica.port_taken"]
        assert taken["port"] == held_port and server.port != held_port and server.starts == 2
        assert server.check(timeout=120).ok
        assert server.log_path.read_text().count("=== runner: start") == 2
    finally:
        server.stop()


def test_a_port_taken_on_every_try_names_the_address_and_the_engine_args(embedded_dir: Path, tmp_path: Path,
                                                                         held_port: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica, "free_port", lambda: held_port)
    monkeypatch.setattr(replica, "PORT_RETRIES", 1)
    server = Replica(spec(embedded_dir, engine_args=("--cb-block-size", "32")), [], tmp_path)
    server.start()
    with pytest.raises(ReplicaStartError) as refused:
        server.wait_ready()
    message = str(refused.value)
    assert refused.value.cause == "port_taken" and server.starts == 2 and "\n" not in message
    # uvicorn exits 3 when its start-up fails (uvicorn/server.py, STARTUP_FAILURE)
    assert message.startswith(f"{EMBEDDED_MODEL}: the transformers server exited with status 3: it could not "
                              f"listen on 127.0.0.1:{held_port}, which another process holds (ERROR: [Errno 98] "
                              f"error while attempting to bind on address ('127.0.0.1', {held_port}): address already "
                              "in use)")
    assert "on 2 ports in a row; an engine flag given with --engine-arg (--cb-block-size 32) may set a port" in message
    assert message.endswith(f"its log: {server.log_path}")


def test_a_server_up_where_the_runner_does_not_probe_is_named_unreachable_not_slow(embedded_dir: Path,
                                                                                  tmp_path: Path) -> None:
    """A port flag that reaches the engine anyway (a spec built by hand; the CLI refuses it): the server says it is
    listening there, and the runner's probe of its own port cannot reach it. The error says so, and where it
    listens, instead of "raise --model-startup-timeout"."""
    elsewhere = replica.free_port()
    server = Replica(spec(embedded_dir, engine_args=("--port", str(elsewhere))), [], tmp_path)
    server.start()
    deadline = time.monotonic() + 600  # a bound on a hang, not the expected time: the loop waits for the log line
    while "Uvicorn running on" not in server.log_path.read_text():
        assert time.monotonic() < deadline and server.exit_status is None, server.log_tail()
        time.sleep(0.2)
    with pytest.raises(ReplicaStartError) as late:
        server.wait_ready(deadline=time.monotonic())  # the deadline is reached at the first probe
    message = str(late.value)
    assert late.value.cause == "unreachable" and "--model-startup-timeout" not in message
    assert message.startswith(f"{EMBEDDED_MODEL}: the transformers server is up (its log: 'INFO: Uvicorn running "
                              f"on http://127.0.0.1:{elsewhere} (Press CTRL+C to quit)'), but the runner's probe of "
                              f"http://127.0.0.1:{server.port} did not pass within 600 s (ConnectError: ")
    assert (f"it listens at http://127.0.0.1:{elsewhere}, not on the port the runner gave it: drop the engine flag "
            "that moves it (--engine-arg)") in message
    assert shepherd.session_processes(server.process.pid) == []
