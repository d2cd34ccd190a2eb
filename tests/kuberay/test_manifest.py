"""The manifest builder: the same RayJob as the chart for the same inputs, and bad input refused before anything
is sent (the operator's rules included)."""

from __future__ import annotations

import copy

import pytest
import yaml

from runner.core.config import RunConfig
from runner.core.errors import ConfigError
from runner.kuberay.checks import check_rayjob, check_rayjob_name
from runner.kuberay.rayjob import (build_configmap, build_model_cache_claim, build_rayjob, build_service_account,
                                     cluster_run_config, entrypoint)
from runner.kuberay.deploy_options import DeployOptions
from tests.kuberay.conftest import CHART, render
from tests.kuberay.test_chart import AKS_VALUES, GKE_VALUES, GPU_VALUES

VLLM_VALUES = yaml.safe_load((CHART / "ci" / "vllm-values.yaml").read_text())
EXISTING_CLAIM = {**VLLM_VALUES, "modelCache": {"type": "persistentVolumeClaim", "mountPath": "/var/cache/models",
                                                "persistentVolumeClaim": {"claimName": "shared-models"}}}

EVERYTHING = {
    "job": {
        "benchmark": "toy",
        "benchmark_args": {"seed": 7},
        "solution": "calculator",
        "storage": "gs://evals/runs/toy",
        "storage_options": {"endpoint_url": "http://minio.minio:9000"},
        "repeats": 4,
        "limit": 50,
        "timeout": 30.5,
        "worker": {"num_workers": 8, "num_cpus": 0.5, "memory": "2GiB", "max_concurrency": 4},
        "extraArgs": ["--log-format", "console"],
    },
    "rayJob": {"activeDeadlineSeconds": None, "backoffLimit": 0, "ttlSecondsAfterFinished": 0},
    "auth": {"mode": "disabled"},
    "imagePullSecrets": [{"name": "registry"}],
    "head": {"cpu": 2, "memory": "8Gi", "labels": {"team": "evals"}, "annotations": {"note": "x"},
             "nodeSelector": {"pool": "cpu"}},
    "workerGroups": [
        {"name": "small", "replicas": 0, "minReplicas": 0, "maxReplicas": 5, "cpu": 0.5, "memory": "1Gi",
         "rayStartParams": {"resources": '"{\\"io\\": 1}"'}, "affinity": {"nodeAffinity": {}}},
        {"name": "big", "replicas": 3, "cpu": "16", "memory": "64Gi", "gpu": 2, "sharedMemory": "8Gi",
         "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
         "image": {"repository": "registry.local/runner", "tag": "gpu"}},
    ],
    "modelCache": {"type": "hostPath", "mountPath": "/cache", "hostPath": {"path": "/mnt/nvme/models"}},
    "hfToken": {"secretName": "hf", "key": "token"},
    "submitter": {"cpu": "250m", "memory": "512Mi"},
    "common": {"env": [{"name": "OPENAI_BASE_URL", "value": "http://vllm:8000/v1"}],
               "envFrom": [{"secretRef": {"name": "model-keys"}}],
               "podLabels": {"azure.workload.identity/use": "true", "team": "everyone"},
               "podAnnotations": {"cost-center": "evals"}},
    "storage": {"credentials": {"source": "secret", "secretRef": "gcs-hmac"}},
    "serviceAccount": {"create": True, "name": "evals-runner", "annotations": {"iam.gke.io/gcp-service-account": "x"}},
}


PROXIED = {**VLLM_VALUES, "common": {"env": [{"name": "HTTPS_PROXY", "value": "http://proxy.corp:3128"},
                                            {"name": "http_proxy", "value": "http://proxy.corp:3128"}]}}
"""A cluster whose pods reach the internet (the Hub, a model API) through an egress proxy, and name no NO_PROXY."""


def build_from_values(chart, values, name="toy-runner"):
    """What the builder makes of chart values: ``job`` is the run config, the rest the deployment options.

    The options come from the values as written (as ``submit --values`` reads them): Helm's merge drops a key set
    to null, where the builder's defaults would then fill it in.
    """
    job = dict(chart.merge_values(values)["job"])
    extra = job.pop("extraArgs")
    config = RunConfig.model_validate(job)
    options = DeployOptions.from_values(values)
    return config, build_rayjob(config, options, name, extra_args=extra), build_configmap(config, name)


def without_labels(manifest):
    out = copy.deepcopy(manifest)
    labels = out["metadata"].pop("labels")
    return out, labels


@pytest.mark.parametrize("values", [{}, GPU_VALUES, EVERYTHING, GKE_VALUES, AKS_VALUES, VLLM_VALUES, EXISTING_CLAIM,
                                    PROXIED],
                         ids=["default", "gpu", "everything", "gke", "aks", "vllm", "existing-claim", "proxied"])
