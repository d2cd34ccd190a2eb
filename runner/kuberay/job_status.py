"""A RayJob's status as KubeRay reports it, and when it is over.

KubeRay keeps two fields (``ray-operator/apis/ray/v1/rayjob_types.go``): ``jobDeploymentStatus`` (the RayJob's own
life cycle: Initializing, Running, Complete, Failed, ValidationFailed, Retrying, Suspended, ...) and ``jobStatus``
(the Ray job's: PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED). The run succeeded when the deployment is
``Complete`` and the job ``SUCCEEDED``; it failed when the deployment is ``Failed`` or ``ValidationFailed``, or
``Complete`` with any other job status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TERMINAL_DEPLOYMENT = ("Complete", "Failed", "ValidationFailed")


@dataclass(frozen=True)
class RayJobStatus:
    """What ``kubectl get rayjob`` shows, plus the operator's message.

    Attributes:
        name: the RayJob's name.
        deployment: ``status.jobDeploymentStatus`` (``None`` before the operator has seen the RayJob).
        job: ``status.jobStatus``.
        reason: ``status.reason`` (e.g. ``DeadlineExceeded``, ``AppFailed``).
        message: ``status.message``.
        cluster: ``status.rayClusterName``.
        failed: attempts that failed so far (``status.failed``).
    """

    name: str
    deployment: str | None = None
    job: str | None = None
    reason: str | None = None
    message: str | None = None
    cluster: str | None = None
    failed: int = 0

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> RayJobStatus:
        """From a RayJob object as the API returns it."""
        status = obj.get("status") or {}
        return cls(
            name=obj["metadata"]["name"],
            deployment=status.get("jobDeploymentStatus") or None,
            job=status.get("jobStatus") or None,
            reason=status.get("reason") or None,
            message=status.get("message") or None,
            cluster=status.get("rayClusterName") or None,
            failed=int(status.get("failed") or 0),
        )

    @property
    def terminal(self) -> bool:
        """The RayJob will not change any more on its own."""
        return self.deployment in TERMINAL_DEPLOYMENT

    @property
    def succeeded(self) -> bool:
        """Complete with the Ray job SUCCEEDED."""
        return self.deployment == "Complete" and self.job == "SUCCEEDED"

    def line(self) -> str:
        """One human line: ``NAME: deployment Running, job RUNNING (cluster X)``, plus reason and message."""
        text = f"{self.name}: deployment {self.deployment or 'New'}, job {self.job or 'NEW'}"
        if self.cluster:
            text += f" (cluster {self.cluster})"
        if self.failed:
            text += f", {self.failed} failed attempt{'s' if self.failed != 1 else ''}"
        if self.reason:
            text += f"; {self.reason}"
        if self.message:
            text += f": {self.message}"
        return text
