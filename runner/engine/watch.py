"""Stop a run whose model server keeps speaking another protocol, instead of writing one error record per task.

A ``ModelProtocolError`` (flagged ``protocol_error``, recorded with ``error.code == "protocol_error"``) means that
the server answered something that is not the OpenAI API (a web page, another API's JSON), so every further call to
it fails the same way. :class:`ProtocolWatch` sees every item's acknowledgement (through
:meth:`Progress.advance <runner.engine.progress.Progress.advance>`, which both executors feed) and stops the run
with one line once :data:`PROTOCOL_ERRORS_TO_STOP` items have ended with such an error since the last item that
ended ``ok``: an ``ok`` item shows that the servers do answer in the protocol, so a server that garbles a rare
reply does not stop a long run.
"""

from __future__ import annotations

from runner.core.errors import ProtocolStop
from runner.core.record import ErrorInfo

PROTOCOL_ERRORS_TO_STOP = 3
"""Items ended by a protocol error, with no ``ok`` item in between, after which the run stops."""


class ProtocolWatch:
    """Counts items ended by a protocol error since the last ``ok`` one; stops the run at ``limit``.

    Args:
        limit: the count that stops the run (default :data:`PROTOCOL_ERRORS_TO_STOP`).
    """

    def __init__(self, limit: int = PROTOCOL_ERRORS_TO_STOP) -> None:
        self.limit = limit
        self.count = 0

    def observe(self, status: str, error: ErrorInfo | None) -> None:
        """Account for one finished item: its record ``status`` and the error that ended it (``None`` if none).

        Raises:
            ProtocolStop: the ``limit``-th protocol error since the last ``ok`` item; the line quotes the last error,
                which names the model, the URL and what came back.
        """
        if status == "ok":
            self.count = 0
            return
        if error is None or error.code != "protocol_error":
            return
        self.count += 1
        if self.count >= self.limit:
            raise ProtocolStop(
                f"the model server speaks another protocol: {self.count} items in a row failed with "
                f"{error.type} ({error.message}); the run stopped, its records are kept: fix the server's URL "
                "(--model-base-url, --judge-base-url...), then run the same command with --rerun-failed"
            )
