"""Each run setting is declared once, on its field: the CLI's flags, the configuration file's keys and the
evaluators' keyword arguments are read from that declaration and agree."""

from __future__ import annotations

import argparse

import pytest
import yaml
from pydantic import BaseModel

from runner import GeneralEvaluator, RayEvaluator
from runner.benchmarks.toy import ToyBenchmark
from runner.cli import build_parser
from runner.cli.args import add_run_arguments, config_from_args, declared_settings
from runner.core.config import RENAMED, RunConfig, RunSettings, ServeSpec, WorkerSpec, build_config
from runner.core.errors import ConfigError
from runner.core.flags import Flag, Nested, NoFlag, declaration

SAMPLES: dict[str, tuple[list[str], object]] = {
    # setting -> (its flag's words after the flag, the value the field then holds)
    "benchmark": (["toy"], "toy"),
    "benchmark_args": (["size=3", "-B", "name=x"], {"size": 3, "name": "x"}),
    "data_dir": (["/data/x"], "/data/x"),
    "solution": (["chat"], "chat"),
    "solution_args": (["k=true"], {"k": True}),
    "model": (["openai:gpt-4o"], "openai:gpt-4o"),
    "model_base_url": (["http://m:8000/v1"], "http://m:8000/v1"),
    "user_model": (["openai:gpt-4o-mini"], "openai:gpt-4o-mini"),
    "user_model_base_url": (["http://u:8000/v1"], "http://u:8000/v1"),
    "judge_model": (["openai:gpt-4.1"], "openai:gpt-4.1"),
    "judge_base_url": (["http://j:8000/v1"], "http://j:8000/v1"),
    "storage": (["s3://bucket/run"], "s3://bucket/run"),
    "storage_options": (['{"anon": true}'], {"anon": True}),
    "repeats": (["3"], 3),
    "limit": (["7"], 7),
    "timeout": (["12.5"], 12.5),
    "metric_timeout": (["4"], 4.0),
    "solution_retries": (["2"], 2),
    "force": ([], True),
    "rerun_failed": ([], True),
    "executor": (["sequential"], "sequential"),
    "ray_address": (["ray://head:10001"], "ray://head:10001"),
    "worker.num_workers": (["4"], 4),
    "worker.num_cpus": (["0.5"], 0.5),
    "worker.num_gpus": (["0.25"], 0.25),
    "worker.memory": (["8GiB"], 8 * 2**30),
    "worker.memory_limit": (["512MiB"], 512 * 2**20),
    "worker.resources": (['{"TPU": 1}'], {"TPU": 1.0}),
    "worker.accelerator_type": (["A100"], "A100"),
    "worker.max_concurrency": (["8"], 8),
    "worker.max_attempts": (["5"], 5),
    "worker.placement_timeout": (["0"], None),
    "log_format": (["json"], "json"),
    "progress": (["off"], "off"),
    "max_rpm": (["600"], 600.0),
    "max_tpm": (["1e6"], 1e6),
    "max_connections": (["16"], 16),
    "max_tokens": (["100000"], 100000),
    "max_cost": (["2.5"], 2.5),
    "prices": (["openai:gpt-4o=2.5,10"], {"openai:gpt-4o": {"input": 2.5, "output": 10.0}}),
    "cache": (["s3://bucket/cache"], "s3://bucket/cache"),
    "cache_policy": (["always"], "always"),
    "storage_outage": (["30"], 30.0),
    "lease_ttl": (["20"], 20.0),
    "take_over": ([], True),
    "allow_overwriting_store": ([], True),
    "shards": (["on"], "on"),
    "serve.model": (["vllm:Qwen/Qwen2.5-7B-Instruct"], "vllm:Qwen/Qwen2.5-7B-Instruct"),
    "serve.engine_args": (["--max-model-len 8192"], ["--max-model-len", "8192"]),
    "model_startup_timeout": (["600"], 600.0),
    "replica_restarts": (["1"], 1),
}


def _fields(model: type[BaseModel], prefix: str = ""):
    for name, info in model.model_fields.items():
        yield prefix + name, model, info


