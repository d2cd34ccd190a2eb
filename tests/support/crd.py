"""Validate manifests offline against KubeRay's CRD schemas, refusing unknown fields as ``fieldValidation=Strict``.

The CRDs (``../shared/data/kuberay-crds/``, KubeRay v1.7.0, see its SOURCE.md) are OpenAPI v3 schemas that a plain
JSON-Schema validator (Draft 7) reads, except that they accept unknown keys: the API server prunes those instead of
failing. :func:`strict` adds ``additionalProperties: false`` to every object that lists ``properties`` and does not
carry ``x-kubernetes-preserve-unknown-fields``, so a misspelt field fails here as it would on a cluster with strict
field validation. The CEL rules (``x-kubernetes-validations``) and the operator's own rules are not in the schema:
``runner.kuberay.checks`` holds the latter.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = "kuberay-crds"
_NESTED_LISTS = ("allOf", "anyOf", "oneOf")


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` where every object with ``properties`` refuses keys it does not list."""
    out = copy.deepcopy(schema)
    _tighten(out)
    return out


def _tighten(node: Any) -> None:
    if not isinstance(node, dict):
        return
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        node["additionalProperties"] = False
    for child in (node.get("properties") or {}).values():
        _tighten(child)
    for key in ("items", "additionalProperties", "not"):
        _tighten(node.get(key))
    for key in _NESTED_LISTS:
        for child in node.get(key) or []:
            _tighten(child)


def crd_schema(path: Path, version: str = "v1") -> dict[str, Any]:
    """The strict JSON schema of ``version`` in the CRD file at ``path``."""
    crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return strict(entry["schema"]["openAPIV3Schema"])
    raise KeyError(f"{path.name} has no version {version!r}")


def schema_errors(manifest: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """Every schema violation of ``manifest`` as ``"spec.path.to.field: message"`` (empty when it is valid)."""
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]


class RayJobSchema:
    """The strict RayJob v1 schema, loaded once: ``errors(manifest)`` lists what is wrong."""

    def __init__(self, crd_dir: Path) -> None:
        self.schema = crd_schema(crd_dir / "ray.io_rayjobs.yaml")

    def errors(self, manifest: dict[str, Any]) -> list[str]:
        if (manifest.get("apiVersion"), manifest.get("kind")) != ("ray.io/v1", "RayJob"):
            raise ValueError(f"not a ray.io/v1 RayJob: {manifest.get('apiVersion')} {manifest.get('kind')}")
        return schema_errors(manifest, self.schema)
