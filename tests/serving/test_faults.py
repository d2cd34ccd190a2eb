"""Why a server did not start, read from the end of its log. The tails are shaped as the engines print them (vLLM's
``RuntimeError: Engine core initialization failed`` after the real cause, argparse's and click's usage errors,
huggingface_hub's gated-repository error); the transformers cases are also met for real in test_replica.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.serving.start_failures import bind_failure, classify, listening

VLLM_OOM = """\
INFO 11-30 10:00:01 [gpu_model_runner.py:1234] Loading model weights took 14.9 GiB
ERROR 11-30 10:00:09 [core.py:700] EngineCore failed to start.
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.6 GiB
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

VLLM_GATED = """\
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status
huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.
"""

VLLM_CONTEXT = """\
pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig
  Value error, User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json). [type=value_error]
"""

VLLM_ARCH = """\
ValueError: Model architectures ['FancyForCausalLM'] are not supported for now. Supported architectures: dict_keys(['LlamaForCausalLM'])
"""

VLLM_FLAG = """\
usage: vllm serve [model_tag] [options]
vllm serve: error: unrecognized arguments: --max-modle-len 8192
"""

SGLANG_ARCH = """\
[2026-11-30 10:00:00] Scheduler hit an exception: Traceback (most recent call last):
ValueError: Unrecognized configuration class <class 'FancyConfig'> for this kind of AutoModel
"""


