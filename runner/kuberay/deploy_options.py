"""Deployment options of a RayJob: the Helm chart's values (``helm/runner/values.yaml``) as pydantic models.

The chart and :func:`runner.kuberay.rayjob.build_rayjob` read the same values, laid out by role as in KubeRay's
``ray-cluster`` chart: ``image``, ``rayVersion``, ``job`` (the run), ``rayJob`` (its life cycle), ``head``,
``workerGroups``, ``submitter``, ``storage.credentials``, ``serviceAccount`` and the security contexts. Field names
are snake_case here and camelCase in the values (pydantic aliases); unknown keys are refused, as the chart's
``values.schema.json`` refuses them.

The defaults here are the chart's defaults (a test asserts it), so ``python -m runner submit`` and
``helm install`` build the same RayJob from the same inputs. These models are the chart's one description of its
values: ``values.schema.json`` is generated from them (:mod:`runner.kuberay.schema`), so a constraint written here
(a bound, a pattern, a KubeRay rule on one value) is refused by ``helm install`` and by ``submit`` alike.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema,
                      model_validator)
from pydantic.alias_generators import to_camel

from runner._version import __version__
from runner.core.errors import ConfigError
from runner.core.secrets import anycase
from runner.kuberay.checks import (DNS1123_LABEL, ENV_REFUSED, HEAD_PARAMS_REFUSED, IMAGE_REPOSITORY_MAX,
                                   IMAGE_REPOSITORY_PATTERN, IMAGE_TAG_PATTERN, PARAMS_REFUSED, image_repository,
                                   image_tag, refused_env)

# The one pin of the Ray version, as in pyproject.toml (ray[default]==...), the Dockerfile and the chart.
RAY_VERSION = "2.60.0"
PYTHON_TAG = "py311"
IMAGE_REPOSITORY = "ghcr.io/example/runner"
IMAGE_TAG = f"{__version__}-ray{RAY_VERSION}-{PYTHON_TAG}"
VLLM_VERSION = "0.33.0"
"""The vLLM release of the GPU image variant (``docker/Dockerfile.vllm``, on ``vllm/vllm-openai:v0.33.0``): the one
whose argument parser ``scripts/check_vllm_args.py`` checks the runner's ``vllm serve`` command lines against."""
VLLM_IMAGE_TAG = f"{__version__}-ray{RAY_VERSION}-vllm{VLLM_VERSION}"
"""The tag of the vLLM image variant: the package, Ray and vLLM versions (its Python is vLLM's own)."""
DEFAULT_SECRET = "runner-storage"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
"""Added to a GPU worker group that has no toleration for ``nvidia.com/gpu`` of its own: GPU nodes are tainted with the
resource's name by the convention of Kubernetes' ``ExtendedResourceToleration`` admission plugin (GKE taints them
``nvidia.com/gpu=present:NoSchedule``), and a toleration only permits, it never attracts a pod."""
HF_TOKEN = "HF_TOKEN"
HF_HOME_DIR = "huggingface"
"""``HF_HOME`` is ``<modelCache.mountPath>/huggingface`` (the Hub's downloads, under ``hub/``)."""
RUNNER_MODEL_CACHE_DIR = "runner"
"""``RUNNER_MODEL_CACHE`` is ``<modelCache.mountPath>/runner`` (the converted embedded model,
:mod:`runner.serving.paths`)."""
POD_MOUNTS = ("/tmp/ray", "/dev/shm", "/etc/runner")
"""Where the chart mounts Ray's logs, the shared memory and the run config: not a place for the model cache."""


# The quantity pattern of the KubeRay CRDs' resource fields (Kubernetes' resource.Quantity), without the sign:
# a pod's CPU or memory is never negative.
_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
_QUANTITY = re.compile(rf"^{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$")


def quantity(value: str | int | float) -> str:
    """A Kubernetes quantity as the chart's ``quote`` writes it: ``2`` -> ``"2"``, ``0.5`` -> ``"0.5"``.

    Raises:
        ValueError: not a non-negative Kubernetes quantity (``500m``, ``2``, ``4Gi``, ``1.5G``).
    """
    if isinstance(value, bool):
        raise ValueError("a quantity is a number or a string like '500m' or '4Gi'")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a quantity must not be negative")
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    if not _QUANTITY.match(value.strip()):
        raise ValueError(f"{value!r} is not a Kubernetes quantity: use e.g. '500m' or '2' for CPUs, '4Gi' for memory")
    return value.strip()


