"""Why a model server did not start, from the last lines of its log: the cause and the server's own error line.

Every engine prints a Python traceback, log lines and warnings in its own order; the line that says what went wrong
is usually the last ``SomeError: ...`` line, but not always (vLLM re-raises ``RuntimeError: Engine core
initialization failed`` after the real cause, argparse prints ``error: unrecognized arguments``, click prints ``No
such option``). So the known causes are matched first, each by the phrasings of vLLM, SGLang and transformers, and the
last error-looking line is the fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.core.errors import one_line

TAIL_BYTES = 64 * 1024
"""How much of a log's end is read: more than a traceback, less than a model's loading chatter."""

_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("engine_flag", re.compile(
        r"unrecognized arguments|error: argument |invalid choice|No such option|Got unexpected extra argument"
        r"|Invalid value for|Missing argument|error: the following arguments are required"),
     "fix the engine flag (--engine-arg)"),
    ("out_of_memory", re.compile(
        r"CUDA out of memory|OutOfMemoryError|out of memory|No available memory for the cache blocks"
        r"|Not enough memory|not enough KV cache|insufficient memory|Cannot allocate memory|MemoryError",
        re.IGNORECASE),
     "give the worker more GPUs or memory (--num-gpus), a smaller model, or a smaller context (--engine-arg)"),
    ("context_length", re.compile(
        r"max_model_len.*(?:greater|larger|exceeds?)|context.length.*(?:greater|larger|exceeds?)"
        r"|User-specified max_model_len|is larger than the maximum|--context-length.*(?:greater|larger)",
        re.IGNORECASE),
     "ask for a context the model has (--engine-arg=--max-model-len=N for vLLM, --context-length for SGLang)"),
    ("weights", re.compile(
        r"GatedRepoError|Cannot access gated repo|401 Client Error|403 Client Error|RepositoryNotFoundError"
        r"|Repository Not Found|LocalEntryNotFoundError|is not a local folder and is not a valid model identifier"
        r"|does not appear to have (?:a )?files? named|No such file or directory|HFValidationError"
        r"|couldn't connect to '?https://huggingface.co|Invalid repository ID|EntryNotFoundError"),
     "check the model's name or path, and HF_TOKEN for a gated model (it must reach every worker)"),
    ("architecture", re.compile(
        r"are not supported for now|is not supported|Unrecognized model|Unrecognized configuration class"
        r"|does not recognize this architecture|model type .* not|Model architectures? .* (?:are|is) not"
        r"|architectures? (?:is )?None|ModelNotSupported", re.IGNORECASE),
     "this engine cannot run this model's architecture: pick another engine (vllm:, sglang:, transformers:) or "
     "a newer engine version"),
)
_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit)\b:?|ERROR\b|error:|Error:|\s*raise\b|CRITICAL\b)")
_TRACEBACK_NOISE = re.compile(r"^\s*(?:File \"|\^+$|~+$|Traceback \(most recent call last\))")


@dataclass(frozen=True)
class StartFault:
    """What a server's log says about why it did not start.

    Args:
        cause: ``engine_flag``, ``out_of_memory``, ``context_length``, ``weights``, ``architecture``, or ``exited``
            when no known cause matches.
        line: the server's own line that says so (one line, cut to 300 characters; ``""`` for an empty log).
        fix: what the user can do.
    """

    cause: str
    line: str
    fix: str


def read_tail(path: Path, start: int = 0, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of ``path`` after byte ``start`` (the current start's output), as text; ``""`` when
    the file cannot be read."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            end = handle.tell()
            handle.seek(max(start, end - limit))
            data = handle.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def tail_lines(text: str, count: int) -> list[str]:
    """The last ``count`` non-blank lines of ``text``, progress-bar carriage returns resolved to their last state."""
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in text.splitlines()]
    return [line for line in lines if line.strip()][-count:]


_LISTENING: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Uvicorn running on socket \('([^']+)', (\d+)"), "uvicorn/server.py, Server._log_started_message, "
                                                                  "for a socket it was given (vLLM binds its own)"),
    (re.compile(r"Uvicorn running on (?:unix socket )?(\S+)"), "uvicorn/server.py, Server._log_started_message: "
                                                               "every engine's HTTP server (transformers serve, vLLM, "
                                                               "SGLang)"),
    (re.compile(r"Starting vLLM API server \d+ on (\S+)"), "vllm/entrypoints/openai/api_server.py, run_server_worker"),
    (re.compile(r"The server is fired up and ready to roll"), "python/sglang/srt/entrypoints/http_server.py, "
                                                             "_wait_and_warmup (after its own first request)"),
)
"""The lines by which a server says that it is listening: the pattern (its groups, when it has them, the address:
a URL or a socket's path, or a host and a port) and the line's source."""

_BIND_FAILURE = re.compile(r"Address already in use|\[Errno 98\]|error while attempting to bind", re.IGNORECASE)
"""A server that could not bind its port: ``[Errno 98] error while attempting to bind on address ('127.0.0.1',
8000): address already in use`` (asyncio's create_server, logged by uvicorn/server.py, Server.startup, which then
exits 3), Python's ``OSError: [Errno 98] Address already in use`` (vLLM binds its socket itself)."""
_BIND_ADDRESS = re.compile(r"address \('([^']+)', (\d+)\)")


def listening(text: str) -> tuple[str, str | None] | None:
    """The latest line of a server's log (``text``) that says it is listening, and the address it names
    (``http://127.0.0.1:8000``; ``None`` when the line names none); ``None`` when no line says so."""
    for line in reversed(tail_lines(text, 400)):
        for pattern, _ in _LISTENING:
            found = pattern.search(line)
            if found and pattern.groups == 2:
                return one_line(line, 200), f"http://{found.group(1)}:{found.group(2)}"
            if found:
                return one_line(line, 200), found.group(1) if pattern.groups else None
    return None


def bind_failure(text: str) -> tuple[str, str | None] | None:
    """The latest line of a server's log (``text``) that says its port was taken, and the address it names
    (``127.0.0.1:8000``; ``None`` when the line names none); ``None`` when no line says so."""
    for line in reversed(tail_lines(text, 400)):
        if _BIND_FAILURE.search(line):
            address = _BIND_ADDRESS.search(line)
            return one_line(line, 200), f"{address.group(1)}:{address.group(2)}" if address else None
    return None


def classify(text: str) -> StartFault:
    """The cause of a failed start from the end of its log (``text``): the latest line matching a known cause,
    else the latest error-looking line, else the last line."""
    lines = tail_lines(text, 400)
    for cause, pattern, fix in _CAUSES:
        for line in reversed(lines):
            if pattern.search(line) and not _TRACEBACK_NOISE.match(line):
                return StartFault(cause, one_line(line), fix)
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()):
            return StartFault("exited", one_line(line), "see the server's log")
    return StartFault("exited", one_line(lines[-1]) if lines else "", "see the server's log")
