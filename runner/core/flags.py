"""How a run setting is spelled on the command line: the marks each field of the run configuration carries.

Every field of :class:`~runner.core.config.RunConfig`, :class:`~runner.core.config.WorkerSpec` and
:class:`~runner.core.config.ServeSpec` is declared once, on the model, as ``Annotated[type, Field(...), Flag(...)]``:
its type, bounds and default (pydantic's ``Field``), and its flag, help text and group (a :class:`Flag`). The CLI's
flags (:mod:`runner.cli.args`), the evaluators' keyword arguments, the configuration file's keys and the table of
``docs/settings.md`` are read from these declarations, so that a new setting is one declaration; former names live
in one table, :data:`runner.core.config.RENAMED`.

Pure data: nothing here imports argparse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FlagKind = Literal["value", "switch", "json", "pairs", "per_model", "prices", "serve", "words", "repeat"]
"""How a flag reads its text:

- ``value``: one value of the field's type (``--repeats 3``); the last one given counts.
- ``switch``: no value; given, the field is true (``--force``).
- ``json``: a JSON object (``--storage-options '{"anon": true}'``).
- ``pairs``: ``KEY=VALUE``, repeatable, merged into the mapping (``-B language=zh``; the value read as JSON when it
  parses).
- ``per_model``: ``N`` (the run's limit) or ``MODEL=N`` (that model's, in ``model_limits``), repeatable.
- ``prices``: ``MODEL=IN,OUT`` (USD per million input and output tokens), repeatable.
- ``serve``: a served model, repeatable; alone, the agent's model.
- ``words``: words for an engine, split as a shell would, repeatable.
- ``repeat``: one text, repeatable, into a list (``--worker-toleration``).
"""


@dataclass(frozen=True)
class Alias:
    """A second flag that sets the field to a fixed value: ``--sequential`` is ``--executor sequential``.

    Args:
        spelling: the flag, e.g. ``"--sequential"``.
        const: the value it sets.
        help: its help text.
    """

    spelling: str
    const: Any
    help: str


@dataclass(frozen=True)
class Flag:
    """The command-line face of one setting.

    Args:
        help: the flag's help text (``--help``, and the docs table).
        group: the heading it is listed under: ``what`` (what to run), ``where`` (where results go), ``how`` (how to
            run), ``serving`` (models served by the run), ``traffic`` (model traffic) or ``kubernetes`` (``submit``'s
            deploy flags, :mod:`runner.kuberay.deploy_flags`).
        spelling: the flag; default ``--`` and the field's name with dashes (``max_rpm`` -> ``--max-rpm``).
        short: a one-letter form (``-b``), if any.
        metavar: what ``--help`` shows for its value; default: the flag's name in capitals, or the choices.
        kind: how its text is read (:data:`FlagKind`).
        zero_is_none: ``0`` sets the field to ``None`` (no bound), e.g. ``--placement-timeout 0``.
        aliases: other flags that set a fixed value (:class:`Alias`).
    """

    help: str
    group: Literal["what", "where", "how", "serving", "traffic", "kubernetes"]
    spelling: str | None = None
    short: str | None = None
    metavar: str | None = None
    kind: FlagKind = "value"
    zero_is_none: bool = False
    aliases: tuple[Alias, ...] = ()


@dataclass(frozen=True)
class Nested:
    """The field is a model whose own fields are settings (``worker``: each :class:`WorkerSpec` field has a flag;
    ``serve``: a list of :class:`~runner.core.config.ServeSpec`, whose fields' flags add to the list)."""


@dataclass(frozen=True)
class NoFlag:
    """The field has no flag of its own, for ``reason`` (e.g. ``model_limits`` is set by ``--max-rpm MODEL=N``); the
    configuration file and the evaluators' keyword arguments still set it."""

    reason: str


Declaration = Flag | Nested | NoFlag
"""What a field declares about its command-line face."""


def declaration(metadata: list[Any]) -> Declaration | None:
    """The :data:`Declaration` among a pydantic field's ``metadata`` (``FieldInfo.metadata``), or ``None``."""
    for mark in metadata:
        if isinstance(mark, (Flag, Nested, NoFlag)):
            return mark
    return None
