"""Fixtures for the Kubernetes layer: the chart rendered by Helm's own engine, the strict KubeRay CRD schema,
and a fake Kubernetes API server on loopback (no cluster can run here; see ``tests.support.kube_api``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.crd import RayJobSchema
from tests.support.kube_api import FakeKubernetes

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "runner"


@pytest.fixture(scope="session")
def rayjob_schema(shared_data: Path) -> RayJobSchema:
    """KubeRay v1.7.0's RayJob v1 schema with unknown fields refused."""
    return RayJobSchema(shared_data / "kuberay-crds")


@pytest.fixture(scope="session")
def chart():
    """The chart loaded by Helm's Go SDK (helm-python-sdk)."""
    import helm_python

    with helm_python.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any] | None = None, name: str = "toy") -> dict[str, Any]:
    """Render the chart as ``helm template NAME`` would; returns {kind: manifest} (one of each kind; NOTES.txt
    left out)."""
    out: dict[str, Any] = {}
    for path, text in chart.render(values or {}, name=name, namespace="evals").items():
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and doc.get("kind"):
                out[doc["kind"]] = doc
    return out


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKubernetes]:
    """A fake API server, with KUBECONFIG pointing at it (default namespace ``evals``) and no in-cluster config."""
    fake = FakeKubernetes().start()
    monkeypatch.setenv("KUBECONFIG", str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    try:
        yield fake
    finally:
        fake.stop()
