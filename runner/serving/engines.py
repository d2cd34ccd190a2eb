"""The engines' own OpenAI-compatible servers: the command line, the environment and the health routes of ``vllm
serve``, SGLang's ``launch_server`` and ``transformers serve``.

A launch is data (:class:`Launch`: argv, environment, served name), so the command lines are tested as data here and
against vLLM's own argument parser (``scripts/check_vllm_args.py``), where no GPU engine can run.

The runner's flags come first and the user's ``--engine-arg`` flags last: both vLLM's and SGLang's parsers keep the
last value of a repeated flag, so a user's ``--gpu-memory-utilization`` overrides the share computed here. The flags
the runner sets and relies on (:attr:`Engine.managed`: where the replica listens, the name it answers to, the model,
what the worker's GPUs decide) are refused in ``--engine-arg`` instead (:meth:`Engine.refuse_managed`): a user's
would win, and the runner would probe a server that is elsewhere until ``--model-startup-timeout``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.core.engines import ENGINE_FACTS, EngineFacts
from runner.core.errors import ConfigError, ReplicaStartError

if TYPE_CHECKING:
    import httpx

    # spec.py checks each spec's engine flags with its engine (Engine.refuse_managed), so it imports this module.
    from runner.serving.spec import ReplicaSpec

HOST = "127.0.0.1"
"""Every replica listens on loopback only: its clients are the worker's own solutions."""

VLLM_MEMORY_UTILIZATION = 0.9
"""vLLM's default ``--gpu-memory-utilization`` (the share of a GPU's memory it takes for weights and KV cache); a
replica on a fraction of a GPU takes that fraction of it."""

SGLANG_MEMORY_FRACTION = 0.85
"""The ``--mem-fraction-static`` of a replica on a whole GPU (SGLang picks 0.8 to 0.9 by GPU size); a fraction of a
GPU takes that fraction of it."""

MODEL_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT",
             "TRANSFORMERS_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER", "VLLM_USE_MODELSCOPE", "MODELSCOPE_CACHE")
"""The variables that decide where weights come from and whether a gated model may be read: the driver captures
them (:func:`model_environment`) and hands them to every replica explicitly, because a remote Ray worker does not
inherit the driver's environment (ray#54812: HF_TOKEN not reaching the engine)."""


NODE_PATHS = frozenset({"HF_HOME", "HF_HUB_CACHE", "MODELSCOPE_CACHE"})
"""The variables of :data:`MODEL_ENV` that name a place on the node: a worker that sets one itself keeps its own
(each pod mounts its model cache where it likes); the driver's fills in only where the worker has none."""


def model_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of :data:`MODEL_ENV` set in ``environ`` (default ``os.environ``): what a driver passes to its
    workers' replicas (``Replica(..., env=...)``). It holds secrets (``HF_TOKEN``): never log it or write it to
    ``run.json``."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in MODEL_ENV if source.get(name)}


