"""Command-line flags of a run, and turning them (plus an optional config file) into a :class:`RunConfig`.

Flags override the config file; a flag left out keeps the file's value (every flag defaults to ``None``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from runner.core.config import RunConfig, build_config, load_config_file
from runner.core.errors import ConfigError

# flag dest -> WorkerSpec field
WORKER_FLAGS = {
    "workers": "num_workers",
    "num_cpus": "num_cpus",
    "num_gpus": "num_gpus",
    "memory": "memory",
    "memory_limit": "memory_limit",
    "resources": "resources",
    "accelerator_type": "accelerator_type",
    "concurrency": "max_concurrency",
    "max_attempts": "max_attempts",
    "placement_timeout": "placement_timeout",
}
# flag dest -> RunConfig field
RUN_FLAGS = (
    "benchmark",
    "data_dir",
    "solution",
    "model",
    "model_base_url",
    "user_model",
    "user_model_base_url",
    "judge_model",
    "judge_base_url",
    "storage",
    "storage_options",
    "repeats",
    "limit",
    "timeout",
    "metric_timeout",
    "solution_retries",
    "executor",
    "force",
    "rerun_failed",
    "take_over",
    "storage_outage",
    "lease_ttl",
    "allow_overwriting_store",
    "ray_address",
    "log_format",
    "max_tokens",
    "max_cost",
    "cache",
    "cache_policy",
    "shards",
    "model_startup_timeout",
    "replica_restarts",
)
# flag dest -> EndpointLimits field; each flag takes N (every endpoint) or MODEL=N (that model's endpoints)
LIMIT_FLAGS = ("max_rpm", "max_tpm", "max_connections")


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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a run (shared by ``run`` and ``submit``)."""
    what = parser.add_argument_group("what to run")
    what.add_argument("--config", metavar="FILE", help="YAML or JSON run config; flags override it")
    what.add_argument("--benchmark", "-b", help="a built-in benchmark (see 'list') or module:Class")
    what.add_argument(
        "--benchmark-arg", "-B", dest="benchmark_args", action="append", type=key_value, metavar="KEY=VALUE",
        help="benchmark constructor argument (repeatable), e.g. -B language=zh",
    )
    what.add_argument("--data-dir", help="where the benchmark reads its data (any fsspec path or URL)")
    what.add_argument("--solution", "-s", help="a built-in solution (see 'list') or module:function")
    what.add_argument(
        "--solution-arg", "-S", dest="solution_args", action="append", type=key_value, metavar="KEY=VALUE",
        help="solution constructor argument (repeatable)",
    )
    what.add_argument("--model", help="chat model of a model-driven solution, provider:model, e.g. openai:gpt-4o, "
                      "vllm:Qwen/Qwen2.5-7B-Instruct, mock (default: $AGENT_CHAT_MODEL_NAME; see 'list')")
    what.add_argument("--model-base-url", metavar="URL",
                      help="API root of the model's server, e.g. http://localhost:8000/v1 (vLLM) or "
                      "http://localhost:11434/v1 (Ollama)")
    what.add_argument("--user-model", metavar="MODEL",
                      help="chat model of the simulated user of a solution that has one (e.g. acebench's "
                      "multi-turn agent tasks), provider:model (default: the agent's model)")
    what.add_argument("--user-model-base-url", metavar="URL",
                      help="API root of the user model's server (default: the provider's; the agent's server "
                      "when --user-model names the agent's model)")
    what.add_argument("--judge-model", help="model of the benchmark's LLM-judged metrics, provider:model "
                      "(default: $EVAL_CHAT_MODEL_NAME, else --model; none: no judge, no judged metrics)")
    what.add_argument("--judge-base-url", metavar="URL",
                      help="API root of the judge's server (default: --model-base-url when the judge is the agent's "
                      "model, else the provider's)")
    what.add_argument("--repeats", type=int, help="runs of each task (default 1); pass@k is reported when > 1")
    what.add_argument("--limit", type=int, help="run only the first N tasks")
    what.add_argument("--timeout", type=float, metavar="SECONDS",
                      help="seconds a solution may take on one task (default 3600; 0: no limit; given, it holds even "
                      "when an async solution blocks its event loop)")
    what.add_argument("--metric-timeout", type=float, metavar="SECONDS",
                      help="seconds each metric may take on one item (default: --timeout's; 0: no limit)")
    what.add_argument("--solution-retries", type=int, metavar="N",
                      help="extra tries, each on a fresh copy of the task, when the solution raises (default 0)")
    what.add_argument("--retry-errors", dest="solution_retries", type=int, action=_Deprecated,
                      new="--solution-retries", help=argparse.SUPPRESS)

    where = parser.add_argument_group("where results go")
    where.add_argument("--storage", metavar="URI", help="run directory: path, file://, s3://... "
                       "(default ./runs/<benchmark>-<UTC timestamp>)")
    where.add_argument("--storage-options", type=json_object, metavar="JSON",
                       help="fsspec options for the storage backend, e.g. '{\"endpoint_url\": \"http://...\"}'")
    where.add_argument("--force", action="store_true", default=None,
                       help="delete this run directory's records and start over")
    where.add_argument("--rerun-failed", action="store_true", default=None,
                       help="run again the items whose record is an error or a timeout (old records go to retired/)")
    where.add_argument("--rerun-errors", dest="rerun_failed", nargs=0, action=_Deprecated, new="--rerun-failed",
                       help=argparse.SUPPRESS)
    where.add_argument("--take-over", action="store_true", default=None,
                       help="take the run over from a driver whose lease lapsed (killed, or cut off from the "
                       "storage); a live driver is never taken over")
    where.add_argument("--storage-outage", type=float, metavar="SECONDS",
                       help="how long record writes wait out a storage that fails with server errors, timeouts or "
                       "resets (new items are held back meanwhile) before the run stops with exit status 3 "
                       "(default 300)")
    where.add_argument("--lease-ttl", type=float, metavar="SECONDS",
                       help="seconds the driver's lease on the run lives without a renewal (renewed every quarter "
                       "of it); a killed driver's lease lapses after it (default 60)")
    where.add_argument("--allow-overwriting-store", action="store_true", default=None,
                       help="write to an object store that does not honour conditional writes (If-None-Match, "
                       "ifGenerationMatch), "
                       "checking each record's existence first; two writers can then race")
    where.add_argument("--shards", choices=("auto", "on", "off"),
                       help="consolidate finished records into Parquet result shards (shards/), which reports, "
                       "resumes and DuckDB read in a few requests (default auto: on object stores only)")

    how = parser.add_argument_group("how to run")
    how.add_argument("--executor", metavar="NAME",
                     help="who runs the items: ray (the default) or sequential (see 'list')")
    how.add_argument("--sequential", dest="executor", action="store_const", const="sequential",
                     help="run here, one task at a time (debugging), instead of on Ray: short for --executor "
                     "sequential")
    how.add_argument("--ray-address", help="Ray cluster to attach to (default: RAY_ADDRESS, else an embedded Ray)")
    how.add_argument("--workers", type=int, help="Ray actors (default: as many as the cluster fits)")
    how.add_argument("--num-cpus", type=float, help="CPUs per worker (default 1)")
    how.add_argument("--num-gpus", type=float, help="GPUs per worker, fractions allowed (default 0)")
    how.add_argument("--memory", help="memory Ray reserves for each worker when it places it, bytes or with a unit "
                     "(e.g. 8GiB); scheduling only: a worker that uses more is not stopped (see --memory-limit)")
    how.add_argument("--memory-limit", metavar="BYTES",
                     help="resident memory each worker process may use (e.g. 4GiB), enforced: an overrun makes the "
                     "running item an error record and the worker is replaced (Ray workers only)")
    how.add_argument("--resources", type=json_object, metavar="JSON", help="custom Ray resources per worker")
    how.add_argument("--accelerator-type", help="Ray accelerator type per worker, e.g. A100")
    how.add_argument("--concurrency", type=int, help="items in flight per worker (default 1)")
    how.add_argument("--max-attempts", type=int,
                     help="executions of an item before a dying worker fails it (default 3; a worker death charges "
                     "an attempt, a solution that raises does not: see --solution-retries)")
    how.add_argument("--placement-timeout", type=float, metavar="SECONDS",
                     help="seconds to wait, with no worker running, for workers to get their resources (held by other "
                     "jobs, or nodes still being added) before the run stops with one line (default 900; 0: no "
                     "bound); the driver says every 30 s what they wait for")
    how.add_argument("--log-format", choices=("console", "json"), help="default: console on a terminal, else json")

    serving = parser.add_argument_group("models served by the run (see docs/models.md)")
    serving.add_argument("--serve", action="append", nargs="?", const="", metavar="MODEL",
                         help="serve MODEL in the run: one replica per worker on its GPUs (vllm:, sglang: or "
                         "transformers: MODEL, a Hugging Face id or a local path); alone, the agent's --model; "
                         "repeatable (e.g. for --judge-model). The embedded model transformers:smollm2-135m-instruct "
                         "is served without it")
    serving.add_argument("--engine-arg", dest="engine_args", action="append", type=engine_args, metavar="ARG",
                         help="a flag for the served model's engine, passed as it is (repeatable), e.g. "
                         "--engine-arg=--max-model-len=8192")
    serving.add_argument("--model-startup-timeout", type=float, metavar="SECONDS",
                         help="seconds a served model's replica may take to become ready (default 1800, enough for "
                         "a 70B model read from disk)")
    serving.add_argument("--replica-restarts", type=int, metavar="N",
                         help="restarts of a replica that exits or stops answering, before the run stops (default 3)")

    traffic = parser.add_argument_group("model traffic (shared by every worker; see docs/models.md)")
    traffic.add_argument("--max-rpm", action="append", type=model_limit, metavar="[MODEL=]N",
                         help="requests per minute to each model endpoint, or to MODEL's (repeatable)")
    traffic.add_argument("--max-tpm", action="append", type=model_limit, metavar="[MODEL=]N",
                         help="tokens (input + output) per minute to each model endpoint, or to MODEL's (repeatable)")
    traffic.add_argument("--max-connections", action="append", type=model_limit, metavar="[MODEL=]N",
                         help="requests in flight to each model endpoint, or to MODEL's (repeatable)")
    traffic.add_argument("--max-tokens", type=int, metavar="N",
                         help="the run's token budget (input + output, every model, resumes included); when spent, "
                         "no new item starts and the run ends with exit status 4")
    traffic.add_argument("--max-cost", type=float, metavar="USD",
                         help="the run's budget in USD, from --price; as --max-tokens otherwise")
    traffic.add_argument("--price", dest="prices", action="append", type=model_price, metavar="MODEL=IN,OUT",
                         help="USD per million input and output tokens of MODEL (repeatable; no built-in prices)")
    traffic.add_argument("--cache", metavar="URI",
                         help="a response cache shared through storage (a path or any fsspec URL, e.g. "
                         "s3://bucket/cache); a hit makes no call and costs nothing")
    traffic.add_argument("--cache-policy", choices=("always", "deterministic", "off"),
                         help="which requests the cache answers (default deterministic: temperature 0 or a seed)")


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> RunConfig:
    """The :class:`RunConfig` of the config file (if any) overridden by the flags that were given.

    Args:
        base: run config fields the config file and the flags override (``submit --values`` passes the ``job``
            values of a Helm values file); a key of the file replaces the same key of ``base`` whole.

    Raises:
        ConfigError: the file or the merged configuration does not validate (naming the field).
    """
    data: dict[str, Any] = dict(base or {})
    if args.config:
        data.update(load_config_file(args.config))
    source = f"config {args.config!r}" if args.config else "run flags"
    given: dict[str, str] = {}
    for name in RUN_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            data[name] = value
            given[name] = _flag(name)
    for flag, field in (("benchmark_args", "benchmark_args"), ("solution_args", "solution_args")):
        pairs = getattr(args, flag, None)
        if pairs:
            merged = dict(data.get(field) or {})
            merged.update(dict(pairs))
            data[field] = merged
    _traffic_flags(args, data, given)
    _serve_flags(args, data, given)
    worker = dict(data.get("worker") or {})
    for flag, field in WORKER_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            worker[field] = None if field == "placement_timeout" and value == 0 else value
            given[f"worker.{field}"] = _flag(flag)
    if worker:
        data["worker"] = worker
    if not data.get("benchmark"):
        raise ConfigError("no benchmark: pass --benchmark NAME (see 'python -m runner list') or --config FILE")
    return build_config(data, source, given)


