"""``python -m runner submit`` and ``python -m runner k8s``: the dry run validated against the KubeRay CRD, the same
RayJob as the chart and k8s/, bad input as one line with exit status 2, and a submission against the fake API
server (no cluster can run here)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
import yaml

from runner.cli import main
from runner.cli.k8s import default_name
from runner.kuberay.deploy_flags import split_image
from runner.core.config import RunConfig
from runner.core.errors import ConfigError
from runner.kuberay.rayjob import build_rayjob
from runner.kuberay.deploy_options import DeployOptions
from tests.kuberay.conftest import CHART, REPO, render

TOY = ["-b", "toy", "-s", "calculator", "--storage", "s3://bucket/runs/toy"]
K8S_COMMAND = ["--name", "runner-toy", "-b", "toy", "-s", "calculator", "--storage", "s3://CHANGE-ME/runner/toy"]


def documents(text: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc}


def assert_one_line_error(rc: int, err: str, *fragments: str) -> None:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0]


def test_dry_run_prints_a_valid_rayjob_and_contacts_nothing(cli, tmp_path, rayjob_schema):
    result = cli("submit", "--dry-run", "--name", "toy-eval", "-n", "evals", *TOY, "--repeats", "3",
                 "--worker-gpu", "1", "--num-gpus", "1", env={"KUBECONFIG": str(tmp_path / "none")})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    docs = documents(result.stdout)
    rayjob = docs["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    assert rayjob["metadata"]["namespace"] == docs["ConfigMap"]["metadata"]["namespace"] == "evals"
    group = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    worker = group["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    # The chart's default group, given GPUs by the flags, is named for them.
    assert (group["groupName"], group["rayStartParams"]) == ("gpu", {"num-gpus": "1"})
    config = RunConfig.model_validate(yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"]))
    assert (config.repeats, config.worker.num_gpus, config.executor) == (3, 1.0, "ray")
    expected = build_rayjob(config, DeployOptions.from_values(
        {"workerGroups": [{"name": "gpu", "replicas": 2, "cpu": "2", "memory": "4Gi", "gpu": 1}]}),
        "toy-eval", namespace="evals")
    assert rayjob == expected


def test_default_names_are_valid_rayjob_names(capsys):
    now = datetime(2026, 9, 1, 12, 30, 5, tzinfo=timezone.utc)
    assert default_name("toy", now) == "toy-0901-123005"
    assert default_name("my_pkg.bench:HotpotQA_Distractor", now) == "hotpotqa-distractor-0901-123005"
    assert default_name("2wiki", now) == "run-2wiki-0901-123005"
    assert len(default_name("x" * 80, now)) == 47
    assert main(["submit", "--dry-run", *TOY]) == 0
    name = documents(capsys.readouterr().out)["RayJob"]["metadata"]["name"]
    assert re.fullmatch(r"toy-\d{4}-\d{6}", name)


def test_image_references():
    assert split_image("registry:5000/org/runner:0.1.0-gpu") == ("registry:5000/org/runner", "0.1.0-gpu")
    assert split_image("[::1]:5000/a__b/c--d:v_1.x") == ("[::1]:5000/a__b/c--d", "v_1.x")
    for bad in ("registry:5000/org/runner", "runner@sha256:abc", "runner:"):
        with pytest.raises(ConfigError, match="must be REPOSITORY:TAG"):
            split_image(bad)
    for bad, why in (("bad image:tag:x", "'bad image:tag' is not an image repository"),
                     ("ghcr.io/Org/runner:1", "'ghcr.io/Org/runner' is not an image repository"),
                     ("runner:-1", "'-1' is not an image tag"), (f"runner:{'x' * 129}", "is not an image tag"),
                     ("runner:v\n", "is not an image tag")):
        with pytest.raises(ConfigError, match=f"^--image .*{re.escape(why)}.*; pass REPOSITORY:TAG, e.g. "):
            split_image(bad)


def test_dry_run_with_chart_values_matches_helm(chart, capsys, rayjob_schema):
    values_file = str(CHART / "ci" / "gpu-values.yaml")
    rc = main(["submit", "--dry-run", "--values", values_file, "--name", "gpu-eval-runner",
               "--storage", "s3://bucket/runs/gpu"])
    assert rc == 0
    printed = documents(capsys.readouterr().out)
    values = yaml.safe_load((CHART / "ci" / "gpu-values.yaml").read_text())
    values["job"]["storage"] = "s3://bucket/runs/gpu"
    helm = render(chart, values, name="gpu-eval")
    for kind in ("RayJob", "ConfigMap"):
        printed[kind]["metadata"].pop("labels")
        helm[kind]["metadata"].pop("labels")
    assert printed["RayJob"] == helm["RayJob"]
    assert RunConfig.model_validate(yaml.safe_load(printed["ConfigMap"]["data"]["config.yaml"])) == \
        RunConfig.model_validate(yaml.safe_load(helm["ConfigMap"]["data"]["config.yaml"]))
    assert rayjob_schema.errors(printed["RayJob"]) == []


def test_submit_matrix_dry_run_matches_helm(chart, capsys, rayjob_schema):
    """``submit matrix --values`` builds the chart's RayJob and a ConfigMap holding the same matrix; every cell is
    checked as ``matrix`` checks it, and the checkpoints' glob is left for the cluster's driver to list."""
    from runner.core.matrix import MatrixConfig

    values_file = str(CHART / "ci" / "matrix-values.yaml")
    rc = main(["submit", "matrix", "--dry-run", "--values", values_file, "--name", "sweep-runner",
               "--storage", "s3://bucket/evals/run42"])
    assert rc == 0
    printed = documents(capsys.readouterr().out)
    values = yaml.safe_load((CHART / "ci" / "matrix-values.yaml").read_text())
    values["job"]["storage"] = "s3://bucket/evals/run42"
    helm = render(chart, values, name="sweep")
    for kind in ("RayJob", "ConfigMap"):
        printed[kind]["metadata"].pop("labels")
        helm[kind]["metadata"].pop("labels")
    assert printed["RayJob"] == helm["RayJob"]
    assert MatrixConfig.model_validate(yaml.safe_load(printed["ConfigMap"]["data"]["config.yaml"])) == \
        MatrixConfig.model_validate(yaml.safe_load(helm["ConfigMap"]["data"]["config.yaml"]))
    assert rayjob_schema.errors(printed["RayJob"]) == []


def test_submit_matrix_refuses_a_bad_cell_in_one_line(capsys):
    values_file = str(CHART / "ci" / "matrix-values.yaml")
    rc = main(["submit", "matrix", "--dry-run", "--values", values_file, "--storage", "s3://bucket/x",
               "--benchmark-arg", "colour=red"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cell qwen2.5-0.5b-instruct/lm-eval-arc_easy-gsm8k: "), err


def test_k8s_manifest_is_valid_and_what_the_dry_run_prints(capsys, rayjob_schema):
    shipped = documents((REPO / "k8s" / "rayjob.yaml").read_text())
    assert rayjob_schema.errors(shipped["RayJob"]) == []
    assert main(["submit", "--dry-run", *K8S_COMMAND]) == 0
    assert documents(capsys.readouterr().out) == shipped


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--name", "r" * 48, *TOY], ["is 48 characters; KubeRay allows at most 47"]),
        (["--name", "Toy_Eval", *TOY], ["not a DNS-1035 label"]),
        (["-b", "toy", "-s", "calculator"], ["a RayJob needs --storage"]),
        (["--credentials-secret", "", *TOY], ["secretRef names no Secret"]),
        (["--image", "ghcr.io/org/runner", *TOY], ["--image 'ghcr.io/org/runner' must be REPOSITORY:TAG"]),
        (["--sequential", *TOY], ["drop --sequential"]),
        (["--force", *TOY], ["a RayJob retry would delete the records"]),
        (["--storage-options", '{"secret": "x"}', *TOY], ["storage_options.secret looks like a credential"]),
        (["--worker-memory", "lots", *TOY], ["field 'workerGroups.0.memory': 'lots' is not a Kubernetes quantity"]),
        (["--worker-cpu", "-2", *TOY], ["field 'workerGroups.0.cpu': '-2' is not a Kubernetes quantity"]),
        (["--num-gpus", "1", *TOY], ["no worker group can hold one worker (num_cpus=1, num_gpus=1;",
                                     "groups: cpu: cpu 2, memory 4Gi, gpu 0)", "--worker-gpu"]),
        (["--memory", "8GiB", "--worker-memory", "6Gi", *TOY], ["memory=8.0 GiB", "memory 6Gi"]),
        (["--image", "bad image:tag:x", *TOY], ["--image 'bad image:tag:x': 'bad image:tag' is not an image "
                                                "repository", "pass REPOSITORY:TAG"]),
        (["-n", "Bad_NS", *TOY], ["--namespace 'Bad_NS' is not a Kubernetes namespace", "DNS-1123 label",
                                  "e.g. --namespace bad-ns"]),
        (["-n", "x" * 64, *TOY], ["is not a Kubernetes namespace", "at most 63"]),
        (["--cache", "/tmp/localcache", *TOY], ["--cache (job.cache) '/tmp/localcache' is local to one pod",
                                                "s3://bucket/cache, or drop --cache"]),
        (["--cache", "memory://cache", *TOY], ["--cache (job.cache) 'memory://cache' is local to one pod"]),
    ],
    ids=["long-name", "not-dns", "no-storage", "empty-secret", "image-without-tag", "sequential", "force",
         "secret-in-options", "bad-memory", "negative-cpu", "gpu-without-gpu-group", "memory-over-pod",
         "bad-image", "bad-namespace", "long-namespace", "local-cache", "memory-cache"],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, fragments):
    rc = main(["submit", "--dry-run", *args])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(rc, captured.err, *fragments)


def test_a_shared_cache_passes_to_the_run_config(capsys):
    assert main(["submit", "--dry-run", "--cache", "s3://bucket/cache", *TOY]) == 0
    config = yaml.safe_load(documents(capsys.readouterr().out)["ConfigMap"]["data"]["config.yaml"])
    assert config["cache"] == "s3://bucket/cache"


def test_k8s_commands_refuse_a_bad_namespace_before_any_call(capsys):
    for action in ("status", "logs", "delete"):
        rc = main(["k8s", action, "toy", "-n", "Bad_NS"])
        assert_one_line_error(rc, capsys.readouterr().err, "--namespace 'Bad_NS' is not a Kubernetes namespace")


def test_values_file_breaking_the_schema_names_the_field(tmp_path, capsys):
    bad = tmp_path / "values.yaml"
    bad.write_text("workerGroups:\n  - {name: gpu, replicas: 1, cpu: '8', memory: 64Gi, gpus: 1}\n")
    rc = main(["submit", "--dry-run", "--values", str(bad), *TOY])
    assert_one_line_error(rc, capsys.readouterr().err, "field 'workerGroups.0.gpus': Extra inputs are not permitted")
    bad.write_text("workerGroups:\n  - {name: gpu, replicas: 1, cpu: '8', memory: 64Gi, image: {tag: '.gpu'}}\n")
    rc = main(["submit", "--dry-run", "--values", str(bad), *TOY])
    assert_one_line_error(rc, capsys.readouterr().err, "field 'workerGroups.0.image.tag': '.gpu' is not an image tag")


def test_submit_without_a_cluster_configuration(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    rc = main(["submit", *TOY])
    assert_one_line_error(rc, capsys.readouterr().err, "no Kubernetes configuration")


def test_submit_wait_to_success(kube, capsys):
    kube.add_secret("runner-storage")
    kube.statuses = [{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"},
                     {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}]
    rc = main(["submit", "--name", "toy-eval", *TOY, "--wait", "--wait-timeout", "60"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "submitted RayJob toy-eval in namespace evals; results go to s3://bucket/runs/toy" in err
    assert "toy-eval: deployment Complete, job SUCCEEDED" in err
    assert "done: python -m runner report s3://bucket/runs/toy" in err
    assert kube.get("rayjobs", "evals", "toy-eval")["spec"]["rayClusterSpec"]["rayVersion"] == "2.60.0"


@pytest.mark.parametrize("values", ["gke-values.yaml", "aks-values.yaml"])
def test_dry_run_with_workload_identity_values_prints_the_account_first(capsys, rayjob_schema, values):
    """The chart's example values for GKE and AKS: submit prints the annotated ServiceAccount the pods run as, then
    the ConfigMap and a RayJob valid for KubeRay, with the same pods as the chart's."""
    assert main(["submit", "--dry-run", "--name", "toy-eval", "-n", "evals", "--values",
                 str(CHART / "ci" / values)]) == 0
    out = capsys.readouterr().out
    kinds = [doc["kind"] for doc in yaml.safe_load_all(out)]
    assert kinds == ["ServiceAccount", "ConfigMap", "RayJob"]
    docs = documents(out)
    chart_values = yaml.safe_load((CHART / "ci" / values).read_text())
    assert docs["ServiceAccount"]["metadata"]["name"] == "runner"
    assert docs["ServiceAccount"]["metadata"]["namespace"] == "evals"
    assert docs["ServiceAccount"]["metadata"]["annotations"] == chart_values["serviceAccount"]["annotations"]
    assert rayjob_schema.errors(docs["RayJob"]) == []
    head = docs["RayJob"]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    assert head["spec"]["serviceAccountName"] == "runner"
    assert head.get("metadata", {}).get("labels", {}) == chart_values.get("common", {}).get("podLabels", {})


