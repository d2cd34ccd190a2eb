"""The ``matrix`` command: models (or checkpoints) x benchmarks in one job (:mod:`runner.engine.matrix`).

``python -m runner matrix --config matrix.yaml`` reads a matrix file (``docs/matrix.md``); the same as flags:
``--model`` and ``--bench`` repeatable (a name, a glob, or a YAML mapping with the entry's own settings),
``--baseline``, ``--watch SECONDS`` with ``--ready-file`` and ``--until``, and every run flag (``--workers``,
``--num-gpus``, ``--storage``, ``--limit``, ``--max-rpm``, ``--max-tokens``, ``--html``...), which override the
file's settings, its entries' included.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import yaml
from pydantic import ValidationError

from runner import log
from runner.cli.args import MATRIX_NAMES, add_run_arguments, flag_values
from runner.core.config import format_validation_error, load_config_file
from runner.core.errors import ConfigError
from runner.core.matrix import MatrixConfig


def add_command(sub: Any) -> None:
    """The ``matrix`` subcommand and its flags."""
    matrix = sub.add_parser("matrix", help="evaluate models or checkpoints x benchmarks in one job (docs/matrix.md)")
    add_run_arguments(matrix, exclude=MATRIX_NAMES,
                      config_help="YAML or JSON matrix file (models, benchmarks, baseline, watch, run settings); "
                                  "flags override it")
    group = matrix.add_argument_group("the matrix")
    group.add_argument("--model", action="append", dest="matrix_models", metavar="MODEL",
                       help="a model as --model takes it, a glob of checkpoint folders (transformers:/ckpts/step_*), "
                            "or a YAML mapping {model: ..., engine_args: [...], limit: ...} (repeatable)")
    group.add_argument("--bench", "-b", action="append", dest="matrix_benchmarks", metavar="BENCHMARK",
                       help="a benchmark name, or a YAML mapping {benchmark: ..., args: {...}, solution: ..., "
                            "limit: ...} (repeatable)")
    group.add_argument("--baseline", metavar="MODEL", help="the model every other one is compared with, cell by cell")
    group.add_argument("--watch", type=float, metavar="SECONDS",
                       help="keep evaluating checkpoints as they appear, looking every SECONDS")
    group.add_argument("--ready-file", metavar="NAME", help="with --watch: a checkpoint is ready once this file is in "
                                                            "its folder (default: its listing held still)")
    group.add_argument("--until", metavar="NAME", help="with --watch: end once this file exists next to the "
                                                       "checkpoints")
    matrix.add_argument("--html", action="store_true", help="print where matrix.html is (it is always written)")
    matrix.set_defaults(handler=cmd_matrix)


def _entry(text: str) -> Any:
    """A ``--model``/``--bench`` value: a YAML mapping, else the text itself."""
    if text.lstrip().startswith("{"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigError(f"cannot read {text!r} as a YAML mapping; write {{benchmark: NAME, args: {{...}}}}"
                              ) from None
    return text


def matrix_config(args: argparse.Namespace) -> tuple[MatrixConfig, dict[str, Any]]:
    """The matrix of the file (if any) and the flags, and the run settings the flags gave (which override the
    file's entries too).

    Raises:
        ConfigError: the file or the flags do not make a matrix (naming the field or the flag).
    """
    data: dict[str, Any] = load_config_file(args.config) if args.config else {}
    if args.matrix_models:
        data["models"] = [*data.get("models", []), *map(_entry, args.matrix_models)]
    if args.matrix_benchmarks:
        data["benchmarks"] = [*data.get("benchmarks", []), *map(_entry, args.matrix_benchmarks)]
    if args.baseline:
        data["baseline"] = args.baseline
    if args.watch is not None or args.ready_file or args.until:
        watch = dict(data.get("watch") or {})
        for key, value in (("every", args.watch), ("ready_file", args.ready_file), ("until", args.until)):
            if value is not None:
                watch[key] = value
        data["watch"] = watch
    overrides: dict[str, Any] = {}
    flag_values(args, overrides, exclude=MATRIX_NAMES)
    if not data.get("models") or not data.get("benchmarks"):
        raise ConfigError("a matrix needs models and benchmarks: pass --model and --bench (each repeatable), or "
                          "--config FILE with 'models:' and 'benchmarks:' (docs/matrix.md)")
    try:
        config = MatrixConfig.model_validate(data)
    except ValidationError as err:
        source = f"matrix {args.config!r}" if args.config else "matrix flags"
        raise ConfigError(format_validation_error(err, source)) from None
    return config, overrides


def cmd_matrix(args: argparse.Namespace) -> int:
    """``matrix``: run (or resume) every cell of the matrix, then print its table of headlines."""
    from runner.engine.matrix.request import MatrixRequest
    from runner.evaluators import evaluate_matrix

    config, overrides = matrix_config(args)
    log.configure(overrides.get("log_format") or config.settings.get("log_format"))
    progress = overrides.get("progress") or config.settings.get("progress")
    request = MatrixRequest.from_config(config, overrides, progress_bar={"on": True, "off": False}.get(progress))
    asyncio.run(evaluate_matrix(request, html=args.html))
    return 0