def _traffic_flags(args: argparse.Namespace, data: dict[str, Any], given: dict[str, str]) -> None:
    """Merge the limit and price flags into ``data`` (a bare limit sets the run's, ``MODEL=N`` the model's) and
    note which flag set each field."""
    model_limits = {name: dict(limits) for name, limits in (data.get("model_limits") or {}).items()}
    for name in LIMIT_FLAGS:
        for model, value in getattr(args, name, None) or ():
            if model is None:
                data[name] = value
                given[name] = _flag(name)
            else:
                model_limits.setdefault(model, {})[name] = value
                given[f"model_limits.{model}.{name}"] = _flag(name)
    if model_limits:
        data["model_limits"] = model_limits
    prices = getattr(args, "prices", None)
    if prices:
        data["prices"] = {**(data.get("prices") or {}), **dict(prices)}
        given.update({f"prices.{model}": "--price" for model, _ in prices})


def _serve_flags(args: argparse.Namespace, data: dict[str, Any], given: dict[str, str]) -> None:
    """Merge ``--serve`` and ``--engine-arg`` into ``data["serve"]``: each ``--serve`` adds a model (the bare flag,
    the agent's model) to the config file's; the engine arguments go to the one served model.

    Raises:
        ConfigError: ``--engine-arg`` without a served model, or with more than one.
    """
    named = getattr(args, "serve", None)
    extra = [word for words in getattr(args, "engine_args", None) or () for word in words]
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


def _flag(dest: str) -> str:
    """The flag of an argparse destination: ``num_cpus`` -> ``--num-cpus``."""
    return "--" + dest.replace("_", "-")
