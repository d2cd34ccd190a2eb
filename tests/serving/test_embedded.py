"""The embedded model's weights and their conversion (the conversion itself ran once for the session's fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.core.errors import ReplicaStartError
from runner.serving import embedded


def test_the_converted_model_is_keyed_by_the_ggufs_sha256_and_names_its_architecture(embedded_dir: Path) -> None:
    assert embedded_dir.name == f"smollm2-135m-instruct-{embedded.GGUF_SHA256[:16]}"
    config = json.loads((embedded_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["max_position_embeddings"] == embedded.CONTEXT_TOKENS
    assert (embedded_dir / "model.safetensors").stat().st_size > 500_000_000  # float32, de-quantised
    assert "im_start" in (embedded_dir / "chat_template.jinja").read_text()
    assert embedded.model_dir() == embedded_dir  # converted once: the second call finds it


def test_the_converted_folder_loads_with_plain_from_pretrained(embedded_dir: Path) -> None:
    """What lm-eval's HFLM and any transformers user do with a model folder: no gguf_file= needed."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(embedded_dir)
    assert getattr(config, "quantization_config", None) is None
    assert "quantization_config" not in json.loads((embedded_dir / "config.json").read_text())


def test_a_conversion_that_still_names_its_gguf_is_repaired_on_first_use(embedded_dir: Path) -> None:
    """Conversions before the fix kept the GGUF's quantization_config in config.json; model_dir() drops it."""
    path = embedded_dir / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "quantization_config": {"quant_method": "gguf", "dequantize": False,
                                                                  "gguf_file": embedded.GGUF_NAME}}))
    assert embedded.model_dir() == embedded_dir
    assert json.loads(path.read_text()) == config


def test_the_gguf_is_the_pinned_file(embedded_dir: Path) -> None:
    gguf = embedded.gguf_file()
    assert gguf.name == embedded.GGUF_NAME and gguf.stat().st_size == embedded.GGUF_SIZE
    assert embedded.sha256_of(gguf) == embedded.GGUF_SHA256


def test_an_override_that_names_no_file_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RUNNER_EMBEDDED_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(ReplicaStartError, match=r"RUNNER_EMBEDDED_GGUF=.*missing.gguf is not a file; point it at "
                                                r"SmolLM2-135M-Instruct.Q4_1.gguf") as refused:
        embedded.gguf_file()
    assert refused.value.cause == "weights"
