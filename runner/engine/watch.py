"""Stop a run whose model server fails every call the same way, instead of writing one error record per task.

Some errors say that every further call to the server will fail alike; the model layer marks them with a code that
the record keeps (``error.code``, see :func:`runner.engine.item.execute.error_info`):

- ``protocol_error``: the server answered something that is not the OpenAI API (a web page, another API's JSON);
- ``quota_exhausted``: it refused with HTTP 429 because the account's quota is used up (OpenAI's
  ``insufficient_quota``), which no wait restores;
- ``rate_limited``: it refused every attempt of a call with HTTP 429 (its rate limit, or a quota of another name);
- ``model_not_found``: it answered HTTP 404 in the API's own JSON (vLLM's "The model `x` does not exist", OpenAI's
  ``model_not_found``): it serves no model of that name;
- ``replica_failed``: the model's replica, served by the run, failed past its restarts (one such item stops the run);
- ``ignored_option``: the engine answered without what the request asked for (``echo``'s prompt log-probabilities,
  ``n`` choices, a forced tool call: :mod:`runner.models._asked`), so no such answer can be scored; the line names
  the option.

:class:`ServerWatch` sees every item's acknowledgement (through :meth:`Progress.advance
<runner.engine.progress.Progress.advance>`, which both executors feed) and stops the run with one line once
:data:`ERRORS_TO_STOP` items have ended with the same such code since the last item that ended ``ok``: an ``ok``
item shows that the server does answer, so one that garbles a rare reply, or refuses now and then, does not stop a
long run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.core.errors import ProtocolStop, RefusalStop, ServerStop
from runner.core.record import ErrorInfo


@dataclass(frozen=True)
class _Stop:
    """How a code stops a run: the error raised, what the line says happened and the fix it names."""

    error: type[ServerStop]
    what: str
    fix: str


_STOPS = {
    "protocol_error": _Stop(ProtocolStop, "the model server speaks another protocol",
                            "fix the server's URL (--model-base-url, --judge-base-url...)"),
    "quota_exhausted": _Stop(RefusalStop, "the model server refuses every call with HTTP 429: the quota is used up",
                             "restore the account's quota with the provider"),
    "rate_limited": _Stop(RefusalStop, "the model server keeps refusing calls with HTTP 429",
                          "lower the request rate (--max-rpm, --concurrency) or wait for the server's limit to reset"),
    "model_not_found": _Stop(ServerStop, "the model server does not serve the model",
                             "check the model's name against the server's GET /v1/models, and its URL"),
    "replica_failed": _Stop(ServerStop, "a model replica the run serves failed for good",
                            "fix the cause (GPU memory, the engine's log under the run's replicas/)"),
    "ignored_option": _Stop(ServerStop, "the model's engine ignores {option}, which the answers need",
                            "point the run at an engine that honours it (the error says which)"),
}

_OPTION = re.compile(r"`\w+`")
"""The option an ``ignored_option`` error names, in backquotes (``the engine (llama.cpp) ignores `echo```)."""

ERRORS_TO_STOP = {"protocol_error": 3, "quota_exhausted": 3, "rate_limited": 5, "model_not_found": 3,
                  "replica_failed": 1, "ignored_option": 3}
"""Items ended by an error of each code, with no ``ok`` item in between, after which the run stops: a few for the
codes that are certain to repeat, more for refusals that a rate limit may lift."""


class ServerWatch:
    """Counts the items ended by each code of :data:`ERRORS_TO_STOP` since the last ``ok`` one; stops the run at the
    code's limit."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def observe(self, status: str, error: ErrorInfo | None) -> None:
        """Account for one finished item: its record ``status`` and the error that ended it (``None`` if none).

        Raises:
            ServerStop: the limit-th error of one code since the last ``ok`` item (``ProtocolStop`` for protocol
                errors, ``RefusalStop`` for refusals); the line quotes the last error, which names the model, the
                URL and what came back.
        """
        if status == "ok":
            self.counts.clear()
            return
        if error is None or error.code is None or error.code not in ERRORS_TO_STOP:
            return
        count = self.counts[error.code] = self.counts.get(error.code, 0) + 1
        if count >= ERRORS_TO_STOP[error.code]:
            stop = _STOPS[error.code]
            option = _OPTION.search(error.message)
            what = stop.what.format(option=option.group(0) if option else "a request option")
            raise stop.error(
                f"{what}: {count} items in a row failed with {error.type} ({error.message}); the run stopped, "
                f"its records are kept: {stop.fix}, then run the same command with --rerun-failed"
            )
