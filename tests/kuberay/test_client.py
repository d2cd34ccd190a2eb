"""The RayJob client on the real ``kubernetes`` package, against the fake API server on loopback (no cluster can
run here; ``tests.support.kube_api`` scripts what the API server and the KubeRay operator would do)."""

from __future__ import annotations

import pytest

from runner.core.config import RunConfig
from runner.kuberay.client import KubernetesError, RayJobClient, WaitTimeout
from runner.kuberay.rayjob import build_configmap, build_rayjob
from runner.kuberay.deploy_options import DeployOptions

CONFIG = RunConfig(benchmark="toy", solution="calculator", storage="s3://bucket/runs/toy")
NAME = "toy-run"

INITIALIZING = {"jobDeploymentStatus": "Initializing", "jobStatus": "NEW", "rayClusterName": "toy-run-x7k2p"}
RUNNING = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "toy-run-x7k2p"}
SUCCEEDED = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayClusterName": "toy-run-x7k2p"}
FAILED = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed", "failed": 3,
          "message": "Job entrypoint command failed with exit code 2"}


@pytest.fixture
def manifests():
    return build_rayjob(CONFIG, DeployOptions(), NAME), build_configmap(CONFIG, NAME)


@pytest.fixture
def submitted(kube, manifests):
    """A client whose RayJob (and Secret) exist on the fake server."""
    kube.add_secret("runner-storage")
    client = RayJobClient.from_environment()
    client.submit(*manifests, secret="runner-storage")
    return client


def test_kubeconfig_gives_server_and_namespace(kube):
    client = RayJobClient.from_environment()
    assert client.namespace == "evals"
    assert RayJobClient.from_environment(namespace="other").namespace == "other"


