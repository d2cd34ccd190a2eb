"""RunConfig + deployment options -> the RayJob (and the ConfigMap holding the run config), as plain dicts.

This is the same shape ``helm/runner/templates/rayjob.yaml`` renders from the same values; a test renders the
chart with Helm's engine and compares. The run inside the cluster is ``python -m runner run --config
/etc/runner/config.yaml``: the same code and config file as on a laptop, with ``executor: ray`` so the driver
attaches to the cluster through ``RAY_ADDRESS`` (set by Ray's job supervisor). A RayJob retry (``backoffLimit``)
starts a new cluster whose driver resumes from storage: finished items have records and are skipped.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from kubernetes.utils.quantity import parse_quantity

from runner._version import __version__
from runner.core.config import RunConfig, WorkerSpec
from runner.core.errors import ConfigError
from runner.core.loopback import LOOPBACK_HOSTS, NO_PROXY_VARIABLES, PROXY_VARIABLES
from runner.kuberay.checks import check_rayjob
from runner.kuberay.deploy_options import GPU_RESOURCE, DeployOptions, WorkerGroup
from runner.core import secrets

CONFIG_DIR = "/etc/runner"
CONFIG_FILE = "config.yaml"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_FILE}"
ENTRYPOINT = f"python -m runner run --config {CONFIG_PATH}"
CHART_NAME = "runner"
SECRET_FLAG = re.compile(rf"^-[^=]*({secrets.SECRET_NAME})")
"""An engine flag that names a credential (``--hf-token``, ``--hf-token=...``, ``--api-key``; not ``--tokenizer``
nor ``--max-num-batched-tokens``): its value would stand in the ConfigMap in clear."""

# Characters shlex.quote leaves alone (in ASCII): an argument made of these needs no quoting in the submitter's shell.
SHELL_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
STORAGE_URI = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://\S+$")
POD_LOCAL_PROTOCOLS = ("file", "local", "memory")
# Run config fields that a RayJob sets itself (executor: ray; take_over: true, so that a retry's driver takes the
# run over from the previous attempt's once its lease lapses) or refuses (ray_address, force); the chart's job
# values are the other fields.
CLUSTER_FIELDS = ("executor", "ray_address", "force", "take_over")
# Run config fields that can carry a credential (runner.core.secrets): fsspec options, by name or value, and URLs.
MAY_HOLD_SECRETS = ("storage", "storage_options", "data_dir", "model_base_url", "user_model_base_url",
                    "judge_base_url", "cache")


def entrypoint(extra_args: list[str] | tuple[str, ...] = (), command: str = "run") -> str:
    """The RayJob's entrypoint: ``python -m runner run --config /etc/runner/config.yaml`` (``command``
    ``matrix``: ``python -m runner matrix --config ...``, an evaluation matrix) plus ``extra_args``.

    KubeRay puts the entrypoint into a shell command line as is (``ray job submit ... -- <entrypoint>``), so an
    extra argument must be shell-safe on its own (letters, digits and ``@%+=:,./-_``).

    Raises:
        ConfigError: an argument that would need shell quoting.
    """
    for arg in extra_args:
        if not SHELL_SAFE.match(arg):
            raise ConfigError(
                f"job.extraArgs: {arg!r} would need shell quoting; put the setting in the run config instead"
            )
    return " ".join([ENTRYPOINT.replace(" run ", f" {command} "), *extra_args])


def cluster_run_config(config: RunConfig) -> dict[str, Any]:
    """The run config file the driver reads in the cluster (the ConfigMap's ``config.yaml``).

    Raises:
        ConfigError: a setting that cannot work in a RayJob: an executor other than ``ray``, ``ray_address`` or
            ``force``; a storage URI that is missing or local to one pod, a cache URI local to one pod; a secret
            (:func:`runner.core.secrets.find`) in ``storage_options`` at any depth, a password in a URL, or an engine
            flag naming a credential (:data:`SECRET_FLAG`, such as vLLM's ``--hf-token``), which the ConfigMap would
            hold in clear.
    """
    if config.executor != "ray":
        raise ConfigError(f"executor {config.executor!r} does not run on the RayJob's Ray cluster: drop --sequential "
                          "and --executor")
    if config.ray_address:
        raise ConfigError("--ray-address is set by KubeRay inside the cluster (RAY_ADDRESS): drop --ray-address")
    if config.force:
        raise ConfigError(
            "--force is refused on Kubernetes: a RayJob retry would delete the records of the attempt before it; "
            "to start over, use a new --storage URI"
        )
    check_storage_uri(config.storage)
    check_cache_uri(config.cache)
    found = secrets.find({name: getattr(config, name) for name in MAY_HOLD_SECRETS})
    if found:
        raise ConfigError(
            f"{found[0].path} {found[0].why} and would be stored in a ConfigMap; put it in the credentials Secret "
            "(storage.credentials.secretRef, or a Secret in common.envFrom) as an environment variable instead"
        )
    for index, entry in enumerate(config.serve):
        for arg in entry.engine_args:
            if SECRET_FLAG.match(arg):
                raise ConfigError(
                    f"serve[{index}].engine_args {arg.partition('=')[0]} passes a credential, which would be stored "
                    "in a ConfigMap; give the pods HF_TOKEN from a Secret instead (hfToken.secretName, or submit "
                    "--hf-token-secret)"
                )
    data = config.model_dump(mode="json", exclude=set(CLUSTER_FIELDS), exclude_none=True)
    data["executor"] = "ray"
    data["take_over"] = True
    data.setdefault("log_format", "json")  # what a pod (no terminal) would pick; said explicitly, as the chart does
    return data


def check_storage_uri(uri: str | None) -> None:
    """A storage URI every pod of the cluster reaches: a URL with a protocol, not a pod-local path.

    Raises:
        ConfigError: ``uri`` is missing, a local path, ``file://``, ``local://`` or ``memory://``.
    """
    if not uri:
        raise ConfigError(
            "a RayJob needs --storage (job.storage): a URI every pod reaches, such as s3://bucket/runs/name"
        )
    if _pod_local(uri):
        raise ConfigError(
            f"storage {uri!r} is local to one pod and is lost with it; use shared object storage such as "
            "s3://bucket/runs/name or gs://bucket/runs/name"
        )


def check_cache_uri(uri: str | None) -> None:
    """A response cache every pod of the cluster shares, or none: as for the storage, not a pod-local path.

    Raises:
        ConfigError: ``uri`` is a local path, ``file://``, ``local://`` or ``memory://``.
    """
    if uri is not None and _pod_local(uri):
        raise ConfigError(
            f"--cache (job.cache) {uri!r} is local to one pod: each pod would keep a cache of its own, lost with it; "
            "use shared object storage such as s3://bucket/cache, or drop --cache"
        )


def _pod_local(uri: str) -> bool:
    """Whether ``uri`` is a path or a URL that only one pod sees (:data:`POD_LOCAL_PROTOCOLS`)."""
    match = STORAGE_URI.match(uri)
    return match is None or match.group(1).lower() in POD_LOCAL_PROTOCOLS


def config_map_name(name: str) -> str:
    """The run-config ConfigMap of RayJob ``name``."""
    return f"{name}-config"


def labels(name: str, managed_by: str = "runner") -> dict[str, str]:
    """Recommended Kubernetes labels of our objects (the chart adds Helm's own as well)."""
    return {
        "app.kubernetes.io/name": CHART_NAME,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/version": __version__,
        "app.kubernetes.io/managed-by": managed_by,
    }


def cluster_matrix_config(matrix: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """The matrix file the driver reads in the cluster: ``matrix``'s models, benchmarks, baseline and watch over
    :func:`cluster_run_config` of its settings (``config``, the matrix's own run settings), less what a matrix names
    in its entries (:data:`MATRIX_NAMED`).

    Raises:
        ConfigError: as :func:`cluster_run_config`.
    """
    data = {key: value for key, value in cluster_run_config(config).items() if key not in MATRIX_NAMED}
    return {**{key: matrix[key] for key in ("models", "benchmarks", "baseline", "watch") if matrix.get(key) is not None},
            **data}


MATRIX_NAMED = ("benchmark", "benchmark_args", "solution", "solution_args", "model")
"""What a run config names that a matrix names in its entries instead (``benchmarks``, ``models``): left out of the
matrix file built from the chart's ``job`` block."""


def build_configmap(config: RunConfig, name: str, namespace: str | None = None,
                    matrix: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ConfigMap holding ``config.yaml`` for RayJob ``name`` (see :func:`cluster_run_config`; with ``matrix``,
    the matrix file of :func:`cluster_matrix_config`)."""
    data = cluster_run_config(config) if matrix is None else cluster_matrix_config(matrix, config)
    text = yaml.safe_dump(data, sort_keys=False)
    metadata: dict[str, Any] = {"name": config_map_name(name), "labels": labels(name)}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {CONFIG_FILE: text}}


def build_service_account(options: DeployOptions, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    """The pods' ServiceAccount with its workload identity annotations, when the options create one
    (``serviceAccount.create``, as the chart's ``templates/serviceaccount.yaml``); ``None`` when the pods use an
    existing one or the namespace's default.

    Args:
        options: the deployment options.
        name: the RayJob's name (the account's name unless ``serviceAccount.name`` gives one).
        namespace: set in ``metadata`` when given.
    """
    if not options.service_account.create:
        return None
    metadata: dict[str, Any] = {"name": options.service_account_name(name), "labels": labels(name)}
    if namespace:
        metadata["namespace"] = namespace
    if options.service_account.annotations:
        metadata["annotations"] = dict(options.service_account.annotations)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}


def build_model_cache_claim(options: DeployOptions, name: str,
                            namespace: str | None = None) -> dict[str, Any] | None:
    """The model cache's PersistentVolumeClaim when the options create one (``modelCache.persistentVolumeClaim.
    create``, as the chart's ``templates/modelcache.yaml``); ``None`` otherwise (an existing claim, a host path, or
    no cache).

    Args:
        options: the deployment options.
        name: the RayJob's name (the claim is ``<name>-models`` unless ``claimName`` names it).
        namespace: set in ``metadata`` when given.
    """
    cache = options.model_cache
    claim = cache.persistent_volume_claim
    if cache.type != "persistentVolumeClaim" or not claim.create:
        return None
    metadata: dict[str, Any] = {"name": options.model_cache_claim_name(name), "labels": labels(name)}
    if namespace:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"accessModes": [claim.access_mode], "resources": {"requests": {"storage": claim.size}}}
    if claim.storage_class_name:
        spec["storageClassName"] = claim.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def build_rayjob(
    config: RunConfig,
    options: DeployOptions,
    name: str,
    *,
    namespace: str | None = None,
    extra_args: list[str] | tuple[str, ...] = (),
    command: str = "run",
) -> dict[str, Any]:
    """The RayJob for one run (``command`` ``matrix``: one evaluation matrix), ``rayClusterSpec`` inline, in
    KubeRay's ``K8sJobMode``.

    Args:
        config: the run (validated for the cluster by :func:`cluster_run_config`).
        options: image, head, worker groups, life cycle, credentials (the chart's values).
        name: the RayJob's name: at most 47 characters, a DNS-1035 label.
        namespace: set in ``metadata`` when given (the API call names it anyway).
        extra_args: shell-safe arguments appended to the entrypoint.

    Raises:
        ConfigError: the run cannot work in a RayJob, or the manifest breaks a rule the KubeRay operator enforces
            (:func:`runner.kuberay.checks.check_rayjob`).
    """
    cluster_run_config(config)
    check_worker_fits(config.worker, options.worker_groups)
    life = options.ray_job
    spec: dict[str, Any] = {
        "entrypoint": entrypoint(extra_args, command),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": life.shutdown_after_job_finishes,
    }
    if life.shutdown_after_job_finishes:
        # The TTL counts down to the shutdown; KubeRay refuses one without it (validateDeletionConfiguration).
        spec["ttlSecondsAfterFinished"] = life.ttl_seconds_after_finished
    if life.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = life.active_deadline_seconds
    spec.update({
        "backoffLimit": life.backoff_limit,
        "submitterConfig": {"backoffLimit": life.submitter_backoff_limit},
        "submitterPodTemplate": _submitter_template(options, name),
        "rayClusterSpec": {
            "rayVersion": options.ray_version,
            "authOptions": {"mode": options.auth.mode},
            "headGroupSpec": {
                "rayStartParams": dict(options.head.ray_start_params),
                "template": _head_template(options, name),
            },
            "workerGroupSpecs": [_worker_group(options, name, group) for group in options.worker_groups],
        },
    })
    metadata: dict[str, Any] = {"name": name, "labels": labels(name)}
    if namespace:
        metadata["namespace"] = namespace
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": spec}
    check_rayjob(manifest)
    return manifest


def check_worker_fits(worker: WorkerSpec, groups: list[WorkerGroup]) -> None:
    """Refuse a worker spec that no worker group's pods can hold, which Ray would only report from the cluster.

    A pod holds a worker when its CPU and ``nvidia.com/gpu`` limits cover the worker's ``num_cpus`` and
    ``num_gpus`` and its memory limit covers the worker's ``memory`` (a necessary condition only: Ray gives part
    of a pod's memory to its object store). Quantities are read by ``kubernetes.utils.parse_quantity``.

    Raises:
        ConfigError: no group fits, naming the worker's demand and the groups' sizes.
    """
    def fits(group: WorkerGroup) -> bool:
        return (float(parse_quantity(group.cpu)) >= worker.num_cpus and group.gpu >= worker.num_gpus
                and (worker.memory is None or float(parse_quantity(group.memory)) >= worker.memory))

    if not groups or any(fits(group) for group in groups):
        return
    demand = f"num_cpus={worker.num_cpus:g}, num_gpus={worker.num_gpus:g}"
    if worker.memory is not None:
        demand += f", memory={worker.memory.human_readable(separator=' ')}"
    sizes = "; ".join(f"{g.name}: cpu {g.cpu}, memory {g.memory}, gpu {g.gpu}" for g in groups)
    raise ConfigError(
        f"no worker group can hold one worker ({demand}; groups: {sizes}); lower --num-cpus / --num-gpus / "
        "--memory, or size a group to fit (--worker-cpu, --worker-memory, --worker-gpu, or workerGroups in values)"
    )


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the ConfigMap's config.yaml) as literal blocks, and a value used twice in full
    (no ``&id001`` anchors), as a person would."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_BlockDumper.add_representer(str, _represent_str)


def dump_yaml(*documents: dict[str, Any]) -> str:
    """Manifests as one YAML stream (``---`` between documents), ready for ``kubectl apply -f -``."""
    return yaml.dump_all(documents, Dumper=_BlockDumper, sort_keys=False)


def _resources(cpu: str, memory: str, gpu: int = 0) -> dict[str, Any]:
    # requests == limits: Ray sizes itself from the limits, and the scheduler then reserves exactly that (an
    # extended resource such as nvidia.com/gpu must have its request equal to its limit anyway).
    amounts: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpu:
        amounts[GPU_RESOURCE] = gpu
    return {"requests": dict(amounts), "limits": dict(amounts)}


IN_CLUSTER_NO_PROXY = ",".join([*LOOPBACK_HOSTS, ".svc", ".cluster.local"])
"""``NO_PROXY`` of the pods when ``common.env`` sets a proxy and no ``NO_PROXY``: loopback and the cluster's own
names. KubeRay's submitter runs ``ray job submit`` against the head's dashboard at
``<head service>.<namespace>.svc.cluster.local:8265`` with ``requests``, which honours the proxy variables, and an
egress proxy cannot reach a cluster address (the run's own replicas ignore the proxy whatever this says:
:mod:`runner.core.loopback`; Ray's gRPC leaves proxies out unless ``RAY_grpc_enable_http_proxy`` is set)."""


def no_proxy_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``NO_PROXY`` and ``no_proxy`` entries (:data:`IN_CLUSTER_NO_PROXY`) for containers whose ``env`` (``common.env``)
    sets a proxy variable and neither spelling of ``NO_PROXY``; none otherwise (a ``NO_PROXY`` of the user's own is
    kept as written). The chart's ``runner.noProxyEnv`` makes the same."""
    names = {entry.get("name") for entry in env}
    if names.isdisjoint(PROXY_VARIABLES) or not names.isdisjoint(NO_PROXY_VARIABLES):
        return []
    return [{"name": name, "value": IN_CLUSTER_NO_PROXY} for name in NO_PROXY_VARIABLES]


def _env(options: DeployOptions, extra: list[dict[str, Any]] = ()) -> dict[str, Any]:
    """``env``/``envFrom`` of a container: the credentials Secret (never its values), the common extras and the
    ``NO_PROXY`` they call for (:func:`no_proxy_env`), then the container's own (``HF_TOKEN`` from its Secret, the
    model cache's paths)."""
    env_from: list[dict[str, Any]] = []
    if options.storage.credentials.source == "secret":
        env_from.append({"secretRef": {"name": options.storage.credentials.secret_ref}})
    env_from.extend(options.common.env_from)
    out: dict[str, Any] = {}
    env = [*options.common.env, *no_proxy_env(options.common.env), *extra]
    if env:
        out["env"] = env
    if env_from:
        out["envFrom"] = env_from
    return out


def _container(options: DeployOptions, name: str, image: str, resources: dict[str, Any],
               mounts: list[dict[str, Any]], env: list[dict[str, Any]] = ()) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": options.image.pull_policy,
        "resources": resources,
        **_env(options, env),
    }
    if options.security_context:
        container["securityContext"] = dict(options.security_context)
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod_template(options: DeployOptions, fullname: str, container: dict[str, Any],
                  volumes: list[dict[str, Any]], placement: Any = None,
                  restart_policy: str | None = None, init: list[dict[str, Any]] = ()) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [container]}
    if init:
        pod["initContainers"] = list(init)
    account = options.service_account_name(fullname)
    if account:
        pod["serviceAccountName"] = account
    if options.image_pull_secrets:
        pod["imagePullSecrets"] = [secret.model_dump() for secret in options.image_pull_secrets]
    if options.pod_security_context:
        pod["securityContext"] = dict(options.pod_security_context)
    if restart_policy:
        pod["restartPolicy"] = restart_policy
    if volumes:
        pod["volumes"] = volumes
    template: dict[str, Any] = {"spec": pod}
    labels, annotations = dict(options.common.pod_labels), dict(options.common.pod_annotations)
    if placement is not None:
        tolerations = placement.tolerations_with_gpu() if isinstance(placement, WorkerGroup) \
            else placement.tolerations
        for key, value in (("nodeSelector", placement.node_selector), ("tolerations", tolerations),
                           ("affinity", placement.affinity)):
            if value:
                pod[key] = value
        labels.update(placement.labels)
        annotations.update(placement.annotations)
    metadata = {key: value for key, value in (("labels", labels), ("annotations", annotations)) if value}
    if metadata:
        template["metadata"] = metadata
    return template


_LOGS_VOLUME = {"name": "ray-logs", "emptyDir": {}}
_LOGS_MOUNT = {"name": "ray-logs", "mountPath": "/tmp/ray"}


_SHM = "shared-mem"  # KubeRay's own name for the /dev/shm it adds when a pod has none (common/pod.go)
_CACHE = "model-cache"
_OWNER_RESOURCES = {"cpu": "100m", "memory": "64Mi"}


def _head_template(options: DeployOptions, fullname: str) -> dict[str, Any]:
    mounts = [dict(_LOGS_MOUNT), {"name": "run-config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes = [dict(_LOGS_VOLUME), {"name": "run-config", "configMap": {"name": config_map_name(fullname)}}]
    container = _container(options, "ray-head", options.image.ref,
                           _resources(options.head.cpu, options.head.memory), mounts, options.hf_token.environment())
    return _pod_template(options, fullname, container, volumes, options.head)


def _model_cache_volume(options: DeployOptions, fullname: str) -> dict[str, Any] | None:
    cache = options.model_cache
    if cache.type == "persistentVolumeClaim":
        return {"name": _CACHE, "persistentVolumeClaim": {"claimName": options.model_cache_claim_name(fullname)}}
    if cache.type == "hostPath":
        return {"name": _CACHE, "hostPath": {"path": cache.host_path.path, "type": "DirectoryOrCreate"}}
    return None


def _cache_owner(options: DeployOptions, image: str) -> dict[str, Any]:
    """The init container that gives a host-path cache to the pods' user: the kubelet creates the directory owned by
    root, and the Ray container runs as ``podSecurityContext.runAsUser`` (1000, group 100 by default)."""
    user = options.pod_security_context.get("runAsUser") or 1000
    group = options.pod_security_context.get("runAsGroup") or 100
    return {
        "name": "model-cache-owner",
        "image": image,
        "imagePullPolicy": options.image.pull_policy,
        "command": ["chown", f"{user}:{group}", options.model_cache.mount_path],
        "resources": {"requests": dict(_OWNER_RESOURCES), "limits": dict(_OWNER_RESOURCES)},
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}},
        "volumeMounts": [{"name": _CACHE, "mountPath": options.model_cache.mount_path}],
    }


def _worker_group(options: DeployOptions, fullname: str, group: WorkerGroup) -> dict[str, Any]:
    image = f"{group.image.repository or options.image.repository}:{group.image.tag or options.image.tag}"
    mounts = [dict(_LOGS_MOUNT), {"name": _SHM, "mountPath": "/dev/shm"}]
    volumes = [dict(_LOGS_VOLUME),
               {"name": _SHM, "emptyDir": {"medium": "Memory", "sizeLimit": group.shared_memory or group.memory}}]
    cache = _model_cache_volume(options, fullname)
    init = []
    if cache is not None:
        mounts.append({"name": _CACHE, "mountPath": options.model_cache.mount_path})
        volumes.append(cache)
        if options.model_cache.type == "hostPath":
            init.append(_cache_owner(options, image))
    container = _container(options, "ray-worker", image, _resources(group.cpu, group.memory, group.gpu), mounts,
                           [*options.hf_token.environment(), *options.model_cache.environment()])
    return {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.replicas if group.min_replicas is None else group.min_replicas,
        "maxReplicas": group.replicas if group.max_replicas is None else group.max_replicas,
        "rayStartParams": {**group.ray_start_params, "num-gpus": str(group.gpu)},
        "template": _pod_template(options, fullname, container, volumes, group, init=init),
    }


def _submitter_template(options: DeployOptions, fullname: str) -> dict[str, Any]:
    # KubeRay fills in the command (ray job submit ... -- <entrypoint>) when the container has none.
    container = _container(options, "ray-job-submitter", options.image.ref,
                           _resources(options.submitter.cpu, options.submitter.memory), [])
    return _pod_template(options, fullname, container, [], restart_policy="Never")
