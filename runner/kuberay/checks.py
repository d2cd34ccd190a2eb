"""Rules the KubeRay operator enforces that the RayJob CRD's schema does not, checked before anything is sent.

The API server accepts a RayJob that breaks these; the operator then marks it ``ValidationFailed`` (or the
worker group never scales), long after ``kubectl apply`` said "created". Sources: KubeRay v1.7.0
``ray-operator/controllers/ray/utils/validation.go`` (``ValidateRayJobMetadata``, ``ValidateRayJobSpec``,
``ValidateRayClusterSpec``), ``ray-operator/controllers/ray/utils/constant.go`` (``MaxRayJobNameLength = 47``) and
the CRD's ``required: [minReplicas, maxReplicas]`` for worker groups, which the API server defaults but a plain
schema validator does not.
"""

from __future__ import annotations

import re
from typing import Any

from runner.core.errors import ConfigError

MAX_RAYJOB_NAME = 47
# Kubernetes IsDNS1035Label: k8s.io/apimachinery/pkg/util/validation/validation.go.
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
_MIN_TOKEN_AUTH_RAY = (2, 52, 0)


def check_rayjob_name(name: str) -> None:
    """A RayJob name the operator accepts: at most 47 characters and a DNS-1035 label.

    The limit leaves room for the RayCluster (``<name>-<5 chars>``) and its head Service names.

    Raises:
        ConfigError: naming the rule and a fix.
    """
    if len(name) > MAX_RAYJOB_NAME:
        raise ConfigError(
            f"RayJob name {name!r} is {len(name)} characters; KubeRay allows at most {MAX_RAYJOB_NAME}: "
            "choose a shorter name (--name, or a shorter Helm release name / fullnameOverride)"
        )
    if not _DNS1035.match(name):
        raise ConfigError(
            f"RayJob name {name!r} is not a DNS-1035 label: use lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit"
        )


def _version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)[:3]
    return tuple(int(p) for p in parts) + (0,) * (3 - len(parts))


def check_rayjob(manifest: dict[str, Any]) -> None:
    """Check a RayJob dict against the operator's own rules (the CRD schema is checked by the API server).

    Raises:
        ConfigError: the first rule broken, in one line.
    """
    check_rayjob_name(str((manifest.get("metadata") or {}).get("name", "")))
    spec = manifest.get("spec") or {}
    cluster = spec.get("rayClusterSpec")
    if cluster is None and not spec.get("clusterSelector"):
        raise ConfigError("the RayJob has neither spec.rayClusterSpec nor spec.clusterSelector; set one")
    mode = spec.get("submissionMode", "K8sJobMode")
    if mode not in _SUBMISSION_MODES:
        raise ConfigError(f"spec.submissionMode {mode!r} is not one of {', '.join(_SUBMISSION_MODES)}")
    if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
        raise ConfigError("spec.suspend needs spec.shutdownAfterJobFinishes: true")
    if spec.get("ttlSecondsAfterFinished", 0) < 0:
        raise ConfigError("spec.ttlSecondsAfterFinished must be 0 or more")
    if spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] <= 0:
        raise ConfigError("spec.activeDeadlineSeconds must be a positive number of seconds")
    if spec.get("backoffLimit", 0) < 0:
        raise ConfigError("spec.backoffLimit must be 0 or more")
    if mode == "InteractiveMode" and spec.get("backoffLimit", 0) > 0:
        raise ConfigError("spec.backoffLimit is incompatible with InteractiveMode")
    if cluster is not None:
        _check_cluster(cluster)


def _check_cluster(cluster: dict[str, Any]) -> None:
    head = cluster.get("headGroupSpec") or {}
    if not ((head.get("template") or {}).get("spec") or {}).get("containers"):
        raise ConfigError("headGroupSpec.template.spec.containers is empty; the head needs its Ray container")
    if "labels" in (head.get("rayStartParams") or {}):
        raise ConfigError("rayStartParams['labels'] is not supported for the head group; use its labels field")
    if (cluster.get("authOptions") or {}).get("mode") == "token":
        version = cluster.get("rayVersion")
        if not version or _version(str(version)) < _MIN_TOKEN_AUTH_RAY:
            raise ConfigError(
                f"authOptions.mode 'token' needs rayVersion 2.52.0 or later, got {version!r}; "
                "set rayVersion or auth.mode: disabled"
            )
    seen: set[str] = set()
    for index, group in enumerate(cluster.get("workerGroupSpecs") or []):
        name = group.get("groupName", "")
        where = f"workerGroupSpecs[{index}] ({name or 'no groupName'})"
        if not _DNS1123.match(name) or len(name) > 63:
            raise ConfigError(f"{where}: groupName must be a DNS-1123 label (lower-case letters, digits and '-')")
        if name in seen:
            raise ConfigError(f"{where}: groupName {name!r} is used twice; worker group names must be unique")
        seen.add(name)
        if "minReplicas" not in group or "maxReplicas" not in group:
            raise ConfigError(f"{where}: set both minReplicas and maxReplicas explicitly (the CRD requires them)")
        low, high = group["minReplicas"], group["maxReplicas"]
        replicas = group.get("replicas", low)
        if not low <= replicas <= high:
            raise ConfigError(
                f"{where}: replicas {replicas} is outside minReplicas {low} .. maxReplicas {high}"
            )
        if not ((group.get("template") or {}).get("spec") or {}).get("containers"):
            raise ConfigError(f"{where}: template.spec.containers is empty; the group needs its Ray container")
        if "labels" in (group.get("rayStartParams") or {}):
            raise ConfigError(f"{where}: rayStartParams['labels'] is not supported; use the group's labels field")
