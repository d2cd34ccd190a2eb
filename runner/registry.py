"""Names -> benchmark, solution and executor classes: built-ins, installed entry points, or ``module:attribute``.

The tables hold import paths, as fsspec's ``registry.py`` holds its filesystems', so nothing is imported until a
name is used: naming the ``toy`` benchmark never imports ACEBench, and the registry imports no plug-in itself.
Packages add their own under the entry-point groups ``runner.benchmarks``, ``runner.solutions`` and
``runner.executors``; a third executor is one module and one line in :data:`EXECUTORS`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from runner.core import plugin, signature
from runner.core.benchmark import BenchmarkBase
from runner.core.errors import BenchmarkError, ConfigError, PluginError
from runner.core.solution import SolutionSpec

BENCHMARKS: dict[str, str] = {
    "acebench": "runner.benchmarks.acebench:ACEBenchmark",
    "bfcl": "runner.benchmarks.bfcl:BFCLBenchmark",
    "gaia": "runner.benchmarks.gaia:GAIABenchmark",
    "hotpotqa": "runner.benchmarks.hotpotqa:HotpotQABenchmark",
    "lm-eval": "runner.benchmarks.lmeval:LMEvalBenchmark",
    "toy": "runner.benchmarks.toy:ToyBenchmark",
}
"""Built-in benchmarks: name -> import path."""

SOLUTIONS: dict[str, str] = {
    "acebench": "runner.solutions.acebench:ACEBenchAgent",
    "bfcl": "runner.solutions.bfcl:BFCLAgent",
    "calculator": "runner.solutions.calculator:calculator",
    "chat": "runner.solutions.chat:chat",
    "gaia-agent": "runner.solutions.gaia:gaia_agent",
    "hotpotqa-agent": "runner.solutions.hotpotqa:hotpotqa_agent",
    "hotpotqa-reader": "runner.solutions.hotpotqa_reader:hotpotqa_reader",
    "lm-eval": "runner.solutions.lmeval:lm_eval_model",
    "reference": "runner.solutions.reference:reference",
}
"""Built-in solutions: name -> import path."""

EXECUTORS: dict[str, str] = {
    "ray": "runner.engine.ray.executor:RayExecutor",
    "sequential": "runner.engine.sequential:SequentialExecutor",
}
"""Executors (:class:`~runner.engine.run.Executor`): name -> import path. ``--sequential`` is the short form of
``executor: sequential``."""

MODEL_CHECK = "runner.models:preflight_models"
"""The model layer's pre-flight of a run's models (their servers answer with the OpenAI shape), by import path: the
engine checks the models before anything is written without importing the model layer (a plug-in)."""


def _entry_points(group: str) -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=group)}


def available_benchmarks() -> dict[str, str]:
    """Benchmark name -> import path, built-ins first."""
    return {**_entry_points("runner.benchmarks"), **BENCHMARKS}


def available_solutions() -> dict[str, str]:
    """Solution name -> import path, built-ins first."""
    return {**_entry_points("runner.solutions"), **SOLUTIONS}


def available_executors() -> dict[str, str]:
    """Executor name -> import path, built-ins first."""
    return {**_entry_points("runner.executors"), **EXECUTORS}


def plugin_summary(kind: str, target: Any) -> tuple[str, list[plugin.ArgumentRow] | None]:
    """What ``list`` and ``docs/settings.md`` say of one benchmark or solution (``kind``), from its declaration
    (:mod:`runner.core.plugin`): a line of what it needs from the run (a benchmark's agent for a bare ``--model``,
    its mock policy), and its arguments (``None`` for a solution that is a plain function, which takes none)."""
    declared = plugin.declaration(target)
    facts = [f"needs {', '.join(sorted(declared.needs))}" if declared.needs else "needs nothing from the run"]
    if declared.default_solution:
        facts.append(f"--model alone runs --solution {declared.default_solution}")
    if declared.mock_policy:
        facts.append(f"--model mock:{declared.mock_name} plays its agent")
    if kind == "solution" and not SolutionSpec(target=target).is_recipe:
        return "; ".join(facts), None
    return "; ".join(facts), list(plugin.argument_rows(target))


def plugin_lines(kind: str, name: str, path: str) -> list[str]:
    """``list``'s lines of one benchmark or solution (:func:`plugin_summary`): its facts, then one line per argument,
    ``-B name (type, default): help``; one line saying why when it does not import (an installed plug-in whose
    dependencies are missing)."""
    try:
        target = load_object(path, kind)
    except PluginError as exc:
        return [f"does not import: {exc}"]
    facts, rows = plugin_summary(kind, target)
    if rows is None:
        return [facts, "a plain function: takes no arguments"]
    flag = "-B" if kind == "benchmark" else "-S"
    return [facts, *(f"{flag} {row.name} ({row.type}, {'required' if row.default is None else f'default {row.default}'})"
                     + (f": {row.help}" if row.help else "") for row in rows)]


def executor_class(name: str) -> type:
    """The executor class registered as ``name`` (imported now: Ray only for ``ray``).

    Raises:
        ConfigError: an unknown name (the message lists the known ones).
    """
    known = available_executors()
    if name not in known:
        raise ConfigError(f"unknown executor {name!r}; use one of: {', '.join(sorted(known))} "
                          "(--sequential is short for --executor sequential)")
    target, _ = resolve(name, known, "executor")
    return target


def check_models(**models: str | None) -> None:
    """Check a run's models before anything is written (:data:`MODEL_CHECK`, imported now): ``model``,
    ``model_base_url``, ``user_model``, ``user_model_base_url``, ``judge_model``, ``judge_base_url`` (``None``:
    unset). Nothing is imported when no model is set.

    Raises:
        ConfigError: an unknown provider, a missing API key.
        RunnerError: a model server that refuses, rejects the key, lacks the model or speaks another protocol.
    """
    if any(models.get(name) for name in ("model", "user_model", "judge_model")):
        load_object(MODEL_CHECK, "model check")(**models)


def load_object(path: str, kind: str) -> Any:
    """Import ``module:attribute`` (``attribute`` may be dotted).

    Raises:
        PluginError: the path is malformed, the module does not import, or it has no such attribute.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise PluginError(f"{kind} {path!r}: expected a built-in name or 'module:attribute'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise PluginError(
            f"{kind} {path!r}: module {module_name!r} does not import ({type(exc).__name__}: {exc}); "
            "check the name and that it is on PYTHONPATH"
        ) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{kind} {path!r}: {module_name!r} has no attribute {attribute!r}") from None
    return obj


