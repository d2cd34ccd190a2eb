"""Which model a worker holds: the placement rule of a run of several models (a matrix), as a pure function.

A worker holds at most one placed model at a time: the replicas of a model the run serves (``vllm:``, ``sglang:``,
``transformers:``) or a model its solution builds in the worker's own process (lm-eval's ``HFLM``). Loading one takes
minutes for a large model, so the rule is model-major, as OpenCompass's partitions are not (open-compass/opencompass
#117: "load time ≈ inference time"):

1. A worker keeps the model it holds while any item of any of that model's cells is pending (not yet handed out),
   so every benchmark of a model feeds the same replica and its batches stay full.
2. A worker whose model has no pending item takes the model with the most pending items per worker that holds (or
   loads) it; a model no worker holds counts as infinitely many. Ties go to the baseline first (every other model
   is compared with it), then, in a watch, to the newest checkpoint (the highest step), then to the model listed
   first.
3. A model with no pending item is never taken: the worker stays idle, keeping what it holds.

:func:`choose_model` is called by the pool (:mod:`runner.engine.pool.pool`) for a worker with nothing in flight
whose model has no pending item, and is recomputed from the pool's state every time: placement is never stored, so
a resume with any number of workers, a lost worker or a new checkpoint is placed by the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelDemand:
    """One placed model as the rule sees it.

    Args:
        model: its name (``provider:model``).
        pending: its items not handed out yet (retries and requeued items included); ``None``: not known yet (a
            benchmark of unknown size whose plan is not used up), which counts as more than any number.
        holders: workers that hold it or are loading it, the deciding worker left out.
        baseline: it is the matrix's baseline.
        step: its checkpoint's step (``None``: not a checkpoint).
        order: its position in the matrix's list of models.
    """

    model: str
    pending: int | None
    holders: int
    baseline: bool = False
    step: int | None = None
    order: int = 0

    @property
    def has_work(self) -> bool:
        """Whether some of its items are pending."""
        return self.pending is None or self.pending > 0

    @property
    def per_holder(self) -> float:
        """Pending items per worker that holds it (infinite for unknown work or no holder)."""
        if self.pending is None or self.holders == 0:
            return math.inf
        return self.pending / self.holders


def choose_model(held: str | None, demands: Sequence[ModelDemand], *, newest_first: bool = False) -> str | None:
    """The model a worker should hold next (see the module's docstring for the rule).

    Args:
        held: the model the worker holds now (``None``: none).
        demands: every placed model that may be taken (a model whose load failed in this round is left out by the
            caller).
        newest_first: a watch of checkpoints is running: among equals, the highest step first.

    Returns:
        ``held`` while it has pending items; else the model to load; else ``held`` (nothing pending anywhere:
        nothing to load).
    """
    by_name = {demand.model: demand for demand in demands}
    if held is not None and held in by_name and by_name[held].has_work:
        return held
    candidates = [demand for demand in demands if demand.has_work and demand.model != held]
    if not candidates:
        return held

    def rank(demand: ModelDemand) -> tuple[float, bool, float, int]:
        step = demand.step if newest_first and demand.step is not None else -math.inf
        return demand.per_holder, demand.baseline, step, -demand.order

    return max(candidates, key=rank).model
