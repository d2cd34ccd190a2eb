"""Plug-in declarations (runner.core.plugin): what a benchmark or solution needs from the run and what it takes, read
by the registry, the request builder, ``list`` and the docs from one place."""

from __future__ import annotations

from typing import Any

import pytest

from runner import registry
from runner.core import plugin, served, signature
from runner.core.benchmark import BenchmarkBase
from runner.core.errors import BenchmarkError, ConfigError, RunnerError
from runner.core.plugin import declare, declaration
from runner.core.solution import SolutionSpec
from runner.core.task import Task
from runner.models import resolve_mock_policy

BUILT_INS = [("benchmark", name, path) for name, path in registry.BENCHMARKS.items()] + \
    [("solution", name, path) for name, path in registry.SOLUTIONS.items()]


@pytest.mark.parametrize(("kind", "name", "path"), BUILT_INS, ids=[f"{k}:{n}" for k, n, _ in BUILT_INS])
def test_every_built_in_declares_its_registry_name_and_the_needs_its_constructor_names(kind: str, name: str,
                                                                                        path: str) -> None:
    """A built-in's declared needs are the ones its parameters name: what the registry hands it is exactly what it
    takes, and a declaration cannot drift from the signature unnoticed."""
    target = registry.load_object(path, kind)
    declared = declaration(target)
    assert declared.declared and declared.name == name
    assert declared.needs == {need for need, arguments in plugin.NEED_ARGUMENTS.items()
                              if signature.names_parameter(target, arguments[0])}


@pytest.mark.parametrize("name", sorted(registry.BENCHMARKS))
def test_a_benchmarks_default_solution_is_a_registered_solution(name: str) -> None:
    default = declaration(registry.load_object(registry.BENCHMARKS[name], "benchmark")).default_solution
    assert default is None or default in registry.SOLUTIONS


class _Plain(BenchmarkBase):
    """A user's benchmark that declares nothing (AgentScope's shape)."""

    def __init__(self, judge_model: str | None = None, data_dir: str | None = None, rounds: int = 1) -> None:
        super().__init__(name="plain")
        self.judge_model, self.data_dir, self.rounds = judge_model, data_dir, rounds

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield Task(id="t", input="x")


def test_code_that_declares_nothing_gets_the_needs_its_parameters_name() -> None:
    declared = declaration(_Plain)
    assert not declared.declared
    assert declared.needs == {"judge", "data_dir"}
    assert declaration(_Plain()) == declared  # an instance reads its class


def test_arguments_are_checked_against_the_model_before_construction() -> None:
    with pytest.raises(BenchmarkError) as raised:
        registry.build_benchmark("toy", {"n_task": 3})
    assert str(raised.value) == "benchmark 'toy' does not accept argument n_task; it accepts: n_tasks, seed"
    with pytest.raises(BenchmarkError, match=r"argument n_tasks='many' is not a valid int .*fix -B n_tasks=VALUE"):
        registry.build_benchmark("toy", {"n_tasks": "many"})


def test_the_run_model_goes_only_to_a_benchmark_that_declares_it_needs_it() -> None:
    seen: dict[str, Any] = {}

    @declare("greedy")
    class Greedy(_Plain):
        def __init__(self, model: str | None = None) -> None:
            super().__init__()
            seen["model"] = model

    registry.build_benchmark("greedy", {}, run_models={"model": "mock"}, target=Greedy)
    assert seen == {"model": None}  # it names model, but declared no need of it

    @declare("lm-like", needs={"model"})
    class Needy(Greedy):
        pass

    registry.build_benchmark("lm-like", {}, run_models={"model": "mock"}, target=Needy)
    assert seen == {"model": "mock"}


def test_a_solution_gets_the_benchmark_only_when_it_needs_it() -> None:
    got: list[Any] = []

    @declare("wants", needs={"benchmark"})
    def wants(benchmark: Any) -> Any:
        got.append(benchmark)
        return lambda task: None

    bench = _Plain()
    SolutionSpec(target=_factory(wants)).build(bench)
    assert got == [bench]

    def ignores(**kwargs: Any) -> Any:
        got.append(kwargs)
        return lambda task: None

    SolutionSpec(target=_factory(ignores)).build(bench)
    assert got[-1] == {}