@dataclass(frozen=True)
class Launch:
    """How to start one replica's server.

    Args:
        argv: the command line.
        env: variables set over the inherited environment (``CUDA_VISIBLE_DEVICES``, caches, the model's).
        served_name: the model name the server answers to (the requests' ``model``).
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    served_name: str = ""


@dataclass(frozen=True)
class ManagedFlag:
    """An engine flag the runner sets itself and relies on, refused in ``--engine-arg``.

    Args:
        spellings: every name the engine's parser takes for it (``--tensor-parallel-size``, ``-tp``).
        why: what the runner does with it, in words (the end of the refusal's sentence).
        fix: the way out (default: drop the flag).
    """

    spellings: tuple[str, ...]
    why: str
    fix: str = "drop it"


_LISTENS = (f"each replica gets a free port on {HOST}, where the runner probes it; elsewhere, the runner would wait "
            "for it until --model-startup-timeout")
_NAMED = "each replica answers to a name of its own (<model>-<8 hex digits>), which every request carries"
_GPUS = "the worker's GPUs decide it: N GPUs per worker are tensor parallelism N"


class Engine:
    """One engine's server: its command line and how it is driven. What the engine does is its
    :class:`~runner.core.engines.EngineFacts` (:attr:`facts`: readiness checks the served name in ``/v1/models``
    where ``facts.lists_served_name``, otherwise the 1-token chat request, which names it, is the check).

    Attributes:
        facts: what the engine does (:data:`runner.core.engines.ENGINE_FACTS`).
        managed: the flags the runner sets and relies on (:class:`ManagedFlag`), refused in ``engine_args``.
        argparse: whether its command line is read by Python's argparse, which takes a unique prefix of a long flag
            for the flag (``--serv`` for ``--served-model-name``) and, in vLLM's ``FlexibleArgumentParser``,
            underscores for dashes; ``transformers serve`` uses click, which takes neither.
    """

    facts: EngineFacts
    managed: tuple[ManagedFlag, ...] = ()
    argparse = True

    @property
    def name(self) -> str:
        """The provider prefix that selects it (:attr:`facts`)."""
        return self.facts.name

    def refuse_managed(self, model: str, engine_args: Sequence[str]) -> None:
        """Refuse an engine flag of ``engine_args`` that takes over what the runner manages (:attr:`managed`),
        written ``--flag=V``, ``--flag V``, or as the engine's parser also takes it (:attr:`argparse`).

        Raises:
            ConfigError: one line naming the flag, why the runner keeps it and the way out.
        """
        for arg in engine_args:
            name = arg.split("=", 1)[0]
            if not name.startswith("-") or name in ("-", "--"):
                continue
            for flag in self.managed:
                if any(self._same_flag(name, spelling) for spelling in flag.spellings):
                    # The flag's name only: a value may be a secret (--api-key).
                    named = name if name == flag.spellings[0] else f"{name} ({flag.spellings[0]})"
                    raise ConfigError(f"{model}: --engine-arg {named} takes over what the runner manages for "
                                      f"{self.name}: {flag.why}; {flag.fix}")

    def _same_flag(self, given: str, spelling: str) -> bool:
        if given == spelling:
            return True
        if not self.argparse or not given.startswith("--"):
            return False
        given = given.replace("_", "-")
        # argparse takes a unique prefix of a long flag for the flag itself (allow_abbrev).
        return spelling.startswith("--") and len(given) >= 4 and spelling.startswith(given)

    def launch(self, spec: ReplicaSpec, *, source: str, served_name: str, port: int, gpu_ids: Sequence[str],
               work_dir: Path, cache_dir: Path) -> Launch:
        """The command line and environment of a replica of ``spec``.

        Args:
            source: what the engine loads: a Hugging Face id or a local directory.
            served_name: the unique name the replica answers to.
            port: the loopback port it listens on.
            gpu_ids: the GPUs it may use (``CUDA_VISIBLE_DEVICES``; empty: none).
            work_dir: the replica's own scratch directory.
            cache_dir: its own compile-cache directory (vllm#18851: a cache shared by two servers at once can be
                corrupted; one per replica, kept between runs, see :mod:`runner.serving.paths`).

        Raises:
            ReplicaStartError: the engine is not installed, needs a GPU and has none, or cannot use the GPUs given.
        """
        raise NotImplementedError

    def preload(self, client: httpx.Client, root: str, spec: ReplicaSpec, served_name: str) -> None:
        """What the server needs, once it answers ``/health``, before its readiness probe: nothing, for an engine
        that loads its model before it listens (vLLM, SGLang, a pinned ``transformers serve``).

        Raises:
            ReplicaStartError: the server could not load its model.
        """

    def swap(self, client: httpx.Client, root: str, spec: ReplicaSpec, *, source: str, served_name: str,
             work_dir: Path) -> str:
        """Load ``source`` (a checkpoint of the same architecture) into the server at ``root`` (``http://HOST:PORT``)
        in place of its weights, without a restart (``facts.reloads_in_place``); the name the server answers to
        afterwards.

        Args:
            client: an HTTP client (loopback, no proxy), with a timeout long enough for the load.
            spec: the new model's spec (it was started :attr:`ReplicaSpec.swappable`).
            source: the new weights' local folder.
            served_name: the name the server answers to now.
            work_dir: the replica's own scratch directory.

        Raises:
            ReplicaStartError: the engine refused or failed the reload (its own line); the replica must then be
                restarted.
        """
        raise ReplicaStartError(f"{spec.model}: the {self.name} server cannot load other weights in place",
                                cause="no_swap")

    def environment(self, gpu_ids: Sequence[str], cache_dir: Path) -> dict[str, str]:
        """``CUDA_VISIBLE_DEVICES`` (empty hides every GPU) and the compile caches: torch inductor's and Triton's,
        under ``cache_dir``; unbuffered Python output so that the log is current; and no daily update check of the
        Hugging Face CLIs (``transformers serve`` asks ``pypi.org`` for a newer release at its first start of a day,
        ``huggingface_hub.check_cli_update``: an egress request, through any proxy, from every replica of a cluster
        that may have no way out)."""
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in gpu_ids),
            "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"),
            "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        }

    def default_concurrency(self, spec: ReplicaSpec, on_gpu: bool) -> int:
        """Requests in flight that fill this engine's batch (see :func:`runner.serving.default_concurrency`)."""
        raise NotImplementedError

    def _refuse_without_gpu(self, spec: ReplicaSpec, gpu_ids: Sequence[str]) -> None:
        if self.facts.needs_gpu and not gpu_ids:
            raise ReplicaStartError(
                f"{spec.model} runs on GPUs, and this worker has none (CUDA_VISIBLE_DEVICES is empty); give the "
                f"workers GPUs (--num-gpus 1, or more for tensor parallelism), or serve it on the CPU with "
                f"transformers:{spec.source}", cause="no_gpu")


def executable(name: str, package: str) -> str:
    """The console script ``name`` of this Python's environment (a Ray worker's ``PATH`` may lack the virtual
    environment's ``bin``), else the one on ``PATH``.

    Raises:
        ReplicaStartError: it is not installed (naming the package to install).
    """
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise ReplicaStartError(f"the {name} command is not installed in this environment ({sys.executable}); "
                                f"pip install '{package}' on every worker (the runner's image for GPUs has it)",
                                cause="not_installed")
    return found


def _flag_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the last ``--name V`` or ``--name=V`` in ``args`` (``None`` when absent)."""
    value = None
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                value = args[index + 1]
            elif arg.startswith(name + "="):
                value = arg.partition("=")[2]
    return value


def _int_flag(args: Sequence[str], *names: str) -> int | None:
    value = _flag_value(args, *names)
    return int(value) if value is not None and re.fullmatch(r"\d+", value) else None


class VLLM(Engine):
    """``vllm serve MODEL --served-model-name NAME --host 127.0.0.1 --port P --distributed-executor-backend mp``,
    plus ``--tensor-parallel-size N`` for N GPUs and ``--gpu-memory-utilization`` for a fraction of one.

    ``mp``, not ``ray``: vLLM's Ray executor fails inside a placement-group actor (vllm#30016, ray#59064), and the
    replica must not start Ray work of its own. ``VLLM_CACHE_ROOT`` (compiled graphs) goes to the replica's own
    cache (vllm#18851)."""

    facts = ENGINE_FACTS["vllm"]
    managed = (
        ManagedFlag(("--host",), _LISTENS),
        ManagedFlag(("--port",), _LISTENS),
        ManagedFlag(("--uds",), "vLLM would listen on a Unix socket, not on the loopback port the runner probes"),
        ManagedFlag(("--served-model-name",), _NAMED),
        ManagedFlag(("--model",), "the model to serve is --serve's (vllm serve's first argument)",
                    "drop it and name the model in --serve or --model"),
        ManagedFlag(("--tensor-parallel-size", "-tp"), _GPUS, "drop it and give each worker N GPUs (--num-gpus N)"),
        ManagedFlag(("--distributed-executor-backend",),
                    "the runner runs vLLM with mp: its Ray executor fails inside the worker's placement group "
                    "(vllm#30016)"),
        ManagedFlag(("--api-key",), "the runner's readiness probes send no key, so they would never pass"),
    )
    DEFAULT_MAX_NUM_SEQS = 256
    """vLLM's ``--max-num-seqs`` default for its OpenAI server (engine/arg_utils.py): sequences in one batch."""
    # Its swap: sleep mode (--enable-sleep-mode) at level 2 discards the weights and the KV cache, and the
    # development routes (VLLM_SERVER_DEV_MODE=1: /sleep, /wake_up, /collective_rpc) reload the weights from another
    # folder of the same architecture (reload_weights with weights_path): docs.vllm.ai, "Sleep Mode".

    def launch(self, spec: ReplicaSpec, *, source: str, served_name: str, port: int, gpu_ids: Sequence[str],
               work_dir: Path, cache_dir: Path) -> Launch:
        self._refuse_without_gpu(spec, gpu_ids)
        argv = [executable("vllm", "vllm"), "serve", source, "--served-model-name", served_name,
                "--host", HOST, "--port", str(port), "--distributed-executor-backend", "mp"]
        if len(gpu_ids) > 1:
            argv += ["--tensor-parallel-size", str(len(gpu_ids))]
        if spec.gpu_share < 1:
            argv += ["--gpu-memory-utilization", f"{VLLM_MEMORY_UTILIZATION * spec.gpu_share:.3f}"]
        env = self.environment(gpu_ids, cache_dir)
        env.update(VLLM_CACHE_ROOT=str(cache_dir / "vllm"), VLLM_NO_USAGE_STATS="1", VLLM_DO_NOT_TRACK="1")
        if spec.swappable:
            argv.append("--enable-sleep-mode")
            env["VLLM_SERVER_DEV_MODE"] = "1"  # the sleep and collective_rpc routes; loopback only (HOST)
        return Launch([*argv, *spec.engine_args], env, served_name)

    def swap(self, client: httpx.Client, root: str, spec: ReplicaSpec, *, source: str, served_name: str,
             work_dir: Path) -> str:
        """Level-2 sleep (weights and KV cache dropped), the weights woken and reloaded from ``source``, the KV cache
        woken, the prefix cache reset (no KV of the old weights is reused)."""
        steps: list[tuple[str, dict[str, object] | None]] = [
            ("/sleep?level=2", None), ("/wake_up?tags=weights", None),
            ("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": source}}),
            ("/wake_up?tags=kv_cache", None), ("/reset_prefix_cache", None)]
        for path, body in steps:
            _swap_step(client, root + path, body, spec, self.name)
        return served_name

    def default_concurrency(self, spec: ReplicaSpec, on_gpu: bool) -> int:
        return _int_flag(spec.engine_args, "--max-num-seqs") or self.DEFAULT_MAX_NUM_SEQS


class SGLang(Engine):
    """``python -m sglang.launch_server --model-path MODEL --served-model-name NAME --host 127.0.0.1 --port P``,
    plus ``--tp N`` for N GPUs and ``--mem-fraction-static`` for a fraction of one."""

    facts = ENGINE_FACTS["sglang"]
    managed = (
        ManagedFlag(("--host",), _LISTENS),
        ManagedFlag(("--port",), _LISTENS),
        ManagedFlag(("--served-model-name",), _NAMED),
        ManagedFlag(("--model-path", "--model"), "the model to serve is --serve's",
                    "drop it and name the model in --serve or --model"),
        ManagedFlag(("--tensor-parallel-size", "--tp-size", "--tp"), _GPUS,
                    "drop it and give each worker N GPUs (--num-gpus N)"),
        ManagedFlag(("--api-key",), "the runner's readiness probes send no key, so they would never pass"),
    )
    DEFAULT_RUNNING_REQUESTS = 256
    """Requests in flight that keep an SGLang batch full on one GPU (its own ``--max-running-requests`` is sized from
    the KV cache, usually more)."""
    # Its swap: POST /update_weights_from_disk {"model_path": ...} loads another checkpoint of the same architecture
    # and size in place (SGLang's docs, "Update Weights From Disk").

    def swap(self, client: httpx.Client, root: str, spec: ReplicaSpec, *, source: str, served_name: str,
             work_dir: Path) -> str:
        answer = _swap_step(client, f"{root}/update_weights_from_disk", {"model_path": source}, spec, self.name)
        if isinstance(answer, dict) and answer.get("success") is False:
            raise ReplicaStartError(f"{spec.model}: SGLang refused to load {source} in place: "
                                    f"{str(answer.get('message'))[:300]}", cause="swap_failed")
        return served_name

    def launch(self, spec: ReplicaSpec, *, source: str, served_name: str, port: int, gpu_ids: Sequence[str],
               work_dir: Path, cache_dir: Path) -> Launch:
        self._refuse_without_gpu(spec, gpu_ids)
        if importlib.util.find_spec("sglang") is None:
            raise ReplicaStartError(f"{spec.model}: SGLang is not installed in this environment ({sys.executable}); "
                                    "pip install 'sglang[all]' on every worker", cause="not_installed")
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", source,
                "--served-model-name", served_name, "--host", HOST, "--port", str(port)]
        if len(gpu_ids) > 1:
            argv += ["--tp", str(len(gpu_ids))]
        if spec.gpu_share < 1:
            argv += ["--mem-fraction-static", f"{SGLANG_MEMORY_FRACTION * spec.gpu_share:.3f}"]
        return Launch([*argv, *spec.engine_args], self.environment(gpu_ids, cache_dir), served_name)

    def default_concurrency(self, spec: ReplicaSpec, on_gpu: bool) -> int:
        return _int_flag(spec.engine_args, "--max-running-requests") or self.DEFAULT_RUNNING_REQUESTS