def test_submit_creates_the_service_account_once_and_no_secret_is_needed(kube, capsys):
    """With workload identity no Secret is read; the account is created before the RayJob, and a second run that
    names it uses it as it is."""
    kube.statuses = [{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}]
    args = ["submit", "--values", str(CHART / "ci" / "aks-values.yaml"), "-b", "toy", "-s", "calculator"]
    assert main([*args, "--name", "toy-one"]) == 0, capsys.readouterr().err
    account = kube.get("serviceaccounts", "evals", "runner")
    assert account["metadata"]["annotations"] == {
        "azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000000"}
    created = [r.path.rsplit("/", 1)[-1] for r in kube.requests if r.method == "POST"]
    assert created[:3] == ["serviceaccounts", "configmaps", "rayjobs"]
    assert not [r for r in kube.requests if "/secrets/" in r.path]
    assert main([*args, "--name", "toy-two"]) == 0, capsys.readouterr().err
    assert kube.get("rayjobs", "evals", "toy-two")["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"][
        "serviceAccountName"] == "runner"


def test_submit_follow_prints_the_driver_log_then_fails_with_exit_1(kube, capsys):
    kube.add_secret("runner-storage")
    kube.log_lines = ["toy: 40/100 items", "Traceback (most recent call last):"]
    kube.statuses = [{"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed"}]
    rc = main(["submit", "--name", "toy-eval", *TOY, "--follow"])
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.out.splitlines() == kube.log_lines
    assert "failed: toy-eval: deployment Failed, job FAILED; AppFailed" in captured.err


