"""``python -m runner submit`` (a run as a KubeRay RayJob) and ``python -m runner k8s status|logs|delete NAME``.

``submit`` builds the same RayJob as the Helm chart from the same inputs: a chart values file (``--values``, its
``job`` block being the run config), a run config file (``--config``) and the run flags, in that order of
precedence (flags win). ``--dry-run`` prints the ServiceAccount (when the values create one, with its workload
identity annotations), the model cache's PersistentVolumeClaim (when they create one), the ConfigMap and the RayJob
as YAML and contacts nothing.

Before it builds anything, ``submit`` (``--dry-run`` too) makes every check of a local ``run`` that needs neither the
benchmark's data nor a model server: the config's fields, the benchmark, solution and executor names, the
benchmark's and the solution's arguments (the benchmark is built, not prepared: its data may exist only in the
cluster), and each model's provider and API key (:func:`~runner.models.check_model_names`; the servers
are not called, as they are often reachable only from inside the cluster); and that a model served by vLLM or
SGLang has GPUs on each worker (:func:`check_served_models_have_gpus`).

Exit status: 0 submitted (or, with ``--wait``/``--follow``, succeeded); 1 the RayJob failed; 2 bad input, an API
error, or ``--wait-timeout`` passed (one line on stderr). ``--wait`` and ``--follow`` give up after
:func:`wait_seconds` unless ``--wait-timeout`` says otherwise.

``k8s status NAME`` exits with the RayJob's state (:data:`STATUS_EXIT`): 0 succeeded or not ended yet, 1 failed, 2
no such RayJob or an API error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from runner.cli.args import add_declared_arguments, add_run_arguments, config_from_args
from runner.models import check_model_names
from runner.core.errors import ConfigError
from runner.engine.request import RunRequest
from runner.kuberay.checks import MAX_RAYJOB_NAME, check_namespace, check_rayjob_name
from runner.kuberay.rayjob import (build_configmap, build_model_cache_claim, build_rayjob, build_service_account,
                                     dump_yaml)
from runner.kuberay.deploy_flags import DeployFlags
from runner.kuberay.deploy_options import DeployOptions
from runner.kuberay.job_status import RayJobStatus
from runner.serving import ENGINES, ReplicaSpec

WAIT_MARGIN_S = 600
"""Seconds ``--wait`` waits past the RayJob's ``activeDeadlineSeconds`` by default: time for the cluster's pods to
start before the deadline's clock does, and for KubeRay to mark the RayJob failed once it passes."""
WAIT_WITHOUT_DEADLINE_S = 86400
"""Seconds ``--wait`` waits by default for a RayJob without ``activeDeadlineSeconds`` (one day)."""
STATUS_EXIT = {"succeeded": 0, "running": 0, "failed": 1}
"""``k8s status``'s exit status by the RayJob's state: succeeded (deployment ``Complete``, job ``SUCCEEDED``), not
ended yet (any other deployment status that is not terminal: ``Initializing``, ``Running``, ``Retrying``,
``Suspended``...), failed (deployment ``Failed`` or ``ValidationFailed``, or ``Complete`` with another job status);
see :mod:`runner.kuberay.job_status`."""


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", "-n", help="Kubernetes namespace (default: the kubeconfig context's)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def add_commands(sub: Any) -> None:
    """Register ``submit`` and ``k8s`` on the top-level subparsers."""
    submit = sub.add_parser("submit", help="run a benchmark (or, 'submit matrix', an evaluation matrix) on Kubernetes "
                                           "as a KubeRay RayJob")
    submit.add_argument("what", nargs="?", choices=("run", "matrix"), default="run",
                        help="'matrix': the matrix file of --config (or the values' job.matrix), as one RayJob")
    add_run_arguments(submit)
    where = submit.add_argument_group("where it runs (Kubernetes)")
    where.add_argument("--dry-run", action="store_true", help="print the YAML of the ServiceAccount and the model "
                       "cache's claim (if the values create them), the ConfigMap and the RayJob; contact nothing")
    _add_cluster_flags(where)
    where.add_argument("--name", help=f"RayJob name, at most {MAX_RAYJOB_NAME} characters "
                                      "(default: <benchmark>-<UTC time>)")
    where.add_argument("--values", metavar="FILE", help="a values file of the Helm chart helm/runner "
                                                         "(its job block is the run config)")
    add_declared_arguments(where, DeployFlags)
    follow = submit.add_argument_group("after submitting")
    follow.add_argument("--wait", action="store_true", help="wait until the RayJob ends; exit 1 if it failed")
    follow.add_argument("--follow", action="store_true", help="print the driver's log, then wait")
    follow.add_argument("--wait-timeout", type=float, metavar="SECONDS",
                        help="give up waiting (and following) after this long, exit 2; the RayJob keeps running "
                             f"(default: its activeDeadlineSeconds plus {WAIT_MARGIN_S} s, i.e. 87000 s with the "
                             f"chart's default deadline of 86400 s; {WAIT_WITHOUT_DEADLINE_S} s when it has none)")
    submit.set_defaults(handler=cmd_submit)

    k8s = sub.add_parser("k8s", help="status, logs or deletion of a RayJob")
    actions = k8s.add_subparsers(dest="action", required=True, parser_class=type(k8s))
    for action, handler, text in (
        ("status", cmd_status, "the RayJob's deployment and job status; exit 0 succeeded or not ended yet, 1 failed"),
        ("logs", cmd_logs, "the driver's log (from the submitter pod)"),
        ("delete", cmd_delete, "delete the RayJob, its cluster, pods and run config"),
    ):
        command = actions.add_parser(action, help=text)
        command.add_argument("name", help="the RayJob's name")
        _add_cluster_flags(command)
        if action == "status":
            command.add_argument("--json", action="store_true", help="print JSON")
        if action == "logs":
            command.add_argument("--follow", "-f", action="store_true", help="stream until the submitter ends")
        command.set_defaults(handler=handler)


def load_values(path: str) -> dict[str, Any]:
    """A Helm values file as a dict.

    Raises:
        ConfigError: unreadable, not YAML, or not a mapping.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read values file {path!r}: {exc.strerror or exc}; check the --values path") from None
    except yaml.YAMLError:
        raise ConfigError(f"values file {path!r} is not valid YAML; fix its syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"values file {path!r} must hold a mapping, got {type(data).__name__}")
    return data


def default_name(benchmark: str, now: datetime | None = None) -> str:
    """``<benchmark>-<MMDD-HHMMSS UTC>``, made a DNS-1035 label of at most 47 characters."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%m%d-%H%M%S")
    slug = re.sub(r"[^a-z0-9]+", "-", benchmark.rsplit(":", 1)[-1].lower()).strip("-") or "run"
    if not slug[0].isalpha():
        slug = f"run-{slug}"
    return f"{slug[:MAX_RAYJOB_NAME - len(stamp) - 1].rstrip('-')}-{stamp}"


