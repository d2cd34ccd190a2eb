"""Models served by the run on Kubernetes: GPU worker groups (nvidia.com/gpu, num-gpus, the GPU taint, /dev/shm), the
model cache volume (a claim, created or existing, or a host path), HF_TOKEN from a Secret, rendered by Helm's engine
and built by ``submit`` alike, valid for KubeRay's CRD and its rules; bad settings refused in one line."""

from __future__ import annotations

import copy
import json

import helm_python
import jsonschema
import pytest
import yaml

from runner.cli import main
from runner.core.config import RunConfig
from runner.core.errors import ConfigError
from runner.kuberay.checks import check_rayjob
from runner.kuberay.rayjob import build_configmap, build_rayjob
from runner.kuberay.deploy_options import DeployOptions
from tests.kuberay.conftest import CHART, render
from tests.kuberay.test_cli import TOY, assert_one_line_error, documents
from tests.kuberay.test_manifest import VLLM_VALUES

SERVED = ["-b", "hotpotqa", "-s", "chat", "--model", "vllm:Qwen/Qwen2.5-7B-Instruct", "--serve",
          "--storage", "s3://bucket/runs/qwen"]
GPU_GROUP = {"name": "gpu", "replicas": 2, "cpu": "8", "memory": "64Gi", "gpu": 2}


def worker_pods(rayjob):
    """{group name: pod spec} of the RayJob's worker groups."""
    return {g["groupName"]: g["template"]["spec"] for g in rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]}


def head_pod(rayjob):
    return rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]


def env_of(pod):
    return {entry["name"]: entry for entry in pod["containers"][0].get("env", [])}


def mounts_of(pod):
    return {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}


def volumes_of(pod):
    return {v["name"]: v for v in pod.get("volumes", [])}


