"""``submit``'s deploy flags, declared once: each a field of :class:`DeployFlags`, marked as run settings are
(``Annotated[type, Flag(help, group="kubernetes", ...)]``, :mod:`runner.core.flags`), so the CLI adds them and reads
them back as it does the run's (:func:`runner.cli.args.add_declared_arguments`), and :meth:`DeployFlags.apply` lays
them over the chart's values (:class:`~runner.kuberay.deploy_options.DeployOptions`), which validates the result.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from runner.core.errors import ConfigError
from runner.core.flags import Flag
from runner.kuberay.checks import image_repository, image_tag
from runner.kuberay.deploy_options import GPU_RESOURCE, DeployOptions

_IMAGE_EXAMPLE = "e.g. ghcr.io/org/runner:0.1.0-ray2.60.0-py311"
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _flag(help: str, metavar: str | None = None, kind: Any = "value") -> Flag:
    return Flag(help=help, group="kubernetes", metavar=metavar, kind=kind)


class DeployFlags(BaseModel):
    """The flags of ``submit`` that set the chart's values (where the RayJob's pods run and what they mount), each
    ``None`` (or empty) when not given.

    Raises:
        pydantic.ValidationError: two flags that exclude each other (``--credentials-secret`` and
            ``--no-credentials``; two ``--model-cache-*``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: Annotated[str | None, _flag("the runner image for every pod", "REPO:TAG")] = None
    credentials_secret: Annotated[str | None, _flag(
        "Secret whose keys become the pods' environment (default: runner-storage)", "SECRET")] = None
    no_credentials: Annotated[bool | None, _flag(
        "the pods get no storage credentials of ours (public store, node role)", kind="switch")] = None
    service_account: Annotated[str | None, _flag(
        "the pods' service account (workload identity; implies it carries the credentials unless "
        "--credentials-secret is given)", "NAME")] = None
    worker_replicas: Annotated[int | None, _flag("pods in the worker group")] = None
    worker_cpu: Annotated[str | None, _flag("CPUs per worker pod, e.g. 4 or 3500m")] = None
    worker_memory: Annotated[str | None, _flag("memory per worker pod, e.g. 16Gi")] = None
    worker_gpu: Annotated[int | None, _flag(
        "GPUs per worker pod (nvidia.com/gpu and the group's num-gpus; the chart's default group becomes the group "
        "'gpu', tolerating the nvidia.com/gpu taint)")] = None
    worker_shared_memory: Annotated[str | None, _flag(
        "the worker pods' /dev/shm, in memory, e.g. 16Gi (default: the pod's memory)", "SIZE")] = None
    worker_node_selector: Annotated[list[str] | None, _flag(
        "a node label the worker pods need, e.g. nvidia.com/gpu.present=true (repeatable)", "KEY=VALUE",
        "repeat")] = None
    worker_toleration: Annotated[list[str] | None, _flag(
        "a taint the worker pods tolerate, as kubectl taint writes it, e.g. dedicated=gpu:NoSchedule (repeatable)",
        "KEY[=VALUE][:EFFECT]", "repeat")] = None
    worker_image: Annotated[str | None, _flag("the worker group's own image (default: --image)", "REPO:TAG")] = None
    model_cache_claim: Annotated[str | None, _flag(
        "an existing PersistentVolumeClaim for the served models' weights (HF_HOME)", "CLAIM")] = None
    model_cache_new_claim: Annotated[str | None, _flag(
        "create a ReadWriteMany claim of SIZE for them (e.g. 200Gi), deleted with the RayJob", "SIZE")] = None
    model_cache_host_path: Annotated[str | None, _flag("keep them in PATH on each node's own disk", "PATH")] = None
    hf_token_secret: Annotated[str | None, _flag(
        "HF_TOKEN on the head and the workers from this Secret's key (default key HF_TOKEN)", "SECRET[:KEY]")] = None

    @model_validator(mode="after")
    def _one_of_each(self) -> DeployFlags:
        if self.credentials_secret is not None and self.no_credentials:
            raise ValueError("--credentials-secret and --no-credentials exclude each other; give one")
        caches = [name for name in ("model_cache_claim", "model_cache_new_claim", "model_cache_host_path")
                  if getattr(self, name) is not None]
        if len(caches) > 1:
            raise ValueError(f"{' and '.join('--' + name.replace('_', '-') for name in caches)} exclude each other; "
                             "give one model cache")
        return self

    @classmethod
    def from_flags(cls, given: dict[str, Any]) -> DeployFlags:
        """The flags of an argparse namespace's ``vars()`` (other keys ignored).

        Raises:
            ConfigError: flags that exclude each other (one line naming them).
        """
        try:
            return cls.model_validate({name: given.get(name) for name in cls.model_fields})
        except ValidationError as exc:
            raise ConfigError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from None

    def apply(self, values: dict[str, Any], source: str) -> DeployOptions:
        """The chart's ``values`` (or its defaults) with these flags applied, validated.

        Args:
            values: a chart values file's mapping (``{}``: the chart's defaults).
            source: where the values come from, for errors (``values 'v.yaml'``, ``submit flags``).

        Raises:
            ConfigError: a bad value, naming it (a flag's own form, or the values field it set).
        """
        data = DeployOptions.from_values(values, source).model_dump(by_alias=True)
        if self.image:
            data["image"]["repository"], data["image"]["tag"] = split_image(self.image)
        if self.service_account:
            data["serviceAccount"]["name"] = self.service_account
            data["serviceAccount"]["create"] = False
            if self.credentials_secret is None:
                data["storage"]["credentials"]["source"] = "serviceAccount"
        if self.credentials_secret is not None:
            data["storage"]["credentials"] = {"source": "secret", "secretRef": self.credentials_secret}
        if self.no_credentials:
            data["storage"]["credentials"]["source"] = "none"
        self._apply_worker_group(data, values)
        self._apply_model_cache(data["modelCache"])
        if self.hf_token_secret is not None:
            name, _, key = self.hf_token_secret.partition(":")
            if not name:
                raise ConfigError("--hf-token-secret names no Secret; pass SECRET or SECRET:KEY, e.g. hf-token")
            data["hfToken"] = {"secretName": name, "key": key or data["hfToken"]["key"]}
        return DeployOptions.from_values(data, source)

    def _apply_worker_group(self, data: dict[str, Any], values: dict[str, Any]) -> None:
        group = {key: value for key, value in (
            ("replicas", self.worker_replicas), ("cpu", self.worker_cpu), ("memory", self.worker_memory),
            ("gpu", self.worker_gpu), ("sharedMemory", self.worker_shared_memory)) if value is not None}
        if self.worker_node_selector:
            group["nodeSelector"] = dict(_pair(item, "--worker-node-selector") for item in self.worker_node_selector)
        if self.worker_toleration:
            group["tolerations"] = [toleration(item) for item in self.worker_toleration]
        if self.worker_image:
            repository, tag = split_image(self.worker_image, "--worker-image")
            group["image"] = {"repository": repository, "tag": tag}
        if not group:
            return
        if len(data["workerGroups"]) != 1:
            raise ConfigError("--worker-* flags set the one worker group; with several, set them in --values")
        if self.worker_gpu and "workerGroups" not in values:
            group["name"] = "gpu"  # the chart's default group, now holding GPUs, is named for them
        data["workerGroups"][0].update(group)

    def _apply_model_cache(self, cache: dict[str, Any]) -> None:
        if self.model_cache_claim is not None:
            cache.update(type="persistentVolumeClaim", persistentVolumeClaim={
                **cache["persistentVolumeClaim"], "claimName": self.model_cache_claim, "create": False})
        if self.model_cache_new_claim is not None:
            cache.update(type="persistentVolumeClaim", persistentVolumeClaim={
                **cache["persistentVolumeClaim"], "create": True, "size": self.model_cache_new_claim})
        if self.model_cache_host_path is not None:
            cache.update(type="hostPath", hostPath={"path": self.model_cache_host_path})


def split_image(ref: str, flag: str = "--image") -> tuple[str, str]:
    """``registry:5000/org/runner:tag`` -> (``registry:5000/org/runner``, ``tag``).

    Raises:
        ConfigError: no tag, a digest (the chart's values name a tag), or a repository or tag that breaks the image
            reference grammar (:func:`runner.kuberay.checks.image_repository` and ``image_tag``), naming ``flag``.
    """
    repository, sep, tag = ref.rpartition(":")
    if "@" in ref or not sep or "/" in tag or not repository or not tag:
        raise ConfigError(f"{flag} {ref!r} must be REPOSITORY:TAG, {_IMAGE_EXAMPLE}")
    try:
        return image_repository(repository), image_tag(tag)
    except ValueError as exc:
        raise ConfigError(f"{flag} {ref!r}: {exc}; pass REPOSITORY:TAG, {_IMAGE_EXAMPLE}") from None


def _pair(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"{flag} {item!r} must be KEY=VALUE, e.g. nvidia.com/gpu.present=true")
    return key, value


def toleration(text: str) -> dict[str, str]:
    """``--worker-toleration`` as ``kubectl taint`` writes a taint: ``KEY[=VALUE][:EFFECT]`` -> a toleration
    (``Equal`` with a value, ``Exists`` without; every effect when none is given).

    Raises:
        ConfigError: no key, or an effect other than ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``.
    """
    rest, colon, effect = text.rpartition(":") if ":" in text else (text, "", "")
    key, equals, value = rest.partition("=")
    if not key or (colon and effect not in _EFFECTS):
        raise ConfigError(f"--worker-toleration {text!r} must be KEY[=VALUE][:EFFECT], EFFECT one of "
                          f"{', '.join(_EFFECTS)}, e.g. {GPU_RESOURCE}:NoSchedule")
    out = {"key": key, "operator": "Equal" if equals else "Exists"}
    if equals:
        out["value"] = value
    if effect:
        out["effect"] = effect
    return out
