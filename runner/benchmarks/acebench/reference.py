"""Gold answers, written as a model should write them (the ``reference`` solution's output).

- normal: the first ground-truth candidate as ``[name(key=value, ...)]``, values as Python literals, a ``_<n>``
  suffix of a repeated function dropped unless the suffixed name is a real function of the task;
- special: the sentence the authors' prompt asks for (``["Missing necessary parameters (a, b) for the api (F)"]``,
  ``["There is incorrect value (v) for the parameters (k) in the conversation history."]``,
  ``["Due to the limitations of the function, I cannot solve this problem."]``);
- agent: the milestone calls (the first list when there are alternatives) run one by one through the task's
  environment; the output holds the end state and the calls, and the metrics score the environment as for a
  model's run.
"""

from __future__ import annotations

from typing import Any

from runner.benchmarks.acebench.calls import format_calls
from runner.benchmarks.acebench.files import AGENT_CATEGORIES
from runner.benchmarks.acebench.normal_checker import call_name
from runner.core.solution import SolutionOutput
from runner.core.task import Task

IRRELEVANT_REPLY = '["Due to the limitations of the function, I cannot solve this problem."]'


def normal_reply(functions: list[dict[str, Any]], ground_truth: Any) -> str:
    """The first candidate of ``ground_truth`` as a call list."""
    candidate = ground_truth[0] if isinstance(ground_truth, list) else ground_truth
    names = {f.get("name") for f in functions}
    return format_calls([(call_name(key, names), arguments) for key, arguments in candidate.items()])


def special_reply(category: str, ground_truth: Any) -> str:
    """The sentence that points out the problem of a special task."""
    if "incomplete" in category:
        parts = [f"Missing necessary parameters ({', '.join(map(str, params))}) for the api ({api})"
                 for api, params in ground_truth.items()]
    elif "error" in category:
        parts = [f"There is incorrect value ({', '.join(map(str, values))}) for the parameters ({param}) in the "
                 f"conversation history." for param, values in ground_truth.items()]
    else:
        return IRRELEVANT_REPLY
    return "[" + ", ".join(f'"{part}"' for part in parts) + "]"


def reference_output(task: Task) -> SolutionOutput:
    """The gold answer of an ACEBench task (see the module docstring)."""
    category = task.tags["category"] if task.tags else ""
    if category in AGENT_CATEGORIES:
        environment = task.metadata["environment"]
        milestones = task.metadata.get("milestones") or []
        if milestones and isinstance(milestones[0], list):
            milestones = milestones[0]
        results = [environment.execute(call) for call in milestones]
        return SolutionOutput(output={"state": environment.state(), "calls": list(environment.calls)},
                              trajectory=[{"call": c, "result": r} for c, r in zip(milestones, results)])
    if category.startswith("special"):
        return SolutionOutput(output=special_reply(category, task.ground_truth))
    return SolutionOutput(output=normal_reply(task.input["functions"], task.ground_truth))
