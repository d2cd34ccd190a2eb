"""ACEBench's per-task metrics: ``accuracy`` (0/1) for every task and ``process_accuracy`` for agent tasks.

What a solution returns (``SolutionOutput.output``):

- normal and special tasks: the model's reply text (``"[f(a=1)]"``, or the phrase of a special category);
- agent tasks: anything (e.g. the final reply, the end state for the record); the metrics read the end state and
  the recorded calls from the task's :class:`ACEEnvironment` (``task.metadata["environment"]``), which the solution
  drove through its tools or :meth:`ACEEnvironment.execute`.
"""

from __future__ import annotations

from typing import Any

from runner.benchmarks.acebench.agent_checker import check_end_state, process_accuracy
from runner.benchmarks.acebench.answer_checks import check_normal, check_special
from runner.benchmarks.acebench.environment import ACEEnvironment
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.solution import SolutionOutput

ACCURACY = "accuracy"
PROCESS_ACCURACY = "process_accuracy"


def _reply(solution: SolutionOutput) -> Any:
    output = solution.output
    if isinstance(output, dict) and "reply" in output:
        return output["reply"]
    return output


class NormalAccuracy(MetricBase):
    """1.0 when the reply is a right call list for a normal task (see :mod:`normal_checker`), else 0.0."""

    def __init__(self, functions: list[dict[str, Any]], ground_truth: Any, category: str, strict: bool) -> None:
        super().__init__(ACCURACY, MetricType.NUMERICAL, "ACEBench accuracy")
        self.functions, self.ground_truth, self.category, self.strict = functions, ground_truth, category, strict

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        verdict = check_normal(_reply(solution), self.functions, self.ground_truth, self.category, self.strict)
        return MetricResult(name=self.name, result=1.0 if verdict.valid else 0.0,
                            message=verdict.error or None, metadata={"error_type": verdict.error_type or None})


class SpecialAccuracy(MetricBase):
    """1.0 when the reply points out the problem of a special task (see :func:`check_special`), else 0.0."""

    def __init__(self, ground_truth: Any, category: str, strict: bool) -> None:
        super().__init__(ACCURACY, MetricType.NUMERICAL, "ACEBench accuracy")
        self.ground_truth, self.category, self.strict = ground_truth, category, strict

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        verdict = check_special(_reply(solution), self.ground_truth, self.category, self.strict)
        return MetricResult(name=self.name, result=1.0 if verdict.valid else 0.0,
                            message=verdict.error or None, metadata={"error_type": verdict.error_type or None})


class AgentAccuracy(MetricBase):
    """End-to-end accuracy: 1.0 when the environment's end state matches the ground truth, else 0.0."""

    def __init__(self, environment: ACEEnvironment, ground_truth: Any, strict: bool) -> None:
        super().__init__(ACCURACY, MetricType.NUMERICAL, "ACEBench end-to-end accuracy")
        self.environment, self.ground_truth, self.strict = environment, ground_truth, strict

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        verdict = check_end_state(self.environment.state(), self.ground_truth, self.strict)
        return MetricResult(name=self.name, result=1.0 if verdict.valid else 0.0, message=verdict.error or None,
                            metadata={"error_type": verdict.error_type or None})


class ProcessAccuracy(MetricBase):
    """Process accuracy: 1.0 when the end state is right, else the in-order share of milestones among the calls."""

    def __init__(self, environment: ACEEnvironment, ground_truth: Any, milestones: Any, strict: bool) -> None:
        super().__init__(PROCESS_ACCURACY, MetricType.NUMERICAL, "ACEBench process accuracy")
        self.environment, self.ground_truth, self.milestones, self.strict = environment, ground_truth, milestones, strict

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        calls = list(self.environment.calls)
        correct = check_end_state(self.environment.state(), self.ground_truth, self.strict).valid
        value = process_accuracy(calls, self.milestones, correct, self.strict)
        return MetricResult(name=self.name, result=value, metadata={"calls": len(calls)})