def resolve(name: str, registry: dict[str, str], kind: str) -> tuple[Any, str]:
    """The object named ``name`` (a registry name or import path) and its import path.

    Raises:
        PluginError: an unknown name (the message lists the known ones) or an import path that does not import.
    """
    if name in registry:
        return load_object(registry[name], kind), registry[name]
    if ":" not in name:
        known = ", ".join(sorted(registry)) or "none"
        raise PluginError(f"unknown {kind} {name!r}; use one of: {known}, or 'module:attribute'")
    return load_object(name, kind), name


RUN_MODEL_ARGS = ("model", "model_base_url")
"""The run's settings a benchmark gets when it declares it needs them (:mod:`runner.core.plugin`; a harness's
benchmark renders prompts with the model's own chat template and refuses tasks its engine cannot answer):
``--model`` and ``--model-base-url``."""


def build_benchmark(name: str, args: dict[str, Any] | None = None, data_dir: str | None = None,
                    run_models: dict[str, Any] | None = None, target: Any = None) -> BenchmarkBase:
    """Construct the benchmark ``name`` with ``args`` (and ``data_dir`` when given), and the run's model settings
    (``run_models``: :data:`RUN_MODEL_ARGS` -> value) that it declares it needs
    (:func:`runner.core.plugin.declaration`).

    ``target``: the class or factory ``name`` resolves to, when the caller has resolved it already (it is then not
    resolved again).

    Raises:
        PluginError: unknown name, bad import path, or not a :class:`BenchmarkBase`.
        BenchmarkError: arguments the benchmark does not accept, that do not validate against its arguments' model
            (:func:`runner.core.plugin.mistyped_arguments`), or that it rejects.
    """
    if target is None:
        target, _ = resolve(name, available_benchmarks(), "benchmark")
    if not callable(target):
        raise PluginError(f"benchmark {name!r} is a {type(target).__name__}, not a benchmark class or factory")
    kwargs = dict(args or {})
    if data_dir is not None:
        kwargs["data_dir"] = data_dir
    needs = plugin.declaration(target).needs
    for argument in RUN_MODEL_ARGS:
        if argument not in needs:
            continue
        if argument in kwargs:
            flag = "--" + argument.replace("_", "-")
            raise BenchmarkError(f"benchmark {name!r} takes the run's {flag}; pass {flag} rather than -B {argument}")
        value = (run_models or {}).get(argument)
        if value is not None:
            kwargs[argument] = value
    check_benchmark_arguments(name, target, kwargs)
    try:
        benchmark = target(**kwargs)
    except (TypeError, ValueError) as exc:
        raise BenchmarkError(f"benchmark {name!r} rejected its arguments: {exc}") from None
    if not isinstance(benchmark, BenchmarkBase):
        raise PluginError(f"benchmark {name!r} built a {type(benchmark).__name__}, not a BenchmarkBase")
    return benchmark