def deploy_options(args: argparse.Namespace, values: dict[str, Any]) -> DeployOptions:
    """The chart values (or defaults) with the deploy flags applied (:class:`DeployFlags`).

    Raises:
        ConfigError: a bad value, or flags that exclude each other, naming them.
    """
    source = f"values {args.values!r}" if args.values else "submit flags"
    return DeployFlags.from_flags(vars(args)).apply(values, source)


def check_served_models_have_gpus(replicas: list[ReplicaSpec], num_gpus: float) -> None:
    """Refuse a run that serves a model with a GPU engine (vLLM, SGLang) on workers without GPUs, which each
    replica would report only once the cluster is up (:meth:`runner.serving.engines.Engine.launch`).

    Raises:
        ConfigError: naming the model and the flags that give the workers GPUs.
    """
    for spec in replicas:
        if ENGINES[spec.engine].facts.needs_gpu and num_gpus <= 0:
            raise ConfigError(
                f"{spec.model} is served by {spec.engine} on GPUs, and each worker has none (--num-gpus 0): pass "
                "--num-gpus 1 (more: tensor parallelism) with a worker group that has GPUs (--worker-gpu 1, or "
                "workerGroups[].gpu in --values)"
            )


def wait_seconds(requested: float | None, options: DeployOptions) -> float:
    """How long ``--wait``/``--follow`` wait in all: ``--wait-timeout`` when given (it must be positive), else the
    RayJob's ``activeDeadlineSeconds`` plus :data:`WAIT_MARGIN_S`, else :data:`WAIT_WITHOUT_DEADLINE_S`.

    Raises:
        ConfigError: a ``--wait-timeout`` that is not positive.
    """
    if requested is not None:
        if requested <= 0:
            raise ConfigError(f"--wait-timeout must be a positive number of seconds, got {requested:g}")
        return requested
    deadline = options.ray_job.active_deadline_seconds
    return WAIT_WITHOUT_DEADLINE_S if deadline is None else deadline + WAIT_MARGIN_S


