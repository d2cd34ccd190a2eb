"""Rules the KubeRay operator enforces that the RayJob CRD's schema does not, checked before anything is sent.

The API server accepts a RayJob that breaks these; the operator then marks it ``ValidationFailed`` (or the
worker group never scales), long after ``kubectl apply`` said "created". :func:`check_rayjob` is the one checker:
``submit`` runs it on the RayJob it built, and the chart's tests run it on what Helm renders.

Source: KubeRay v1.7.0 (commit ``59d663aeec13760646da3db9c1cf8cfe883e30b7``),
``ray-operator/controllers/ray/utils/validation.go``: ``ValidateRayJobMetadata`` (name), ``ValidateRayJobSpec``
with ``validateDeletionConfiguration`` (life cycle, submission mode, cluster selector, deadlines) and
``ValidateRayClusterSpec`` with ``validateRayGroupLabels`` (the inline cluster); ``constant.go``
(``MaxRayJobNameLength = 47``). ``ValidateRayJobStatus`` reads only the status the operator writes, so nothing sent
can break it. Not encoded, because nothing the chart or ``submit`` writes sets them: the contents of a
``deletionStrategy`` (``validateDeletionRules``, ``validateLegacyDeletionPolicies``), ``runtimeEnvYAML``, and the
cluster features ``gcsFaultToleranceOptions``, ``autoscalerOptions``, ``networkPolicy``, ``tlsOptions``,
``historyServerOptions``, worker ``suspend``, ``idleTimeoutSeconds`` and ``priority``.

Each message names the chart value that sets the field (``rayJob.ttlSecondsAfterFinished``) and the fix.
"""

from __future__ import annotations

import re
from typing import Any

from runner.core.errors import ConfigError

MAX_RAYJOB_NAME = 47
# Kubernetes IsDNS1035Label / IsDNS1123Label: k8s.io/apimachinery/pkg/util/validation/validation.go.
DNS1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_LABEL_MAX = 63
# An image reference's name and tag: the grammar of distribution/reference v0.5.0 (reference.go, regexp.go), the
# one container runtimes parse images with (a pod whose image breaks it fails with InvalidImageName). \w is
# written out: it is ASCII in Go's RE2 (Helm's schema check) but Unicode in Python.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
IMAGE_REPOSITORY_PATTERN = rf"^(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$"
IMAGE_REPOSITORY_MAX = 255  # NameTotalLengthMax
IMAGE_TAG_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
MIN_TOKEN_AUTH_RAY = (2, 52, 0)
CLUSTER_SELECTOR_KEY = "ray.io/cluster"  # constant.go RayJobClusterSelectorKey

_VALIDATION = "validation.go"
PARAMS_REFUSED = {"labels": f"{_VALIDATION} validateRayGroupLabels: Ray node labels belong in the group's own "
                            "labels field, not in rayStartParams"}
"""``rayStartParams`` keys KubeRay refuses in any group, with the rule."""
HEAD_PARAMS_REFUSED = {"redis-username": f"{_VALIDATION} ValidateRayClusterSpec: set "
                                         "gcsFaultToleranceOptions.redisUsername instead"}
"""``rayStartParams`` keys KubeRay refuses in the head group, with the rule."""
ENV_REFUSED: dict[str, tuple[tuple[str, ...], str]] = {
    "RAY_REDIS_ADDRESS": ((), f"{_VALIDATION} ValidateRayClusterSpec: it turns on GCS fault tolerance, which needs "
                              "gcsFaultToleranceOptions"),
    "REDIS_USERNAME": ((), f"{_VALIDATION} ValidateRayClusterSpec: set gcsFaultToleranceOptions.redisUsername"),
    "RAY_enable_autoscaler_v2": (("1", "true"), f"{_VALIDATION} ValidateRayClusterSpec: autoscaler v2 needs "
                                                "enableInTreeAutoscaling"),
}
"""Head container environment variables KubeRay refuses in a cluster without ``gcsFaultToleranceOptions`` and
without autoscaling, as the chart's: name -> (the refused values, ``()`` for any value; the rule)."""


