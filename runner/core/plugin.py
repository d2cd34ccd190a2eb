"""What a benchmark or a solution takes and what it needs from the run, declared once, on the plug-in.

A plug-in (a benchmark class or factory, a solution recipe or function) declares with :func:`declare`::

    @declare("hotpotqa", needs={"judge", "data_dir"}, default_solution="hotpotqa-agent",
             mock_policy="runner.benchmarks.hotpotqa.mock:policy")
    class HotpotQABenchmark(RecordsBenchmark): ...

    @declare("lm-eval", needs={"model", "benchmark", "model_base_url"}, in_process_providers=("transformers",))
    def lm_eval_model(model: str, benchmark: Any, model_base_url: str | None = None): ...

- **name**: how the registry and messages name it (the registry's line maps the same name to its import path).

- **needs** (:data:`NEEDS`): what the run hands it, by the constructor arguments :data:`NEED_ARGUMENTS` names: the
  run's ``--model`` and ``--model-base-url``, the simulated user's model and server, the judge (``judge_model``,
  ``judge_base_url``), the data folder (``--data-dir``), the benchmark (a solution's). The registry passes exactly
  these and nothing else it has.
- **arguments** (``-B`` for a benchmark, ``-S`` for a solution): a pydantic model, :func:`arguments_model`, made
  from the constructor's signature (each keyword argument a field: its annotation, its default, the help its
  docstring's ``Args:`` gives), the benchmark a solution needs aside. The registry checks a run's arguments against
  it before anything is written (:func:`unknown_arguments`, :func:`mistyped_arguments`); ``list`` and
  ``docs/settings.md`` print its fields less what the run fills (:func:`argument_rows`). One declaration, the
  signature, serves the Python caller and the command line.
- **default_solution**: the solution a bare ``--model`` runs (a model-driven agent), by registry name.
- **mock_policy**: the ``module:attribute`` of the policy ``mock:<name>`` answers with (a scripted model that plays
  the benchmark's agent): declaring it publishes it in :data:`MOCK_POLICIES`, where the model layer
  (:mod:`runner.models._mock`) finds it in every process that imported the benchmark (a Ray worker unpickles the
  benchmark, so imports it).
- **in_process_providers**: providers whose models the solution loads in its own process rather than calling a
  server (lm-eval's ``HFLM`` loads ``transformers:`` models): the run starts no replica of such a model.

Code that declares nothing (an AgentScope benchmark, a plain function) gets the declaration its parameter names make
(:func:`declaration`): a constructor that names ``model`` needs the run's model, one that names ``judge_model`` the
judge, and so on. Pure data and :mod:`inspect`: no plug-in is imported here.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import pydantic

from runner.core import signature

Need = Literal["model", "model_base_url", "user_model", "user_model_base_url", "judge", "data_dir", "benchmark"]
"""What a plug-in may need from the run (see :data:`NEED_ARGUMENTS`)."""

NEED_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "model": ("model",),
    "model_base_url": ("model_base_url",),
    "user_model": ("user_model",),
    "user_model_base_url": ("user_model_base_url",),
    "judge": ("judge_model", "judge_base_url"),
    "data_dir": ("data_dir",),
    "benchmark": ("benchmark",),
}
"""Each need -> the constructor arguments that carry it (a judge is its model and its server's URL)."""

NEEDS = tuple(NEED_ARGUMENTS)
"""Every need, in the order :data:`NEED_ARGUMENTS` lists them."""

_MARK = "__runner_plugin__"

MOCK_POLICIES: dict[str, str] = {}
"""The ``mock:<name>`` policies plug-ins declared in this process: name -> ``module:attribute`` (imported by the
model layer on first use)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Declaration:
    """What one plug-in takes and needs (see the module's docstring).

    Args:
        name: the plug-in's name (``None`` for code that declares nothing).
        needs: names from :data:`NEEDS`.
        default_solution: a benchmark's agent for a bare ``--model`` (registry name), or ``None``.
        mock_policy: the ``module:attribute`` of its ``mock:<mock_name>`` policy, or ``None``.
        mock_name: the name of that policy (the plug-in's ``name`` unless it says otherwise).
        in_process_providers: a solution's providers loaded in its own process (e.g. ``("transformers",)``).
        declared: ``False`` for the declaration :func:`declaration` reads from parameter names of code that
            declares nothing.
    """

    name: str | None = None
    needs: frozenset[str] = frozenset()
    default_solution: str | None = None
    mock_policy: str | None = None
    mock_name: str | None = None
    in_process_providers: tuple[str, ...] = ()
    declared: bool = True

    def run_arguments(self) -> tuple[str, ...]:
        """The constructor arguments the run fills (:data:`NEED_ARGUMENTS` of its needs)."""
        return tuple(argument for need in NEEDS if need in self.needs for argument in NEED_ARGUMENTS[need])


def declare(name: str, *, needs: Iterable[str] = (), default_solution: str | None = None,
            mock_policy: str | None = None, mock_name: str | None = None,
            in_process_providers: Iterable[str] = ()) -> Callable[[T], T]:
    """Mark a benchmark or solution (class or function) with its :class:`Declaration` (and publish its
    ``mock_policy`` as ``mock:<mock_name>``, default ``mock:<name>``, in :data:`MOCK_POLICIES`); returns it
    unchanged.

    Raises:
        ValueError: a need that is not one of :data:`NEEDS` (a programming error, raised at import).
    """
    wanted = frozenset(needs)
    unknown = sorted(wanted - set(NEEDS))
    if unknown:
        raise ValueError(f"unknown need(s) {', '.join(unknown)}; declare some of: {', '.join(NEEDS)}")
    declared = Declaration(name=name, needs=wanted, default_solution=default_solution, mock_policy=mock_policy,
                           mock_name=mock_name or name, in_process_providers=tuple(in_process_providers))

    def mark(target: T) -> T:
        setattr(target, _MARK, declared)
        if mock_policy is not None:
            MOCK_POLICIES[declared.mock_name] = mock_policy
        return target

    return mark


def declaration(target: Any) -> Declaration:
    """The declaration of ``target`` (a class, factory or function; a benchmark instance reads its class's): the
    one :func:`declare` gave it (a subclass inherits its parent's), else the one its parameter names make (each
    need whose first argument it names, ``**kwargs`` not counting), with ``declared=False``."""
    found = getattr(target, _MARK, None)
    if isinstance(found, Declaration):
        return found
    if not callable(target):
        target = type(target)
    named = frozenset(need for need, arguments in NEED_ARGUMENTS.items()
                      if signature.names_parameter(target, arguments[0]))
    return Declaration(needs=named, declared=False)


def arguments_model(target: Any) -> type[pydantic.BaseModel] | None:
    """The pydantic model of ``target``'s own arguments (``-B``/``-S``): one field per keyword argument of its
    constructor (a class's ``__init__``) but ``benchmark`` (a solution's, never the user's), typed by its
    annotation (``Any`` where pydantic cannot check it), with its default (required where it has none) and its help
    from the docstring's ``Args:`` section. Extra fields are forbidden unless it takes ``**kwargs``. ``None`` when
    its signature cannot be read (a builtin)."""
    try:
        return _cached_model(target)
    except TypeError:  # an unhashable callable (a dataclass instance used as a factory): made each time
        return _model(target)


@functools.lru_cache(maxsize=256)
def _cached_model(target: Any) -> type[pydantic.BaseModel] | None:
    return _model(target)


def _model(target: Any) -> type[pydantic.BaseModel] | None:
    params = signature.parameters(target)
    if params is None:
        return None
    try:
        hints = typing.get_type_hints(_annotated(target))
    except Exception:  # noqa: BLE001 - unresolvable annotations: the fields are unchecked
        hints = {}
    skipped = set(NEED_ARGUMENTS["benchmark"])
    helps = argument_help(inspect.getdoc(target) or "")
    fields: dict[str, Any] = {}
    for name in signature.named_parameters(target):
        if name in skipped:
            continue
        default = params[name].default
        # A name pydantic keeps for itself (a leading underscore, a BaseModel attribute) is the field's alias.
        key = name if _plain_field_name(name) else f"field_{len(fields)}"
        fields[key] = (_checkable(hints.get(name, Any)),
                       pydantic.Field(... if default is inspect.Parameter.empty else default,
                                      description=helps.get(name), alias=None if key == name else name))
    extra = "allow" if signature.takes_var_keyword(target) else "forbid"
    title = getattr(target, "__qualname__", type(target).__qualname__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a field named like a pydantic namespace (model_args) is still a field
        return pydantic.create_model(  # type: ignore[call-overload,no-any-return]
            f"{title}.Arguments", __config__=pydantic.ConfigDict(extra=extra, arbitrary_types_allowed=True,
                                                                 protected_namespaces=()), **fields)


def _annotated(target: Any) -> Any:
    """Where ``target``'s argument annotations are: a class's ``__init__``, a callable object's ``__call__``, else
    the function itself."""
    if inspect.isclass(target):
        return target.__init__
    if inspect.isroutine(target) or not hasattr(type(target), "__call__"):
        return target
    return type(target).__call__


def _plain_field_name(name: str) -> bool:
    return not name.startswith("_") and not hasattr(pydantic.BaseModel, name)


def argument_fields(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The fields of an arguments' model by the argument's own name (its alias where pydantic keeps the name):
    name -> pydantic ``FieldInfo``."""
    return {info.alias or key: info for key, info in model.model_fields.items()}


def _checkable(annotation: Any) -> Any:
    """``annotation`` when pydantic can build a validator for it, else ``Any``."""
    try:
        pydantic.TypeAdapter(annotation)
    except Exception:  # noqa: BLE001 - a type pydantic cannot check (an arbitrary class)
        return Any
    return annotation


def unknown_arguments(target: Any, offered: Iterable[str]) -> list[str]:
    """The names of ``offered`` that ``target``'s :func:`arguments_model` has no field for (none when it takes
    ``**kwargs``; all of them when its signature cannot be read), the run's own arguments included."""
    model = arguments_model(target)
    if model is None:
        return list(offered)
    if model.model_config.get("extra") == "allow":
        return []
    fields = argument_fields(model)
    return [name for name in offered if name not in fields]


def mistyped_arguments(target: Any, offered: Mapping[str, Any]) -> dict[str, str]:
    """The arguments of ``offered`` whose value does not validate against their field of ``target``'s
    :func:`arguments_model` (pydantic's lax mode: ``"8"`` is an int, ``"hot"`` no float), each with the reason,
    e.g. ``{"temperature": "is not a valid float (Input should be ...)"}``. The values are checked, not converted:
    the plug-in gets them as given."""
    model = arguments_model(target)
    if model is None:
        return {}
    problems = {}
    fields = argument_fields(model)
    for name, value in offered.items():
        found = fields.get(name)
        if found is None or found.annotation is Any:
            continue
        try:
            pydantic.TypeAdapter(found.annotation).validate_python(value)
        except pydantic.ValidationError as err:
            text = getattr(found.annotation, "__name__", None) or str(found.annotation).replace("typing.", "")
            problems[name] = f"is not a valid {text} ({err.errors()[0]['msg']})"
    return problems


@dataclass(frozen=True)
class ArgumentRow:
    """One argument of a plug-in, for ``list`` and ``docs/settings.md``.

    Args:
        name: the argument (``-B name=VALUE``, ``-S name=VALUE``).
        type: its annotation, as written (``int | None``).
        default: its default, as ``repr`` writes it; ``None`` when required.
        help: its help (the docstring's ``Args:`` line), or ``""``.
    """

    name: str
    type: str
    default: str | None
    help: str = field(default="")


def argument_rows(target: Any) -> Iterator[ArgumentRow]:
    """The rows of ``target``'s :func:`arguments_model` but those the run fills (:meth:`Declaration.run_arguments`),
    in the constructor's order (none for an unreadable signature)."""
    model = arguments_model(target)
    filled = set(declaration(target).run_arguments())
    for name, found in (argument_fields(model).items() if model is not None else ()):
        if name in filled:
            continue
        annotation = found.annotation
        text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
        yield ArgumentRow(name=name, type=text or str(annotation).replace("typing.", ""),
                          default=None if found.is_required() else repr(found.default),
                          help=plain(found.description or ""))


_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def plain(text: str) -> str:
    """Docstring text on one line as Markdown and a terminal read it: doubled backquotes as single ones, and a
    Sphinx role's reference as its target in backquotes (the last part only after a tilde, as Sphinx shows it)."""
    text = _ROLE.sub(lambda found: f"`{found.group(2).rsplit('.', 1)[-1] if found.group(1) else found.group(2)}`",
                     text)
    return " ".join(text.replace("``", "`").split())


_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_ENTRY = re.compile(r"^([A-Za-z_][\w, ]*?)(?:\s*\([^)]*\))?:\s*(.*)$")


def argument_help(doc: str) -> dict[str, str]:
    """Argument name -> help, from a Google-style docstring's ``Args:`` section (an entry ``name: text`` and its
    indented continuation lines; ``a, b: text`` documents both)."""
    helps: dict[str, str] = {}
    lines = doc.splitlines()
    for start, line in enumerate(lines):
        if _SECTION.match(line.strip()):
            break
    else:
        return helps
    indent: int | None = None
    current: list[str] = []
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent or (depth == indent and _SECTION.match(line.strip())):
            break
        entry = _ENTRY.match(line.strip()) if depth == indent else None
        if entry:
            current = [name.strip() for name in entry.group(1).split(",")]
            for name in current:
                helps[name] = entry.group(2).strip()
        else:
            for name in current:
                helps[name] = f"{helps[name]} {line.strip()}".strip()
    return helps