def test_a_gpu_group_asks_for_its_gpus_tolerates_their_taint_and_gets_shared_memory(chart, rayjob_schema):
    values = {"workerGroups": [{"name": "cpu", "replicas": 1, "cpu": "2", "memory": "4Gi"},
                               {**GPU_GROUP, "sharedMemory": "16Gi",
                                "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}]}
    rayjob = render(chart, values)["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    check_rayjob(rayjob)
    groups = {g["groupName"]: g for g in rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]}
    assert (groups["gpu"]["rayStartParams"], groups["cpu"]["rayStartParams"]) == ({"num-gpus": "2"},
                                                                                  {"num-gpus": "0"})
    pods = worker_pods(rayjob)
    resources = pods["gpu"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 2}
    assert pods["gpu"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pods["gpu"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert "tolerations" not in pods["cpu"] and "nvidia.com/gpu" not in pods["cpu"]["containers"][0]["resources"][
        "requests"]
    # /dev/shm in memory on every worker pod: sized by sharedMemory, else at the pod's memory as KubeRay would.
    for name, size in (("gpu", "16Gi"), ("cpu", "4Gi")):
        shm = mounts_of(pods[name])["/dev/shm"]
        assert volumes_of(pods[name])[shm]["emptyDir"] == {"medium": "Memory", "sizeLimit": size}


def test_a_toleration_of_the_gpu_key_of_its_own_is_kept_as_it_is(chart):
    own = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoExecute"}
    pods = worker_pods(render(chart, {"workerGroups": [{**GPU_GROUP, "tolerations": [own]}]})["RayJob"])
    assert pods["gpu"]["tolerations"] == [own]


def test_num_gpus_comes_from_the_group_s_gpu_only(chart):
    group = {**GPU_GROUP, "rayStartParams": {"num-gpus": "4"}}
    with pytest.raises(helm_python.HelmValuesError, match="at '/workerGroups/0/rayStartParams'"):
        chart.render({"workerGroups": [group]}, name="toy")
    with pytest.raises(ConfigError, match=r"rayStartParams\['num-gpus'\] is written by the chart from the group's "
                                          "gpu; remove it and set the group's gpu"):
        DeployOptions.from_values({"workerGroups": [group]})


@pytest.mark.parametrize("num_gpus, fits", [(2, True), (1, True), (0.5, True), (3, False)])
def test_the_fit_check_refuses_a_worker_no_gpu_group_holds(num_gpus, fits):
    """Each worker must fit in one pod of some group: 3 GPUs per worker fit no pod of 2 GPUs, which Ray would only
    report from the cluster (an actor pending forever)."""
    config = RunConfig(benchmark="toy", solution="calculator", storage="s3://b/r",
                       worker={"num_gpus": num_gpus, "num_cpus": 4})
    options = DeployOptions.from_values({"workerGroups": [{"name": "cpu", "replicas": 1, "cpu": "16",
                                                           "memory": "4Gi"}, GPU_GROUP]})
    if fits:
        build_rayjob(config, options, "toy")
        return
    with pytest.raises(ConfigError, match=r"no worker group can hold one worker \(num_cpus=4, num_gpus=3; groups: "
                                          r"cpu: cpu 16, memory 4Gi, gpu 0; gpu: cpu 8, memory 64Gi, gpu 2\)"):
        build_rayjob(config, options, "toy")


def test_submit_refuses_more_gpus_per_worker_than_a_pod_has(capsys):
    rc = main(["submit", "--dry-run", *TOY, "--worker-gpu", "1", "--num-gpus", "2"])
    assert_one_line_error(rc, capsys.readouterr().err, "no worker group can hold one worker (num_cpus=1, num_gpus=2;",
                          "gpu: cpu 2, memory 4Gi, gpu 1)")


def test_submit_refuses_a_vllm_model_on_workers_without_gpus(capsys):
    """A vLLM replica refuses a worker without GPUs once the cluster is up; submit says so before anything is sent."""
    rc = main(["submit", "--dry-run", *SERVED])
    assert_one_line_error(rc, capsys.readouterr().err, "vllm:Qwen/Qwen2.5-7B-Instruct is served by vllm on GPUs, and "
                          "each worker has none (--num-gpus 0)", "--worker-gpu 1")


def test_the_model_cache_on_an_existing_claim_is_mounted_on_every_worker_pod(chart, rayjob_schema):
    values = {"workerGroups": [GPU_GROUP, {"name": "cpu", "replicas": 1, "cpu": "2", "memory": "4Gi"}],
              "modelCache": {"type": "persistentVolumeClaim", "persistentVolumeClaim": {"claimName": "models"}}}
    out = render(chart, values)
    assert "PersistentVolumeClaim" not in out
    rayjob = out["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    for pod in worker_pods(rayjob).values():
        assert volumes_of(pod)[mounts_of(pod)["/models"]]["persistentVolumeClaim"] == {"claimName": "models"}
        env = env_of(pod)
        assert (env["HF_HOME"]["value"], env["RUNNER_MODEL_CACHE"]["value"]) == ("/models/huggingface",
                                                                                "/models/runner")
        assert "initContainers" not in pod
    # Not on the head: the driver serves nothing in a RayJob, and would hand its own HF_HOME to the replicas.
    head = head_pod(rayjob)
    assert "/models" not in mounts_of(head) and "HF_HOME" not in env_of(head)


def test_a_claim_the_chart_creates_is_a_read_write_many_claim_of_the_release(chart, rayjob_schema):
    values = {"modelCache": {"type": "persistentVolumeClaim", "persistentVolumeClaim": {
        "create": True, "size": "500Gi", "storageClassName": "filestore-rwx"}}}
    out = render(chart, values, name="qwen")
    claim = out["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "qwen-runner-models"
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "500Gi"}},
                             "storageClassName": "filestore-rwx"}
    pod = worker_pods(out["RayJob"])["cpu"]
    assert volumes_of(pod)["model-cache"]["persistentVolumeClaim"] == {"claimName": "qwen-runner-models"}
    assert rayjob_schema.errors(out["RayJob"]) == []


def test_the_model_cache_on_each_node_s_disk_is_given_to_the_pods_user(chart, rayjob_schema):
    """A hostPath the kubelet creates is root's: an init container, root with only CAP_CHOWN, gives it to the pods'
    user (podSecurityContext's runAsUser and runAsGroup)."""
    values = {"modelCache": {"type": "hostPath", "mountPath": "/var/cache/models",
                             "hostPath": {"path": "/mnt/nvme0/models"}},
              "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 1001, "runAsGroup": 1001, "fsGroup": 1001}}
    rayjob = render(chart, values)["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    pod = worker_pods(rayjob)["cpu"]
    assert volumes_of(pod)["model-cache"]["hostPath"] == {"path": "/mnt/nvme0/models", "type": "DirectoryOrCreate"}
    assert mounts_of(pod)["/var/cache/models"] == "model-cache"
    assert env_of(pod)["HF_HOME"]["value"] == "/var/cache/models/huggingface"
    (owner,) = pod["initContainers"]
    assert owner["command"] == ["chown", "1001:1001", "/var/cache/models"]
    assert owner["securityContext"]["runAsUser"] == 0
    assert owner["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert owner["volumeMounts"] == [{"name": "model-cache", "mountPath": "/var/cache/models"}]


@pytest.mark.parametrize("cache, helm_where, message", [
    ({"type": "persistentVolumeClaim"}, "at '/modelCache/persistentVolumeClaim'", "no claim is named"),
    ({"type": "hostPath", "mountPath": "/dev/shm"}, "at '/modelCache/mountPath'", "'/dev/shm' is where the chart"),
    ({"type": "hostPath", "hostPath": {"path": "models"}}, "at '/modelCache/hostPath/path'", "should match pattern"),
    ({"type": "nfs"}, "at '/modelCache/type'", "Input should be 'none', 'persistentVolumeClaim' or 'hostPath'"),
], ids=["claim-without-a-name", "mount-over-shm", "relative-host-path", "unknown-type"])
def test_bad_model_cache_values_are_refused_by_the_chart_and_submit(chart, cache, helm_where, message):
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.render({"modelCache": cache}, name="toy")
    assert helm_where in str(caught.value)
    with pytest.raises(ConfigError, match="modelCache"):
        DeployOptions.from_values({"modelCache": cache})
    with pytest.raises(ConfigError) as caught_here:
        DeployOptions.from_values({"modelCache": cache})
    assert message in str(caught_here.value)


def test_hf_token_comes_from_its_secret_to_the_head_and_the_workers_and_never_into_the_config_map(chart):
    values = {"hfToken": {"secretName": "hf-token"}, "workerGroups": [GPU_GROUP],
              "job": {"benchmark": "toy", "solution": "calculator", "storage": "s3://b/r"}}
    out = render(chart, values)
    reference = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}
    rayjob = out["RayJob"]
    assert env_of(head_pod(rayjob))["HF_TOKEN"] == reference
    assert env_of(worker_pods(rayjob)["gpu"])["HF_TOKEN"] == reference
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]["containers"][0]
    assert "env" not in submitter
    assert "HF_TOKEN" not in out["ConfigMap"]["data"]["config.yaml"]
    assert "hf-token" not in out["ConfigMap"]["data"]["config.yaml"]


@pytest.mark.parametrize("env, where", [
    ({"name": "HF_TOKEN", "value": "hf_abcdef"}, "hfToken.secretName"),
    ({"name": "OPENAI_API_KEY", "value": "sk-abcdef"}, "a Secret in common.envFrom"),
    ({"name": "AWS_SECRET_ACCESS_KEY", "value": "abcdef"}, "a Secret in common.envFrom"),
], ids=["hf-token", "api-key", "aws-secret"])
def test_a_credential_in_clear_in_common_env_is_refused(chart, tmp_path, capsys, env, where):
    values = {"common": {"env": [env]}}
    with pytest.raises(helm_python.HelmValuesError, match="at '/common/env/0'"):
        chart.render(values, name="toy")
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rc = main(["submit", "--dry-run", "--values", str(path), *TOY])
    err = capsys.readouterr().err
    assert_one_line_error(rc, err, f"env[0] {env['name']!r} holds a credential, which would stand in clear in the "
                                   f"RayJob; give it from a Secret instead ({where}")
    assert env["value"] not in err


@pytest.mark.parametrize("env", [
    {"name": "MAX_TOKENS", "value": "512"},
    {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/var/run/secrets/gcp/key.json"},
    {"name": "SSL_KEY_FILE", "value": "/etc/tls/tls.key"},
    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
], ids=["not-a-credential", "credentials-file", "key-file", "from-a-secret"])
def test_neighbours_of_a_credential_in_common_env_pass(chart, env):
    rayjob = render(chart, {"common": {"env": [env]}})["RayJob"]
    assert env_of(head_pod(rayjob))[env["name"]] == env
    DeployOptions.from_values({"common": {"env": [env]}})


@pytest.mark.parametrize("values, name", [
    ({"hfToken": {"secretName": "hf"}, "common": {"env": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "other", "key": "t"}}}]}}, "HF_TOKEN"),
    ({"modelCache": {"type": "hostPath"}, "common": {"env": [{"name": "HF_HOME", "value": "/data"}]}}, "HF_HOME"),
], ids=["token-twice", "hf-home-twice"])
def test_a_variable_the_chart_sets_is_not_set_twice(chart, values, name):
    with pytest.raises(helm_python.HelmValuesError, match="at '/common/env/0/name'"):
        chart.render(values, name="toy")
    with pytest.raises(ConfigError, match=f"common.env sets {name}, which"):
        DeployOptions.from_values(values)


@pytest.mark.parametrize("arg", ["--hf-token=hf_secret123", "--api-key"])
def test_an_engine_flag_carrying_a_credential_never_reaches_the_config_map(chart, capsys, arg):
    """vLLM takes --hf-token: given as an engine argument it would stand in the ConfigMap in clear."""
    serve = [{"model": "vllm:Qwen/Qwen2.5-7B-Instruct", "engine_args": [arg, "hf_secret123"]}]
    job = {"benchmark": "hotpotqa", "solution": "chat", "model": "vllm:Qwen/Qwen2.5-7B-Instruct", "serve": serve,
           "storage": "s3://b/r", "worker": {"num_gpus": 1}}
    flag = arg.partition("=")[0]
    with pytest.raises(ConfigError, match=f"serve\\[0\\].engine_args {flag} passes a credential") as caught:
        build_configmap(RunConfig.model_validate(job), "toy")
    assert "hf_secret123" not in str(caught.value)
    with pytest.raises(helm_python.HelmValuesError, match="at '/job/serve/0/engine_args/0'"):
        chart.render({"job": job}, name="toy")
    rc = main(["submit", "--dry-run", *SERVED, "--num-gpus", "1", "--worker-gpu", "1", f"--engine-arg={arg}"])
    err = capsys.readouterr().err
    assert_one_line_error(rc, err, f"engine_args {flag} passes a credential", "--hf-token-secret")
    assert "hf_secret123" not in err


def test_engine_flags_that_are_no_credential_pass():
    job = {"benchmark": "hotpotqa", "solution": "chat", "model": "vllm:m", "storage": "s3://b/r",
           "serve": [{"engine_args": ["--tokenizer", "t", "--max-num-batched-tokens=8192", "--max-model-len", "8192"]}]}
    assert "--max-num-batched-tokens=8192" in build_configmap(RunConfig.model_validate(job), "t")["data"]["config.yaml"]


def test_submit_flags_build_what_the_chart_renders_from_the_same_values(chart, capsys, rayjob_schema):
    """Every new submit flag, and the chart given the values they stand for: the same RayJob and claim."""
    argv = ["submit", "--dry-run", "--name", "qwen-runner", *SERVED, "--num-gpus", "1", "--num-cpus", "4",
            "--engine-arg=--max-model-len=8192", "--worker-replicas", "4", "--worker-cpu", "8",
            "--worker-memory", "64Gi", "--worker-gpu", "1", "--worker-shared-memory", "16Gi",
            "--worker-node-selector", "nvidia.com/gpu.present=true", "--worker-toleration", "dedicated=gpu:NoSchedule",
            "--worker-image", "registry.example.com/runner:0.1.0-ray2.60.0-vllm0.33.0",
            "--image", "registry.example.com/runner:0.1.0-ray2.60.0-vllm0.33.0",
            "--model-cache-new-claim", "200Gi", "--hf-token-secret", "hf-token:token"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert [doc["kind"] for doc in yaml.safe_load_all(out)] == ["PersistentVolumeClaim", "ConfigMap", "RayJob"]
    printed = documents(out)
    image = {"repository": "registry.example.com/runner", "tag": "0.1.0-ray2.60.0-vllm0.33.0"}
    values = {
        "image": image,
        "job": yaml.safe_load(printed["ConfigMap"]["data"]["config.yaml"]),
        "workerGroups": [{"name": "gpu", "replicas": 4, "cpu": "8", "memory": "64Gi", "gpu": 1,
                          "sharedMemory": "16Gi", "nodeSelector": {"nvidia.com/gpu.present": "true"},
                          "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                           "effect": "NoSchedule"}], "image": image}],
        "modelCache": {"type": "persistentVolumeClaim", "persistentVolumeClaim": {"create": True, "size": "200Gi"}},
        "hfToken": {"secretName": "hf-token", "key": "token"},
    }
    for key in ("executor", "take_over"):
        values["job"].pop(key)
    helm = render(chart, values, name="qwen")
    for kind in ("RayJob", "PersistentVolumeClaim"):
        assert {**printed[kind], "metadata": {}} == {**helm[kind], "metadata": {}}
        assert printed[kind]["metadata"]["name"] == helm[kind]["metadata"]["name"]
    assert rayjob_schema.errors(printed["RayJob"]) == []
    pod = worker_pods(printed["RayJob"])["gpu"]
    assert [t["key"] for t in pod["tolerations"]] == ["dedicated", "nvidia.com/gpu"]
    assert env_of(pod)["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}


@pytest.mark.parametrize("flags, fragments", [
    (["--worker-toleration", "dedicated=gpu:Sometimes"], ["--worker-toleration 'dedicated=gpu:Sometimes' must be "
                                                          "KEY[=VALUE][:EFFECT]"]),
    (["--worker-node-selector", "gpu"], ["--worker-node-selector 'gpu' must be KEY=VALUE"]),
    (["--worker-image", "runner"], ["--worker-image 'runner' must be REPOSITORY:TAG"]),
    (["--worker-shared-memory", "lots"], ["field 'workerGroups.0.sharedMemory': 'lots' is not a Kubernetes quantity"]),
    (["--model-cache-host-path", "models"], ["field 'modelCache.hostPath.path'"]),
    (["--model-cache-new-claim", "big"], ["field 'modelCache.persistentVolumeClaim.size'"]),
    (["--hf-token-secret", ":HF_TOKEN"], ["--hf-token-secret names no Secret"]),
    (["--model-cache-claim", "weights", "--model-cache-host-path", "/models"],
     ["--model-cache-claim and --model-cache-host-path exclude each other; give one model cache"]),
    (["--credentials-secret", "s", "--no-credentials"], ["--credentials-secret and --no-credentials exclude each other"]),
], ids=["bad-effect", "selector-without-value", "image-without-tag", "bad-shm", "relative-host-path", "bad-size",
        "token-without-secret", "two-model-caches", "secret-and-no-credentials"])
def test_bad_new_submit_flags_are_one_line(capsys, flags, fragments):
    rc = main(["submit", "--dry-run", *TOY, *flags])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(rc, captured.err, *fragments)


def test_the_vllm_example_values_are_a_valid_served_run(chart, rayjob_schema, capsys):
    """helm/runner/ci/vllm-values.yaml: every pod on the vLLM image, a vLLM replica per GPU worker, a created claim,
    HF_TOKEN from its Secret; submit --values builds the same."""
    out = render(chart, VLLM_VALUES, name="qwen")
    rayjob = out["RayJob"]
    assert rayjob_schema.errors(rayjob) == []
    check_rayjob(rayjob)
    config = RunConfig.model_validate(yaml.safe_load(out["ConfigMap"]["data"]["config.yaml"]))
    assert [entry.model for entry in config.serve] == ["vllm:Qwen/Qwen2.5-7B-Instruct"]
    images = {c["image"] for c in [head_pod(rayjob)["containers"][0], worker_pods(rayjob)["gpu"]["containers"][0],
                                   rayjob["spec"]["submitterPodTemplate"]["spec"]["containers"][0]]}
    assert images == {"ghcr.io/example/runner:0.1.0-ray2.60.0-vllm0.33.0"}
    assert main(["submit", "--dry-run", "--name", "qwen-runner", "--values", str(CHART / "ci" / "vllm-values.yaml")
                 ]) == 0, capsys.readouterr().err
    printed = documents(capsys.readouterr().out)
    assert {**printed["RayJob"], "metadata": {}} == {**rayjob, "metadata": {}}


def test_the_schema_and_the_models_agree_on_the_new_values():
    schema = jsonschema.Draft7Validator(json.loads((CHART / "values.schema.json").read_text()))
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    cases = [
        ({"modelCache": {"type": "hostPath"}}, True),
        ({"modelCache": {"type": "persistentVolumeClaim", "persistentVolumeClaim": {"claimName": "m"}}}, True),
        ({"modelCache": {"type": "persistentVolumeClaim"}}, False),
        ({"modelCache": {"mountPath": "/models/"}}, False),
        ({"modelCache": {"persistentVolumeClaim": {"accessMode": "ReadOnlyMany"}}}, False),
        ({"hfToken": {"secretName": "Bad_Name"}}, False),
        ({"workerGroups": [{**GPU_GROUP, "sharedMemory": "16Gi"}]}, True),
        ({"workerGroups": [{**GPU_GROUP, "sharedMemory": "-1"}]}, False),
    ]
    for change, valid in cases:
        values = copy.deepcopy(defaults)
        for key, value in change.items():
            values[key] = _deep_merge(values[key], value) if isinstance(value, dict) else value
        try:
            DeployOptions.from_values(values)
            models_say = True
        except ConfigError:
            models_say = False
        assert (schema.is_valid(values), models_say) == (valid, valid), change


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_submit_creates_the_claim_before_the_rayjob_and_deletes_it_with_the_rayjob(kube, capsys):
    kube.add_secret("runner-storage")
    kube.add_secret("hf-token")
    args = ["submit", "--name", "qwen", *SERVED, "--num-gpus", "1", "--worker-gpu", "1",
            "--model-cache-new-claim", "200Gi", "--hf-token-secret", "hf-token"]
    assert main(args) == 0, capsys.readouterr().err
    created = [r.path.rsplit("/", 1)[-1] for r in kube.requests if r.method == "POST"]
    assert created == ["configmaps", "persistentvolumeclaims", "rayjobs"]
    assert [r.path.rsplit("/", 1)[-1] for r in kube.requests if r.method == "GET" and "/secrets/" in r.path] == [
        "runner-storage", "hf-token"]
    claim = kube.get("persistentvolumeclaims", "evals", "qwen-models")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["ownerReferences"][0]["name"] == "qwen"
    assert main(["k8s", "delete", "qwen"]) == 0
    assert kube.get("persistentvolumeclaims", "evals", "qwen-models") is None


def test_submit_uses_a_claim_of_that_name_that_exists_as_it_is(kube, capsys):
    kube.add_secret("runner-storage")
    kube.objects[("persistentvolumeclaims", "evals", "qwen-models")] = {"metadata": {"name": "qwen-models"}}
    assert main(["submit", "--name", "qwen", *TOY, "--model-cache-new-claim", "200Gi"]) == 0, \
        capsys.readouterr().err
    assert "ownerReferences" not in kube.get("persistentvolumeclaims", "evals", "qwen-models")["metadata"]
    assert main(["k8s", "delete", "qwen"]) == 0
    assert kube.get("persistentvolumeclaims", "evals", "qwen-models") is not None


@pytest.mark.parametrize("flags, message", [
    (["--model-cache-claim", "shared-models"], "PersistentVolumeClaim shared-models not found in namespace evals"),
    (["--hf-token-secret", "hf-token"], "Secret hf-token not found in namespace evals"),
], ids=["missing-claim", "missing-token-secret"])
def test_submit_with_a_missing_claim_or_token_secret_sends_nothing(kube, capsys, flags, message):
    kube.add_secret("runner-storage")
    rc = main(["submit", "--name", "toy-eval", *TOY, *flags])
    assert_one_line_error(rc, capsys.readouterr().err, message)
    assert [r for r in kube.requests if r.method == "POST"] == []
