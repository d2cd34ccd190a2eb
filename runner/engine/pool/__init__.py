"""A pool of workers, free of Ray: :class:`~runner.engine.pool.pool.WorkerPool` runs the plan's items on workers
through a backend (the Ray one is :class:`runner.engine.ray.backend.RayBackend`; tests drive it with fakes), with the
workers' bookkeeping (:mod:`.workers`: pending, ready, suspect, dead, replaced) apart from the dispatch window
(:mod:`.dispatch`: the plan, the retry queue, batch sizes as pure functions).

May import ``core`` and the engine's run-level modules and ``item`` (for the shapes of an acknowledgement and a fault);
never Ray.
"""
