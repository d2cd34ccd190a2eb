"""The Python half of scripts/device_check.sh (W8, on a GPU machine with no network): see that script.

    python scripts/device_check.py WORK_DIR [--items 200] [--concurrency 32] [--cpu]

``--cpu`` rehearses the same steps on a machine without a GPU (no CUDA_VISIBLE_DEVICES check, the engine on the
CPU): it is how this script was checked before a GPU machine was available.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx
import structlog

from runner.models import ChatModel
from runner.serving import Replica, ReplicaSpec, ServedModels
from runner.serving.shepherd import session_processes

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def build_model(directory: Path) -> Path:
    """A small Llama with random weights and a byte-level BPE tokenizer trained on a few sentences, with a ChatML
    template: nothing downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    text = ["The capital of France is Paris.", "Who wrote Hamlet? William Shakespeare.",
            "A benchmark runner evaluates models on tasks."] * 50
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2000, special_tokens=special,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = CHATML
    config = LlamaConfig(vocab_size=fast.vocab_size, hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=4096,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id)
    model = LlamaForCausalLM(config)
    model.config.architectures = ["LlamaForCausalLM"]
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def gpu_pids() -> set[int]:
    """Pids holding memory on any GPU (nvidia-smi's compute apps; host pids)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                         text=True, check=False).stdout
    return {int(line) for line in out.split() if line.strip().isdigit()}


def check_visible_devices(model: Path, logs: Path) -> None:
    """A replica given GPU 0 holds GPU memory; one given none holds none, and its CUDA_VISIBLE_DEVICES hides every
    GPU from torch."""
    hidden = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                            env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    print(f"torch under CUDA_VISIBLE_DEVICES='': {hidden.stdout.strip()} GPU(s)")
    assert hidden.stdout.strip() == "0", hidden.stderr
    for gpus, expect_gpu in (([], False), (["0"], True)):
        spec = ReplicaSpec(model="transformers:random-llama", engine="transformers", source=str(model),
                           startup_timeout=180, stop_grace=5)
        replica = Replica(spec, gpus, logs)
        replica.start()
        try:
            replica.wait_ready()
            session = {process.pid for process in session_processes(replica.process.pid)}
            on_gpu = bool(session & gpu_pids())
            print(f"replica with gpu_ids={gpus}: device {'cuda:0' if gpus else 'cpu'}, holds GPU memory: {on_gpu}")
            assert on_gpu == expect_gpu, f"CUDA_VISIBLE_DEVICES not honoured (gpu_ids={gpus}); log {replica.log_path}"
        finally:
            replica.stop()


PROMPTS = [f"Question {i}: what is {i} plus {i}? Answer briefly." for i in range(1000)]


async def engine_alone(url: str, name: str, items: int, concurrency: int) -> tuple[float, int]:
    """(a) A plain asyncio client straight to the server: seconds, output tokens."""
    gate = asyncio.Semaphore(concurrency)
    tokens = 0
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        async def one(prompt: str) -> None:
            nonlocal tokens
            async with gate:
                answer = await client.post("/chat/completions", json={
                    "model": name, "messages": [{"role": "user", "content": prompt}], "max_tokens": 32,
                    "temperature": 0})
                answer.raise_for_status()
                tokens += answer.json()["usage"]["completion_tokens"]
        started = time.perf_counter()
        await asyncio.gather(*(one(prompt) for prompt in PROMPTS[:items]))
    return time.perf_counter() - started, tokens


async def through_runner(model_name: str, items: int, concurrency: int) -> tuple[float, int]:
    """(b) The same prompts through runner's model layer (retries, limiter hooks, usage): seconds, output tokens."""
    model = ChatModel.from_name(model_name, temperature=0, max_tokens=32)
    gate = asyncio.Semaphore(concurrency)
    tokens = 0

    async def one(prompt: str) -> None:
        nonlocal tokens
        async with gate:
            reply = await model.chat(prompt)
            tokens += reply.usage.output_tokens or 0

    started = time.perf_counter()
    await asyncio.gather(*(one(prompt) for prompt in PROMPTS[:items]))
    await model.aclose()
    return time.perf_counter() - started, tokens


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cpu", action="store_true", help="rehearse without a GPU")
    options = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))  # no per-call lines
    started = time.monotonic()
    model = build_model(options.work / "random-llama")
    print(f"== model built from a config in {time.monotonic() - started:.0f} s: {model}")
    logs = options.work / "replicas"
    gpus = [] if options.cpu else ["0"]
    if not options.cpu:
        print("== CUDA_VISIBLE_DEVICES")
        check_visible_devices(model, logs)
    print(f"== the transformers engine on {'the CPU' if options.cpu else 'GPU 0'}: (a) alone, (b) through runner")
    spec = ReplicaSpec(model="transformers:random-llama", engine="transformers", source=str(model),
                       startup_timeout=180, stop_grace=5)
    with ServedModels([spec], gpu_ids=gpus, log_dir=logs) as group:
        [replica] = group.replicas
        asyncio.run(engine_alone(replica.base_url, replica.served_name, 16, 16))  # warm-up
        results = {}
        for label, run in (("a_engine_alone", lambda: engine_alone(replica.base_url, replica.served_name,
                                                                   options.items, options.concurrency)),
                           ("b_runner_one_replica", lambda: through_runner(spec.model, options.items,
                                                                          options.concurrency))):
            seconds, tokens = asyncio.run(run())
            results[label] = {"items_per_s": round(options.items / seconds, 2),
                              "output_tokens_per_s": round(tokens / seconds, 1), "seconds": round(seconds, 2)}
            print(f"{label}: {json.dumps(results[label])}")
    ratio = results["b_runner_one_replica"]["items_per_s"] / results["a_engine_alone"]["items_per_s"]
    print(json.dumps({"w8": results, "b_over_a": round(ratio, 3), "items": options.items,
                      "concurrency": options.concurrency}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