def test_submit_creates_configmap_then_rayjob_strictly_and_links_them(kube, manifests):
    kube.add_secret("runner-storage")
    created = RayJobClient.from_environment().submit(*manifests, secret="runner-storage")
    posts = [r for r in kube.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/api/v1/namespaces/evals/configmaps",
                                       "/apis/ray.io/v1/namespaces/evals/rayjobs"]
    assert all(r.query.get("fieldValidation") == "Strict" for r in posts)
    assert posts[1].body == manifests[0]
    owner = kube.get("configmaps", "evals", "toy-run-config")["metadata"]["ownerReferences"]
    assert owner == [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": NAME, "uid": created["metadata"]["uid"]}]


def test_watch_follows_statuses_to_success(submitted, kube):
    kube.statuses = [INITIALIZING, RUNNING, SUCCEEDED]
    seen = []
    final = submitted.wait(NAME, timeout=60, on_status=seen.append)
    assert final.succeeded and final.terminal
    assert [(s.deployment, s.job) for s in seen] == [
        (None, None), ("Initializing", "NEW"), ("Running", "RUNNING"), ("Complete", "SUCCEEDED")]
    assert seen[-1].line() == "toy-run: deployment Complete, job SUCCEEDED (cluster toy-run-x7k2p)"
    watch = kube.requests_to("GET", "/rayjobs")[-1]
    assert watch.query["watch"] == "true" and watch.query["fieldSelector"] == f"metadata.name={NAME}"
    assert 1 <= int(watch.query["timeoutSeconds"]) <= 60


def test_watch_follows_statuses_to_failure(submitted, kube):
    kube.statuses = [INITIALIZING, RUNNING, {**RUNNING, "jobDeploymentStatus": "Retrying"}, FAILED]
    final = submitted.wait(NAME, timeout=60)
    assert final.terminal and not final.succeeded
    assert final.line() == ("toy-run: deployment Failed, job FAILED, 3 failed attempts; AppFailed: "
                            "Job entrypoint command failed with exit code 2")


def test_validation_failed_is_terminal(submitted, kube):
    kube.statuses = [{"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
                      "message": "RayJob name should be no more than 47 characters"}]
    final = submitted.wait(NAME, timeout=60)
    assert final.terminal and not final.succeeded


def test_watch_restarts_after_410_gone(submitted, kube):
    kube.statuses = [INITIALIZING, RUNNING, SUCCEEDED]
    kube.gone_after = 1
    seen = []
    final = submitted.wait(NAME, timeout=60, on_status=seen.append)
    assert final.succeeded
    assert [s.deployment for s in seen] == [None, "Initializing", "Running", "Complete"]
    reads = kube.requests_to("GET", f"/rayjobs/{NAME}")
    watches = [r for r in kube.requests_to("GET", "/rayjobs") if r.query.get("watch")]
    assert len(reads) == 2 and len(watches) == 2  # a fresh read after the 410, then a new watch from it
    assert int(watches[1].query["resourceVersion"]) > int(watches[0].query["resourceVersion"])


def test_our_deadline_gives_up_and_says_the_job_keeps_running(submitted, kube):
    kube.statuses = []
    with pytest.raises(WaitTimeout, match="gave up waiting after 0.3 s; the RayJob keeps running"):
        submitted.wait(NAME, timeout=0.3)


def test_logs_of_the_submitter_pod(submitted, kube):
    kube.log_lines = ["Job submission server address: http://toy-run-head-svc:8265",
                      "toy: 100/100 items, accuracy 1.000", "Job 'toy-run-abc' succeeded"]
    assert list(submitted.logs(NAME)) == kube.log_lines
    assert list(submitted.logs(NAME, follow=True)) == kube.log_lines
    log_request = kube.requests_to("GET", "/log")[-1]
    assert log_request.path == "/api/v1/namespaces/evals/pods/toy-run-abcde/log"
    assert log_request.query == {"container": "ray-job-submitter", "follow": "true"}


def test_logs_before_the_submitter_pod_exists(submitted, kube):
    kube.pod_phase = None
    with pytest.raises(KubernetesError, match="has no submitter pod yet; wait, or use --follow"):
        list(submitted.logs(NAME))
    kube.pod_phase = "Pending"
    with pytest.raises(WaitTimeout, match="did not start within 0.2 s"):
        list(RayJobClient.from_environment(sleep=lambda s: None).logs(NAME, follow=True, timeout=0.2))


def test_delete_is_foreground_and_takes_the_configmap_along(submitted, kube):
    submitted.delete(NAME)
    delete = kube.requests_to("DELETE", "/rayjobs/")[-1]
    assert delete.query.get("propagationPolicy") == "Foreground"
    assert kube.get("rayjobs", "evals", NAME) is None
    assert kube.get("configmaps", "evals", "toy-run-config") is None
    with pytest.raises(KubernetesError, match="no RayJob toy-run in namespace evals"):
        submitted.delete(NAME)


def test_missing_secret_is_reported_before_anything_is_created(kube, manifests):
    with pytest.raises(KubernetesError, match="Secret runner-storage not found in namespace evals; create it"):
        RayJobClient.from_environment().submit(*manifests, secret="runner-storage")
    assert [r for r in kube.requests if r.method == "POST"] == []


def test_a_field_the_server_refuses_leaves_nothing_behind(kube, manifests, rayjob_schema):
    kube.strict_errors = rayjob_schema.errors
    rayjob, configmap = manifests
    rayjob["spec"]["shutdownAfterJobFinish"] = rayjob["spec"].pop("shutdownAfterJobFinishes")
    with pytest.raises(KubernetesError, match=r"creating RayJob toy-run: 400 .*'shutdownAfterJobFinish' was unexp"):
        RayJobClient.from_environment().submit(rayjob, configmap)
    assert kube.get("configmaps", "evals", "toy-run-config") is None
    assert kube.get("rayjobs", "evals", NAME) is None


def test_submitting_twice_is_refused_clearly(submitted, kube, manifests):
    with pytest.raises(KubernetesError, match="ConfigMap toy-run-config already exists .* pick another --name"):
        submitted.submit(*manifests)
    with pytest.raises(KubernetesError, match="RayJob toy-run already exists in namespace evals"):
        submitted.submit(manifests[0])


def test_a_cluster_without_kuberay(kube, manifests):
    kube.rayjobs_installed = False
    with pytest.raises(KubernetesError, match="install the KubeRay operator"):
        RayJobClient.from_environment().submit(*manifests)
    assert kube.get("configmaps", "evals", "toy-run-config") is None


def test_no_configuration_at_all(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubernetesError, match="no Kubernetes configuration: not inside a cluster"):
        RayJobClient.from_environment()


def test_unreachable_api_server(kube):
    kube.stop()
    with pytest.raises(KubernetesError, match="cannot reach the Kubernetes API at http://127.0.0.1"):
        RayJobClient.from_environment().status(NAME)
