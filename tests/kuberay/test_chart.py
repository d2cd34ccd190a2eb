"""The Helm chart, linted and rendered by Helm's own engine, and every rendered RayJob checked strictly against
KubeRay v1.7.0's CRD schema and the operator's own rules."""

from __future__ import annotations

import json

import helm_python
import jsonschema
import pytest
import yaml

from runner.core.config import RunConfig, WorkerSpec
from runner.kuberay.checks import check_rayjob
from tests.kuberay.conftest import CHART, render

GPU_VALUES = yaml.safe_load((CHART / "ci" / "gpu-values.yaml").read_text())


def containers(rayjob):
    """{container name: container} of the head, every worker group and the submitter."""
    spec = rayjob["spec"]
    pods = [spec["submitterPodTemplate"]["spec"], spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]]
    pods += [group["template"]["spec"] for group in spec["rayClusterSpec"]["workerGroupSpecs"]]
    return [(pod, pod["containers"][0]) for pod in pods]


def test_lint_is_clean_in_strict_mode():
    report = helm_python.lint(CHART, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize("example", ["gpu", "gke", "aks", "vllm", "matrix"])
def test_lint_with_each_example_in_ci_is_clean(example):
    values = yaml.safe_load((CHART / "ci" / f"{example}-values.yaml").read_text())
    report = helm_python.lint(CHART, values, strict=True)
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("values", [{}, GPU_VALUES], ids=["default", "gpu"])
def test_rendered_rayjob_is_valid_for_kuberay(chart, rayjob_schema, values):
    rayjob = render(chart, values)["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    check_rayjob(rayjob)
    spec = rayjob["spec"]
    assert spec["entrypoint"] == "python -m runner run --config /etc/runner/config.yaml"
    assert spec["submissionMode"] == "K8sJobMode"
    assert spec["shutdownAfterJobFinishes"] is True
    assert (spec["ttlSecondsAfterFinished"], spec["activeDeadlineSeconds"]) == (300, 86400)
    assert (spec["backoffLimit"], spec["submitterConfig"]["backoffLimit"]) == (2, 2)
    assert spec["rayClusterSpec"]["rayVersion"] == "2.60.0"
    assert spec["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] == {"num-cpus": "0"}


def test_a_misspelt_field_fails_the_strict_crd_schema(chart, rayjob_schema):
    rayjob = render(chart)["RayJob"]
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]
    head["rayStartParam"] = head.pop("rayStartParams")
    rayjob["spec"]["submitterConfig"]["backofLimit"] = 3
    errors = rayjob_schema.errors(rayjob)
    assert any("'rayStartParam' was unexpected" in e for e in errors), errors
    assert any(e.startswith("spec.submitterConfig:") and "'backofLimit'" in e for e in errors), errors


def test_gpu_worker_group_gets_gpus_its_image_and_placement(chart):
    groups = {g["groupName"]: g for g in render(chart, GPU_VALUES)["RayJob"]["spec"]["rayClusterSpec"]
              ["workerGroupSpecs"]}
    gpu = groups["gpu"]
    container = gpu["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == container["resources"]["requests"] == {
        "cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 1}
    assert gpu["rayStartParams"] == {"num-gpus": "1"}
    assert container["image"] == "ghcr.io/example/runner:0.1.0-ray2.60.0-py311-gpu"
    # The example's own toleration for the key, not a second one.
    assert gpu["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert gpu["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert (gpu["replicas"], gpu["minReplicas"], gpu["maxReplicas"]) == (2, 2, 2)
    cpu = groups["cpu"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in cpu["resources"]["limits"]
    assert groups["cpu"]["rayStartParams"] == {"num-gpus": "0"}
    assert "tolerations" not in groups["cpu"]["template"]["spec"]
    assert cpu["image"] == "ghcr.io/example/runner:0.1.0-ray2.60.0-py311"


def test_config_map_holds_the_run_config_mounted_on_the_head(chart):
    out = render(chart, GPU_VALUES)
    config = RunConfig.model_validate(yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"]))
    assert (config.benchmark, config.solution, config.repeats) == ("toy", "calculator", 3)
    assert config.executor == "ray" and config.ray_address is None
    assert (config.worker.num_gpus, config.worker.accelerator_type) == (1, "H100")
    head = out["RayJob"]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in head["volumes"]}
    assert volumes[mounts["/etc/runner"]]["configMap"]["name"] == out["ConfigMap"]["metadata"]["name"] == \
        "toy-runner-config"


def test_credentials_come_from_the_secret_on_every_pod_and_pods_run_as_non_root(chart):
    rayjob = render(chart)["RayJob"]
    for pod, container in containers(rayjob):
        assert container["envFrom"] == [{"secretRef": {"name": "runner-storage"}}]
        assert "env" not in container
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
    for pod, container in containers(rayjob)[1:]:
        logs = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp/ray")
        assert next(v for v in pod["volumes"] if v["name"] == logs["name"]) == {"name": "ray-logs", "emptyDir": {}}
    assert "runtimeEnvYAML" not in rayjob["spec"]


def test_service_account_for_workload_identity(chart, rayjob_schema):
    values = {
        "serviceAccount": {"create": True, "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}},
        "storage": {"credentials": {"source": "serviceAccount"}},
    }
    out = render(chart, values)
    account = out["ServiceAccount"]
    assert account["metadata"]["name"] == "toy-runner"
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}
    for pod, container in containers(out["RayJob"]):
        assert pod["serviceAccountName"] == "toy-runner"
        assert "envFrom" not in container
    assert rayjob_schema.errors(out["RayJob"]) == []


GKE_VALUES = yaml.safe_load((CHART / "ci" / "gke-values.yaml").read_text())
AKS_VALUES = yaml.safe_load((CHART / "ci" / "aks-values.yaml").read_text())


def test_gke_workload_identity_annotates_the_account_every_pod_runs_as(chart, rayjob_schema):
    out = render(chart, GKE_VALUES)
    assert out["ServiceAccount"]["metadata"]["name"] == "runner"
    assert out["ServiceAccount"]["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "runner@my-project.iam.gserviceaccount.com"}
    for pod, container in containers(out["RayJob"]):
        assert pod["serviceAccountName"] == "runner" and "envFrom" not in container
    assert yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"])["storage"] == "gs://my-bucket/runs/toy"
    assert rayjob_schema.errors(out["RayJob"]) == []


def test_aks_workload_identity_labels_every_pod_and_annotates_the_account(chart, rayjob_schema):
    """AKS's webhook acts on pods labelled azure.workload.identity/use: "true" that run as an account annotated with
    the identity's client id: the head, every worker group and the submitter carry the label (a group's own labels
    beside it), and the account name; the storage account's name reaches every container."""
    values = {**AKS_VALUES, "head": {"labels": {"team": "evals"}}}
    out = render(chart, values)
    assert out["ServiceAccount"]["metadata"]["annotations"] == {
        "azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000000"}
    spec = out["RayJob"]["spec"]
    templates = [spec["submitterPodTemplate"], spec["rayClusterSpec"]["headGroupSpec"]["template"],
                 *(group["template"] for group in spec["rayClusterSpec"]["workerGroupSpecs"])]
    assert [t["metadata"]["labels"] for t in templates] == [
        {"azure.workload.identity/use": "true"}, {"azure.workload.identity/use": "true", "team": "evals"},
        {"azure.workload.identity/use": "true"}]
    for pod, container in containers(out["RayJob"]):
        assert pod["serviceAccountName"] == "runner" and "envFrom" not in container
        assert container["env"] == [{"name": "AZURE_STORAGE_ACCOUNT_NAME", "value": "mystorageaccount"}]
    assert rayjob_schema.errors(out["RayJob"]) == []


def test_no_service_account_object_by_default(chart):
    assert "ServiceAccount" not in render(chart)


def test_values_match_the_schema_for_python_jsonschema_too(chart):
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)
    jsonschema.validate(chart.merge_values(GPU_VALUES), schema)


def test_job_values_are_the_run_config_fields():
    """The job block is a run config file: the schema lists RunConfig's fields, less those a RayJob sets itself, and
    the matrix block of an evaluation matrix."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    job = schema["properties"]["job"]
    assert set(job["properties"]) == set(RunConfig.model_fields) - {"executor", "ray_address", "force", "take_over"} | {
        "extraArgs", "matrix"}
    assert set(job["properties"]["worker"]["properties"]) == set(WorkerSpec.model_fields)
    values = yaml.safe_load((CHART / "values.yaml").read_text())["job"]
    assert set(values) == set(job["properties"]) and set(values["worker"]) == set(WorkerSpec.model_fields)


@pytest.mark.parametrize(
    "values, where",
    [
        ({"workerGroups": [{"name": "gpu", "replicas": 1, "cpu": "1", "memory": "1Gi", "gpus": 1}]},
         "at '/workerGroups/0': additional properties 'gpus' not allowed"),
        ({"job": {"benchmark": "toy", "repeat": 3}}, "at '/job': additional properties 'repeat' not allowed"),
        ({"storage": {"credentials": {"source": "secret", "secretRef": ""}}}, "at '/storage/credentials/secretRef'"),
        ({"job": {"storage": "/data/runs/toy"}}, "at '/job/storage'"),
        ({"job": {"storage_options": {"secret": "hunter2"}}}, "at '/job/storage_options/secret'"),
        ({"job": {"extraArgs": ["--log-format", "json; rm -rf /"]}}, "at '/job/extraArgs/1'"),
        ({"job": {"cache": "/tmp/cache"}}, "at '/job/cache'"),
        ({"job": {"cache": "memory://cache"}}, "at '/job/cache'"),
        ({"image": {"repository": "bad image"}}, "at '/image/repository'"),
        ({"image": {"tag": "-1"}}, "at '/image/tag'"),
    ],
    ids=["misspelt-worker-field", "misspelt-job-field", "empty-secret-name", "pod-local-storage",
         "secret-in-values", "unsafe-extra-arg", "pod-local-cache", "memory-cache", "bad-image-repository",
         "bad-image-tag"],
)
def test_values_breaking_the_schema_are_refused_naming_the_field(chart, values, where):
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.render(values, name="toy")
    assert where in str(caught.value)


@pytest.mark.parametrize(
    "release, values, message",
    [
        ("a" * 41, {}, "is 48 characters; KubeRay allows at most 47"),
        ("toy", {"fullnameOverride": "x" * 48}, "is 48 characters; KubeRay allows at most 47"),
        ("9lives", {}, 'RayJob name "9lives-runner" is not a DNS-1035 label'),
        ("toy", {"storage": {"credentials": {"source": "serviceAccount"}}}, "no service account is set"),
    ],
    ids=["long-release-name", "long-fullname-override", "not-dns-1035", "service-account-source-without-one"],
)
def test_bad_names_and_missing_service_account_fail_the_render(chart, release, values, message):
    with pytest.raises(helm_python.HelmRenderError) as caught:
        chart.render(values, name=release)
    assert message in str(caught.value)


def test_a_shared_cache_passes_the_schema(chart):
    out = render(chart, {"job": {"cache": "s3://bucket/cache"}})
    assert yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"])["cache"] == "s3://bucket/cache"


MATRIX_VALUES = yaml.safe_load((CHART / "ci" / "matrix-values.yaml").read_text())


def test_a_matrix_renders_as_one_rayjob_of_the_matrix_command(chart, rayjob_schema):
    """job.matrix: the entrypoint is the matrix command, the ConfigMap holds a matrix file (its entries, the job
    block's run settings for every cell, none of a single run's benchmark, model or solution), and the RayJob passes
    KubeRay's CRD schema and rules."""
    from runner.core.matrix import MatrixConfig

    rendered = render(chart, MATRIX_VALUES, name="sweep")
    rayjob = rendered["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    check_rayjob(rayjob)
    assert rayjob["spec"]["entrypoint"] == "python -m runner matrix --config /etc/runner/config.yaml"
    config = yaml.safe_load(rendered["ConfigMap"]["data"]["config.yaml"])
    matrix = MatrixConfig.model_validate(config)
    assert [entry.model for entry in matrix.models] == ["vllm:Qwen/Qwen2.5-0.5B-Instruct",
                                                        "vllm:s3://CHANGE-ME/checkpoints/run42/step_*"]
    assert matrix.watch is not None and matrix.watch.until == "DONE"
    assert {"benchmark", "model", "solution", "benchmark_args", "solution_args", "matrix"} & set(config) == set()
    assert (config["executor"], config["take_over"]) == ("ray", True)
    assert matrix.benchmarks[1].settings() == {"limit": 500, "judge_model": "none"}
    assert rendered["ConfigMap"]["metadata"]["name"] == "sweep-runner-config"


def test_the_values_schema_checks_a_matrix_block(chart):
    import copy

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values["job"] = {**values["job"], **MATRIX_VALUES["job"]}
    jsonschema.validate(values, schema)
    bad = copy.deepcopy(values)
    bad["job"]["matrix"]["watch"]["evry"] = 60
    with pytest.raises(jsonschema.ValidationError, match="'evry' was unexpected"):
        jsonschema.validate(bad, schema)
    bad = copy.deepcopy(values)
    del bad["job"]["matrix"]["benchmarks"]
    with pytest.raises(jsonschema.ValidationError, match="'benchmarks' is a required property"):
        jsonschema.validate(bad, schema)
