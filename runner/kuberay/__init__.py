"""Kubernetes: RayJob manifests for the KubeRay operator, and a thin client to submit, watch, follow and delete them.

The builder side imports nothing from Kubernetes, so ``submit --dry-run`` works without a cluster; the client is
``runner.kuberay.client.RayJobClient`` (it imports the ``kubernetes`` package).
"""

from runner.kuberay.checks import check_rayjob, check_rayjob_name
from runner.kuberay.rayjob import build_configmap, build_rayjob, dump_yaml
from runner.kuberay.deploy_options import DeployOptions
from runner.kuberay.job_status import RayJobStatus

__all__ = [
    "DeployOptions",
    "RayJobStatus",
    "build_configmap",
    "build_rayjob",
    "check_rayjob",
    "check_rayjob_name",
    "dump_yaml",
]