def cmd_submit(args: argparse.Namespace) -> int:
    """``submit``: build the RayJob; print it (``--dry-run``) or create it, then optionally follow and wait."""
    check_namespace(args.namespace)
    values = load_values(args.values) if args.values else {}
    job = dict(values.get("job") or {})
    extra_args = job.pop("extraArgs", None) or []
    matrix = job.pop("matrix", None)
    options = deploy_options(args, values)
    if args.what == "matrix" or matrix:
        config, matrix, replicas, models = _matrix_job(args, job, matrix)
    else:
        config, replicas, models = config_from_args(args, base=job), [], []
    name = args.name or options.fullname_override or default_name("matrix" if matrix else config.benchmark)
    check_rayjob_name(name)
    rayjob = build_rayjob(config, options, name, namespace=args.namespace, extra_args=extra_args,
                          command="matrix" if matrix else "run")
    configmap = build_configmap(config, name, namespace=args.namespace, matrix=matrix)
    waiting = wait_seconds(args.wait_timeout, options) if args.wait or args.follow else None
    account = build_service_account(options, name, namespace=args.namespace)
    claim = build_model_cache_claim(options, name, namespace=args.namespace)
    if not matrix:
        # The checks of a local run, before anything is printed or sent. The ConfigMap keeps the config as given,
        # so that the pods settle the model defaults from their own environment.
        request = RunRequest.from_config(config)
        replicas, models = list(request.replicas), [request.models()]
    check_served_models_have_gpus(replicas, config.worker.num_gpus)
    for named in models:
        check_model_names(**named)
    if args.dry_run:
        sys.stdout.write(dump_yaml(*[obj for obj in (account, claim) if obj], configmap, rayjob))
        return 0

    from runner.kuberay.client import RayJobClient, WaitTimeout

    client = RayJobClient.from_environment(args.namespace, args.context)
    credentials = options.storage.credentials
    cache = options.model_cache
    existing_claim = options.model_cache_claim_name(name) \
        if cache.type == "persistentVolumeClaim" and claim is None else None
    client.submit(rayjob, configmap, secret=credentials.secret_ref if credentials.source == "secret" else None,
                  service_account=account, claim=claim, existing_claim=existing_claim,
                  token_secret=options.hf_token.secret_name or None)
    ns = client.namespace
    print(f"submitted RayJob {name} in namespace {ns}; results go to {config.storage}", file=sys.stderr)
    if not (args.wait or args.follow):
        print(f"follow it: python -m runner k8s logs {name} -n {ns} --follow", file=sys.stderr)
        return 0
    assert waiting is not None
    until = time.monotonic() + waiting
    try:
        if args.follow:
            for line in client.logs(name, follow=True, timeout=waiting):
                print(line, flush=True)
        left = max(until - time.monotonic(), 0.001) if args.follow else waiting
        final = client.wait(name, timeout=left, on_status=lambda s: print(s.line(), file=sys.stderr))
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc} (waited {waiting:g} s in all, --wait-timeout); see it with python -m runner k8s "
                          f"status {name} -n {ns}") from None
    if final.succeeded:
        print(f"done: python -m runner report {config.storage}", file=sys.stderr)
        return 0
    print(f"failed: {final.line()}; see python -m runner k8s logs {name} -n {ns}", file=sys.stderr)
    return 1


