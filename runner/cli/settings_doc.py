"""``docs/settings.md``: the table of every run setting, written from the fields' declarations.

``python -m runner.cli.settings_doc`` writes it; ``--check`` exits 1 when the committed page differs from the
declarations (a test runs it), so that the page cannot fall behind a new or changed setting.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic_core import PydanticUndefined

from runner import registry
from runner.cli.args import GROUPS, Setting, declared_settings
from runner.core.config import RENAMED, RunConfig
from runner.core.flags import NoFlag, declaration
from runner.kuberay.deploy_flags import DeployFlags

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
"""Where the page lives in a checkout."""

_HEAD = """# Run settings

Every setting of a run, in one table per group of `python -m runner run --help`. Each is declared once, on its field
of `RunConfig`, `WorkerSpec` or `ServeSpec` (`runner/core/config.py`, marks from `runner/core/flags.py`): the flag,
the key of a configuration file (`--config`, a Helm values file's `job:`), and the keyword argument of
`GeneralEvaluator` / `RayEvaluator` are read from it. A `worker.` key is a key of the file's `worker:` mapping and a
keyword of `RayEvaluator` (`worker.num_workers` is its `n_workers` / `max_workers`); a `serve.` key is a key of each
entry of the file's `serve:` list. Flags override the file.

This page is written by `python -m runner.cli.settings_doc` (a test fails when it is stale): edit the declarations,
not the page.
"""


def _default(setting: Setting) -> str:
    """The field's default as the table shows it: ``` `3` ```, or ``-`` for none (``None``, empty)."""
    info = setting.info
    value: Any = info.default
    if info.default_factory is not None or value is None:
        return "-"
    if value is PydanticUndefined:
        return "required"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(setting: Setting) -> str:
    flag = setting.flag
    spellings = [f"`{setting.option}`", *([f"`{flag.short}`"] if flag.short else []),
                 *(f"`{alias.spelling}`" for alias in flag.aliases)]
    former = [f"`{old}`" for old, new in RENAMED.items() if new == setting.name]
    key = f"`{setting.name}`" + (f" (formerly {', '.join(former)})" if former else "")
    return f"| {', '.join(spellings)} | {key} | {_default(setting)} | {_cell(flag.help)} |"


def page() -> str:
    """The whole page, as Markdown."""
    lines = [_HEAD]
    settings = declared_settings()
    for group, title in GROUPS.items():
        if group == "kubernetes":
            continue
        lines += [f"## {title[0].upper()}{title[1:]}", "", "| flag | key | default | meaning |",
                  "| --- | --- | --- | --- |"]
        lines += [_row(setting) for setting in settings if setting.flag.group == group]
        lines.append("")
    unflagged = [(name, mark.reason) for name, info in RunConfig.model_fields.items()
                 if isinstance(mark := declaration(info.metadata), NoFlag)]
    lines += ["## Keys without a flag of their own", "", "| key | how it is set |", "| --- | --- |"]
    lines += [f"| `{name}` | {_cell(reason)} |" for name, reason in unflagged]
    lines += ["", "## `submit`'s deploy flags (Kubernetes)", "",
              "Declared on `DeployFlags` (`runner/kuberay/deploy_flags.py`) with the same marks; each sets the Helm "
              "chart's values over `--values` (docs/kubernetes.md), not a run setting.", "",
              "| flag | meaning |", "| --- | --- |"]
    for setting in declared_settings(DeployFlags):
        metavar = f" `{setting.flag.metavar}`" if setting.flag.metavar else ""
        lines.append(f"| `{setting.option}`{metavar} | {_cell(setting.flag.help)} |")
    return "\n".join(lines + _plugin_sections()) + "\n"


def _plugin_sections() -> list[str]:
    """The built-in benchmarks' and solutions' arguments, from their declarations (:mod:`runner.core.plugin`)."""
    lines = ["", "## Arguments of the built-in benchmarks (`-B`) and solutions (`-S`)", "",
             "Read from each plug-in's declaration (`runner/core/plugin.py`: its constructor's keyword arguments, "
             "what it needs from the run); `python -m runner list` prints the same for installed plug-ins too. An "
             "argument it does not take, or a value of the wrong type, is refused before anything is written."]
    for kind, table in (("benchmark", registry.BENCHMARKS), ("solution", registry.SOLUTIONS)):
        flag = "-b" if kind == "benchmark" else "-s"
        for name, path in sorted(table.items()):
            facts, arguments = registry.plugin_summary(kind, registry.load_object(path, kind))
            lines += ["", f"### `{flag} {name}`", "", f"`{path}`: {_cell(facts)}.", ""]
            if not arguments:
                lines.append("No arguments." if arguments is not None else "A plain function: no arguments.")
                continue
            lines += ["| argument | type | default | meaning |", "| --- | --- | --- | --- |"]
            lines += [f"| `{row.name}` | `{_cell(row.type)}` | {'required' if row.default is None else f'`{row.default}`'} "
                      f"| {_cell(row.help)} |" for row in arguments]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Write :data:`PAGE` (or, with ``--check``, exit 1 when the committed one is stale)."""
    parser = argparse.ArgumentParser(prog="python -m runner.cli.settings_doc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page differs")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE} is stale: run python -m runner.cli.settings_doc")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
