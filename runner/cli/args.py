"""Command-line flags of a run, and turning them (plus an optional config file) into a :class:`RunConfig`.

Flags override the config file; a flag left out keeps the file's value (every flag defaults to ``None``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from runner.core.config import RENAMED, RunConfig, build_config, load_config_file
from runner.core.errors import ConfigError
from runner.core.flags import Flag, Nested, declaration

SUGGESTION_CUTOFF = 0.6
"""How close a mistyped flag must be to a known one to be suggested (``difflib.get_close_matches``' ratio)."""


def unrecognized(extras: Sequence[str], flags: Iterable[str], commands: Iterable[str] = ()) -> str:
    """The message for arguments a parser did not recognise, with the closest known flag (or, for a first word that
    is no flag, command) when one is close: ``unrecognized arguments: --storge x; did you mean --storage?``.

    Args:
        extras: the arguments left over, in order.
        flags: the option strings of the parser that read them.
        commands: the command names, suggested for a word that is not a flag.
    """
    message = f"unrecognized arguments: {' '.join(extras)}"
    long_flags = sorted({flag for flag in flags if flag.startswith("--")})
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], long_flags, n=1, cutoff=SUGGESTION_CUTOFF)
            if close:
                return f"{message}; did you mean {close[0]}?"
        elif extra == extras[0] and not extra.startswith("-"):
            close = difflib.get_close_matches(extra, sorted(commands), n=1, cutoff=SUGGESTION_CUTOFF)
            if close:
                return f"{message}; did you mean the command {close[0]!r}?"
    return message


def parse_value(text: str) -> Any:
    """A ``KEY=VALUE`` value: JSON if it parses (numbers, booleans, lists), else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def key_value(text: str) -> tuple[str, Any]:
    """argparse type for ``KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), parse_value(value)


def json_object(text: str) -> dict[str, Any]:
    """argparse type for a JSON object flag."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"key\": 1}}', got {text!r}")
    return value


def model_limit(text: str) -> tuple[str | None, Any]:
    """argparse type for a limit: ``N`` (every model endpoint) or ``MODEL=N`` (the endpoints of ``MODEL``); the
    number is validated with the run config."""
    model, sep, value = text.rpartition("=")
    if sep and not model.strip():
        raise argparse.ArgumentTypeError(f"expected N or MODEL=N, got {text!r}")
    return (model.strip() or None), parse_value(value.strip())


def engine_args(text: str) -> list[str]:
    """argparse type for ``--engine-arg``: one flag, or several split as a shell would
    (``--engine-arg="--max-model-len 8192"``)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r} into words ({exc})") from None
    if not words:
        raise argparse.ArgumentTypeError("an empty engine argument")
    return words


def model_price(text: str) -> tuple[str, dict[str, float]]:
    """argparse type for ``--price MODEL=IN,OUT``: USD per million input and output tokens."""
    model, sep, value = text.rpartition("=")
    numbers = value.split(",")
    try:
        if not sep or not model.strip() or len(numbers) != 2:
            raise ValueError
        prices = {"input": float(numbers[0]), "output": float(numbers[1])}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected MODEL=IN,OUT (USD per million input and output tokens, e.g. openai:gpt-4o=2.5,10), "
            f"got {text!r}") from None
    return model.strip(), prices


class _Deprecated(argparse.Action):
    """A former flag: stores its value under the new flag's destination and says once, in one line on stderr, which
    flag to use instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values if self.nargs != 0 else True)


@dataclass(frozen=True)
class Setting:
    """One setting of the run configuration with a flag, as its field declares it (:mod:`runner.core.flags`).

    Args:
        path: where it sits in :class:`RunConfig`: ``("repeats",)``, ``("worker", "num_cpus")``, or
            ``("serve", "model")`` (a field of each entry of the ``serve`` list).
        flag: its declared :class:`Flag`.
        info: the field (pydantic's ``FieldInfo``: its type, which the flag's text is read as, and its default).
    """

    path: tuple[str, ...]
    flag: Flag
    info: FieldInfo

    @property
    def annotation(self) -> Any:
        """The field's type (``int | None``, a ``Literal``...)."""
        return self.info.annotation

    @property
    def name(self) -> str:
        """The dotted path, as a validation error names the field: ``worker.num_cpus``."""
        return ".".join(self.path)

    @property
    def option(self) -> str:
        """The flag: the declared spelling, else ``--`` and the field's name with dashes."""
        return self.flag.spelling or "--" + self.path[-1].replace("_", "-")

    @property
    def dest(self) -> str:
        """The argparse destination: the flag's name with underscores (``--workers`` -> ``workers``)."""
        return self.option.removeprefix("--").replace("-", "_")


