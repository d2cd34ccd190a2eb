"""Vendored code: BFCL's simulated APIs for the multi-turn categories, kept verbatim.

Source: the PyPI package ``bfcl-eval`` 2026.3.23,
``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/{gorilla_file_system, long_context, math_api, message_api,
posting_api, ticket_api, trading_bot, travel_booking, vehicle_control}.py``; licence: Apache License 2.0, Copyright
the Gorilla authors, UC Berkeley Sky Computing Lab
(https://github.com/ShishirPatil/gorilla/tree/main/berkeley-function-call-leaderboard).

The modules are byte for byte the package's, except the import path of ``long_context`` in four of them
(``bfcl_eval.eval_checker.multi_turn_eval.func_source_code.long_context`` became
``runner.benchmarks.bfcl.vendor.long_context``). Do not edit, reformat or lint them: BFCL's state checker compares
their objects attribute by attribute, so any change could change verdicts. Updating means copying the files of a newer
``bfcl-eval`` again. The folder's name keeps them out of the linter (``[tool.ruff] extend-exclude`` in
``pyproject.toml``) and the duplicate finder. :mod:`runner.benchmarks.bfcl.apis` loads them by class name.
"""
