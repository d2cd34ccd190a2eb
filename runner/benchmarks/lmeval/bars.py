"""lm-eval's progress bars, off wherever the runner calls lm-eval.

lm-eval draws a tqdm bar in each request loop of its model classes, and its API models' loops take no
``disable_tqdm`` at all (``TemplateAPI._loglikelihood_tokens`` and ``generate_until`` draw ``Requesting API``
whatever they are given; ``HFLM.loglikelihood_rolling`` passes ``disable_tqdm=False`` on): called once per batch of
documents, as the runner calls them, that is a bar on stderr for every document, between the run's own lines. Its
tasks draw one more while they build their requests.

Inside :func:`no_bars` (a context variable, so the calls of other threads and other code are untouched) every bar
those modules start is disabled, whatever ``disable`` its caller passed: each module's ``tqdm`` (and
``tqdm_asyncio``) is a subclass that reads the variable, installed once, and otherwise the same class.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import threading
from collections.abc import Iterator
from typing import Any

_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("runner_lm_eval_quiet", default=False)
_MODULES = ("lm_eval.api.model", "lm_eval.api.task", "lm_eval.models.huggingface", "lm_eval.models.api_models")
"""The lm-eval modules whose ``tqdm`` draws the bars of the runner's paths: the model classes' request loops (``LM``,
``HFLM``, ``TemplateAPI`` under ``local-completions`` and ``local-chat-completions``) and ``Task.build_all_requests``."""
_lock = threading.Lock()
_installed = False


def _quiet_class(base: type) -> type:
    """``base`` (a tqdm class) with every bar disabled while :func:`no_bars` is in force."""

    class Quiet(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if _QUIET.get():
                kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    Quiet.__name__ = Quiet.__qualname__ = base.__name__
    return Quiet


def install() -> None:
    """Put the quiet tqdm classes in lm-eval's modules (:data:`_MODULES`), once per process; a module that cannot
    be imported (an extra not installed: ``lm-eval[api]`` without ``[hf]``) is left out."""
    global _installed
    with _lock:
        if _installed:
            return
        from tqdm import tqdm
        from tqdm.asyncio import tqdm_asyncio

        quiet = {tqdm: _quiet_class(tqdm), tqdm_asyncio: _quiet_class(tqdm_asyncio)}
        for name in _MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for attribute in ("tqdm", "tqdm_asyncio"):
                found = getattr(module, attribute, None)
                if found in quiet:
                    setattr(module, attribute, quiet[found])
        _installed = True


@contextlib.contextmanager
def no_bars() -> Iterator[None]:
    """lm-eval draws no progress bar inside the block, in this context (this thread, or the context a call was
    copied into); installs the quiet classes first (:func:`install`)."""
    install()
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)
