"""Model replicas started by the run: the engine's own OpenAI-compatible server (``vllm serve``, SGLang's
``launch_server``, ``transformers serve``) as a subprocess of each worker, on its GPUs and a loopback port; started,
checked, restarted and stopped here. No Ray: the Ray worker actor and the sequential executor both use it.

- :func:`replica_specs` (a run's configuration -> what each worker serves), :func:`default_concurrency`.
- :class:`ServedModels` (a worker's replicas: start, publish to the model layer, watch, restart, stop),
  :class:`Replica` (one server), :func:`model_environment` (the variables a driver hands to its replicas).
- :mod:`runner.serving.embedded`: the embedded model, ``transformers:smollm2-135m-instruct``.

Errors: :class:`~runner.core.errors.ReplicaStartError` (exit 2, before any record), :class:`~runner.core.errors.
ReplicaFailed` (exit 3, past the restarts). ``docs/models.md`` ("Models served by the run") is the user's side.

May import ``runner.core`` only; never Ray, the engine or a plug-in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from runner._lazy import lazy_exports
from runner.core import served

if TYPE_CHECKING:
    from runner.core.errors import ReplicaFailed, ReplicaStartError
    from runner.serving.engines import ENGINES, Launch, default_concurrency, model_environment
    from runner.serving.replica import Health, Replica
    from runner.serving.spec import ReplicaSpec, replica_specs, served_models
    from runner.serving.supervisor import ReplicaStatus, ServedModels

# Names are imported on first use: a run that serves no model (and the CLI's start) never loads the supervisor's
# HTTP client and process tools.
_LAZY = {
    "ENGINES": "runner.serving.engines",
    "Health": "runner.serving.replica",
    "Launch": "runner.serving.engines",
    "Replica": "runner.serving.replica",
    "ReplicaFailed": "runner.core.errors",
    "ReplicaSpec": "runner.serving.spec",
    "ReplicaStartError": "runner.core.errors",
    "ReplicaStatus": "runner.serving.supervisor",
    "ServedModels": "runner.serving.supervisor",
    "default_concurrency": "runner.serving.engines",
    "model_environment": "runner.serving.engines",
    "replica_specs": "runner.serving.spec",
    "served_models": "runner.serving.spec",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


# Plug-ins that load the embedded model in their own process find its folder through core (runner.core.served);
# the converter (runner.serving.embedded, which imports the HTTP client) is imported when one first asks.
served.publish_embedded_folder(lambda: str(importlib.import_module("runner.serving.embedded").model_dir()))