def check_benchmark_arguments(name: str, target: Any, kwargs: dict[str, Any]) -> None:
    """Refuse benchmark arguments (``-B``, ``--data-dir``) that the benchmark's arguments' model
    (:func:`runner.core.plugin.arguments_model`) has no field for or that do not validate against it.

    Raises:
        BenchmarkError: one line naming the argument and listing the ones it accepts, or the fix of the value.
    """
    unknown = plugin.unknown_arguments(target, kwargs)
    if unknown and plugin.arguments_model(target) is not None:
        accepted = signature.named_parameters(target)
        flag = "--data-dir" if unknown == ["data_dir"] else f"argument {', '.join(sorted(unknown))}"
        raise BenchmarkError(
            f"benchmark {name!r} does not accept {flag}; it accepts: {', '.join(accepted) or 'no arguments'}")
    for argument, problem in plugin.mistyped_arguments(target, kwargs).items():
        flag = "--data-dir" if argument == "data_dir" else f"-B {argument}=VALUE (or the config's benchmark_args)"
        raise BenchmarkError(f"benchmark {name!r}: argument {argument}={kwargs[argument]!r} {problem}; fix {flag}")


def solution_spec(
    name: str | None,
    args: dict[str, Any] | None = None,
    model: str | None = None,
    benchmark: BenchmarkBase | None = None,
    model_base_url: str | None = None,
    user_model: str | None = None,
    user_model_base_url: str | None = None,
    target: Any = None,
) -> SolutionSpec:
    """The recipe of the solution ``name`` with its arguments, unchecked (:meth:`SolutionSpec.check` is the
    caller's: :meth:`RunRequest.from_config <runner.engine.request.RunRequest.from_config>` checks it once).

    With no name but a ``model``, the benchmark's declared ``default_solution`` (a model-driven agent) is used.
    ``model``, ``model_base_url``, ``user_model`` and ``user_model_base_url`` are passed as the constructor
    arguments of those names. ``target``: what the name (or the default solution) resolves to, when the caller has
    resolved it already.

    Raises:
        ConfigError: no solution and no model, a model for a benchmark without a default agent, or a
            ``model_base_url``, ``user_model`` or ``user_model_base_url`` for a solution that does not take one.
        PluginError: unknown name or bad import path.
    """
    if name is None:
        default = plugin.declaration(benchmark).default_solution if benchmark is not None else None
        if model is None:
            raise ConfigError("no solution: pass --solution NAME (see 'python -m runner list') or --model")
        if default is None:
            raise ConfigError("this benchmark has no default agent for --model; pass --solution too")
        name = default
    if target is None:
        target, _ = resolve(name, available_solutions(), "solution")
    kwargs = dict(args or {})
    if model is not None:
        kwargs["model"] = model
    spec = SolutionSpec(target=target, kwargs=kwargs, name=name)
    optional = (("model_base_url", model_base_url, "a model server URL", "--model-base-url"),
                ("user_model", user_model, "a user model", "--user-model"),
                ("user_model_base_url", user_model_base_url, "a user model server URL", "--user-model-base-url"))
    for argument, value, what, flag in optional:
        if value is None:
            continue
        if not spec.accepts(argument):
            raise ConfigError(f"solution {name!r} does not take {what}; drop {flag}")
        spec.kwargs[argument] = value
    return spec