Quantity = Annotated[str, BeforeValidator(quantity),
                     WithJsonSchema({"type": ["string", "number"], "pattern": _QUANTITY.pattern, "minimum": 0})]


ImageRepository = Annotated[str, AfterValidator(image_repository),
                            WithJsonSchema({"type": "string", "pattern": IMAGE_REPOSITORY_PATTERN,
                                            "maxLength": IMAGE_REPOSITORY_MAX})]
"""An image repository (:func:`runner.kuberay.checks.image_repository`: the grammar of distribution/reference)."""
ImageTag = Annotated[str, AfterValidator(image_tag), WithJsonSchema({"type": "string", "pattern": IMAGE_TAG_PATTERN})]
"""An image tag (:func:`runner.kuberay.checks.image_tag`)."""


def _params_rule(refused: dict[str, str], derived: dict[str, str] | None = None) -> Any:
    """A ``rayStartParams`` dict type without the keys in ``refused`` (name -> KubeRay's rule, quoted on refusal)
    nor those in ``derived`` (name -> the value the chart writes it from)."""
    derived = derived or {}

    def check(params: dict[str, str]) -> dict[str, str]:
        for name, rule in refused.items():
            if name in params:
                raise ValueError(f"rayStartParams[{name!r}] is refused by KubeRay ({rule}); remove it")
        for name, source in derived.items():
            if name in params:
                raise ValueError(f"rayStartParams[{name!r}] is written by the chart from {source}; remove it and "
                                 f"set {source}")
        return params

    schema = {"type": "object", "additionalProperties": {"type": "string"},
              "not": {"anyOf": [{"required": [name]} for name in [*refused, *derived]]}}
    return Annotated[dict[str, str], AfterValidator(check), WithJsonSchema(schema)]


HeadParams = _params_rule({**PARAMS_REFUSED, **HEAD_PARAMS_REFUSED})
WorkerParams = _params_rule(PARAMS_REFUSED, {"num-gpus": "the group's gpu"})
"""A worker group's ``rayStartParams``: its ``num-gpus`` is always its ``gpu`` (``nvidia.com/gpu``), so that Ray
counts exactly the GPUs the device plugin gave the pod, never the node's others (an image on NVIDIA's CUDA base
sets ``NVIDIA_VISIBLE_DEVICES=all``, which shows every GPU of the node to a pod that asked for none)."""


_ENV_SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential", "sas")
ENV_SECRET_NAME = ("(^|_)(" + "|".join(anycase(word) for word in _ENV_SECRET_WORDS) + ")(_|$)|"
                   + anycase("connection_string"))
"""An environment variable name that names a credential: one of the words ``TOKEN``, ``KEY``, ``SECRET``,
``PASSWORD``, ``PASSWD``, ``CREDENTIAL``, ``SAS`` between underscores (``HF_TOKEN``, ``OPENAI_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, ``AZURE_STORAGE_SAS_TOKEN``; not ``MAX_TOKENS``), or ``CONNECTION_STRING``: the words of
:mod:`runner.core.secrets` for the upper-case names of environment variables. A plain pattern, as the schema needs."""
ENV_PATH_NAME = "_(FILE|PATH|DIR)$"
"""A variable that names a file holding a credential (``GOOGLE_APPLICATION_CREDENTIALS`` aside, ``*_KEY_FILE``):
a path, not a secret."""


