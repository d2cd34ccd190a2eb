"""GAIA's per-task metrics: ``accuracy`` (the leaderboard's verdict, validation split) and ``answered`` (test split).

What a solution returns (``SolutionOutput.output``): the answer text, or a mapping with ``model_answer`` (and
optionally ``reasoning_trace``), as a submission line has them; :func:`runner.benchmarks.gaia.submission.answer_text`
reads both (numbers and lists become their text).
"""

from __future__ import annotations

from runner.benchmarks.gaia.scorer import answer_type, question_scorer
from runner.benchmarks.gaia.submission import answer_text
from runner.core.metric import MetricBase, MetricResult, MetricType
from runner.core.solution import SolutionOutput

ACCURACY = "accuracy"
ANSWERED = "answered"


class GAIAAccuracy(MetricBase):
    """1.0 when the leaderboard's ``question_scorer`` accepts the answer (:mod:`runner.benchmarks.gaia.scorer`),
    else 0.0; the mean is the leaderboard's score (the share of right answers).

    The result's metadata keeps the answer as scored and the branch the ground truth chose (``number``, ``list``,
    ``string``).

    Args:
        ground_truth: the task's ``Final answer``.
    """

    def __init__(self, ground_truth: str) -> None:
        super().__init__(ACCURACY, MetricType.NUMERICAL, "GAIA quasi exact match (the leaderboard's scorer)")
        self.ground_truth = ground_truth

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        answer = answer_text(solution.output)
        right = question_scorer(answer, self.ground_truth)
        return MetricResult(name=self.name, result=1.0 if right else 0.0,
                            metadata={"model_answer": answer, "answer_type": answer_type(self.ground_truth)})


class Answered(MetricBase):
    """1.0 when the solution gave an answer (not ``None``, not blank), else 0.0: what a test-split run can know
    before the leaderboard scores its submission file."""

    def __init__(self) -> None:
        super().__init__(ANSWERED, MetricType.NUMERICAL, "an answer was given (the test split is scored by the "
                                                         "leaderboard)")

    def __call__(self, solution: SolutionOutput) -> MetricResult:
        answer = answer_text(solution.output)
        return MetricResult(name=self.name, result=1.0 if answer is not None and answer.strip() else 0.0)
