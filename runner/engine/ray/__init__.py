"""Everything of the engine that touches Ray, and the only package of runner that imports ``ray``: the executor
(:mod:`.executor`), the cluster connection and pool sizing (:mod:`.cluster`), the pool's Ray backend
(:mod:`.backend`), the worker actor (:mod:`.worker`) and the run's limiter actor (:mod:`.limiter`, the remote
:class:`~runner.traffic.control.TrafficHub`).

May import ``core``, ``storage``, ``traffic``, ``log`` and the rest of the engine. Nothing outside this package
imports it except through :data:`runner.registry.EXECUTORS`, so a sequential run never imports Ray.
"""
