"""The swap step of scripts/device_check.sh (issue 35): a running replica loads another checkpoint's weights in place
of its own, answers with them, and faster than a cold start.

    python scripts/device_check_swap.py WORK_DIR [--engine transformers|vllm|sglang] [--cpu]

Two checkpoints of one architecture are built from a config (random weights, seeds 1 and 2; nothing is downloaded:
``device_check.build_model``). For the engine (``transformers`` by default; ``vllm`` or ``sglang`` where installed):

1. a swappable replica of checkpoint A starts (cold start A, timed) and answers three prompts, greedy;
2. it swaps to checkpoint B (:meth:`runner.serving.ServedModels.swap`: ``/load_model`` for ``transformers serve``,
   level-2 sleep and ``reload_weights`` for vLLM, ``/update_weights_from_disk`` for SGLang; timed) and answers them;
3. a fresh replica of B starts (cold start B, timed) and answers them.

It checks that the swapped replica answers as the fresh replica of B does (the new weights) and not as A did, and
prints one JSON line: the seconds of each start and of the swap, and swap / cold start. ``--cpu`` rehearses it
without a GPU (``transformers`` only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import time
from pathlib import Path

import httpx
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from device_check import build_model  # noqa: E402

from runner.serving import ReplicaSpec, ServedModels  # noqa: E402

PROMPTS = ["The capital of France is", "Who wrote Hamlet?", "A benchmark runner"]


def checkpoint(base: Path, folder: Path, seed: int) -> Path:
    """``base``'s architecture and tokenizer with weights drawn from ``seed``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(base))
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    for file in base.iterdir():
        if "token" in file.name or file.name.endswith(".jinja"):
            shutil.copy(file, folder / file.name)
    return folder


async def answers(url: str, name: str) -> list[str]:
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        replies = []
        for prompt in PROMPTS:
            answer = await client.post(f"{url}/chat/completions", json={
                "model": name, "messages": [{"role": "user", "content": prompt}], "max_tokens": 12, "temperature": 0})
            answer.raise_for_status()
            replies.append(answer.json()["choices"][0]["message"]["content"])
    return replies


def spec(engine: str, folder: Path) -> ReplicaSpec:
    return ReplicaSpec(model=f"{engine}:{folder}", engine=engine, source=str(folder), startup_timeout=600,
                       stop_grace=5, swappable=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--engine", default="transformers", choices=("transformers", "vllm", "sglang"))
    parser.add_argument("--cpu", action="store_true", help="rehearse without a GPU")
    options = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = build_model(options.work / "base")
    a = checkpoint(base, options.work / "step_1", 1)
    b = checkpoint(base, options.work / "step_2", 2)
    gpus = [] if options.cpu else ["0"]
    logs = options.work / "replicas"
    started = time.monotonic()
    with ServedModels([spec(options.engine, a)], gpu_ids=gpus, log_dir=logs) as group:
        cold_a = time.monotonic() - started
        [replica] = group.replicas
        before = asyncio.run(answers(replica.base_url, replica.served_name))
        assert group.can_swap([spec(options.engine, b)]), "the two checkpoints should be swappable"
        started = time.monotonic()
        group.swap([spec(options.engine, b)])
        swap_s = time.monotonic() - started
        swapped = asyncio.run(answers(replica.base_url, replica.served_name))
    started = time.monotonic()
    with ServedModels([spec(options.engine, b)], gpu_ids=gpus, log_dir=logs) as group:
        cold_b = time.monotonic() - started
        [replica] = group.replicas
        fresh = asyncio.run(answers(replica.base_url, replica.served_name))
    result = {"engine": options.engine, "device": "cpu" if options.cpu else "gpu", "cold_start_a_s": round(cold_a, 2),
              "swap_s": round(swap_s, 2), "cold_start_b_s": round(cold_b, 2),
              "swap_over_cold_start": round(swap_s / cold_b, 3), "swapped_equals_fresh": swapped == fresh,
              "swapped_differs_from_a": swapped != before}
    print(json.dumps(result))
    if swapped != fresh or swapped == before:
        print(f"swap check FAILED: A {before}, swapped {swapped}, fresh B {fresh}", file=sys.stderr)
        return 1
    print("swap check passed: the swapped replica answers with the new weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