def _env_rule(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kubernetes' EnvVar needs a name; KubeRay refuses some on the head (:func:`runner.kuberay.checks.refused_env`);
    a credential (:data:`ENV_SECRET_NAME`) given as a plain ``value`` would stand in clear in the RayJob, so it must
    come from a Secret (``valueFrom.secretKeyRef``, ``common.envFrom``, or ``hfToken`` for ``HF_TOKEN``)."""
    for index, entry in enumerate(env):
        if not entry.get("name"):
            raise ValueError(f"env[{index}] has no name; give each entry a name and a value")
        name = str(entry["name"])
        if entry.get("value") and re.search(ENV_SECRET_NAME, name) and not re.search(ENV_PATH_NAME, name):
            where = "hfToken.secretName" if name == HF_TOKEN else "a Secret in common.envFrom"
            raise ValueError(f"env[{index}] {name!r} holds a credential, which would stand in clear in the RayJob; "
                             f"give it from a Secret instead ({where}, or valueFrom.secretKeyRef)")
        rule = refused_env(entry)
        if rule:
            raise ValueError(f"env[{index}] {entry.get('name')!r} is refused by KubeRay on the head ({rule}); "
                             "remove it")
    return env


# The JSON schema of the same rules: a name, and no name (with a value, where given) that refused_env refuses.
_REFUSED_ENTRIES = [
    {"properties": {"name": {"const": name}, "value": {"enum": list(values)}}, "required": ["name", "value"]}
    if values else {"properties": {"name": {"const": name}}, "required": ["name"]}
    for name, (values, _) in ENV_REFUSED.items()
]
_CLEAR_SECRET = {"properties": {"name": {"pattern": ENV_SECRET_NAME, "not": {"pattern": ENV_PATH_NAME}},
                                 "value": {"minLength": 1}}, "required": ["name", "value"]}
_ENV_ITEM = {"type": "object", "required": ["name"], "properties": {"name": {"minLength": 1}},
             "not": {"anyOf": [*_REFUSED_ENTRIES, _CLEAR_SECRET]}}
Env = Annotated[list[dict[str, Any]], AfterValidator(_env_rule),
                WithJsonSchema({"type": "array", "items": _ENV_ITEM})]


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


class Image(_Values):
    """The container image of every Ray pod, and of the submitter (KubeRay's default uses the head's image)."""

    repository: ImageRepository = IMAGE_REPOSITORY
    tag: ImageTag = IMAGE_TAG
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"

    @property
    def ref(self) -> str:
        """``repository:tag``."""
        return f"{self.repository}:{self.tag}"


class GroupImage(_Values):
    """A worker group's own image (e.g. the ``-gpu`` build for a GPU group); unset fields fall back to ``image``."""

    repository: ImageRepository | None = None
    tag: ImageTag | None = None


class _Placement(_Values):
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class Head(_Placement):
    """The Ray head pod: it runs the driver (``python -m runner run``) and, with ``num-cpus: "0"``, no actors."""

    cpu: Quantity = "1"
    memory: Quantity = "4Gi"
    ray_start_params: HeadParams = Field(default_factory=lambda: {"num-cpus": "0"})


class WorkerGroup(_Placement):
    """One worker group: ``replicas`` pods of ``cpu``/``memory``/``gpu`` each.

    ``gpu`` is the pod's ``nvidia.com/gpu`` limit and request and the group's ``num-gpus`` start parameter; a GPU
    group also tolerates the ``nvidia.com/gpu`` taint (:data:`GPU_TOLERATION`) unless its ``tolerations`` name that
    key. ``shared_memory`` sizes the pod's ``/dev/shm`` (an ``emptyDir`` in memory), where NCCL and vLLM's and
    SGLang's multi-process executors exchange tensors; ``None`` sizes it as KubeRay would, at the pod's ``memory``.
    What it holds counts against the pod's memory limit. ``min_replicas``/``max_replicas`` default to ``replicas``
    (no autoscaling); KubeRay's CRD requires both, so the manifest always carries them.
    """

    name: str = Field(pattern=DNS1123_LABEL, max_length=63)
    replicas: int = Field(ge=0)
    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=0)
    cpu: Quantity
    memory: Quantity
    gpu: int = Field(default=0, ge=0)
    shared_memory: Quantity | None = None
    image: GroupImage = Field(default_factory=GroupImage)
    ray_start_params: WorkerParams = Field(default_factory=dict)

    def tolerations_with_gpu(self) -> list[dict[str, Any]]:
        """The group's tolerations, plus :data:`GPU_TOLERATION` for a GPU group without one for that key."""
        if self.gpu and not any(t.get("key") == GPU_RESOURCE for t in self.tolerations):
            return [*self.tolerations, dict(GPU_TOLERATION)]
        return list(self.tolerations)


def default_worker_groups() -> list[WorkerGroup]:
    """One CPU group of two pods, 2 CPUs and 4 GiB each."""
    return [WorkerGroup(name="cpu", replicas=2, cpu="2", memory="4Gi")]


_CLAIM_NAME = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"  # a DNS-1123 subdomain


