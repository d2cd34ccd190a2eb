"""What a solution returns, and the context it may ask for.

``SolutionOutput`` keeps AgentScope's fields (``success``, ``output``, ``trajectory``, ``meta``). A solution is any
callable ``solution(task)`` or ``solution(task, context)``, sync or async, returning a ``SolutionOutput`` or a bare
value (wrapped as ``SolutionOutput(output=value)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SolutionOutput:
    """The answer of a solution to one task.

    Args:
        success: ``False`` when the solution itself reports failure; the record is then marked ``error``
            (its metrics still run).
        output: the final answer; must be JSON-serialisable (it is stored in the record).
        trajectory: the steps that led to it (tool calls with arguments and results, messages), JSON-serialisable.
        meta: any other JSON-serialisable detail.
    """

    success: bool = True
    output: Any = None
    trajectory: list[Any] = field(default_factory=list)
    meta: dict[str, Any] | None = None


@dataclass
class SolutionContext:
    """Passed as the second argument to a solution that takes two.

    Args:
        run_id: the run's id.
        task_id: the task's id.
        repeat: the repeat index (0-based).
        attempt: 1 on the first try; higher when the item is retried after a worker died.
        worker: who runs it: ``{"host", "pid"}`` and, on Ray, ``{"node_id", "actor_id"}``.
        logger: a structlog logger with ``run_id``, ``task_id`` and ``repeat`` bound.

    Calling the context itself is a no-op that logs its arguments at debug level, so that AgentScope solutions
    written as ``solve(task, pre_print_hook)`` run unchanged.
    """

    run_id: str
    task_id: str
    repeat: int
    attempt: int = 1
    worker: dict[str, Any] = field(default_factory=dict)
    logger: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.logger is not None:
            self.logger.debug("solution.hook", args=[repr(a)[:200] for a in args])
