"""KubeRay v1.7's RayJob rules (runner.kuberay.checks) against every chart value that can break one: ``submit
--dry-run`` refuses it in one line (exit 2), and the chart refuses it by its schema or a template guard, or renders
a RayJob that keeps the rule; what the schema refuses, the checker refuses on its own on the chart's render."""

from __future__ import annotations

import shutil

import helm_python
import pytest
import yaml

from runner.cli import main
from runner.core.errors import ConfigError
from runner.kuberay.checks import check_rayjob
from tests.kuberay.conftest import CHART, render
from tests.kuberay.test_cli import TOY, assert_one_line_error, documents

GROUP = {"name": "cpu", "replicas": 2, "cpu": "2", "memory": "4Gi"}


def group(**change):
    return {"workerGroups": [{**GROUP, **change}]}


# (id, values, a fragment of submit's one-line error, how the chart refuses it: "schema" or "template", and a
# fragment of the checker's message on a render without the schema, or of the template's message).
RULES = [
    ("ttl-negative", {"rayJob": {"ttlSecondsAfterFinished": -1}},
     "field 'rayJob.ttlSecondsAfterFinished': Input should be greater than or equal to 0",
     "schema", "rayJob.ttlSecondsAfterFinished is -1; it must be 0 or more (KubeRay v1.7 validation.go "
               "ValidateRayJobSpec)"),
    ("deadline-not-positive", {"rayJob": {"activeDeadlineSeconds": -5}},
     "field 'rayJob.activeDeadlineSeconds': Input should be greater than 0",
     "schema", "rayJob.activeDeadlineSeconds is -5; it must be a positive number of seconds"),
    ("backoff-negative", {"rayJob": {"backoffLimit": -1}},
     "field 'rayJob.backoffLimit': Input should be greater than or equal to 0",
     "schema", "rayJob.backoffLimit is -1; it must be 0 or more"),
    ("min-replicas-negative", group(minReplicas=-1),
     "field 'workerGroups.0.minReplicas': Input should be greater than or equal to 0",
     "schema", "workerGroups[0] (cpu): minReplicas is -1; it must be 0 or more"),
    ("min-over-max", group(minReplicas=3, maxReplicas=1),
     "workerGroups[0] (cpu): minReplicas 3 is greater than maxReplicas 1; lower minReplicas or raise maxReplicas",
     "template", "workerGroups[0] (cpu): minReplicas 3 is greater than maxReplicas 1"),
    ("replicas-over-max", group(replicas=5, minReplicas=1, maxReplicas=3),
     "workerGroups[0] (cpu): replicas 5 is outside minReplicas 1 .. maxReplicas 3",
     "template", "workerGroups[0] (cpu): replicas 5 is outside minReplicas 1 .. maxReplicas 3"),
    ("group-names-twice", {"workerGroups": [GROUP, GROUP]}, "workerGroups names must be unique",
     "template", "workerGroups[1] (cpu): name \"cpu\" is used twice"),
    ("group-name-not-dns-1123", group(name="GPU"), "field 'workerGroups.0.name': String should match pattern",
     "schema", "workerGroups[0] (GPU): name must be a DNS-1123 label"),
    ("labels-in-head-params", {"head": {"rayStartParams": {"num-cpus": "0", "labels": "zone=a"}}},
     "field 'head.rayStartParams': rayStartParams['labels'] is refused by KubeRay",
     "schema", "head.rayStartParams['labels'] is refused by KubeRay v1.7 (validation.go validateRayGroupLabels"),
    ("labels-in-worker-params", group(rayStartParams={"labels": "zone=a"}),
     "field 'workerGroups.0.rayStartParams': rayStartParams['labels'] is refused by KubeRay",
     "schema", "workerGroups[0] (cpu): rayStartParams['labels'] is refused by KubeRay v1.7"),
    ("redis-username-in-head-params", {"head": {"rayStartParams": {"redis-username": "ray"}}},
     "rayStartParams['redis-username'] is refused by KubeRay",
     "schema", "head.rayStartParams['redis-username'] is refused by KubeRay v1.7 (validation.go "
               "ValidateRayClusterSpec"),
    ("redis-address-env", {"common": {"env": [{"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}]}},
     "field 'common.env': env[0] 'RAY_REDIS_ADDRESS' is refused by KubeRay on the head",
     "schema", "common.env 'RAY_REDIS_ADDRESS' on the head is refused by KubeRay v1.7"),
    ("redis-username-env", {"common": {"env": [{"name": "REDIS_USERNAME", "value": "ray"}]}},
     "env[0] 'REDIS_USERNAME' is refused by KubeRay on the head",
     "schema", "common.env 'REDIS_USERNAME' on the head is refused"),
    ("autoscaler-v2-env", {"common": {"env": [{"name": "RAY_enable_autoscaler_v2", "value": "true"}]}},
     "env[0] 'RAY_enable_autoscaler_v2' is refused by KubeRay on the head (validation.go ValidateRayClusterSpec: "
     "autoscaler v2 needs enableInTreeAutoscaling)",
     "schema", "common.env 'RAY_enable_autoscaler_v2' on the head is refused"),
    ("token-auth-before-ray-2-52", {"rayVersion": "2.51.0"},
     "auth.mode 'token' needs rayVersion 2.52.0 or later, got '2.51.0'",
     "template", "auth.mode 'token' needs rayVersion 2.52.0 or later, got \"2.51.0\""),
    ("name-over-47", {"fullnameOverride": "r" * 48}, "is 48 characters; KubeRay allows at most 47",
     "template", "is 48 characters; KubeRay allows at most 47"),
    ("name-not-dns-1035", {"fullnameOverride": "toy-run-"}, "is not a DNS-1035 label",
     "template", "is not a DNS-1035 label"),
]
IDS = [row[0] for row in RULES]


@pytest.fixture(scope="module")
def chart_without_schema(tmp_path_factory):
    """The chart with its values.schema.json removed: what the checker finds on its own in what Helm renders."""
    copy = tmp_path_factory.mktemp("chart") / "runner"
    shutil.copytree(CHART, copy)
    (copy / "values.schema.json").unlink()
    with helm_python.Chart.load(copy) as loaded:
        yield loaded


def submit(tmp_path, values, *args):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return main(["submit", "--dry-run", "--values", str(path), *args, *TOY])


@pytest.mark.parametrize("values, message", [(row[1], row[2]) for row in RULES], ids=IDS)
def test_submit_refuses_each_rule_in_one_line(tmp_path, capsys, values, message):
    rc = submit(tmp_path, values)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(rc, captured.err, message)


@pytest.mark.parametrize("values, how, message", [row[1:2] + row[3:] for row in RULES], ids=IDS)
def test_the_chart_refuses_each_rule(chart, chart_without_schema, values, how, message):
    if how == "template":
        with pytest.raises(helm_python.HelmRenderError, match="execution error") as caught:
            chart.render(values, name="toy")
        assert message in str(caught.value)
        return
    with pytest.raises(helm_python.HelmValuesError, match="at '/"):
        chart.render(values, name="toy")
    rayjob = render(chart_without_schema, values)["RayJob"]
    with pytest.raises(ConfigError) as caught:
        check_rayjob(rayjob)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("life", [{"shutdownAfterJobFinishes": False},
                                  {"shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 600}],
                         ids=["default-ttl", "ttl-set"])
def test_no_shutdown_renders_no_ttl_in_the_chart_and_in_submit(chart, tmp_path, capsys, rayjob_schema, life):
    """KubeRay refuses a TTL without the shutdown it counts down to (validation.go validateDeletionConfiguration):
    the chart and submit leave the TTL out, so the default TTL no longer breaks the rule."""
    rendered = render(chart, {"rayJob": life}, name="toy-eval")["RayJob"]
    assert rendered["spec"]["shutdownAfterJobFinishes"] is False
    assert "ttlSecondsAfterFinished" not in rendered["spec"]
    check_rayjob(rendered)
    assert rayjob_schema.errors(rendered) == []
    assert submit(tmp_path, {"rayJob": life}, "--name", "toy-eval-runner") == 0
    printed = documents(capsys.readouterr().out)["RayJob"]
    for manifest in (printed, rendered):
        manifest["metadata"].pop("labels")
    assert printed == rendered


def test_the_checker_refuses_a_ttl_without_shutdown(chart):
    rayjob = render(chart, {"rayJob": {"shutdownAfterJobFinishes": False}})["RayJob"]
    rayjob["spec"]["ttlSecondsAfterFinished"] = 300
    with pytest.raises(ConfigError, match="rayJob.ttlSecondsAfterFinished is 300 while rayJob.shutdownAfterJobFinishes"
                                          r" is false.*validateDeletionConfiguration"):
        check_rayjob(rayjob)


@pytest.mark.parametrize("values", [
    {"common": {"env": [{"name": "RAY_enable_autoscaler_v2", "value": "0"}, {"name": "REDIS_PASSWORD", "valueFrom": {
        "secretKeyRef": {"name": "redis", "key": "password"}}}]}},
    {"head": {"rayStartParams": {"num-cpus": "0", "redis-password": "x"}}},
    group(minReplicas=0, maxReplicas=5, replicas=0),
    {"rayVersion": "2.52.0"},
    {"rayVersion": "2.40.0", "auth": {"mode": "disabled"}},
    {"rayJob": {"activeDeadlineSeconds": None, "backoffLimit": 0, "ttlSecondsAfterFinished": 0}},
], ids=["autoscaler-v2-off", "redis-password-without-gcs-ft", "autoscaling-bounds", "token-auth-at-2-52",
        "old-ray-without-token-auth", "no-deadline-no-retries"])
def test_neighbours_that_keep_the_rules_pass(chart, tmp_path, capsys, values):
    check_rayjob(render(chart, values)["RayJob"])
    assert submit(tmp_path, values) == 0, capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    ({"suspend": True, "shutdownAfterJobFinishes": False, "ttlSecondsAfterFinished": 0},
     "spec.suspend needs spec.shutdownAfterJobFinishes: true"),
    ({"clusterSelector": {"ray.io/cluster": "shared"}, "backoffLimit": 1},
     "rayJob.backoffLimit must be 0 with spec.clusterSelector"),
    ({"clusterSelector": {"team": "evals"}, "backoffLimit": 0}, "needs a cluster name under 'ray.io/cluster'"),
    ({"submissionMode": "SidecarMode"}, "spec.submitterPodTemplate is not supported in SidecarMode"),
    ({"submissionMode": "InteractiveMode"}, "rayJob.backoffLimit must be 0 in InteractiveMode"),
    ({"submissionMode": "BatchMode"}, "spec.submissionMode 'BatchMode' is not one of"),
    ({"deletionStrategy": {"deletionRules": [{"policy": "DeleteCluster",
                                              "condition": {"jobStatus": "SUCCEEDED"}}]}},
     "deletionRules needs shutdownAfterJobFinishes: false"),
    ({"deletionStrategy": {}}, "needs deletionRules, or both onSuccess and onFailure"),
    ({"preRunningDeadlineSeconds": 0}, "spec.preRunningDeadlineSeconds is 0"),
], ids=["suspend-without-shutdown", "selector-with-retries", "selector-without-cluster-name", "sidecar-submitter",
        "interactive-retries", "unknown-mode", "deletion-rules-with-shutdown", "empty-deletion-strategy",
        "pre-running-deadline"])
def test_rules_no_chart_value_reaches_are_still_checked(chart, change, message):
    """Fields the chart never sets (a RayJob edited by hand): the checker follows ValidateRayJobSpec for them too."""
    rayjob = render(chart)["RayJob"]
    rayjob["spec"].update(change)
    with pytest.raises(ConfigError, match="ValidateRayJobSpec|validateDeletionConfiguration") as caught:
        check_rayjob(rayjob)
    assert message in str(caught.value)