class TransformersServe(Engine):
    """``transformers serve FORCED_MODEL --continuous-batching --host 127.0.0.1 --port P --device D``.

    It has no served-name flag: the forced model's name is the only one it accepts (another is refused with 400,
    "Server is pinned to ..."). A local directory is therefore forced through a link in the replica's own work
    directory named after the replica (``<work>/smollm2-135m-instruct-3f9a0c1d`` -> the model), which makes the name
    unique; a Hugging Face id is its own name (uvicorn does not share ports, so a second server on the port fails to
    start rather than splitting requests). ``--device cpu`` without GPUs, ``cuda:0`` (the first visible) with one,
    ``auto`` (layers spread over them) with several: it has no tensor parallelism."""

    facts = ENGINE_FACTS["transformers"]
    managed = (
        ManagedFlag(("--host",), _LISTENS),
        ManagedFlag(("--port",), _LISTENS),
        ManagedFlag(("--device",), "the worker's GPUs decide it: cpu without one, cuda:0 with one (the first the "
                                   "worker was given), auto with several",
                    "drop it and give the workers GPUs (--num-gpus) or none"),
    )
    argparse = False
    CPU_CACHE_SHARE = 0.1
    """The share of the machine's memory a replica on the CPU gives its KV cache. Continuous batching sizes the
    cache from the device's memory (``--cb-max-memory-percent``, default 0.9 of what is free): on a CPU that is the
    machine's RAM, and SmolLM2-135M's replica took 10 to 12 GB of a 24 GB machine, so two replicas (two workers,
    or the tests beside a run) ran the node out of memory. A tenth holds 16 conversations of thousands of tokens of a
    small model (SmolLM2-135M: 46 KB of float32 K and V per token)."""
    GPU_CACHE_SHARE = 0.9
    """The share of a GPU's free memory a replica's KV cache takes (``transformers serve``'s own default), times the
    worker's share of the GPU."""

    def cache_share(self, spec: ReplicaSpec, on_gpu: bool) -> float:
        """``--cb-max-memory-percent``: :data:`GPU_CACHE_SHARE` times the replica's GPU share, or
        :data:`CPU_CACHE_SHARE` on the CPU. A user's ``--engine-arg --cb-max-memory-percent`` comes after and wins."""
        return round(self.GPU_CACHE_SHARE * spec.gpu_share, 3) if on_gpu else self.CPU_CACHE_SHARE

    # Its swap: a server not pinned to one model loads the one a request names (POST /load_model, then requests
    # naming it), and POST /reset unloads what it holds (5.17, cli/serving/server.py; its continuous-batching manager
    # follows the model of the requests). A swappable replica is started so, with no idle unloading
    # (--model-timeout -1), and loads its model before it is ready.

    def launch(self, spec: ReplicaSpec, *, source: str, served_name: str, port: int, gpu_ids: Sequence[str],
               work_dir: Path, cache_dir: Path) -> Launch:
        forced = _linked(source, work_dir, served_name)
        device = "cpu" if not gpu_ids else "cuda:0" if len(gpu_ids) == 1 else "auto"
        model = ["--model-timeout", "-1"] if spec.swappable else [forced]
        argv = [executable("transformers", "transformers[serving]"), "serve", *model, "--continuous-batching",
                "--host", HOST, "--port", str(port), "--device", device,
                "--cb-max-memory-percent", f"{self.cache_share(spec, on_gpu=bool(gpu_ids)):g}"]
        env = self.environment(gpu_ids, cache_dir)
        env["HF_HUB_DISABLE_TELEMETRY"] = "1"
        return Launch([*argv, *spec.engine_args], env, forced)

    def preload(self, client: httpx.Client, root: str, spec: ReplicaSpec, served_name: str) -> None:
        """A :attr:`ReplicaSpec.swappable` server is pinned to no model: load its own before it counts as ready, so
        that weights it cannot load fail the start at once, with the server's own line (not after the start-up
        timeout of a chat probe that never succeeds).

        Raises:
            ReplicaStartError: the server could not load the model (its message).
        """
        if spec.swappable:
            _load_model(client, root, spec, served_name, served_name)

    def swap(self, client: httpx.Client, root: str, spec: ReplicaSpec, *, source: str, served_name: str,
             work_dir: Path) -> str:
        """Unload what the server holds (``/reset``), link the new weights under a new unique name and load them
        (``/load_model``, whose event stream ends with ``ready`` or ``error``)."""
        _swap_step(client, f"{root}/reset", None, spec, self.name)
        name = _linked(source, work_dir, f"{spec.slug}-{secrets.token_hex(4)}")
        _load_model(client, root, spec, name, source)
        return name

    def default_concurrency(self, spec: ReplicaSpec, on_gpu: bool) -> int:
        # On 2 CPU cores, 24 HotpotQA questions: 1.11 items/s at 1 in flight, 2.54 at 4, 4.00 at 16 (issue 19).
        return 64 if on_gpu else 16