class ModelCacheClaim(_Values):
    """The model cache's PersistentVolumeClaim: an existing one (``claim_name``), or one the chart creates
    (``create``: named ``claim_name``, default ``<fullname>-models``, of ``size`` in ``storage_class_name``, the
    cluster's default class when empty). ``ReadWriteMany`` lets the worker pods of several nodes mount it (a file
    store: EFS, Filestore, Azure Files, CephFS, NFS); ``ReadWriteOnce`` holds only when every worker pod runs on one
    node. A created claim goes with the release (``helm uninstall``) or the RayJob (``k8s delete``): for a cache
    that outlives the run, create a claim once and name it."""

    claim_name: str = Field(default="", pattern=_CLAIM_NAME, max_length=253)
    create: bool = False
    size: Quantity = "200Gi"
    storage_class_name: str = ""
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"] = "ReadWriteMany"


class ModelCacheHostPath(_Values):
    """The model cache on each node's own disk (``hostPath``, created when missing): the worker pods of one node
    share it; each node downloads once. An init container (running as root, with only ``CAP_CHOWN``) gives the
    directory to the pods' user, since the kubelet creates it owned by root."""

    path: str = Field(default="/var/lib/runner/models", pattern=r"^(/[^/]+)+$")


class ModelCache(_Values):
    """Where the worker pods keep model weights, so that the replicas on one node (or on every node, with a
    shared claim) download a model once: ``HF_HOME`` (``<mount_path>/huggingface``, vLLM's, SGLang's and
    ``transformers``' downloads) and ``RUNNER_MODEL_CACHE`` (``<mount_path>/runner``, the converted embedded model)
    point into it.

    ``type``: ``none`` (each pod downloads into its own filesystem, lost with it), ``persistentVolumeClaim``
    (:class:`ModelCacheClaim`) or ``hostPath`` (:class:`ModelCacheHostPath`). Mounted on the worker pods only: in a
    RayJob the head runs the driver, which serves nothing (a sequential run is refused there); the head therefore
    carries no ``HF_HOME`` of its own either, since the driver hands its Hub variables to the replicas and would
    otherwise override the workers' path.
    """

    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"type": {"const": "persistentVolumeClaim"}}, "required": ["type"]},
        "then": {"properties": {"persistentVolumeClaim": {"anyOf": [
            {"properties": {"claimName": {"minLength": 1}}, "required": ["claimName"]},
            {"properties": {"create": {"const": True}}, "required": ["create"]}]}}},
    })

    type: Literal["none", "persistentVolumeClaim", "hostPath"] = "none"
    mount_path: str = Field(default="/models", pattern=r"^(/[^/]+)+$",
                            json_schema_extra={"not": {"enum": list(POD_MOUNTS)}})
    persistent_volume_claim: ModelCacheClaim = Field(default_factory=ModelCacheClaim)
    host_path: ModelCacheHostPath = Field(default_factory=ModelCacheHostPath)

    @model_validator(mode="after")
    def _complete(self) -> ModelCache:
        if self.mount_path in POD_MOUNTS:
            raise ValueError(f"modelCache.mountPath {self.mount_path!r} is where the chart mounts something else "
                             f"({', '.join(POD_MOUNTS)}); pick another path, e.g. /models")
        claim = self.persistent_volume_claim
        if self.type == "persistentVolumeClaim" and not (claim.claim_name or claim.create):
            raise ValueError("modelCache.type is 'persistentVolumeClaim' but no claim is named; set "
                             "modelCache.persistentVolumeClaim.claimName to an existing claim, or create: true")
        return self

    def environment(self) -> list[dict[str, str]]:
        """``HF_HOME`` and ``RUNNER_MODEL_CACHE`` in the mounted cache; none without a cache."""
        if self.type == "none":
            return []
        return [{"name": "HF_HOME", "value": f"{self.mount_path}/{HF_HOME_DIR}"},
                {"name": "RUNNER_MODEL_CACHE", "value": f"{self.mount_path}/{RUNNER_MODEL_CACHE_DIR}"}]


class HfToken(_Values):
    """``HF_TOKEN`` (gated or private models on the Hugging Face Hub, and gated data sets such as GAIA's) from the
    key ``key`` of the Secret ``secret_name`` (none when empty), on the head and the worker pods: the replicas
    download with it, and the driver reads gated data sets with it. Never a value in the chart's values, the run
    config or the RayJob: the pods read it from the Secret (``valueFrom.secretKeyRef``)."""

    secret_name: str = Field(default="", pattern=_CLAIM_NAME, max_length=253)
    key: str = Field(default=HF_TOKEN, pattern=r"^[-._a-zA-Z0-9]+$")

    def environment(self) -> list[dict[str, Any]]:
        """The ``HF_TOKEN`` entry of a container's ``env``, or none."""
        if not self.secret_name:
            return []
        return [{"name": HF_TOKEN, "valueFrom": {"secretKeyRef": {"name": self.secret_name, "key": self.key}}}]