@pytest.mark.parametrize(("tail", "cause", "line"), [
    (VLLM_OOM, "out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    (VLLM_GATED, "weights", "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo"),
    (VLLM_CONTEXT, "context_length", "Value error, User-specified max_model_len (200000) is greater than"),
    (VLLM_ARCH, "architecture", "ValueError: Model architectures ['FancyForCausalLM'] are not supported for now."),
    (VLLM_FLAG, "engine_flag", "vllm serve: error: unrecognized arguments: --max-modle-len 8192"),
    (SGLANG_ARCH, "architecture", "ValueError: Unrecognized configuration class <class 'FancyConfig'>"),
])
def test_the_cause_and_the_servers_own_line(tail: str, cause: str, line: str) -> None:
    fault = classify(tail)
    assert fault.cause == cause
    assert fault.line.startswith(line)


def test_an_unknown_failure_is_named_by_its_last_error_line() -> None:
    fault = classify("loading...\nKeyError: 'rope_scaling'\nshutting down\n")
    assert (fault.cause, fault.line) == ("exited", "KeyError: 'rope_scaling'")


def test_progress_bars_are_read_at_their_last_state_and_an_empty_log_has_no_line() -> None:
    assert classify("Loading: 10%\rLoading: 100%\n").line == "Loading: 100%"
    assert classify("").line == ""


@pytest.mark.parametrize(("tail", "address"), [
    # transformers serve (uvicorn), as met for real in test_replica.py
    ("INFO:     Application startup complete.\nINFO:     Uvicorn running on http://127.0.0.1:18600 (Press CTRL+C to "
     "quit)\n", "http://127.0.0.1:18600"),
    ("INFO 11-30 10:00:09 [api_server.py:1880] Starting vLLM API server 0 on http://127.0.0.1:41000\n",
     "http://127.0.0.1:41000"),
    ("INFO 11-30 10:00:09 [api_server.py:1880] Starting vLLM API server 0 on http://127.0.0.1:41000\n"
     "INFO:     Uvicorn running on socket ('127.0.0.1', 41000) (Press CTRL+C to quit)\n", "http://127.0.0.1:41000"),
    ("INFO:     Uvicorn running on unix socket /tmp/vllm.sock (Press CTRL+C to quit)\n", "/tmp/vllm.sock"),
    ("[2026-11-30 10:00:30] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
     "[2026-11-30 10:00:40] The server is fired up and ready to roll!\n", None),
])
def test_the_line_by_which_a_server_says_it_listens(tail: str, address: str | None) -> None:
    found = listening("Loading weights: 100%\n" + tail)
    assert found is not None and found[1] == address and found[0] in " ".join(tail.split())


def test_a_log_that_says_nothing_of_listening_is_still_loading() -> None:
    assert listening("[transformers] Loading /models/m@main\nLoading weights:  43%\n") is None


def test_a_taken_port_and_the_address_it_names() -> None:
    uvicorn = ("INFO:     Waiting for application startup.\nERROR:    [Errno 98] error while attempting to bind on "
               "address ('127.0.0.1', 18600): address already in use\nINFO:     Waiting for application shutdown.\n")
    assert bind_failure(uvicorn) == ("ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', "
                                     "18600): address already in use", "127.0.0.1:18600")
    assert bind_failure("OSError: [Errno 98] Address already in use\n") == (
        "OSError: [Errno 98] Address already in use", None)
    assert bind_failure(VLLM_OOM) is None


class _SwappingReplica:
    """A replica whose swap takes as long as the test says (a test double: the real engines' swaps take seconds,
    and when a health check lands in one is up to the scheduler). It records every check it gets and whether a
    swap was under way then."""

    def __init__(self, spec, gpu_ids=(), log_dir="replicas", env=None) -> None:  # noqa: ANN001 - Replica's signature
        import threading

        self.spec, self.name, self.served_name, self.port, self.base_url = spec, "fake", "fake", 1, "http://x/v1"
        self.swapping, self.checked_during_swap, self.checks = False, 0, 0
        self.let_go = threading.Event()

    def start(self) -> None:
        pass

    def wait_ready(self, deadline=None) -> None:  # noqa: ANN001
        pass

    def check(self, timeout: float = 30.0, generate: bool = False):  # noqa: ANN201
        from runner.serving.replica import Health

        self.checks += 1
        self.checked_during_swap += self.swapping
        return Health(True)

    def can_swap(self, spec) -> bool:  # noqa: ANN001
        return True

    def swap(self, spec, timeout=None) -> None:  # noqa: ANN001
        self.swapping = True
        self.let_go.wait(10)
        self.spec, self.swapping = spec, False

    def stop(self) -> list[int]:
        return []

    @property
    def log_path(self):  # noqa: ANN201
        return Path("fake.log")


def test_the_health_watcher_never_probes_a_replica_while_its_weights_are_swapped(monkeypatch) -> None:
    """Issue 42: during a transformers serve swap, the watcher's 1-token chat probe named the old served name, which
    the server then loaded again on demand, racing the swap (``500 ValueError: Unknown modality for: NoneType``):
    the probe failed and the replica started afresh. Now checks wait for the swap and resume after it."""
    import threading
    import time as clock

    from runner.serving import ReplicaSpec, supervisor

    monkeypatch.setattr(supervisor, "Replica", _SwappingReplica)
    monkeypatch.setattr(supervisor, "CHECK_INTERVAL_S", 0.01)
    spec = ReplicaSpec(model="transformers:/ckpts/step_1", engine="transformers", source="/ckpts/step_1",
                       swappable=True)
    with supervisor.ServedModels([spec], publish=False) as group:
        [replica] = group.replicas
        deadline = clock.monotonic() + 10
        while replica.checks < 3 and clock.monotonic() < deadline:
            clock.sleep(0.01)
        swapping = threading.Thread(target=group.swap, args=([ReplicaSpec(
            model="transformers:/ckpts/step_2", engine="transformers", source="/ckpts/step_2", swappable=True)],))
        swapping.start()
        while not replica.swapping:
            clock.sleep(0.01)
        before = replica.checks
        clock.sleep(0.3)  # some thirty intervals of the watcher, all during the swap
        assert replica.checks == before
        replica.let_go.set()
        swapping.join(10)
        deadline = clock.monotonic() + 10
        while replica.checks <= before and clock.monotonic() < deadline:
            clock.sleep(0.01)
        assert replica.checks > before and replica.checked_during_swap == 0 and group.ready()