def _load_model(client: httpx.Client, root: str, spec: ReplicaSpec, name: str, source: str) -> None:
    """``transformers serve``'s ``POST /load_model`` of ``name``, its event stream read to its ``ready`` event.

    Raises:
        ReplicaStartError: a refusal, an ``error`` event (the server's message: a broken ``config.json``, missing
            weights) or a stream that ends without ``ready``.
    """
    import httpx

    try:
        with client.stream("POST", f"{root}/load_model", json={"model": name}) as answer:
            if answer.status_code != 200:
                answer.read()
                raise ReplicaStartError(f"{spec.model}: transformers serve refused to load {source}: "
                                        f"{answer.status_code} {answer.text[:300]}", cause="load_failed")
            for line in answer.iter_lines():
                event = _event(line)
                if event.get("status") == "error":
                    raise ReplicaStartError(f"{spec.model}: transformers serve could not load {source}: "
                                            f"{str(event.get('message'))[:300]}", cause="load_failed")
                if event.get("status") == "ready":
                    return
    except httpx.HTTPError as exc:
        raise ReplicaStartError(f"{spec.model}: loading {source} failed ({type(exc).__name__}: {str(exc)[:200]})",
                                cause="load_failed") from None
    raise ReplicaStartError(f"{spec.model}: transformers serve's load of {source} ended without a ready event",
                            cause="load_failed")