class PullSecret(_Values):
    """An image pull Secret of every pod, by name."""

    name: str = Field(min_length=1)


class RayJobLifecycle(_Values):
    """The RayJob's life cycle.

    Args:
        backoff_limit: RayJob retries (a new cluster each; the run resumes from storage).
        submitter_backoff_limit: retries of the submitter Kubernetes Job (``submitterConfig.backoffLimit``).
        active_deadline_seconds: seconds before KubeRay fails the RayJob; ``None`` for no deadline.
        shutdown_after_job_finishes: delete the Ray cluster when the job ends.
        ttl_seconds_after_finished: seconds to keep the cluster after the job ends (for a look at it); used only
            with ``shutdown_after_job_finishes``, since KubeRay refuses a TTL without the shutdown it counts down to
            (``validation.go`` ``validateDeletionConfiguration``), so the RayJob leaves it out otherwise.
    """

    backoff_limit: int = Field(default=2, ge=0)
    submitter_backoff_limit: int = Field(default=2, ge=0)
    active_deadline_seconds: int | None = Field(default=86400, gt=0)
    shutdown_after_job_finishes: bool = True
    ttl_seconds_after_finished: int = Field(default=300, ge=0)


class Auth(_Values):
    """Ray token authentication (``rayClusterSpec.authOptions``): with ``token`` the operator creates the token
    Secret and sets it on every Ray container and on the submitter (KubeRay >= 1.5.1, Ray >= 2.52)."""

    mode: Literal["token", "disabled"] = "token"


class Submitter(_Values):
    """The submitter pod (``ray job submit``, which then prints the driver's log)."""

    cpu: Quantity = "500m"
    memory: Quantity = "1Gi"


class Common(_Values):
    """What the head, the workers and the submitter share: ``env`` (plain values, never secrets) and ``env_from``
    (``secretRef``/``configMapRef`` entries, e.g. a model API key Secret) of their containers, and ``pod_labels`` and
    ``pod_annotations`` of their pods (a group's own ``labels`` and ``annotations`` win over these). AKS Workload
    Identity needs the pod label ``azure.workload.identity/use: "true"`` here."""

    env: Env = Field(default_factory=list)
    env_from: list[dict[str, Any]] = Field(default_factory=list)
    pod_labels: dict[str, str] = Field(default_factory=dict)
    pod_annotations: dict[str, str] = Field(default_factory=dict)


class Credentials(_Values):
    """Where the pods get storage credentials.

    ``source``: ``secret`` (every key of the Secret ``secret_ref`` becomes an environment variable on the head, the
    workers and the submitter: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for an
    S3-compatible store...), ``serviceAccount`` (cloud workload identity through ``serviceAccount``) or ``none``
    (a public store, or a node role).
    """

    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"source": {"const": "secret"}}},
        "then": {"required": ["secretRef"], "properties": {"secretRef": {"minLength": 1}}},
    })

    source: Literal["secret", "serviceAccount", "none"] = "secret"
    secret_ref: str = DEFAULT_SECRET


class Storage(_Values):
    """Storage access of the pods (the storage URI itself is the run's, ``job.storage``)."""

    credentials: Credentials = Field(default_factory=Credentials)


class ServiceAccount(_Values):
    """The pods' Kubernetes service account, for cloud workload identity. ``create``: the chart (and ``submit``)
    creates one (name ``name`` or the release's full name) with ``annotations``: ``eks.amazonaws.com/role-arn`` (EKS
    IRSA), ``iam.gke.io/gcp-service-account`` (GKE Workload Identity with a Google service account),
    ``azure.workload.identity/client-id`` (AKS Workload Identity, with the pod label of :class:`Common`); else
    ``name`` is an existing one."""

    create: bool = False
    name: str = ""
    annotations: dict[str, str] = Field(default_factory=dict)


def default_pod_security_context() -> dict[str, Any]:
    """Non-root as the Ray image's ``ray`` user (uid 1000, gid 100)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def default_security_context() -> dict[str, Any]:
    """Every container: no privilege escalation, no Linux capabilities (Ray needs none)."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _not_in_common_env(names: list[str]) -> dict[str, Any]:
    """The schema of values whose ``common.env`` names none of ``names``."""
    return {"properties": {"common": {"properties": {"env": {"items": {
        "properties": {"name": {"not": {"enum": names}}}}}}}}}