@pytest.mark.parametrize("model", [RunConfig, WorkerSpec, ServeSpec], ids=lambda m: m.__name__)
def test_every_field_declares_its_flag_or_why_it_has_none(model):
    undeclared = [name for name, _, info in _fields(model) if declaration(info.metadata) is None]
    assert undeclared == []
    for name, _, info in _fields(model):
        mark = declaration(info.metadata)
        if isinstance(mark, NoFlag):
            assert mark.reason.strip(), name
        if isinstance(mark, Flag):
            assert mark.help.strip() and mark.group in ("what", "where", "how", "serving", "traffic"), name


def test_every_flagged_setting_has_a_sample_here_and_nothing_else_does():
    assert sorted(setting.name for setting in declared_settings()) == sorted(SAMPLES)


def test_every_setting_is_a_field_or_nested_in_one():
    flagged = {setting.name for setting in declared_settings()}
    nested = {name for name, _, info in _fields(RunConfig) if isinstance(declaration(info.metadata), Nested)}
    assert nested == {"worker", "serve"}
    expected = {name for name, _, info in _fields(RunConfig) if isinstance(declaration(info.metadata), Flag)}
    expected |= {f"worker.{name}" for name in WorkerSpec.model_fields} | {f"serve.{n}" for n in ServeSpec.model_fields}
    assert flagged == expected


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_the_parser_has_the_declared_flags_and_no_other():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    declared = set()
    for setting in declared_settings():
        declared.add(setting.option)
        declared |= {setting.flag.short} - {None}
        declared |= {alias.spelling for alias in setting.flag.aliases}
    former = {"--" + old.replace("_", "-") for old in RENAMED}
    assert _options(parser) == declared | former | {"--config", "-h", "--help"}


@pytest.mark.parametrize("command", ["run", "submit"])
def test_run_and_submit_take_every_declared_flag(command):
    chosen = build_parser()._subparsers._group_actions[0].choices[command]
    assert {setting.option for setting in declared_settings()} <= _options(chosen)


def _config(*words: str, base: dict | None = None) -> RunConfig:
    return config_from_args(build_parser().parse_args(["run", *words]), base=base)


def _value(config: RunConfig, name: str):
    if name.startswith("serve."):
        return getattr(config.serve[0], name.split(".")[1])
    value = config
    for key in name.split("."):
        value = getattr(value, key)
    return value.model_dump() if isinstance(value, BaseModel) else value


@pytest.mark.parametrize("setting", declared_settings(), ids=lambda setting: setting.name)
def test_each_flag_sets_its_declared_field(setting):
    words, expected = SAMPLES[setting.name]
    extra = ["--serve", "vllm:m/x"] if setting.name == "serve.engine_args" else []
    config = _config(*([] if setting.name == "benchmark" else ["-b", "toy"]), *extra, setting.option, *words)
    value = _value(config, setting.name)
    if isinstance(expected, dict) and setting.name == "prices":
        value = {model: price.model_dump() for model, price in value.items()}
    assert value == expected


def test_a_limit_for_one_model_goes_to_its_model_limits():
    config = _config("-b", "toy", "--max-rpm", "openai:gpt-4o=60", "--max-rpm", "100", "--max-connections",
                     "openai:gpt-4o=2")
    assert config.max_rpm == 100
    limits = config.model_limits["openai:gpt-4o"]
    assert (limits.max_rpm, limits.max_connections) == (60, 2)


def test_a_bad_value_names_the_flag_that_set_it():
    with pytest.raises(ConfigError, match=r"^--concurrency: Input should be greater than or equal to 1"):
        _config("-b", "toy", "--concurrency", "0")
    with pytest.raises(ConfigError, match=r"^--max-rpm: "):
        _config("-b", "toy", "--max-rpm", "openai:gpt-4o=-1")