def _linked(source: str, work_dir: Path, name: str) -> str:
    """``source`` as ``transformers serve`` is given it: a local folder through a link named ``name`` in the
    replica's work directory (a unique name it answers to); a Hugging Face id as it is."""
    local = Path(source).expanduser()
    if not local.is_dir():
        return source
    link = work_dir / name
    if not link.exists():
        link.symlink_to(local.resolve(), target_is_directory=True)
    return str(link)


def _event(line: str) -> dict[str, object]:
    """One ``data: {...}`` line of a server-sent event stream, read (empty for anything else)."""
    if not line.startswith("data:"):
        return {}
    try:
        value = json.loads(line[5:].strip())
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _swap_step(client: httpx.Client, url: str, body: dict[str, object] | None, spec: ReplicaSpec,
               engine: str) -> object:
    """``POST url`` (with the JSON ``body``) as one step of a swap; the answer's JSON (``None`` if it has none).

    Raises:
        ReplicaStartError: no answer, or an answer other than 2xx (its status and text).
    """
    import httpx

    try:
        answer = client.post(url, json=body) if body is not None else client.post(url)
    except httpx.HTTPError as exc:
        raise ReplicaStartError(f"{spec.model}: the {engine} server did not answer {url} ({type(exc).__name__}: "
                                f"{str(exc)[:200]})", cause="swap_failed") from None
    if answer.status_code >= 300:
        raise ReplicaStartError(f"{spec.model}: the {engine} server answered {url} with {answer.status_code}: "
                                f"{answer.text[:300]}", cause="swap_failed")
    try:
        return answer.json()
    except ValueError:
        return None


ENGINES: dict[str, Engine] = {engine.name: engine for engine in (VLLM(), SGLang(), TransformersServe())}
"""The engine of each servable provider."""


def default_concurrency(spec: ReplicaSpec, on_gpu: bool = True) -> int:
    """Requests in flight per worker that fill a replica's batch: the default of ``--concurrency`` (items in flight
    per worker) for a run that serves its model, instead of 1. vLLM's ``--max-num-seqs`` (256 unless given in
    ``engine_args``), SGLang's ``--max-running-requests`` (256 unless given), ``transformers serve`` 16 on CPU
    (measured on 2 cores: 1.11 items/s at 1 in flight, 2.54 at 4, 4.00 at 16) and 64 on a GPU. With several served
    models, take the largest."""
    return ENGINES[spec.engine].default_concurrency(spec, on_gpu)