def refused_env(entry: dict[str, Any]) -> str | None:
    """The rule of :data:`ENV_REFUSED` that the head's environment entry ``entry`` (``{"name", "value"}``) breaks,
    or ``None``."""
    values, rule = ENV_REFUSED.get(str(entry.get("name")), ((), None))
    if rule is None or (values and entry.get("value") not in values):
        return None
    return rule


def image_repository(value: str) -> str:
    """``value`` if it is an image repository (``ghcr.io/org/runner``, ``registry:5000/runner``).

    Raises:
        ValueError: it is not, saying what one is.
    """
    if len(value) > IMAGE_REPOSITORY_MAX or not re.fullmatch(IMAGE_REPOSITORY_PATTERN, value):
        raise ValueError(f"{value!r} is not an image repository: lower-case path components ([a-z0-9] separated by "
                         "'.', '_', '__' or '-') after an optional registry host[:port]/, e.g. ghcr.io/org/runner")
    return value


def image_tag(value: str) -> str:
    """``value`` if it is an image tag (``0.1.0-ray2.60.0-py311``).

    Raises:
        ValueError: it is not, saying what one is.
    """
    if not re.fullmatch(IMAGE_TAG_PATTERN, value):
        raise ValueError(f"{value!r} is not an image tag: up to 128 letters, digits, '_', '.' and '-', not starting "
                         "with '.' or '-'")
    return value


def check_namespace(namespace: str | None) -> None:
    """A namespace name Kubernetes accepts (``ValidateNamespaceName``: a DNS-1123 label of at most 63 characters);
    ``None`` (the kubeconfig context's) passes.

    Raises:
        ConfigError: naming ``--namespace`` and, where one can be made, a valid name to use.
    """
    if namespace is None or (len(namespace) <= DNS1123_LABEL_MAX and re.fullmatch(DNS1123_LABEL, namespace)):
        return
    fixed = re.sub(r"[^a-z0-9-]+", "-", namespace.lower()).strip("-")[:DNS1123_LABEL_MAX].rstrip("-")
    example = f", e.g. --namespace {fixed}" if fixed else ""
    raise ConfigError(
        f"--namespace {namespace!r} is not a Kubernetes namespace: use a DNS-1123 label of at most "
        f"{DNS1123_LABEL_MAX} lower-case letters, digits and '-', starting and ending with a letter or digit{example}"
    )


def check_rayjob_name(name: str) -> None:
    """A RayJob name the operator accepts (``ValidateRayJobMetadata``): at most 47 characters and a DNS-1035 label.

    The limit leaves room for the RayCluster (``<name>-<5 chars>``) and its head Service names.

    Raises:
        ConfigError: naming the rule and a fix.
    """
    if len(name) > MAX_RAYJOB_NAME:
        raise ConfigError(
            f"RayJob name {name!r} is {len(name)} characters; KubeRay allows at most {MAX_RAYJOB_NAME}: "
            "choose a shorter name (--name, or a shorter Helm release name / fullnameOverride)"
        )
    if not re.match(DNS1035_LABEL, name):
        raise ConfigError(
            f"RayJob name {name!r} is not a DNS-1035 label: use lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit"
        )


def _version(text: str) -> tuple[int, ...] | None:
    """``"2.60.0"`` -> ``(2, 60, 0)``, as Kubernetes' ``version.ParseGeneric`` reads it; ``None`` if it cannot."""
    match = re.match(r"^v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", text.strip())
    return None if match is None else tuple(int(part or 0) for part in match.groups())


