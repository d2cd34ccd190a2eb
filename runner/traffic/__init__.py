"""A run's model traffic: request and token rates per endpoint, the shared backoff on refusals, the budget, and the
response cache's hook, behind one interface.

:class:`~runner.traffic.control.TrafficControl` is what the engine holds for a run (per process); where its state
lives is a :class:`~runner.traffic.control.TrafficHub` the executor injects: in this process
(:class:`~runner.traffic.in_process.LocalTraffic`), or in a Ray actor (``runner.engine.ray.limiter.RemoteTraffic``). The
rules are pure bookkeeping with time passed in (:mod:`.state`: schedules, leases, the budget; :mod:`.backoff`: the
rate's decrease and increase), unit-tested with a fake clock. The model layer sees only the limiter and cache
interfaces in ``runner.core.limits`` and ``runner.core.cache``.

May import ``core`` and ``storage``; never the engine, Ray or a plug-in.
"""

from runner.traffic.control import TrafficControl, TrafficHub
from runner.traffic.in_process import LocalLimiter, LocalTraffic
from runner.traffic.state import Budget, TrafficState

__all__ = ["Budget", "LocalLimiter", "LocalTraffic", "TrafficControl", "TrafficHub", "TrafficState"]
