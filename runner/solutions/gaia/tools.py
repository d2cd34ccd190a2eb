"""The local tools of the GAIA baseline agent: reading files, a calculator, and Python in a subprocess.

Each task gets a fresh working directory holding a copy of its attached file (a copy, so that code the model writes
cannot change the dataset). ``read_file`` reads files of that directory as text (the attachment's readers,
:mod:`runner.benchmarks.gaia.attachments`); ``python`` runs a program there in a new process with a time limit.

The Python tool is not a sandbox: the program runs with the user's rights and this environment's packages, like the
local executors of other agent frameworks. It gets an isolated interpreter (``-I``: no user site, no ``PYTHON*``
variables), a minimal environment (no API keys or tokens of the run), the working directory as ``HOME``, and is
killed with its whole process group (its children too) when the time limit passes or the task is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from runner.benchmarks.gaia.attachments import Attachment, AttachmentText, read_text
from runner.solutions.tools import CALCULATOR_TOOL, ToolError, calculator

DEFAULT_PYTHON_TIMEOUT_S = 30.0
MAX_OUTPUT_BYTES = 20_000
"""Bytes of a program's stdout (and of its stderr) kept; the rest is read and dropped."""
MAX_CHARS = 12_000
"""Characters of a file's text one ``read_file`` call returns (``offset`` pages through the rest)."""
CHILD_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
"""The variables a Python program inherits (nothing else: no keys or tokens)."""

READ_FILE_TOOL = {
    "name": "read_file",
    "description": ("Read a file of your working directory as text: the attached file (the default) or a file a "
                    "Python program wrote or unpacked. Spreadsheets come as CSV rows per sheet, PDFs as text per "
                    "page, Word and PowerPoint files as their text, zip archives as their member list. Returns at "
                    "most 12000 characters; pass offset to read on. Images, audio and video have no text here."),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file's name in the working directory (default: the "
                                                      "attached file)"},
            "offset": {"type": "integer", "description": "the character to start from (default 0)"},
        },
    },
}


def python_tool(timeout: float) -> dict[str, Any]:
    """The ``python`` tool's definition, saying its time limit."""
    return {
        "name": "python",
        "description": (f"Run a Python 3 program in a new process, in your working directory (which holds the "
                        f"attached file), and get what it prints: stdout, stderr and the exit code. Print what you "
                        f"need to see. Installed packages may be imported. It is stopped after {timeout:g} s."),
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the program's source code"}},
            "required": ["code"],
        },
    }


async def _drain(stream: asyncio.StreamReader | None, into: bytearray, cap: int) -> None:
    """Read ``stream`` to its end, keeping its first ``cap`` bytes in ``into``."""
    if stream is None:
        return
    while chunk := await stream.read(65536):
        if len(into) < cap:
            into.extend(chunk[: cap - len(into)])


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytearray, cap: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + f"\n[output cut at {cap} bytes]" if len(data) >= cap else text


async def run_python(code: str, cwd: Path, timeout: float = DEFAULT_PYTHON_TIMEOUT_S,
                     max_output: int = MAX_OUTPUT_BYTES) -> dict[str, Any]:
    """Run ``code`` with this interpreter in a new process group in ``cwd``.

    Returns:
        ``{"stdout", "stderr", "exit_code", "timed_out"}``: the first ``max_output`` bytes of each stream (UTF-8,
        undecodable bytes replaced), the exit status (negative: killed by that signal; ``None`` when timed out) and
        whether the time limit of ``timeout`` seconds passed (the group is killed then, children included, and what
        was printed until then is returned).

    Cancelling the call kills the group too.
    """
    environment = {name: os.environ[name] for name in CHILD_ENVIRONMENT if name in os.environ}
    environment.update(HOME=str(cwd), MPLBACKEND="Agg")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-X", "utf8", "-c", code, cwd=str(cwd), env=environment,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    stdout, stderr = bytearray(), bytearray()
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(_drain(process.stdout, stdout, max_output),
                                              _drain(process.stderr, stderr, max_output), process.wait()), timeout)
    except asyncio.TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None or timed_out:
            _kill_group(process)
        if process.returncode is None:
            await process.wait()
    return {"stdout": _text(stdout, max_output), "stderr": _text(stderr, max_output),
            "exit_code": None if timed_out else process.returncode, "timed_out": timed_out}