def _matrix_job(args: argparse.Namespace, job: dict[str, Any], values_matrix: dict[str, Any] | None
                ) -> tuple[Any, dict[str, Any], list[ReplicaSpec], list[dict[str, Any]]]:
    """``submit matrix``: the matrix of the values' ``job.matrix`` (its ``job`` block's run settings) and of the
    ``--config`` matrix file, with the run flags over both; every cell built and checked as ``matrix`` checks it
    (its storage is not read: it may be reachable from the cluster only).

    Returns:
        the matrix's own run settings (for the RayJob), the matrix file's content, every cell's replicas and models.

    Raises:
        ConfigError: ``-b``/``--model`` given (a matrix names them in its file), or what ``matrix`` refuses.
    """
    from runner.cli.args import MATRIX_NAMES, flag_values
    from runner.core.config import load_config_file
    from runner.core.matrix import MatrixConfig
    from runner.engine.matrix.request import MatrixRequest
    from runner.kuberay.rayjob import MATRIX_NAMED

    if getattr(args, "benchmark", None) or getattr(args, "model", None):
        raise ConfigError("submit matrix names its benchmarks and models in the matrix file (--config, or the "
                          "values' job.matrix); drop --benchmark and --model")
    data = {key: value for key, value in job.items() if key not in MATRIX_NAMED}
    data.update(values_matrix or {})
    if args.config:
        data.update(load_config_file(args.config))
    overrides: dict[str, Any] = {}
    flag_values(args, overrides, exclude=MATRIX_NAMES)
    try:
        config = MatrixConfig.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - pydantic's error as the matrix command words it
        from pydantic import ValidationError

        from runner.core.config import format_validation_error

        if isinstance(exc, ValidationError):
            raise ConfigError(format_validation_error(exc, "the matrix")) from None
        raise
    request = MatrixRequest.from_config(config, overrides, read_root=False)
    replicas = [spec for cell in request.cells for spec in (*cell.replicas, *cell.pinned)]
    models = [cell.request.models() for cell in request.cells]
    matrix = config.model_dump(mode="json", exclude={"settings"}, exclude_none=True, exclude_defaults=True)
    return request.run_config, matrix, replicas, models


def _client(args: argparse.Namespace) -> Any:
    from runner.kuberay.client import RayJobClient

    check_namespace(args.namespace)
    return RayJobClient.from_environment(args.namespace, args.context)


def state(status: RayJobStatus) -> str:
    """``succeeded``, ``failed`` or ``running`` (not ended yet): the keys of :data:`STATUS_EXIT`."""
    if status.succeeded:
        return "succeeded"
    return "failed" if status.terminal else "running"


def cmd_status(args: argparse.Namespace) -> int:
    """``k8s status NAME``: one line (or JSON) with the RayJob's deployment and job status; the exit status says
    whether it failed (:data:`STATUS_EXIT`)."""
    status = _client(args).status(args.name)
    if args.json:
        print(json.dumps({**status.__dict__, "terminal": status.terminal, "succeeded": status.succeeded,
                          "state": state(status)}, indent=2))
    else:
        print(status.line())
    return STATUS_EXIT[state(status)]


def cmd_logs(args: argparse.Namespace) -> int:
    """``k8s logs NAME``: the driver's log from the submitter pod (``--follow`` to stream it)."""
    for line in _client(args).logs(args.name, follow=args.follow):
        print(line, flush=True)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """``k8s delete NAME``: delete the RayJob with foreground propagation (cluster, pods, ConfigMap first)."""
    client = _client(args)
    client.delete(args.name)
    print(f"deleted RayJob {args.name} in namespace {client.namespace}", file=sys.stderr)
    return 0
