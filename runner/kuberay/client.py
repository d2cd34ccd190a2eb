"""A thin client for RayJobs on the official ``kubernetes`` package: submit, status, wait, logs, delete.

Everything goes through ``CustomObjectsApi`` (group ``ray.io``, version ``v1``, plural ``rayjobs``) and
``CoreV1Api`` (the run-config ConfigMap, the submitter pod's log). The submitter is the Kubernetes Job KubeRay
creates in ``K8sJobMode``, named after the RayJob; its pod runs ``ray job submit``, which prints the driver's log.

Example::

    client = RayJobClient.from_environment(namespace="evals")
    client.submit(rayjob, configmap, secret="runner-storage")
    for line in client.logs(rayjob["metadata"]["name"], follow=True):
        print(line)
    final = client.wait(rayjob["metadata"]["name"], timeout=3600)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from runner.core.errors import RunnerError
from runner.kuberay.job_status import RayJobStatus

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"
SUBMITTER_CONTAINER = "ray-job-submitter"
_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# A server-side watch ends after this many seconds at most, so our own deadline is checked at least that often.
_WATCH_WINDOW = 60
_HTTP_GONE = 410


class KubernetesError(RunnerError):
    """The Kubernetes API refused or could not be reached; the message says what to do."""


class WaitTimeout(KubernetesError):
    """Our own deadline passed before the RayJob finished (the RayJob keeps running)."""


def _api_message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body or "{}").get("message") or exc.reason or ""
    except (ValueError, AttributeError):
        return exc.reason or ""


class RayJobClient:
    """RayJobs in one namespace.

    Args:
        api_client: a configured ``kubernetes.client.ApiClient`` (see :meth:`from_environment`).
        namespace: where the RayJobs live.
        sleep: the pause between polls of the submitter pod (tests pass a no-op).
    """

    def __init__(self, api_client: k8s.ApiClient, namespace: str,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.namespace = namespace
        self._api_client = api_client
        self._custom = k8s.CustomObjectsApi(api_client)
        self._core = k8s.CoreV1Api(api_client)
        self._sleep = sleep

    @classmethod
    def from_environment(cls, namespace: str | None = None, context: str | None = None,
                         sleep: Callable[[float], None] = time.sleep) -> RayJobClient:
        """In-cluster configuration first (a pod's service account), then the kubeconfig (``KUBECONFIG`` or
        ``~/.kube/config``, context ``context`` or the current one). The namespace defaults to the pod's, or the
        context's, or ``default``.

        Raises:
            KubernetesError: neither configuration is available or readable.
        """
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            default_ns = _NAMESPACE_FILE.read_text().strip() if _NAMESPACE_FILE.exists() else "default"
        except k8s_config.ConfigException:
            # Read KUBECONFIG now: the kubernetes package reads it once, when it is imported.
            config_file = os.environ.get("KUBECONFIG") or None
            try:
                k8s_config.load_kube_config(config_file=config_file, context=context,
                                            client_configuration=configuration)
                contexts, active = k8s_config.list_kube_config_contexts(config_file=config_file)
                if context:
                    active = next(c for c in contexts if c["name"] == context)
                default_ns = (active.get("context") or {}).get("namespace") or "default"
            except (k8s_config.ConfigException, OSError, StopIteration, TypeError) as exc:
                raise KubernetesError(
                    f"no Kubernetes configuration: not inside a cluster, and the kubeconfig could not be used ({exc}); "
                    "set KUBECONFIG or run 'kubectl config use-context NAME'"
                ) from None
        return cls(k8s.ApiClient(configuration), namespace or default_ns, sleep)

    def _fail(self, exc: ApiException | HTTPError, doing: str) -> KubernetesError:
        if isinstance(exc, HTTPError):
            host = self._api_client.configuration.host
            return KubernetesError(f"cannot reach the Kubernetes API at {host} while {doing}: {exc}")
        if exc.status in (401, 403):
            return KubernetesError(
                f"{doing}: forbidden ({exc.status}): {_api_message(exc)}; check your credentials and RBAC "
                f"in namespace {self.namespace}"
            )
        return KubernetesError(f"{doing}: {exc.status} {_api_message(exc)}")

    def submit(self, rayjob: dict[str, Any], configmap: dict[str, Any] | None = None, *,
               secret: str | None = None, service_account: dict[str, Any] | None = None,
               claim: dict[str, Any] | None = None, existing_claim: str | None = None,
               token_secret: str | None = None) -> dict[str, Any]:
        """Create the run-config ConfigMap and the RayJob, with strict field validation on the server.

        The ConfigMap and the model cache's claim, when given, are created first (so the head never waits for
        them), then the RayJob, then each is made a dependent of the RayJob (``ownerReferences``), so deleting the RayJob
        removes it too. If the RayJob cannot be created, they are removed again.

        Args:
            rayjob: the RayJob dict (:func:`runner.kuberay.rayjob.build_rayjob`).
            configmap: its ConfigMap (:func:`runner.kuberay.rayjob.build_configmap`), if any.
            secret: a Secret the pods read credentials from; checked to exist first (skipped if we may not read it).
            service_account: the pods' ServiceAccount (:func:`runner.kuberay.rayjob.build_service_account`),
                created before anything else unless one of that name exists, which is then used as it is (a named
                account serves every run that names it, so it is never deleted with a RayJob).
            claim: the model cache's PersistentVolumeClaim to create
                (:func:`runner.kuberay.rayjob.build_model_cache_claim`); one of that name that exists already (a
                previous run's, or made by hand) is used as it is and left alone.
            existing_claim: the name of a model cache claim the pods mount, checked to exist first.
            token_secret: the Secret the pods read ``HF_TOKEN`` from, checked to exist first.

        Returns:
            The created RayJob as the API server returned it.

        Raises:
            KubernetesError: a Secret or the claim is missing, a RayJob or ConfigMap of that name exists, the RayJob
                kind is not installed, the server refused a field, or the API cannot be reached.
        """
        name = rayjob["metadata"]["name"]
        for needed in (secret, token_secret):
            if needed:
                self._check_secret(needed)
        if existing_claim:
            self._check_claim(existing_claim)
        if service_account is not None:
            self._create_service_account(service_account)
        if configmap is not None:
            self._create_configmap(configmap, name)
        try:
            created_claim = self._create_claim(claim) if claim is not None else None
        except KubernetesError:
            if configmap is not None:
                self._delete_configmap(configmap["metadata"]["name"])
            raise
        try:
            created = self._create_rayjob(rayjob, name)
        except KubernetesError:
            if configmap is not None:
                self._delete_configmap(configmap["metadata"]["name"])
            if created_claim:
                self._delete_claim(created_claim)
            raise
        if configmap is not None:
            self._own(self._core.patch_namespaced_config_map, "ConfigMap", configmap["metadata"]["name"], created)
        if created_claim:
            self._own(self._core.patch_namespaced_persistent_volume_claim, "PersistentVolumeClaim", created_claim,
                      created)
        return created

    def _create_configmap(self, configmap: dict[str, Any], name: str) -> None:
        """Create the run-config ConfigMap of the run ``name``.

        Raises:
            KubernetesError: one of that name exists (a run of that name was submitted before), or the API fails.
        """
        try:
            self._core.create_namespaced_config_map(self.namespace, configmap, field_validation="Strict")
        except ApiException as exc:
            if exc.status == 409:
                raise KubernetesError(
                    f"ConfigMap {configmap['metadata']['name']} already exists in namespace {self.namespace}: "
                    f"a run named {name} was submitted before; delete it ('python -m runner k8s delete {name}') "
                    "or pick another --name"
                ) from None
            raise self._fail(exc, f"creating ConfigMap {configmap['metadata']['name']}") from None
        except HTTPError as exc:
            raise self._fail(exc, "creating the run-config ConfigMap") from None

    def _create_rayjob(self, rayjob: dict[str, Any], name: str) -> dict[str, Any]:
        """Create the RayJob ``name`` with strict field validation; the object as the API server returned it.

        Raises:
            KubernetesError: one of that name exists, the RayJob kind is not installed, or the API fails.
        """
        try:
            return self._custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, rayjob, field_validation="Strict"
            )
        except (ApiException, HTTPError) as exc:
            if isinstance(exc, ApiException) and exc.status == 409:
                raise KubernetesError(
                    f"RayJob {name} already exists in namespace {self.namespace}: follow it with "
                    f"'python -m runner k8s logs {name}', or delete it first"
                ) from None
            if isinstance(exc, ApiException) and exc.status == 404:
                raise KubernetesError(
                    f"the API has no {GROUP}/{VERSION} {PLURAL} in namespace {self.namespace}: install the KubeRay "
                    "operator (docs/kubernetes.md) and check the namespace exists"
                ) from None
            raise self._fail(exc, f"creating RayJob {name}") from None

    def _create_claim(self, claim: dict[str, Any]) -> str | None:
        """Create the model cache's claim; its name, or ``None`` when one of that name exists (used as it is)."""
        name = claim["metadata"]["name"]
        try:
            self._core.create_namespaced_persistent_volume_claim(self.namespace, claim, field_validation="Strict")
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise self._fail(exc, f"creating PersistentVolumeClaim {name}") from None
        except HTTPError as exc:
            raise self._fail(exc, f"creating PersistentVolumeClaim {name}") from None
        return name

    def _check_claim(self, name: str) -> None:
        try:
            self._core.read_namespaced_persistent_volume_claim(name, self.namespace, _preload_content=False) \
                .release_conn()
        except ApiException as exc:
            if exc.status == 404:
                raise KubernetesError(
                    f"PersistentVolumeClaim {name} not found in namespace {self.namespace}; create it (a "
                    "ReadWriteMany claim for worker pods on several nodes), or let submit create one "
                    "(--model-cache-new-claim SIZE)"
                ) from None
            if exc.status not in (401, 403):
                raise self._fail(exc, f"checking PersistentVolumeClaim {name}") from None
            # Not allowed to read claims: the pods will tell if it is missing.
        except HTTPError as exc:
            raise self._fail(exc, f"checking PersistentVolumeClaim {name}") from None

    def _delete_claim(self, name: str) -> None:
        try:
            self._core.delete_namespaced_persistent_volume_claim(name, self.namespace)
        except (ApiException, HTTPError):
            pass  # best effort: the error that brought us here is the one to report

    def _create_service_account(self, account: dict[str, Any]) -> None:
        name = account["metadata"]["name"]
        try:
            self._core.create_namespaced_service_account(self.namespace, account, field_validation="Strict")
        except ApiException as exc:
            if exc.status != 409:
                raise self._fail(exc, f"creating ServiceAccount {name}") from None
        except HTTPError as exc:
            raise self._fail(exc, f"creating ServiceAccount {name}") from None

    def _check_secret(self, secret: str) -> None:
        try:
            self._core.read_namespaced_secret(secret, self.namespace, _preload_content=False).release_conn()
        except ApiException as exc:
            if exc.status == 404:
                raise KubernetesError(
                    f"Secret {secret} not found in namespace {self.namespace}; create it with the storage keys, "
                    f"e.g. 'kubectl create secret generic {secret} -n {self.namespace} "
                    "--from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=...'"
                ) from None
            if exc.status not in (401, 403):
                raise self._fail(exc, f"checking Secret {secret}") from None
            # Not allowed to read Secrets: the pods will tell if it is missing.
        except HTTPError as exc:
            raise self._fail(exc, f"checking Secret {secret}") from None

    def _own(self, patch: Callable[..., Any], kind: str, name: str, owner: dict[str, Any]) -> None:
        """Make the object ``name`` (patched by ``patch``, e.g. ``patch_namespaced_config_map``) a dependent of
        ``owner``, so that deleting the RayJob deletes it."""
        reference = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
        try:
            patch(name, self.namespace, {"metadata": {"ownerReferences": [reference]}})
        except (ApiException, HTTPError) as exc:
            raise self._fail(exc, f"linking {kind} {name} to its RayJob") from None

    def _delete_configmap(self, name: str) -> None:
        try:
            self._core.delete_namespaced_config_map(name, self.namespace)
        except (ApiException, HTTPError):
            pass  # best effort: the error that brought us here is the one to report

    def get(self, name: str) -> dict[str, Any]:
        """The RayJob object.

        Raises:
            KubernetesError: it does not exist, or the API refused.
        """
        try:
            return self._custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                raise KubernetesError(f"no RayJob {name} in namespace {self.namespace}") from None
            raise self._fail(exc, f"reading RayJob {name}") from None
        except HTTPError as exc:
            raise self._fail(exc, f"reading RayJob {name}") from None

    def status(self, name: str) -> RayJobStatus:
        """The RayJob's current status."""
        return RayJobStatus.from_object(self.get(name))

    def wait(self, name: str, *, timeout: float | None = None,
             on_status: Callable[[RayJobStatus], None] | None = None) -> RayJobStatus:
        """Watch the RayJob until it is terminal (see :class:`RayJobStatus`) and return its last status.

        A watch whose resourceVersion has expired (HTTP 410 Gone) is restarted from a fresh read; each server-side
        watch lasts at most 60 s, so ``timeout`` (seconds, ours, on top of the RayJob's activeDeadlineSeconds) is
        checked at least that often.

        Args:
            on_status: called with each new status (the first one included).

        Raises:
            WaitTimeout: ``timeout`` passed first (the RayJob keeps running).
            KubernetesError: the RayJob was deleted meanwhile, or the API refused.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        obj = self.get(name)
        status = RayJobStatus.from_object(obj)
        if on_status:
            on_status(status)
        version = obj["metadata"].get("resourceVersion")
        while not status.terminal:
            remaining = _WATCH_WINDOW if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(f"gave up waiting after {timeout:g} s; the RayJob keeps running: {status.line()}")
            window = max(1, int(min(remaining, _WATCH_WINDOW)))
            watcher = k8s_watch.Watch()
            try:
                for event in watcher.stream(
                    self._custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL,
                    field_selector=f"metadata.name={name}", resource_version=version, timeout_seconds=window,
                    allow_watch_bookmarks=True, _request_timeout=window + 30,
                ):
                    raw = event["raw_object"]
                    version = (raw.get("metadata") or {}).get("resourceVersion", version)
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "DELETED":
                        raise KubernetesError(f"RayJob {name} was deleted while waiting for it ({status.line()})")
                    new = RayJobStatus.from_object(raw)
                    if new != status and on_status:
                        on_status(new)
                    status = new
                    if status.terminal:
                        watcher.stop()
                        break
            except ApiException as exc:
                if exc.status != _HTTP_GONE:
                    raise self._fail(exc, f"watching RayJob {name}") from None
                obj = self.get(name)  # our resourceVersion is too old: read the current state, watch from there
                version = obj["metadata"].get("resourceVersion")
                new = RayJobStatus.from_object(obj)
                if new != status and on_status:
                    on_status(new)
                status = new
            except HTTPError as exc:
                raise self._fail(exc, f"watching RayJob {name}") from None
        return status

    def submitter_pod(self, name: str) -> dict[str, Any] | None:
        """The newest pod of the RayJob's submitter Job (a retry makes a new one), or ``None`` yet."""
        try:
            pods = self._core.list_namespaced_pod(self.namespace, label_selector=f"job-name={name}")
        except (ApiException, HTTPError) as exc:
            raise self._fail(exc, f"listing the submitter pods of RayJob {name}") from None
        items = self._api_client.sanitize_for_serialization(pods).get("items") or []
        if not items:
            return None
        return max(items, key=lambda pod: pod["metadata"].get("creationTimestamp") or "")

    def logs(self, name: str, *, follow: bool = False, timeout: float | None = None,
             poll: float = 2.0) -> Iterator[str]:
        """The driver's log, as the submitter pod prints it, line by line.

        With ``follow``, waits (polling every ``poll`` s, up to ``timeout`` s) for the submitter pod to start, then
        streams until the pod's container ends.

        Raises:
            KubernetesError: no submitter pod (yet, without ``follow``), or ``timeout`` passed before it started.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pod = self.submitter_pod(name)
            phase = ((pod or {}).get("status") or {}).get("phase")
            if pod is not None and phase != "Pending":
                break
            if not follow:
                what = "has no submitter pod yet" if pod is None else "has a submitter pod that has not started yet"
                raise KubernetesError(f"RayJob {name} {what}; wait, or use --follow")
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"the submitter pod of RayJob {name} did not start within {timeout:g} s")
            self.get(name)  # fails clearly if the RayJob is gone
            self._sleep(poll)
        pod_name = pod["metadata"]["name"]
        try:
            if not follow:
                text = self._core.read_namespaced_pod_log(pod_name, self.namespace, container=SUBMITTER_CONTAINER)
                yield from text.splitlines()
                return
            yield from k8s_watch.Watch().stream(self._core.read_namespaced_pod_log, pod_name, self.namespace,
                                                  container=SUBMITTER_CONTAINER)
        except (ApiException, HTTPError) as exc:
            raise self._fail(exc, f"reading the log of pod {pod_name}") from None

    def delete(self, name: str) -> None:
        """Delete the RayJob with foreground propagation: its cluster, submitter Job, pods and run-config ConfigMap
        go before the RayJob itself disappears.

        Raises:
            KubernetesError: no such RayJob, or the API refused.
        """
        try:
            self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name, propagation_policy="Foreground"
            )
        except ApiException as exc:
            if exc.status == 404:
                raise KubernetesError(f"no RayJob {name} in namespace {self.namespace}") from None
            raise self._fail(exc, f"deleting RayJob {name}") from None
        except HTTPError as exc:
            raise self._fail(exc, f"deleting RayJob {name}") from None
