"""values.schema.json is generated from the models submit validates with (runner.kuberay.schema): the committed file
is what the models give, and the schema and the models accept and refuse the same values."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from runner.core.errors import ConfigError
from runner.kuberay import schema as values_schema
from runner.kuberay.deploy_options import DeployOptions
from tests.kuberay.conftest import CHART
from tests.kuberay.test_manifest import EVERYTHING

COMMITTED = CHART / "values.schema.json"


def test_the_committed_schema_is_what_the_models_give():
    generated = json.dumps(values_schema.values_schema(), indent=2) + "\n"
    assert COMMITTED.read_text() == generated, "values.schema.json is stale: run python -m runner.kuberay.schema"
    assert values_schema.main(["--check"]) == 0


def test_check_fails_on_a_stale_schema(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "values.schema.json"
    stale.write_text(COMMITTED.read_text().replace('"minimum": 0', '"minimum": 1', 1))
    monkeypatch.setattr(values_schema, "SCHEMA_PATH", stale)
    assert values_schema.main(["--check"]) == 1
    assert "is stale: run python -m runner.kuberay.schema" in capsys.readouterr().err
    assert values_schema.main([]) == 0 and values_schema.main(["--check"]) == 0


def test_the_schema_is_draft_7_and_takes_the_chart_defaults():
    schema = json.loads(COMMITTED.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)


# Chart values without job (the run config, validated by RunConfig in submit); each case is a whole values file as
# Helm validates it (the defaults merged in), and must be accepted by both the schema and DeployOptions, or by neither.
DEFAULTS = {key: value for key, value in yaml.safe_load((CHART / "values.yaml").read_text()).items() if key != "job"}


def merged(change):
    out = json.loads(json.dumps(DEFAULTS))
    for key, value in change.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


CASES = [
    ({}, True),
    ({key: value for key, value in EVERYTHING.items() if key != "job"}, True),
    ({"rayJob": {"ttlSecondsAfterFinished": -1}}, False),
    ({"rayJob": {"activeDeadlineSeconds": 0}}, False),
    ({"rayJob": {"activeDeadlineSeconds": None}}, True),
    ({"rayJob": {"backofLimit": 3}}, False),
    ({"head": {"cpu": "lots"}}, False),
    ({"head": {"cpu": -1}}, False),
    ({"head": {"cpu": 0.5, "memory": "1.5Gi"}}, True),
    ({"head": {"rayStartParams": {"labels": "a=b"}}}, False),
    ({"head": {"rayStartParams": {"num-cpus": 0}}}, False),
    ({"image": {"pullPolicy": "Sometimes"}}, False),
    ({"image": {"tag": ""}}, False),
    ({"imagePullSecrets": [{"name": ""}]}, False),
    ({"imagePullSecrets": [{"name": "registry"}]}, True),
    ({"rayVersion": "2.60"}, False),
    ({"auth": {"mode": "oauth"}}, False),
    ({"storage": {"credentials": {"source": "secret", "secretRef": ""}}}, False),
    ({"storage": {"credentials": {"source": "none", "secretRef": ""}}}, True),
    ({"workerGroups": [{"name": "GPU", "replicas": 1, "cpu": "1", "memory": "1Gi"}]}, False),
    ({"workerGroups": [{"name": "gpu", "replicas": 1, "cpu": "1", "memory": "1Gi", "minReplicas": -1}]}, False),
    ({"workerGroups": [{"name": "gpu", "replicas": 1, "cpu": "1"}]}, False),
    ({"workerGroups": [{"name": "gpu", "replicas": 1, "cpu": "1", "memory": "1Gi", "image": {"tag": "gpu"}}]}, True),
    ({"common": {"env": [{"name": "RAY_REDIS_ADDRESS", "value": "r:6379"}]}}, False),
    ({"common": {"env": [{"name": "RAY_enable_autoscaler_v2", "value": "1"}]}}, False),
    ({"common": {"env": [{"name": "RAY_enable_autoscaler_v2", "value": "0"}]}}, True),
    ({"common": {"env": [{"value": "nameless"}]}}, False),
    ({"serviceAccount": {"annotations": {"a": 1}}}, False),
]


@pytest.mark.parametrize("change, valid", CASES, ids=[json.dumps(change)[:60] for change, _ in CASES])
def test_the_schema_and_the_models_agree(change, valid):
    values = merged(change)
    schema_says = jsonschema.Draft7Validator(json.loads(COMMITTED.read_text())).is_valid({**values, "job": {
        "benchmark": "toy", "storage": "s3://bucket/runs/toy"}})
    try:
        DeployOptions.from_values(values)
        models_say = True
    except ConfigError:
        models_say = False
    assert (schema_says, models_say) == (valid, valid)
