"""Solutions of the served-model tests: each asks the run's embedded model (SmolLM2, served by the run) a short
question through the model layer, and some misbehave on one item, once (tracked in a file), to kill the worker that
runs it or its model's server."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from runner.core import served
from runner.core.loopback import PROXY_VARIABLES
from runner.core.solution import SolutionOutput, solution_factory
from runner.core.task import Task
from runner.models import ChatModel, user_message

EMBEDDED = "transformers:smollm2-135m-instruct"


def _once(flag: str) -> bool:
    """True the first time it is asked about ``flag`` (a file path), false after."""
    path = Path(flag)
    if path.exists():
        return False
    path.write_text(str(os.getpid()))
    return True


def _server_pids() -> list[int]:
    """The processes of this worker's replica of the embedded model: whoever listens on its port, and its session."""
    endpoint = served.served_endpoint(EMBEDDED)
    assert endpoint is not None, "the replica is not published in this worker"
    port = urlsplit(endpoint.base_url).port
    listening = [conn.pid for conn in psutil.net_connections("tcp") if conn.laddr and conn.laddr.port == port
                 and conn.status == psutil.CONN_LISTEN and conn.pid]
    return listening


@solution_factory
def ask(model: str = EMBEDDED, flag: str = "", kill: str = "",
        proxy: str = "") -> Callable[[Task], Awaitable[SolutionOutput]]:
    """Ask ``model`` (the run's ``--model``: the embedded one) ``What is <task input>?`` (4 tokens at most). With
    ``kill`` (``worker`` or ``server``), the first item to run kills this worker's process or its replica's server
    (SIGKILL) before it asks; ``flag`` is the file that makes it happen once. With ``proxy`` (a URL), the first item
    sets it as every proxy variable of this worker's environment, upper and lower case, and removes ``NO_PROXY``
    (a Ray worker on a cluster with an egress proxy): the worker's later calls and health checks, and a replica it
    restarts, see it. Ray only: with ``--sequential`` it would change the driver's environment."""
    chat_model = ChatModel.from_name(model, temperature=0.0, max_tokens=4)

    async def solve(task: Task) -> SolutionOutput:
        if proxy and os.environ.get("HTTP_PROXY") != proxy:
            os.environ.update(dict.fromkeys(PROXY_VARIABLES, proxy))
            for name in ("NO_PROXY", "no_proxy"):
                os.environ.pop(name, None)
        if kill and _once(flag):
            if kill == "worker":
                os.kill(os.getpid(), signal.SIGKILL)
            for pid in _server_pids():
                os.kill(pid, signal.SIGKILL)
        reply = await chat_model.chat([user_message(f"What is {task.input}?")])
        return SolutionOutput(success=True, output=reply.text, meta={"pid": os.getpid()})

    return solve