def _factory(fn: Any) -> Any:
    from runner.core.solution import solution_factory

    return solution_factory(fn)


def test_a_solution_argument_of_the_wrong_type_is_one_line_naming_the_flag() -> None:
    spec = registry.solution_spec("chat", {"temperature": "hot"}, model="mock")
    with pytest.raises(ConfigError) as raised:
        spec.check()
    assert str(raised.value).startswith("solution 'chat': argument temperature='hot' is not a valid float")
    assert str(raised.value).endswith("fix -S temperature=VALUE (or the config's solution_args)")


def test_declared_mock_policies_are_found_by_name_and_unknown_ones_listed() -> None:
    registry.load_object(registry.BENCHMARKS["hotpotqa"], "benchmark")
    registry.load_object(registry.SOLUTIONS["gaia-agent"], "solution")
    assert plugin.MOCK_POLICIES["hotpotqa"] == "runner.benchmarks.hotpotqa.mock:policy"
    assert plugin.MOCK_POLICIES["gaia"] == "runner.solutions.gaia.mock:policy"
    from runner.benchmarks.hotpotqa.mock import policy

    assert resolve_mock_policy("hotpotqa") is policy
    with pytest.raises(ConfigError, match=r"unknown mock policy 'nope'; use mock:<one of .*default, echo, gaia, "):
        resolve_mock_policy("nope")


def test_the_docstring_args_become_each_arguments_help() -> None:
    rows = {row.name: row for row in plugin.argument_rows(registry.load_object(registry.BENCHMARKS["toy"],
                                                                                "benchmark"))}
    assert set(rows) == {"n_tasks", "seed"}
    assert rows["n_tasks"].type == "int" and rows["n_tasks"].default == "100"
    assert rows["seed"].help == "the generator's seed."
    assert plugin.argument_help("""Summary.

    Args:
        a, b: both
            continued.
        c (int): third.

    Raises:
        X: not an argument.
    """) == {"a": "both continued.", "b": "both continued.", "c": "third."}


def test_list_prints_each_plug_ins_needs_and_arguments(cli) -> None:
    out = cli("list").stdout
    assert "needs data_dir, judge; --model alone runs --solution hotpotqa-agent; --model mock:hotpotqa plays its " \
           "agent" in out
    assert "-B n_tasks (int, default 100): how many questions" in out
    assert "-S system_prompt (str | None, default None)" in out


def test_the_embedded_folder_is_published_through_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.serving  # noqa: F401 - publishes the locator on import

    monkeypatch.setattr(served, "_embedded_locator", [lambda: "/models/smollm2"])
    assert served.embedded_folder() == "/models/smollm2"
    monkeypatch.setattr(served, "_embedded_locator", [])
    with pytest.raises(RunnerError, match="published by runner.serving"):
        served.embedded_folder()


def test_a_need_that_does_not_exist_is_refused_at_declaration() -> None:
    with pytest.raises(ValueError, match="unknown need"):
        declare("x", needs={"gpu"})


def test_arguments_named_as_pydantic_keeps_its_own_names_are_still_checked() -> None:
    """A user's recipe may name an argument ``_private``, ``json`` or ``model_config``: each is a field (by alias),
    checked and listed under its own name."""

    def recipe(model: str, json: int = 1, _private: int = 2, model_config: int = 3) -> Any:
        return lambda task: None

    assert [row.name for row in plugin.argument_rows(recipe)] == ["json", "_private", "model_config"]
    assert plugin.unknown_arguments(recipe, ["json", "_private", "other"]) == ["other"]
    assert set(plugin.mistyped_arguments(recipe, {"_private": "two", "model_config": 3})) == {"_private"}


def test_an_unhashable_factory_gets_an_arguments_model_too() -> None:
    """A dataclass instance used as a benchmark factory (``-b module:obj``) cannot be a cache key: its arguments
    are still checked."""
    from dataclasses import dataclass

    @dataclass
    class Factory:
        size: int = 1

        def __call__(self, rounds: int = 1) -> _Plain:
            return _Plain(rounds=rounds)

    factory = Factory()
    assert plugin.unknown_arguments(factory, ["rounds", "other"]) == ["other"]
    assert set(plugin.mistyped_arguments(factory, {"rounds": "many"})) == {"rounds"}
