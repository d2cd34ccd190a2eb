"""No secret reaches a RayJob's configuration: the table of secret shapes of tests/storage/test_secrets.py, plus
URLs with a password in the run's URL fields, against the ConfigMap the builder makes, ``submit --dry-run`` and the
chart's values (Helm's engine). Each is refused in one line naming where the secret is, without showing it."""

from __future__ import annotations

import json
import re

import helm_python
import pytest
import yaml

from runner.cli import main
from runner.core.config import RunConfig
from runner.core.errors import ConfigError
from runner.kuberay.rayjob import build_configmap
from tests.kuberay.conftest import render
from tests.kuberay.test_cli import TOY, assert_one_line_error, documents
from tests.support.secret_shapes import NOT_SECRET, SHAPES

BASE = {"benchmark": "toy", "solution": "calculator", "storage": "s3://bucket/runs/toy"}
# (id, run config fields, the dotted path of the first secret, the secret strings).
CASES = [(name, {"storage_options": options}, f"storage_options.{where}", values)
         for name, options, where, values in SHAPES] + [
    ("storage-url-with-password", {"storage": "ftp://evals:url-pass-15@ftp.example.com/runs"}, "storage",
     ["url-pass-15"]),
    ("model-url-with-password", {"model_base_url": "http://evals:url-pass-16@vllm:8000/v1"}, "model_base_url",
     ["url-pass-16"]),
    ("judge-url-with-password", {"judge_base_url": "https://evals:url-pass-17@judge.example.com/v1"},
     "judge_base_url", ["url-pass-17"]),
]
IDS = [case[0] for case in CASES]


def pointer(path: str) -> str:
    """``storage_options.a[0].b`` -> ``/job/storage_options/a/0/b``, as Helm names a value."""
    return "/job/" + re.sub(r"\[(\d+)\]", r".\1", path).replace(".", "/")


@pytest.mark.parametrize("fields, where, values", [case[1:] for case in CASES], ids=IDS)
def test_the_config_map_refuses_every_secret(fields, where, values):
    with pytest.raises(ConfigError) as caught:
        build_configmap(RunConfig.model_validate({**BASE, **fields}), "toy")
    message = str(caught.value)
    assert message.startswith(f"{where} ") and "would be stored in a ConfigMap" in message
    assert "storage.credentials.secretRef" in message
    assert not [value for value in values if value in message]


@pytest.mark.parametrize("fields, where, values", [case[1:] for case in CASES], ids=IDS)
def test_submit_dry_run_refuses_every_secret_in_one_line(tmp_path, capsys, fields, where, values):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"job": {**BASE, **fields}}, sort_keys=False))
    rc = main(["submit", "--dry-run", "--values", str(path)])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(rc, captured.err, f"{where} ", "would be stored in a ConfigMap")
    assert not [value for value in values if value in captured.err]


def test_submit_refuses_secret_storage_options_given_as_a_flag(capsys):
    _, options, where, values = SHAPES[1]
    rc = main(["submit", "--dry-run", *TOY, "--storage-options", json.dumps(options)])
    err = capsys.readouterr().err
    assert_one_line_error(rc, err, f"storage_options.{where} looks like a credential")
    assert values[0] not in err


@pytest.mark.parametrize("fields, where, values", [case[1:] for case in CASES], ids=IDS)
def test_the_chart_refuses_every_secret_in_its_values(chart, fields, where, values):
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.render({"job": {**BASE, **fields}}, name="toy")
    message = str(caught.value)
    assert f"at '{pointer(where)}'" in message
    assert not [value for value in values if value in message]


def test_options_that_are_not_secrets_reach_the_config_map_in_the_chart_and_in_submit(chart, capsys):
    job = {**BASE, "solution": "chat", "model": "vllm:m", "storage_options": NOT_SECRET,
           "model_base_url": "http://vllm:8000/v1"}
    rendered = yaml.safe_load(render(chart, {"job": job})["ConfigMap"]["data"]["config.yaml"])
    built = yaml.safe_load(build_configmap(RunConfig.model_validate(job), "toy")["data"]["config.yaml"])
    assert rendered["storage_options"] == built["storage_options"] == NOT_SECRET
    assert main(["submit", "--dry-run", *TOY, "--storage-options", json.dumps(NOT_SECRET)]) == 0
    printed = documents(capsys.readouterr().out)["ConfigMap"]["data"]["config.yaml"]
    assert yaml.safe_load(printed)["storage_options"] == NOT_SECRET
