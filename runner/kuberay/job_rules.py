"""What the chart's schema can refuse in the ``job`` block that a local run refuses by name, so that Helm refuses it
before a cluster starts (``submit`` makes the full checks itself: :mod:`runner.cli.k8s`).

- Model names (``model``, ``user_model``, ``judge_model``): a known provider and a model
  (:func:`runner.models.parse_model_name`'s rule), as :func:`model_name_pattern`.
- For each built-in benchmark and solution (:data:`runner.registry.BENCHMARKS`, :data:`runner.registry.SOLUTIONS`;
  a built-in name wins over an installed one): the argument names its declaration takes (``benchmark_args``,
  ``solution_args``; :mod:`runner.core.plugin`), and null for what it does not need (``data_dir``, the judge of a
  benchmark without judged metrics, a model for a solution that takes none), as :func:`builtin_rules`.

Unknown benchmark and solution names cannot be refused here: an image may install more under the entry-point
groups (:mod:`runner.registry`). Argument values are not checked either: a local run validates them in pydantic's
lax mode (``"8"`` is an int), which a schema would not match.
"""

from __future__ import annotations

from typing import Any

from runner import registry
from runner.core import plugin
from runner.core.solution import SolutionSpec
from runner.models import PROVIDERS
from runner.core.secrets import anycase

MODEL_FIELDS = ("model", "user_model", "judge_model")
"""The ``job`` fields that name a model (``provider:model``)."""

SOLUTION_MODEL_ARGS = ("model", "model_base_url", "user_model", "user_model_base_url")
"""The ``job`` fields passed to a solution as constructor arguments of the same name."""


def model_name_pattern() -> str:
    """A regular expression for the names :func:`runner.models.parse_model_name` accepts: ``provider:model`` or
    ``provider/model`` with a known provider (any case) and a model, or ``mock`` alone."""
    others = "|".join(anycase(name) for name in sorted(PROVIDERS) if name != "mock")
    return rf"^\s*({anycase('mock')}([:/].*)?|({others})[:/]\s*\S.*)$"


def _when(field: str, value: str, then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {field: {"const": value}}, "required": [field]}, "then": {"properties": then}}


def _argument_names(target: Any) -> dict[str, Any] | None:
    """``{"propertyNames": {"enum": [...]}}`` of the fields of ``target``'s arguments' model
    (:func:`runner.core.plugin.arguments_model`), or ``None`` when it takes any (``**kwargs``) or its signature
    cannot be read."""
    model = plugin.arguments_model(target)
    if model is None or model.model_config.get("extra") == "allow":
        return None
    names = list(plugin.argument_fields(model))
    return {"propertyNames": {"enum": names}} if names else {"maxProperties": 0}


def builtin_rules() -> list[dict[str, Any]]:
    """``if``/``then`` rules (JSON Schema draft-07), one per built-in benchmark and solution; see the module
    docstring."""
    null = {"type": "null"}
    rules = []
    for name, path in sorted(registry.BENCHMARKS.items()):
        target = registry.load_object(path, "benchmark")
        then: dict[str, Any] = {}
        if (arguments := _argument_names(target)) is not None:
            then["benchmark_args"] = arguments
        needs = plugin.declaration(target).needs
        if "data_dir" not in needs and _argument_names(target) is not None:
            then["data_dir"] = null
        if "judge" not in needs:
            then.update(judge_model=null, judge_base_url=null)
        if then:
            rules.append(_when("benchmark", name, then))
    for name, path in sorted(registry.SOLUTIONS.items()):
        spec = SolutionSpec(target=registry.load_object(path, "solution"), name=name)
        then = {"solution_args": _argument_names(spec.target) if spec.is_recipe
                else {"maxProperties": 0}}
        if then["solution_args"] is None:
            del then["solution_args"]
        then.update({field: null for field in SOLUTION_MODEL_ARGS if not spec.accepts(field)})
        if then:
            rules.append(_when("solution", name, then))
    return rules