def check_rayjob(manifest: dict[str, Any]) -> None:
    """Check a RayJob dict against the operator's own rules (the CRD schema is checked by the API server).

    Raises:
        ConfigError: the first rule broken, in one line naming the value and the fix.
    """
    check_rayjob_name(str((manifest.get("metadata") or {}).get("name", "")))
    spec = manifest.get("spec") or {}
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    mode = spec.get("submissionMode", "K8sJobMode")
    backoff = spec.get("backoffLimit")
    selector = spec.get("clusterSelector") or {}
    if spec.get("suspend") and not shutdown:
        _refuse("spec.suspend needs spec.shutdownAfterJobFinishes: true", "ValidateRayJobSpec")
    if ttl < 0:
        _refuse(f"rayJob.ttlSecondsAfterFinished is {ttl}; it must be 0 or more", "ValidateRayJobSpec")
    if not shutdown and ttl > 0:
        _refuse(f"rayJob.ttlSecondsAfterFinished is {ttl} while rayJob.shutdownAfterJobFinishes is false; the TTL "
                "counts down to the shutdown: set shutdownAfterJobFinishes: true or drop the TTL",
                "validateDeletionConfiguration")
    _check_deletion_strategy(spec.get("deletionStrategy"), shutdown)
    if spec.get("suspend") and selector:
        _refuse("spec.suspend is not supported with spec.clusterSelector", "ValidateRayJobSpec")
    if spec.get("rayClusterSpec") is None and not selector:
        _refuse("the RayJob has neither spec.rayClusterSpec nor spec.clusterSelector; set one", "ValidateRayJobSpec")
    if mode not in SUBMISSION_MODES:
        _refuse(f"spec.submissionMode {mode!r} is not one of {', '.join(SUBMISSION_MODES)}", "ValidateRayJobSpec")
    if selector:
        if not selector.get(CLUSTER_SELECTOR_KEY):
            _refuse(f"spec.clusterSelector needs a cluster name under {CLUSTER_SELECTOR_KEY!r}", "ValidateRayJobSpec")
        if mode == "SidecarMode":
            _refuse("spec.clusterSelector is not supported in SidecarMode", "ValidateRayJobSpec")
        if backoff is not None and backoff > 0:
            _refuse("rayJob.backoffLimit must be 0 with spec.clusterSelector", "ValidateRayJobSpec")
    if mode == "InteractiveMode" and backoff is not None and backoff > 0:
        _refuse("rayJob.backoffLimit must be 0 in InteractiveMode", "ValidateRayJobSpec")
    if mode == "SidecarMode":
        for field in ("submitterPodTemplate", "submitterConfig"):
            if spec.get(field) is not None:
                _refuse(f"spec.{field} is not supported in SidecarMode; drop it", "ValidateRayJobSpec")
        policy = _pod(((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {})).get("restartPolicy")
        if policy not in (None, "", "Never"):
            _refuse("the head pod's restartPolicy must be Never or unset in SidecarMode", "ValidateRayJobSpec")
    for field, value in (("rayJob.activeDeadlineSeconds", spec.get("activeDeadlineSeconds")),
                         ("spec.preRunningDeadlineSeconds", spec.get("preRunningDeadlineSeconds"))):
        if value is not None and value <= 0:
            _refuse(f"{field} is {value}; it must be a positive number of seconds (or null: no deadline)",
                    "ValidateRayJobSpec")
    if backoff is not None and backoff < 0:
        _refuse(f"rayJob.backoffLimit is {backoff}; it must be 0 or more", "ValidateRayJobSpec")
    if spec.get("rayClusterSpec") is not None:
        _check_cluster(spec["rayClusterSpec"])


def _refuse(problem: str, function: str) -> None:
    raise ConfigError(f"{problem} (KubeRay v1.7 {_VALIDATION} {function})")


def _pod(group: dict[str, Any]) -> dict[str, Any]:
    return (group.get("template") or {}).get("spec") or {}


def _check_deletion_strategy(strategy: dict[str, Any] | None, shutdown: bool) -> None:
    """``validateDeletionConfiguration``: which deletion settings go together (the rules' contents are not read)."""
    if strategy is None:
        return
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = bool(strategy.get("deletionRules"))
    if rules and shutdown:
        _refuse("spec.deletionStrategy.deletionRules needs shutdownAfterJobFinishes: false",
                "validateDeletionConfiguration")
    if rules and legacy:
        _refuse("spec.deletionStrategy: use deletionRules or onSuccess/onFailure, not both",
                "validateDeletionConfiguration")
    if not (rules or legacy):
        _refuse("spec.deletionStrategy needs deletionRules, or both onSuccess and onFailure",
                "validateDeletionConfiguration")


def _check_cluster(cluster: dict[str, Any]) -> None:
    """``ValidateRayClusterSpec`` for what the chart sets, plus the worker group rules below."""
    head = cluster.get("headGroupSpec") or {}
    containers = _pod(head).get("containers")
    if not containers:
        _refuse("headGroupSpec.template.spec.containers is empty; the head needs its Ray container",
                "ValidateRayClusterSpec")
    autoscaling = bool(cluster.get("enableInTreeAutoscaling"))
    params = head.get("rayStartParams") or {}
    for name, rule in {**PARAMS_REFUSED, **HEAD_PARAMS_REFUSED}.items():
        if name in params:
            raise ConfigError(f"head.rayStartParams[{name!r}] is refused by KubeRay v1.7 ({rule}); remove it")
    for entry in containers[0].get("env") or []:
        rule = refused_env(entry)
        if rule and not (autoscaling and entry.get("name") == "RAY_enable_autoscaler_v2"):
            raise ConfigError(f"common.env {entry.get('name')!r} on the head is refused by KubeRay v1.7 ({rule}); "
                              "remove it")
    _check_auth(cluster)
    seen: set[str] = set()
    for index, group in enumerate(cluster.get("workerGroupSpecs") or []):
        _check_worker_group(index, group, seen, autoscaling)


def _check_auth(cluster: dict[str, Any]) -> None:
    """Token authentication needs Ray 2.52.0 or later (``ValidateRayClusterSpec``)."""
    auth = cluster.get("authOptions") or {}
    if auth.get("enableK8sTokenAuth"):
        _refuse("authOptions.enableK8sTokenAuth is not supported for a RayJob", "ValidateRayJobSpec")
    if auth.get("mode") != "token":
        return
    found = _version(str(cluster.get("rayVersion") or ""))
    if found is None or found < MIN_TOKEN_AUTH_RAY:
        _refuse(f"auth.mode 'token' needs rayVersion 2.52.0 or later, got {cluster.get('rayVersion')!r}: set "
                "rayVersion to the image's Ray version, or auth.mode: disabled", "ValidateRayClusterSpec")


def _check_worker_group(index: int, group: dict[str, Any], seen: set[str], autoscaling: bool) -> None:
    """``ValidateRayClusterSpec`` on one group, and the runner's own rules: a groupName that is a DNS-1123 label
    and unique (it names the group's pods), and replicas within minReplicas..maxReplicas, which KubeRay would
    otherwise clamp silently (``utils/util.go`` ``GetWorkerGroupDesiredReplicas``)."""
    name = group.get("groupName", "")
    where = f"workerGroups[{index}] ({name or 'no name'})"
    if not re.match(DNS1123_LABEL, name) or len(name) > 63:
        raise ConfigError(f"{where}: name must be a DNS-1123 label (lower-case letters, digits and '-')")
    if name in seen:
        raise ConfigError(f"{where}: name {name!r} is used twice; worker group names must be unique")
    seen.add(name)
    low, high = group.get("minReplicas"), group.get("maxReplicas")
    if not autoscaling and (low is None or high is None):
        _refuse(f"{where}: set both minReplicas and maxReplicas (required without autoscaling)",
                "ValidateRayClusterSpec")
    for field, value in (("minReplicas", low), ("maxReplicas", high)):
        if value is not None and value < 0:
            _refuse(f"{where}: {field} is {value}; it must be 0 or more", "ValidateRayClusterSpec")
    if low is not None and high is not None and low > high:
        _refuse(f"{where}: minReplicas {low} is greater than maxReplicas {high}; lower minReplicas or raise "
                "maxReplicas", "ValidateRayClusterSpec")
    replicas = group.get("replicas", low)
    if low is not None and high is not None and replicas is not None and not low <= replicas <= high:
        raise ConfigError(f"{where}: replicas {replicas} is outside minReplicas {low} .. maxReplicas {high}; "
                          "KubeRay would run the nearest bound instead: set replicas within them")
    if not _pod(group).get("containers"):
        _refuse(f"{where}: template.spec.containers is empty; the group needs its Ray container",
                "ValidateRayClusterSpec")
    for rule_name, rule in PARAMS_REFUSED.items():
        if rule_name in (group.get("rayStartParams") or {}):
            raise ConfigError(f"{where}: rayStartParams[{rule_name!r}] is refused by KubeRay v1.7 ({rule}); "
                              "remove it")