@pytest.mark.parametrize(("status", "exit_status", "state"), [
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed"}, 1, "failed"),  # the issue's
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, 1, "failed"),        # a neighbour: ended unsuccessful
    ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}, 1, "failed"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, 0, "succeeded"),
    ({"jobDeploymentStatus": "Retrying", "jobStatus": "FAILED"}, 0, "running"),          # KubeRay tries again
    ({}, 0, "running"),
])
def test_k8s_status_exits_with_the_rayjobs_state(kube, capsys, status, exit_status, state):
    kube.add_secret("runner-storage")
    assert main(["submit", "--name", "toy-eval", *TOY]) == 0
    kube.objects[("rayjobs", "evals", "toy-eval")]["status"] = status
    capsys.readouterr()
    assert main(["k8s", "status", "toy-eval"]) == exit_status
    assert main(["k8s", "status", "toy-eval", "--json"]) == exit_status
    assert yaml.safe_load(capsys.readouterr().out.split("\n", 1)[1])["state"] == state


def test_submit_wait_has_a_default_bound_from_the_rayjobs_deadline(kube, capsys, monkeypatch, tmp_path):
    """No --wait-timeout: the wait gives up after the RayJob's activeDeadlineSeconds plus 600 s (a day and 600 s with
    the chart's default; a day without a deadline); here a 1 s deadline from --values with the margin made 0.5 s:
    one line and exit 2, and the RayJob keeps running."""
    import runner.cli.k8s as k8s

    assert k8s.wait_seconds(None, DeployOptions.from_values({}, "test")) == 86400 + 600
    assert k8s.wait_seconds(None, DeployOptions.from_values({"rayJob": {"activeDeadlineSeconds": None}},
                                                            "test")) == 86400
    assert k8s.wait_seconds(30, DeployOptions.from_values({}, "test")) == 30
    with pytest.raises(ConfigError, match="--wait-timeout must be a positive number of seconds, got 0"):
        k8s.wait_seconds(0, DeployOptions.from_values({}, "test"))
    monkeypatch.setattr(k8s, "WAIT_MARGIN_S", 0.5)
    kube.add_secret("runner-storage")
    kube.statuses = []
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump({"rayJob": {"activeDeadlineSeconds": 1}}))
    rc = main(["submit", "--name", "toy-eval", *TOY, "--wait", "--values", str(values_file)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: gave up waiting after 1.5 s; the RayJob keeps running: toy-eval: deployment New, job NEW (waited 1.5 s "
        "in all, --wait-timeout); see it with python -m runner k8s status toy-eval -n evals")


def test_submit_with_a_missing_secret_sends_nothing(kube, capsys):
    rc = main(["submit", "--name", "toy-eval", *TOY, "--credentials-secret", "minio-keys"])
    assert_one_line_error(rc, capsys.readouterr().err, "Secret minio-keys not found in namespace evals")
    assert [r for r in kube.requests if r.method == "POST"] == []


def test_k8s_status_logs_and_delete(kube, capsys):
    kube.add_secret("runner-storage")
    assert main(["submit", "--name", "toy-eval", *TOY]) == 0
    kube.objects[("rayjobs", "evals", "toy-eval")]["status"] = {"jobDeploymentStatus": "Running",
                                                                "jobStatus": "RUNNING"}
    kube.log_lines = ["toy: 10/100 items"]
    capsys.readouterr()
    assert main(["k8s", "status", "toy-eval"]) == 0
    assert capsys.readouterr().out.strip() == "toy-eval: deployment Running, job RUNNING"
    assert main(["k8s", "logs", "toy-eval", "-n", "evals"]) == 0
    assert capsys.readouterr().out.strip() == "toy: 10/100 items"
    assert main(["k8s", "delete", "toy-eval"]) == 0
    assert capsys.readouterr().err.strip() == "deleted RayJob toy-eval in namespace evals"
    assert kube.get("rayjobs", "evals", "toy-eval") is None
    rc = main(["k8s", "status", "toy-eval"])
    assert_one_line_error(rc, capsys.readouterr().err, "no RayJob toy-eval in namespace evals")