def _page(text: AttachmentText, name: str, offset: int) -> dict[str, Any]:
    if text.text is None:
        return {"path": name, "reader": text.reader, "note": text.note}
    end = offset + MAX_CHARS
    result: dict[str, Any] = {"path": name, "reader": text.reader, "text": text.text[offset:end], "offset": offset,
                              "total_chars": len(text.text), "next_offset": end if end < len(text.text) else None}
    if text.note:
        result["note"] = text.note
    return result


class Workspace:
    """One task's working directory and its local tools (``read_file``, ``calculator``, ``python``).

    Args:
        attachment: the task's attached file, copied into the directory; ``None`` when it has none.
        python_timeout: seconds a Python program may run.

    Use it as a context manager: the directory is removed on exit.

    Raises:
        OSError: the directory cannot be made (on entry).
    """

    def __init__(self, attachment: Attachment | None, python_timeout: float = DEFAULT_PYTHON_TIMEOUT_S) -> None:
        self.attachment = attachment
        self.python_timeout = python_timeout
        self.directory: Path | None = None
        self.attachment_problem: str | None = None

    def __enter__(self) -> Workspace:
        self.directory = Path(tempfile.mkdtemp(prefix="gaia-task-"))
        if self.attachment is not None:
            try:
                shutil.copyfile(self.attachment.path(), self.directory / self.attachment.name)
            except OSError as exc:  # FileNotFoundError included: the model hears why it has no file
                self.attachment_problem = f"the attached file {self.attachment.name} is not available: {exc}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def definitions(self) -> list[dict[str, Any]]:
        """The local tools' definitions."""
        return [READ_FILE_TOOL, CALCULATOR_TOOL, python_tool(self.python_timeout)]

    @property
    def names(self) -> list[str]:
        """The local tools' names."""
        return [tool["name"] for tool in self.definitions]

    def _resolve(self, name: str) -> Path:
        assert self.directory is not None
        path = Path(os.path.normpath(self.directory / name))
        if path != self.directory and self.directory not in path.parents:
            raise ToolError(f"read_file reads files of the working directory only; {name!r} is outside it")
        if not path.is_file():
            present = sorted(p.name for p in self.directory.iterdir())
            raise ToolError(f"there is no file {name!r}; the working directory holds: {', '.join(present) or 'nothing'}")
        return path

    def read_file(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A page of a file's text (see :data:`READ_FILE_TOOL`).

        Raises:
            ToolError: bad arguments, no attached file, a path outside the directory or no such file.
        """
        offset = arguments.get("offset", 0)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ToolError("read_file: offset must be a whole number of at least 0")
        name = arguments.get("path")
        if name is not None and not isinstance(name, str):
            raise ToolError("read_file: path must be a string")
        attachment = self.attachment
        if not name or (attachment is not None and name == attachment.name):
            if attachment is None:
                raise ToolError("this task has no attached file; give the path of a file in the working directory")
            if self.attachment_problem:
                raise ToolError(self.attachment_problem)
            return _page(attachment.text(), attachment.name, offset)
        path = self._resolve(name)
        return _page(read_text(path), name, offset)

    async def run(self, name: str, arguments: dict[str, Any]) -> Any:
        """The result of the local tool call ``name(arguments)``.

        Raises:
            ToolError: an unknown tool or arguments it refuses.
        """
        if name == READ_FILE_TOOL["name"]:
            try:
                return await asyncio.to_thread(self.read_file, arguments)
            except OSError as exc:
                raise ToolError(f"read_file: {exc}") from None
        if name == CALCULATOR_TOOL["name"]:
            return calculator(arguments)
        if name == "python":
            code = arguments.get("code")
            if not isinstance(code, str) or not code.strip():
                raise ToolError("python needs a non-empty string 'code'")
            assert self.directory is not None
            return await run_python(code, self.directory, self.python_timeout)
        raise ToolError(f"there is no tool {name!r}")
