"""A solution's GAIA answer as the leaderboard receives it, and the leaderboard's submission file.

The leaderboard (``https://huggingface.co/spaces/gaia-benchmark/leaderboard``, ``content.py``, "Submissions") takes
JSON lines ``{"task_id", "model_answer", "reasoning_trace"}`` (the last optional) and scores each ``model_answer``
with its ``question_scorer``; the test split's answers are not public, so a test-split run is scored there, from
this file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

SUBMISSION_FILE = "submission.jsonl"
"""The submission of repeat 0, beside ``summary.json`` in the run directory; repeat ``k > 0`` is written to
``submission.repeat-<k>.jsonl``."""


def submission_file(repeat: int) -> str:
    """The file name of the submission made of repeat ``repeat``'s answers."""
    return SUBMISSION_FILE if repeat == 0 else f"submission.repeat-{repeat}.jsonl"


def answer_text(output: Any) -> str | None:
    """The ``model_answer`` of a solution's output, as the leaderboard would receive it.

    - ``None`` stays ``None`` (the leaderboard's scorer reads it as the text ``"None"``);
    - a string is the answer;
    - a mapping: its ``model_answer`` (the submission's field; the baseline agent's output), else its ``answer``,
      read by these same rules;
    - a number or a boolean: its ``str`` (``42``, ``3.5``, ``True``), since a submission's answer is text;
    - a list or tuple: its elements' texts joined by ``", "`` (GAIA's comma-separated list form).

    Anything else is its ``str``.
    """
    if output is None or isinstance(output, str):
        return output
    if isinstance(output, Mapping):
        for key in ("model_answer", "answer"):
            if key in output:
                return answer_text(output[key])
        return None
    if isinstance(output, (list, tuple)):
        return ", ".join(str(answer_text(item)) for item in output)
    return str(output)


def reasoning_text(output: Any) -> str | None:
    """The ``reasoning_trace`` of a solution's output: a mapping's ``reasoning_trace`` as text, else ``None``."""
    if isinstance(output, Mapping) and output.get("reasoning_trace") is not None:
        trace = output["reasoning_trace"]
        return trace if isinstance(trace, str) else json.dumps(trace, ensure_ascii=False, default=str)
    return None


def submission_line(task_id: str, output: Any) -> dict[str, Any]:
    """One line of the submission file for ``task_id`` (``reasoning_trace`` only when the output has one)."""
    line: dict[str, Any] = {"task_id": task_id, "model_answer": answer_text(output)}
    trace = reasoning_text(output)
    if trace is not None:
        line["reasoning_trace"] = trace
    return line


def submission_bytes(lines: Iterable[Mapping[str, Any]]) -> bytes:
    """JSON lines (UTF-8, one object per line, a final newline)."""
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
