"""Which replicas a run starts: :func:`replica_specs` reads a run's configuration."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.core.config import DEFAULT_STARTUP_TIMEOUT, EMBEDDED_MODEL, SERVABLE_PROVIDERS, RunConfig
from runner.core.errors import ConfigError
from runner.core.limits import model_key
from runner.serving.engines import ENGINES


@dataclass(frozen=True)
class ReplicaSpec:
    """One model the run serves: what each worker starts (one replica of each spec).

    Args:
        model: the model's name as the run names it (``vllm:Qwen/Qwen2.5-7B-Instruct``): the key under which the
            model layer finds the replica (:mod:`runner.core.served`), and the name of its usage in the records.
        engine: ``vllm``, ``sglang`` or ``transformers`` (the provider).
        source: what the engine loads: a Hugging Face id or a local directory; for the embedded model, ``""``
            until the replica resolves its cached directory (:mod:`runner.serving.embedded`).
        engine_args: the user's flags for the engine (``--engine-arg``), passed after the runner's own.
        gpu_share: the share of each of its GPUs' memory the replica may use, in (0, 1]: the worker's fractional
            ``--num-gpus`` (two workers with 0.5 share a GPU), divided among the replicas of one worker.
        startup_timeout: seconds from start to ready (``--model-startup-timeout``).
        max_restarts: restarts after a failure during the run, before the run stops (``--replica-restarts``).
        stop_grace: seconds between SIGTERM and SIGKILL when it is stopped.
        embedded: the model is the embedded one (its ``source`` is resolved when the replica starts).
        swappable: start the server so that it can load another checkpoint of the same architecture in place
            (:meth:`Engine.swap <runner.serving.engines.Engine.swap>`): a matrix's checkpoints, on an engine that
            reloads weights in place (:attr:`~runner.core.engines.EngineFacts.reloads_in_place`).
        source_options: fsspec options to copy a ``source`` at a URL to the node with (the run's
            ``storage_options`` where the source is on the storage's kind of filesystem); not part of the spec's
            identity.
    """

    model: str
    engine: str
    source: str
    engine_args: tuple[str, ...] = ()
    gpu_share: float = 1.0
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    max_restarts: int = 3
    stop_grace: float = 15.0
    embedded: bool = field(default=False)
    swappable: bool = False
    source_options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def slug(self) -> str:
        """A short name for files and served names: the model's last path part, lower case, letters, digits, ``.``,
        ``-`` and ``_`` only (``qwen2.5-7b-instruct``), with a digest when that loses anything."""
        last = self.source.rstrip("/").rsplit("/", 1)[-1] if self.source else self.model.partition(":")[2]
        clean = re.sub(r"[^a-z0-9._-]+", "-", last.lower()).strip("-.") or "model"
        if clean != last.lower():
            clean = f"{clean[:40]}-{hashlib.sha256(last.encode()).hexdigest()[:6]}"
        return clean[:60]


def replica_specs(config: RunConfig, in_process: tuple[str, ...] = (), any_model: bool = False) -> list[ReplicaSpec]:
    """The replicas each worker of a run starts: the models of ``config.serve`` (the bare ``--serve`` standing for
    ``config.model``) and the embedded model (:data:`~runner.core.config.EMBEDDED_MODEL`) wherever the run names it
    without a URL (as the agent's model, the simulated user's or the judge's). Call it with the configuration whose
    model and judge defaults are settled (``RunRequest.config``, or :func:`~runner.engine.request.model_defaults`).

    The GPU share is the worker's ``num_gpus`` when it is a fraction of one GPU (1 otherwise), divided among the
    replicas, which share the worker's GPUs; a whole number of GPUs above 1 is the tensor-parallel size (from the GPU
    ids the replica is given).

    ``in_process``: providers whose models the run's solution loads in its own process (lm-eval's ``HFLM`` for
    ``transformers:``): the agent's model of such a provider is not served (and ``--serve`` of it is refused).

    ``any_model``: the solution is an object of the Python API, which may call a model the configuration does not
    name (it builds its own client): a served model need not be one of the run's.

    Raises:
        ConfigError: a bare ``--serve`` without a model, a served model that is none of the run's models, a
            fractional ``--num-gpus`` above 1, ``--serve`` of a model the solution runs in its own process, an
            engine flag that takes over what the runner manages (its host, port, served name, model, tensor-parallel
            size or device: :meth:`Engine.refuse_managed <runner.serving.engines.Engine.refuse_managed>`).
    """
    agent = model_key(config.model) if config.model else None
    loaded_here = agent if agent is not None and agent.partition(":")[0] in in_process else None
    named = {model_key(name): name for name in (config.model, config.user_model, config.judge_model) if name}
    chosen: dict[str, tuple[str, tuple[str, ...]]] = {}
    for entry in config.serve:
        name = entry.model or config.model
        if name is None:
            raise ConfigError("--serve without a model serves the agent's model, and the run has none: pass --model "
                              "provider:MODEL, or name the model to serve (--serve vllm:MODEL)")
        if model_key(name) not in named and not any_model:
            raise ConfigError(f"--serve {name} names none of the run's models ({', '.join(named.values()) or 'none'}); "
                              "serve the model of --model, --user-model or --judge-model")
        if model_key(name) == loaded_here and config.model_base_url is None:
            raise ConfigError(f"--serve {name}: the solution runs {name} in each worker itself; drop --serve (or "
                              "serve it yourself and pass --model-base-url)")
        chosen[model_key(name)] = (named.get(model_key(name), name), tuple(entry.engine_args))
    urls = {config.model: config.model_base_url, config.user_model: config.user_model_base_url,
            config.judge_model: config.judge_base_url}
    for name, url in urls.items():
        if name and model_key(name) == EMBEDDED_MODEL and url is None and model_key(name) != loaded_here:
            chosen.setdefault(EMBEDDED_MODEL, (EMBEDDED_MODEL, ()))
    return _specs(chosen, config.worker.num_gpus, config.model_startup_timeout, config.replica_restarts,
                  config.storage_options_for)


def _specs(chosen: dict[str, tuple[str, tuple[str, ...]]], gpus: float, startup_timeout: float,
           restarts: int, options_for: Callable[[str], dict[str, Any]]) -> list[ReplicaSpec]:
    """One :class:`ReplicaSpec` per chosen model (``provider:model`` key -> (name, engine arguments)), sharing the
    worker's ``gpus``; ``options_for(url)`` gives the fsspec options of a source at a URL (the run's
    :meth:`~runner.core.config.RunConfig.storage_options_for`)."""
    if gpus > 1 and gpus != int(gpus):
        raise ConfigError(f"--num-gpus {gpus:g} is a fraction above 1, which cannot be a tensor-parallel size; give "
                          "each worker a whole number of GPUs, or a fraction of one")
    share = (gpus if 0 < gpus < 1 else 1.0) / max(1, len(chosen))
    specs = []
    for key, (name, engine_args) in chosen.items():
        engine, _, source = key.partition(":")
        assert engine in SERVABLE_PROVIDERS  # ServeSpec validated it
        ENGINES[engine].refuse_managed(name, engine_args)
        embedded = key == EMBEDDED_MODEL
        source = "" if embedded else name.partition(":")[2].strip()
        options = options_for(source) if "://" in source else {}
        specs.append(ReplicaSpec(model=name, engine=engine, source=source, engine_args=engine_args, gpu_share=share,
                                 startup_timeout=startup_timeout, max_restarts=restarts, embedded=embedded,
                                 source_options=options))
    return specs


def served_models(config: RunConfig) -> list[str]:
    """The names of the models the run serves (``provider:model``), as :func:`replica_specs` finds them: what a
    preflight check must skip (their replicas start in the workers) and a progress line counts."""
    return [spec.model for spec in replica_specs(config)]