def test_builder_and_chart_make_the_same_rayjob(chart, rayjob_schema, values):
    rendered = render(chart, values)
    config, built, configmap = build_from_values(chart, values)
    options = DeployOptions.from_values(values)
    for kind, made in (("ServiceAccount", build_service_account(options, "toy-runner")),
                       ("PersistentVolumeClaim", build_model_cache_claim(options, "toy-runner"))):
        if kind in rendered:
            assert without_labels(made)[0] == without_labels(rendered[kind])[0]
        else:
            assert made is None
    chart_rayjob, chart_labels = without_labels(rendered["RayJob"])
    built_rayjob, built_labels = without_labels(built)
    assert built_rayjob == chart_rayjob
    for key in ("app.kubernetes.io/name", "app.kubernetes.io/version"):
        assert built_labels[key] == chart_labels[key]
    assert (chart_labels["app.kubernetes.io/managed-by"], built_labels["app.kubernetes.io/managed-by"]) == (
        "Helm", "runner")
    chart_config = RunConfig.model_validate(yaml.safe_load(rendered["ConfigMap"]["data"]["config.yaml"]))
    built_config = RunConfig.model_validate(yaml.safe_load(configmap["data"]["config.yaml"]))
    assert built_config == chart_config == config.model_copy(update={"take_over": True})
    assert rendered["ConfigMap"]["metadata"]["name"] == configmap["metadata"]["name"]
    assert rayjob_schema.errors(built) == []


def test_everything_values_reach_the_manifest(chart):
    _, rayjob, _ = build_from_values(chart, EVERYTHING)
    spec = rayjob["spec"]
    assert spec["entrypoint"] == "python -m runner run --config /etc/runner/config.yaml --log-format console"
    assert "activeDeadlineSeconds" not in spec
    assert spec["rayClusterSpec"]["authOptions"] == {"mode": "disabled"}
    small, big = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert (small["replicas"], small["minReplicas"], small["maxReplicas"]) == (0, 0, 5)
    assert small["template"]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "0.5", "memory": "1Gi"}
    assert big["template"]["spec"]["containers"][0]["image"] == "registry.local/runner:gpu"
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]
    assert head["metadata"] == {"labels": {"azure.workload.identity/use": "true", "team": "evals"},
                                "annotations": {"cost-center": "evals", "note": "x"}}
    assert spec["submitterPodTemplate"]["metadata"] == {
        "labels": {"azure.workload.identity/use": "true", "team": "everyone"}, "annotations": {"cost-center": "evals"}}
    container = head["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "gcs-hmac"}}, {"secretRef": {"name": "model-keys"}}]
    assert container["env"] == [{"name": "OPENAI_BASE_URL", "value": "http://vllm:8000/v1"},
                                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]
    assert head["spec"]["serviceAccountName"] == "evals-runner"
    big_pod = big["template"]["spec"]
    assert big_pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert {v["name"]: v for v in big_pod["volumes"]}["shared-mem"]["emptyDir"] == {"medium": "Memory",
                                                                                    "sizeLimit": "8Gi"}
    assert big_pod["initContainers"][0]["image"] == "registry.local/runner:gpu"


def test_builder_defaults_are_the_chart_defaults():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert DeployOptions() == DeployOptions.from_values(values)


CONFIG = RunConfig(benchmark="toy", solution="calculator", storage="s3://bucket/runs/toy")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"executor": "sequential"}, "drop --sequential"),
        ({"ray_address": "ray://head:10001"}, "drop --ray-address"),
        ({"force": True}, "a RayJob retry would delete the records"),
        ({"storage": None}, "a RayJob needs --storage"),
        ({"storage": "runs/toy"}, "is local to one pod"),
        ({"storage": "file:///data/runs"}, "is local to one pod"),
        ({"storage": "memory://runs"}, "is local to one pod"),
        ({"cache": "/tmp/localcache"}, "--cache \\(job.cache\\) '/tmp/localcache' is local to one pod"),
        ({"cache": "file:///data/cache"}, "--cache \\(job.cache\\) 'file:///data/cache' is local to one pod"),
        ({"storage_options": {"secret": "s3cr3t"}}, "storage_options.secret looks like a credential"),
        ({"storage_options": {"client_kwargs": {"aws_secret_access_key": "k"}}},
         "storage_options.client_kwargs.aws_secret_access_key looks like a credential"),
    ],
)
def test_run_settings_that_cannot_work_in_a_rayjob_are_refused(change, message):
    config = CONFIG.model_copy(update=change)
    with pytest.raises(ConfigError, match=message):
        build_rayjob(config, DeployOptions(), "toy")


