import pickle

import pytest

from runner import MetricBase, MetricResult, MetricType, SolutionOutput, Task
from runner.core.config import RunConfig, build_config, fingerprint
from runner.core.errors import ConfigError


class Always(MetricBase):
    def __init__(self, name: str = "always") -> None:
        super().__init__(name=name, metric_type=MetricType.NUMERICAL)

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        return MetricResult(name=self.name, result=1)


def test_task_ids_become_strings_and_must_be_non_empty():
    assert Task(id=7).id == "7"
    with pytest.raises(ValueError, match="non-empty id"):
        Task(id="")


def test_task_rejects_duplicate_metric_names():
    with pytest.raises(ValueError, match="unique"):
        Task(id="t", metrics=[Always(), Always()])


def test_category_metric_needs_categories():
    class Label(MetricBase):
        def __call__(self, solution):
            return "a"

    with pytest.raises(ValueError, match="list of categories"):
        Label(name="label", metric_type=MetricType.CATEGORY)
    assert Label(name="label", metric_type="category", categories=["a"]).metric_type is MetricType.CATEGORY


class Env:
    def __init__(self):
        self.state = []


class ReadsEnv(MetricBase):
    def __init__(self, env):
        super().__init__(name="env")
        self.env = env

    def __call__(self, solution):
        return len(self.env.state)


def test_fresh_copy_keeps_references_shared_between_metadata_and_metrics():
    env = Env()
    task = Task(id="t", metrics=[ReadsEnv(env)], metadata={"env": env})
    copy = task.fresh()
    copy.metadata["env"].state.append("changed")
    assert copy.metrics[0].env is copy.metadata["env"]
    assert env.state == []
    assert pickle.loads(pickle.dumps(task)).id == "t"


async def test_task_evaluate_runs_every_metric():
    task = Task(id="t", metrics=[Always("a"), Always("b")])
    results = await task.evaluate(SolutionOutput(output=1))
    assert [r.name for r in results] == ["a", "b"]


def test_config_rejects_unknown_field_naming_it():
    with pytest.raises(ConfigError, match="field 'repeat'"):
        build_config({"benchmark": "toy", "repeat": 2})
    with pytest.raises(ConfigError, match="field 'worker.num_gpus'"):
        build_config({"benchmark": "toy", "worker": {"num_gpus": -1}})


def test_config_memory_accepts_units():
    config = RunConfig(benchmark="toy", worker={"memory": "2GiB"})
    assert config.worker.memory == 2 * 1024**3


def test_fingerprint_ignores_execution_settings():
    a = RunConfig(benchmark="toy", solution="calculator", repeats=1, limit=5, storage="x")
    b = RunConfig(benchmark="toy", solution="calculator", repeats=3, timeout=2, storage="y", sequential=True)
    c = RunConfig(benchmark="toy", solution="reference")
    assert fingerprint(a.fingerprint_fields()) == fingerprint(b.fingerprint_fields())
    assert fingerprint(a.fingerprint_fields()) != fingerprint(c.fingerprint_fields())


def test_the_data_location_in_the_fingerprint_is_the_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    relative = RunConfig(benchmark="toy", solution="calculator", data_dir="./data/file.json")
    absolute = RunConfig(benchmark="toy", solution="calculator", data_dir=str(tmp_path / "data" / "file.json"))
    assert relative.fingerprint_fields() == absolute.fingerprint_fields()
    url = RunConfig(benchmark="toy", solution="calculator", data_dir="s3://bucket/data.json")
    assert url.fingerprint_fields()["data_dir"] == "s3://bucket/data.json"