def test_flags_merge_into_the_files_mappings_without_changing_the_file():
    base = {"benchmark": "toy", "benchmark_args": {"size": 2, "name": "a"}, "worker": {"num_cpus": 2}}
    config = _config("-B", "name=b", "--workers", "3", base=base)
    assert config.benchmark_args == {"size": 2, "name": "b"}
    assert (config.worker.num_cpus, config.worker.num_workers) == (2, 3)
    assert base == {"benchmark": "toy", "benchmark_args": {"size": 2, "name": "a"}, "worker": {"num_cpus": 2}}


@pytest.mark.parametrize("old, new", sorted(RENAMED.items()))
def test_a_former_name_still_works_as_flag_file_key_and_keyword(old, new, capsys):
    value = 2 if new == "solution_retries" else True
    words = [] if value is True else [str(value)]
    flag_config = _config("-b", "toy", "--" + old.replace("_", "-"), *words)
    assert getattr(flag_config, new) == value
    assert f"--{old.replace('_', '-')} is deprecated; use --{new.replace('_', '-')}" in capsys.readouterr().err
    with pytest.warns(FutureWarning, match=f"'{old}' is deprecated; use '{new}'"):
        assert getattr(build_config({"benchmark": "toy", old: value}), new) == value
    with pytest.warns(FutureWarning, match=f"{old}= is deprecated; use {new}="):
        evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), **{old: value})
    assert getattr(evaluator.settings, new) == value


RUN_WORDS = ["--limit", "5", "--timeout", "30", "--solution-retries", "1", "--max-rpm", "120", "--max-rpm",
             "openai:gpt-4o=30", "--max-tokens", "5000", "--cache", "memory://cache", "--cache-policy", "always",
             "--lease-ttl", "20", "--shards", "off", "--model-startup-timeout", "60", "--replica-restarts", "1",
             "--workers", "2", "--num-cpus", "0.5", "--memory", "1GiB", "--concurrency", "4",
             "--max-attempts", "2", "--placement-timeout", "0", "--ray-address", "ray://head:10001",
             "--serve", "vllm:org/model", "--engine-arg", "--max-model-len 4096"]
RUN_FILE = {"limit": 5, "timeout": 30, "solution_retries": 1, "max_rpm": 120,
            "model_limits": {"openai:gpt-4o": {"max_rpm": 30}}, "max_tokens": 5000, "cache": "memory://cache",
            "cache_policy": "always", "lease_ttl": 20, "shards": "off", "model_startup_timeout": 60,
            "replica_restarts": 1, "ray_address": "ray://head:10001",
            "serve": [{"model": "vllm:org/model", "engine_args": ["--max-model-len", "4096"]}],
            "worker": {"num_workers": 2, "num_cpus": 0.5, "memory": "1GiB", "max_concurrency": 4, "max_attempts": 2,
                       "placement_timeout": None}}
RUN_KEYWORDS = {key: value for key, value in RUN_FILE.items() if key != "worker"}


def test_flags_a_file_and_evaluator_keywords_give_the_same_settings(tmp_path):
    from_flags = _config("-b", "toy", *RUN_WORDS).settings()
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "toy", **RUN_FILE}))
    from_file = _config("--config", str(path)).settings()
    evaluator = RayEvaluator(benchmark=ToyBenchmark(), n_workers=2, num_cpus=0.5, memory="1GiB", max_concurrency=4,
                             max_attempts=2, worker=WorkerSpec(placement_timeout=None), **RUN_KEYWORDS)
    assert from_flags == from_file == evaluator.settings
    assert isinstance(evaluator.settings, RunSettings)


def test_the_settings_page_is_written_from_the_declarations(tmp_path, monkeypatch, capsys):
    from runner.cli import settings_doc

    assert settings_doc.main(["--check"]) == 0
    page = settings_doc.page()
    for setting in declared_settings():
        assert f"| `{setting.option}`" in page and f"`{setting.name}`" in page
    stale = tmp_path / "settings.md"
    stale.write_text(page.replace("--max-rpm", "--max-rps"))
    monkeypatch.setattr(settings_doc, "PAGE", stale)
    assert settings_doc.main(["--check"]) == 1
    assert "is stale: run python -m runner.cli.settings_doc" in capsys.readouterr().out