def declared_settings(model: type[BaseModel] = RunConfig, prefix: tuple[str, ...] = ()) -> list[Setting]:
    """Every setting of ``model`` that has a flag, in declaration order, the fields of a :class:`Nested` model in
    place (``worker``'s, ``serve``'s entries').

    Raises:
        TypeError: a field declares nothing (no :class:`Flag`, :class:`Nested` or :class:`~runner.core.flags.NoFlag`): every setting
            must say how the command line sets it.
    """
    settings: list[Setting] = []
    for name, info in model.model_fields.items():
        mark = declaration(info.metadata)
        if mark is None:
            raise TypeError(f"{model.__name__}.{name} declares no Flag, Nested or NoFlag (runner.core.flags)")
        if isinstance(mark, Nested):
            settings.extend(declared_settings(_nested_model(info.annotation), (*prefix, name)))
        elif isinstance(mark, Flag):
            settings.append(Setting((*prefix, name), mark, info))
    return settings


def _nested_model(annotation: Any) -> type[BaseModel]:
    """The model of a :class:`Nested` field: ``WorkerSpec``, or the ``ServeSpec`` of ``list[ServeSpec]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    (item,) = typing.get_args(annotation)
    return item


GROUPS = {"what": "what to run", "where": "where results go", "how": "how to run",
           "serving": "models served by the run (see docs/models.md)",
           "traffic": "model traffic (shared by every worker; see docs/models.md)",
           "kubernetes": "where it runs (Kubernetes)"}
"""The headings of ``--help``, by a :class:`Flag`'s group."""

_KINDS: dict[str, dict[str, Any]] = {
    "switch": {"action": "store_true", "default": None},
    "json": {"type": json_object},
    "pairs": {"action": "append", "type": key_value},
    "per_model": {"action": "append", "type": model_limit},
    "prices": {"action": "append", "type": model_price},
    "serve": {"action": "append", "nargs": "?", "const": ""},
    "words": {"action": "append", "type": engine_args},
    "repeat": {"action": "append"},
}
"""The argparse options of each :data:`~runner.core.flags.FlagKind` but ``value``."""


def _value_options(annotation: Any) -> dict[str, Any]:
    """The argparse ``type`` or ``choices`` that read one value of ``annotation``: ``int``, ``float``, the choices
    of a ``Literal``, else the text itself (pydantic validates it with the rest of the configuration)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)] if union else [annotation]
    kind = kinds[0] if len(kinds) == 1 else str
    if typing.get_origin(kind) is Literal:
        return {"choices": typing.get_args(kind)}
    if kind in (int, float):
        return {"type": kind}
    return {}


MATRIX_NAMES = frozenset({"benchmark", "model"})
"""The run settings a matrix names in lists of its own (``models``, ``benchmarks``): its command has ``--model`` and
``--bench`` repeatable instead (:mod:`runner.cli.matrix`)."""


def add_run_arguments(parser: argparse.ArgumentParser, *, exclude: frozenset[str] = frozenset(),
                      config_help: str = "YAML or JSON run config; flags override it") -> None:
    """The flags of a run (shared by ``run``, ``submit`` and, less ``exclude``, ``matrix``), one per declared setting
    (:func:`declared_settings`), with the aliases they declare and the former names of
    :data:`~runner.core.config.RENAMED`."""
    groups = {key: parser.add_argument_group(title) for key, title in GROUPS.items() if key != "kubernetes"}
    groups["what"].add_argument("--config", metavar="FILE", help=config_help)
    for setting in declared_settings():
        if setting.path[0] not in exclude:
            _add_setting(groups[setting.flag.group], setting)


def add_declared_arguments(group: argparse._ActionsContainer, model: type[BaseModel]) -> None:
    """The flags ``model``'s fields declare (:class:`~runner.core.flags.Flag`), added to ``group`` as a run's are:
    ``submit``'s deploy flags (:class:`~runner.kuberay.deploy_flags.DeployFlags`). Read them back with
    ``model.model_validate`` of the namespace's values under the fields' names."""
    for setting in declared_settings(model):
        _add_setting(group, setting)


def _add_setting(group: argparse._ActionsContainer, setting: Setting) -> None:
    """``setting``'s flag in ``group``, with its short form, its aliases and its former name."""
    flag = setting.flag
    options = dict(_KINDS[flag.kind]) if flag.kind != "value" else _value_options(setting.annotation)
    if flag.metavar or "choices" not in options and flag.kind != "switch":
        options["metavar"] = flag.metavar or setting.dest.upper()
    spellings = [setting.option, *([flag.short] if flag.short else [])]
    group.add_argument(*spellings, dest=setting.dest, help=flag.help, **options)
    for alias in flag.aliases:
        group.add_argument(alias.spelling, dest=setting.dest, action="store_const", const=alias.const,
                           help=alias.help)
    former = {new: old for old, new in RENAMED.items()}
    if setting.path[-1] in former:
        old = "--" + former[setting.path[-1]].replace("_", "-")
        kept = {key: value for key, value in options.items() if key in ("type", "metavar")}
        group.add_argument(old, dest=setting.dest, action=_Deprecated, new=setting.option, help=argparse.SUPPRESS,
                           **({"nargs": 0} if flag.kind == "switch" else kept))


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> RunConfig:
    """The :class:`RunConfig` of the config file (if any) overridden by the flags that were given.

    Args:
        base: run config fields the config file and the flags override (``submit --values`` passes the ``job``
            values of a Helm values file); a key of the file replaces the same key of ``base`` whole.

    Raises:
        ConfigError: the file or the merged configuration does not validate (naming the field, or the flag that
            set it).
    """
    data: dict[str, Any] = dict(base or {})
    if args.config:
        data.update(load_config_file(args.config))
    source = f"config {args.config!r}" if args.config else "run flags"
    given = flag_values(args, data)
    if not data.get("benchmark"):
        raise ConfigError("no benchmark: pass --benchmark NAME (see 'python -m runner list') or --config FILE")
    return build_config(data, source, given)