class DeployOptions(_Values):
    """Everything about a RayJob except the run itself (the chart's values without ``job``).

    ``model_cache`` and ``hf_token`` set ``HF_HOME``, ``RUNNER_MODEL_CACHE`` and ``HF_TOKEN`` themselves, so
    ``common.env`` may not name them too (two definitions of one variable, the later silently winning).

    Raises (from :meth:`from_values`):
        ConfigError: an unknown key or a bad value, naming the field.
    """

    model_config = ConfigDict(json_schema_extra={"allOf": [
        {"if": {"properties": {"modelCache": {"properties": {"type": {"enum": ["persistentVolumeClaim", "hostPath"]}},
                                              "required": ["type"]}}, "required": ["modelCache"]},
         "then": _not_in_common_env(["HF_HOME", "RUNNER_MODEL_CACHE"])},
        {"if": {"properties": {"hfToken": {"properties": {"secretName": {"minLength": 1}},
                                           "required": ["secretName"]}}, "required": ["hfToken"]},
         "then": _not_in_common_env([HF_TOKEN])},
    ]})

    name_override: str = ""
    fullname_override: str = ""
    ray_version: str = Field(default=RAY_VERSION, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    image: Image = Field(default_factory=Image)
    image_pull_secrets: list[PullSecret] = Field(default_factory=list)
    ray_job: RayJobLifecycle = Field(default_factory=RayJobLifecycle)
    auth: Auth = Field(default_factory=Auth)
    head: Head = Field(default_factory=Head)
    worker_groups: list[WorkerGroup] = Field(default_factory=default_worker_groups)
    submitter: Submitter = Field(default_factory=Submitter)
    common: Common = Field(default_factory=Common)
    storage: Storage = Field(default_factory=Storage)
    service_account: ServiceAccount = Field(default_factory=ServiceAccount)
    model_cache: ModelCache = Field(default_factory=ModelCache)
    hf_token: HfToken = Field(default_factory=HfToken)
    pod_security_context: dict[str, Any] = Field(default_factory=default_pod_security_context)
    security_context: dict[str, Any] = Field(default_factory=default_security_context)

    @model_validator(mode="after")
    def _credentials_have_a_source(self) -> DeployOptions:
        creds = self.storage.credentials
        if creds.source == "secret" and not creds.secret_ref.strip():
            raise ValueError(
                "storage.credentials.source is 'secret' but storage.credentials.secretRef names no Secret; "
                "name the Secret holding the storage keys, or set source to 'serviceAccount' or 'none'"
            )
        if creds.source == "serviceAccount" and not (self.service_account.create or self.service_account.name):
            raise ValueError(
                "storage.credentials.source is 'serviceAccount' but no service account is set; "
                "set serviceAccount.name (or serviceAccount.create: true with its annotations)"
            )
        names = [group.name for group in self.worker_groups]
        if len(set(names)) != len(names):
            raise ValueError(f"workerGroups names must be unique, got {names}")
        ours = [entry["name"] for entry in [*self.model_cache.environment(), *self.hf_token.environment()]]
        for entry in self.common.env:
            if entry.get("name") in ours:
                setting = "hfToken" if entry["name"] == HF_TOKEN else "modelCache"
                raise ValueError(f"common.env sets {entry['name']}, which {setting} sets; remove it from common.env")
        return self

    @classmethod
    def from_values(cls, values: dict[str, Any], source: str = "values") -> DeployOptions:
        """Options from chart values (a parsed values file); ``job`` (the run) and Helm's ``global`` are left out."""
        data = {key: value for key, value in values.items() if key not in ("job", "global")}
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise ConfigError(_values_error(err, source)) from None

    def model_cache_claim_name(self, fullname: str) -> str:
        """The model cache's claim: the named one, else ``<fullname>-models`` when the chart creates it."""
        return self.model_cache.persistent_volume_claim.claim_name or f"{fullname}-models"

    def service_account_name(self, fullname: str) -> str:
        """The pods' service account: the created one, a named existing one, or ``""`` (the namespace default)."""
        if self.service_account.create:
            return self.service_account.name or fullname
        return self.service_account.name


def _values_error(err: ValidationError, source: str) -> str:
    """One line naming the first bad value by its path in the values (camelCase, as the user writes it)."""
    first = err.errors()[0]
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "value_error" and not where:
        return f"{source}: {message}{more}"
    return f"{source}: field '{where or '(top level)'}': {message}{more}"
