"""Fixtures for the BFCL solution's tests: the shared data's tasks and the official evaluator (the benchmark tests'
fixtures), and a scripted OpenAI-compatible model server standing in for a model that calls tools (no language
model can run on the test machines; everything on our side of the HTTP connection is the real code)."""

from __future__ import annotations

from tests.benchmarks.bfcl.conftest import (  # noqa: F401 - fixtures shared with the benchmark's tests
    bfcl_dir,
    bfcl_tasks,
    official_entries,
    official_verdict,
    reference_scorer,
)