def flag_values(args: argparse.Namespace, data: dict[str, Any],
                exclude: frozenset[str] = frozenset()) -> dict[str, str]:
    """Put the run flags that were given into ``data`` (over what it holds, at each setting's path); the flag that
    set each path, for error messages.

    Raises:
        ConfigError: ``--engine-arg`` without exactly one served model.
    """
    given: dict[str, str] = {}
    for setting in declared_settings():
        value = getattr(args, setting.dest, None)
        if value is None or setting.path[0] == "serve" or setting.path[0] in exclude:
            continue
        if setting.flag.kind == "per_model":
            _model_limit_flags(setting, value, data, given)
            continue
        if setting.flag.kind in ("pairs", "prices"):
            value = {**(_at(data, setting.path) or {}), **dict(value)}
        elif setting.flag.zero_is_none and value == 0:
            value = None
        _put(data, setting.path, value)
        given[setting.name] = setting.option
    _serve_flags(args, data, given)
    return given


def _at(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in the nested mapping ``data``, or ``None``."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``path`` in ``data`` to ``value``, copying the mappings on the way (a config file's stay unchanged)."""
    *parents, last = path
    for key in parents:
        data[key] = dict(data.get(key) or {})
        data = data[key]
    data[last] = value


def _model_limit_flags(setting: Setting, values: list[tuple[str | None, Any]], data: dict[str, Any],
                       given: dict[str, str]) -> None:
    """A limit flag's values into ``data``: a bare ``N`` sets the run's limit, ``MODEL=N`` that model's (under
    ``model_limits``)."""
    for model, value in values:
        path = (setting.name,) if model is None else ("model_limits", model, setting.name)
        if model is not None:
            data["model_limits"] = {name: dict(limits) for name, limits in (data.get("model_limits") or {}).items()}
        _put(data, path, value)
        given[".".join(path)] = setting.option


def _serve_flags(args: argparse.Namespace, data: dict[str, Any], given: dict[str, str]) -> None:
    """Merge ``--serve`` and ``--engine-arg`` into ``data["serve"]``: each ``--serve`` adds a model (the bare flag,
    the agent's model) to the config file's; the engine arguments go to the one served model.

    Raises:
        ConfigError: ``--engine-arg`` without a served model, or with more than one.
    """
    named = getattr(args, "serve", None)
    extra = [word for words in getattr(args, "engine_arg", None) or () for word in words]
    if not named and not extra:
        return
    serve = [entry if isinstance(entry, dict) else {"model": entry} for entry in data.get("serve") or []]
    for name in named or ():
        serve.append({"model": name.strip() or None})
        given[f"serve.{len(serve) - 1}.model"] = "--serve"
    if extra:
        if len(serve) != 1:
            raise ConfigError(
                "--engine-arg needs exactly one served model (--serve MODEL), and the run serves "
                f"{len(serve) or 'none'}; with several, give each its engine_args in the config file's serve list")
        serve[0] = {**serve[0], "engine_args": [*serve[0].get("engine_args", []), *extra]}
    data["serve"] = serve
