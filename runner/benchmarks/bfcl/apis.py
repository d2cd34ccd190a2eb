"""BFCL's simulated APIs for the multi-turn categories, by class name: a file system, a calculator, messaging,
posting, tickets, trading, travel booking and vehicle control.

The classes themselves are ``bfcl-eval`` 2026.3.23's, kept verbatim in :mod:`runner.benchmarks.bfcl.vendor` (Apache
License 2.0; the provenance is there). They are copied rather than imported because ``bfcl-eval`` requires torch,
FAISS and six model vendors' SDKs (see ``docs/bfcl.md``); the state checker compares their objects' attributes, so
any edit would change verdicts. ``math_api`` needs ``mpmath`` (the ``bfcl`` extra). The memory and web-search APIs
are not copied: those categories are refused.
"""

from __future__ import annotations

import importlib
from typing import Any

from runner.core.errors import BenchmarkError

VENDOR = "runner.benchmarks.bfcl.vendor"
"""The package holding the verbatim modules."""

CLASS_MODULES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
"""Class name -> its module in :mod:`runner.benchmarks.bfcl.vendor` (``CLASS_FILE_PATH_MAPPING`` of
``executable_backend_config.py``)."""

FUNC_DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
"""Class name -> its function docs under ``multi_turn_func_doc/`` (``MULTI_TURN_FUNC_DOC_FILE_MAPPING``)."""

STATELESS_CLASSES = ("MathAPI",)
"""Classes built without a scenario (``STATELESS_CLASSES``)."""


def api_class(name: str) -> type:
    """The simulated API class ``name`` (imported on first use).

    Raises:
        BenchmarkError: an unknown class, or ``mpmath`` missing for ``MathAPI``.
    """
    if name not in CLASS_MODULES:
        raise BenchmarkError(f"BFCL item uses an unknown simulated API {name!r}; known: {', '.join(CLASS_MODULES)}")
    try:
        module = importlib.import_module(f"{VENDOR}.{CLASS_MODULES[name]}")
    except ImportError as exc:
        raise BenchmarkError(f"BFCL's {name} needs {exc.name} ({exc}); pip install 'ray-bench-runner[bfcl]'") from None
    return getattr(module, name)


def new_instance(name: str, initial_config: dict[str, Any], long_context: bool) -> Any:
    """A fresh instance of ``name`` loaded with its part of ``initial_config`` (deep-copied, as the official
    executor does), unless it is stateless."""
    import copy

    instance = api_class(name)()
    if name not in STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(initial_config.get(name, {})), long_context=long_context)
    return instance
