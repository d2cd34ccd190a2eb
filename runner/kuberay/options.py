"""Deployment options of a RayJob: the Helm chart's values (``helm/runner/values.yaml``) as pydantic models.

The chart and :func:`runner.kuberay.manifest.build_rayjob` read the same values, laid out by role as in KubeRay's
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
from runner.kuberay.checks import (DNS1123_LABEL, ENV_REFUSED, HEAD_PARAMS_REFUSED, IMAGE_REPOSITORY_MAX,
                                   IMAGE_REPOSITORY_PATTERN, IMAGE_TAG_PATTERN, PARAMS_REFUSED, image_repository,
                                   image_tag, refused_env)

# The one pin of the Ray version, as in pyproject.toml (ray[default]==...), the Dockerfile and the chart.
RAY_VERSION = "2.60.0"
PYTHON_TAG = "py311"
IMAGE_REPOSITORY = "ghcr.io/example/runner"
IMAGE_TAG = f"{__version__}-ray{RAY_VERSION}-{PYTHON_TAG}"
DEFAULT_SECRET = "runner-storage"


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


def _params_rule(refused: dict[str, str]) -> Any:
    """A ``rayStartParams`` dict type without the keys in ``refused`` (name -> KubeRay's rule, quoted on refusal)."""
    def check(params: dict[str, str]) -> dict[str, str]:
        for name, rule in refused.items():
            if name in params:
                raise ValueError(f"rayStartParams[{name!r}] is refused by KubeRay ({rule}); remove it")
        return params

    schema = {"type": "object", "additionalProperties": {"type": "string"},
              "not": {"anyOf": [{"required": [name]} for name in refused]}}
    return Annotated[dict[str, str], AfterValidator(check), WithJsonSchema(schema)]


HeadParams = _params_rule({**PARAMS_REFUSED, **HEAD_PARAMS_REFUSED})
WorkerParams = _params_rule(PARAMS_REFUSED)


def _env_rule(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kubernetes' EnvVar needs a name; KubeRay refuses some on the head (:func:`runner.kuberay.checks.refused_env`)."""
    for index, entry in enumerate(env):
        if not entry.get("name"):
            raise ValueError(f"env[{index}] has no name; give each entry a name and a value")
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
_ENV_ITEM = {"type": "object", "required": ["name"], "properties": {"name": {"minLength": 1}},
             "not": {"anyOf": _REFUSED_ENTRIES}}
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
    """One worker group: ``replicas`` pods of ``cpu``/``memory``/``gpu`` each (``gpu`` -> ``nvidia.com/gpu``).

    ``min_replicas``/``max_replicas`` default to ``replicas`` (no autoscaling); KubeRay's CRD requires both, so the
    manifest always carries them.
    """

    name: str = Field(pattern=DNS1123_LABEL, max_length=63)
    replicas: int = Field(ge=0)
    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=0)
    cpu: Quantity
    memory: Quantity
    gpu: int = Field(default=0, ge=0)
    image: GroupImage = Field(default_factory=GroupImage)
    ray_start_params: WorkerParams = Field(default_factory=dict)


def default_worker_groups() -> list[WorkerGroup]:
    """One CPU group of two pods, 2 CPUs and 4 GiB each."""
    return [WorkerGroup(name="cpu", replicas=2, cpu="2", memory="4Gi")]


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


class DeployOptions(_Values):
    """Everything about a RayJob except the run itself (the chart's values without ``job``).

    Raises (from :meth:`from_values`):
        ConfigError: an unknown key or a bad value, naming the field.
    """

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
        return self

    @classmethod
    def from_values(cls, values: dict[str, Any], source: str = "values") -> DeployOptions:
        """Options from chart values (a parsed values file); ``job`` (the run) and Helm's ``global`` are left out."""
        data = {key: value for key, value in values.items() if key not in ("job", "global")}
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise ConfigError(_values_error(err, source)) from None

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