def test_storage_options_without_secrets_pass():
    data = cluster_run_config(CONFIG.model_copy(update={"storage_options": {"endpoint_url": "http://m:9000",
                                                                            "keyring": "no"}}))
    assert data["storage_options"] == {"endpoint_url": "http://m:9000", "keyring": "no"}
    assert data["executor"] == "ray" and "force" not in data
    assert data["take_over"] is True  # a retry's driver takes the run over from the previous attempt's


def test_extra_args_must_be_shell_safe():
    assert entrypoint(["--log-format", "json"]).endswith("--config /etc/runner/config.yaml --log-format json")
    with pytest.raises(ConfigError, match="would need shell quoting"):
        entrypoint(["--model", "x; rm -rf /"])


@pytest.mark.parametrize(
    "name, message",
    [
        ("a" * 48, "is 48 characters; KubeRay allows at most 47"),
        ("Toy", "not a DNS-1035 label"),
        ("9-lives", "not a DNS-1035 label"),
        ("toy_run", "not a DNS-1035 label"),
        ("toy-", "not a DNS-1035 label"),
    ],
)
def test_rayjob_names_the_operator_refuses(name, message):
    with pytest.raises(ConfigError, match=message):
        build_rayjob(CONFIG, DeployOptions(), name)


def test_a_47_character_name_passes():
    check_rayjob_name("a" * 47)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"storage": {"credentials": {"source": "secret", "secretRef": ""}}},
         "storage.credentials.secretRef names no Secret"),
        ({"storage": {"credentials": {"source": "serviceAccount"}}}, "no service account is set"),
        ({"workerGroups": [{"name": "a", "replicas": 1, "cpu": 1, "memory": "1Gi"}] * 2}, "names must be unique"),
        ({"workerGroups": [{"name": "a", "replicas": 1, "cpu": 1, "memory": "1Gi", "gpus": 1}]},
         "field 'workerGroups.0.gpus': Extra inputs are not permitted"),
        ({"head": {"cpu": "1", "memory": "1Gi", "rayStartParams": {"num-cpus": 0}}},
         "field 'head.rayStartParams.num-cpus': Input should be a valid string"),
    ],
)
def test_bad_deployment_values_name_the_field(values, message):
    with pytest.raises(ConfigError, match=message):
        DeployOptions.from_values(values)


def test_operator_rules_on_worker_groups():
    rayjob = build_rayjob(CONFIG, DeployOptions(), "toy")
    broken = copy.deepcopy(rayjob)
    del broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"]
    with pytest.raises(ConfigError, match=r"workerGroups\[0\] \(cpu\): set both minReplicas and maxReplicas"):
        check_rayjob(broken)
    broken["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    check_rayjob(broken)
    broken = copy.deepcopy(rayjob)
    del broken["spec"]["rayClusterSpec"]
    with pytest.raises(ConfigError, match="neither spec.rayClusterSpec nor spec.clusterSelector"):
        check_rayjob(broken)


def test_a_proxy_in_common_env_gives_every_pod_a_no_proxy_for_the_cluster(chart):
    """Issue 27: with HTTP(S)_PROXY and no NO_PROXY, KubeRay's submitter would send "ray job submit" for the head's
    dashboard (<head service>.<namespace>.svc.cluster.local:8265) to the proxy. Every pod gets NO_PROXY for
    loopback and the cluster's names after the user's variables; a NO_PROXY of the user's own is kept as written,
    and without a proxy nothing is added."""
    from tests.kuberay.test_chart import containers

    cluster = "127.0.0.1,localhost,::1,.svc,.cluster.local"
    for rayjob in (render(chart, PROXIED)["RayJob"], build_from_values(chart, PROXIED)[1]):
        for _, container in containers(rayjob):
            env = {entry["name"]: entry.get("value") for entry in container["env"]}
            assert env["NO_PROXY"] == env["no_proxy"] == cluster, container["name"]
            assert env["HTTPS_PROXY"] == "http://proxy.corp:3128"
            assert [entry["name"] for entry in container["env"]][:4] == ["HTTPS_PROXY", "http_proxy", "NO_PROXY",
                                                                         "no_proxy"]
    own = {**PROXIED, "common": {"env": [*PROXIED["common"]["env"], {"name": "no_proxy", "value": ".corp"}]}}
    for rayjob in (render(chart, own)["RayJob"], build_from_values(chart, own)[1]):
        for _, container in containers(rayjob):
            names = [entry["name"] for entry in container["env"]]
            assert names.count("no_proxy") == 1 and "NO_PROXY" not in names
    for _, container in containers(render(chart, VLLM_VALUES)["RayJob"]):
        assert "NO_PROXY" not in {entry["name"] for entry in container.get("env", [])}

