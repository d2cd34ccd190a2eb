"""The lm-eval part of the GPU check (issue 26): lm-evaluation-harness tasks on a GPU, the runner against ``lm_eval``.

    python scripts/device_check_lmeval.py WORK_DIR [--docs 40]

Needs a GPU machine with the runner, lm-eval 0.4.13 (its ``hf`` and ``api`` extras) and vLLM installed, e.g. the
runner's vLLM image (``docker/Dockerfile.vllm`` plus ``pip install 'lm-eval[hf]==0.4.13'``); no network: the model is
built from a config (random weights, a tokenizer trained on the spot: ``device_check.build_model``) and the tasks are
lm-eval YAMLs over local JSON written here (``generate_until`` with a filter, ``multiple_choice``,
``loglikelihood_rolling``). Two checks, each the same documents twice:

1. **HFLM on the GPU**: ``python -m runner -b lm-eval --model transformers:<model> --sequential`` against
   ``lm_eval --model hf --device cuda:0 --batch_size 1``: the same results and samples (to 1e-4 relative), and each
   wall time.
2. **vLLM replicas**: ``python -m runner -b lm-eval --model vllm:<model> --serve`` (a replica started by the run on the
   GPU, lm-eval's ``local-completions`` at it, token ids, the replica's ``max_model_len``) against the stock
   ``lm_eval --model local-completions`` pointed at a ``vllm serve`` of the same model: the same values (the same
   engine answers both), and each wall time.

Prints one line per check and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from device_check import build_model  # noqa: E402

from tests.benchmarks.lmeval.compare import RESULT_KEYS, differences, runner_files  # noqa: E402

TASKS = "dev_gen,dev_mc,dev_ppl"
WORDS = "paris london rome madrid berlin vienna prague lisbon dublin oslo".split()


def write_tasks(folder: Path, docs: int) -> Path:
    """Three local tasks of ``docs`` documents each over synthetic data."""
    rng = random.Random(0)
    data = folder / "data"
    data.mkdir(parents=True)
    rows = [{"question": f"Which city is number {i}?", "answer": rng.choice(WORDS), "label": i % 2,
             "text": " ".join(rng.choice(WORDS) for _ in range(60))} for i in range(docs)]
    (data / "rows.json").write_text(json.dumps(rows))
    common = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}/rows.json\ntest_split: test\n"
    (folder / "dev_gen.yaml").write_text(
        "task: dev_gen\n" + common + 'output_type: generate_until\ndoc_to_text: "Q: {{question}}\\nA:"\n'
        'doc_to_target: " {{answer}}"\ngeneration_kwargs: {until: ["\\n"], do_sample: false, max_gen_toks: 8}\n'
        "filter_list:\n  - name: first\n    filter: [{function: take_first}]\n"
        "metric_list:\n  - {metric: exact_match, aggregation: mean, higher_is_better: true}\nmetadata: {version: 1}\n")
    (folder / "dev_mc.yaml").write_text(
        "task: dev_mc\n" + common + 'output_type: multiple_choice\ndoc_to_text: "Q: {{question}}\\nA:"\n'
        'doc_to_choice: ["yes", "no"]\ndoc_to_target: "{{label}}"\n'
        "metric_list:\n  - {metric: acc, aggregation: mean, higher_is_better: true}\n"
        "  - {metric: acc_norm, aggregation: mean, higher_is_better: true}\nmetadata: {version: 1}\n")
    (folder / "dev_ppl.yaml").write_text(
        "task: dev_ppl\n" + common + 'output_type: loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
        "metric_list:\n  - {metric: word_perplexity, aggregation: weighted_perplexity, higher_is_better: false}\n"
        "  - {metric: bits_per_byte, aggregation: bits_per_byte, higher_is_better: false}\nmetadata: {version: 1}\n")
    return folder


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Seconds ``command`` took; exits on failure with its last output."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                                                 **(env or {})}, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def lm_eval_files(out: Path) -> tuple[dict, dict]:
    (results,) = out.glob("*/results_*.json")
    samples = {path.name.removeprefix("samples_").rsplit("_", 1)[0]: [json.loads(line) for line in
                                                                      path.read_text().splitlines()]
               for path in out.glob("*/samples_*.jsonl")}
    return json.loads(results.read_text()), samples


def compare(run_dir: Path, reference: tuple[dict, dict], rel: float, skip: tuple[str, ...] = ()) -> list[str]:
    results, samples = runner_files(run_dir)
    found = [d for key in RESULT_KEYS if key not in skip for d in differences(results.get(key), reference[0].get(key),
                                                                             rel, key)]
    for task, lines in reference[1].items():
        found += differences(samples.get(task), lines, rel, f"samples_{task}")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--docs", type=int, default=40)
    args = parser.parse_args()
    work: Path = args.work
    model = build_model(work / "model")
    tasks = write_tasks(work / "tasks", args.docs)
    runner = [sys.executable, "-m", "runner", "-b", "lm-eval", "-B", f"tasks={TASKS}", "-B", f"include_path={tasks}"]
    failed = False

    hf_ref = run([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model}", "--device",
                  "cuda:0", "--batch_size", "1", "--tasks", TASKS, "--include_path", str(tasks), "--log_samples",
                  "--output_path", str(work / "lm-eval-hf")], tasks)
    hf_run = run([*runner, "--model", f"transformers:{model}", "--sequential", "--storage", str(work / "run-hf")],
                 tasks, {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")})
    found = compare(work / "run-hf", lm_eval_files(work / "lm-eval-hf"), 1e-4)
    failed |= bool(found)
    print(f"lm-eval HFLM on cuda: lm_eval {hf_ref:.1f} s, runner --sequential {hf_run:.1f} s "
          f"({hf_run / hf_ref:.2f} x); {'same values' if not found else 'DIFFER: ' + '; '.join(found[:5])}")

    port = free_port()
    server = subprocess.Popen(["vllm", "serve", str(model), "--served-model-name", "dev", "--host", "127.0.0.1",
                               "--port", str(port), "--max-model-len", "2048", "--gpu-memory-utilization", "0.4"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        import httpx

        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        api_ref = run([sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
                       f"model=dev,base_url=http://127.0.0.1:{port}/v1/completions,tokenizer={model},"
                       "tokenizer_backend=huggingface,tokenized_requests=True,max_length=2048",
                       "--batch_size", "1", "--tasks", TASKS, "--include_path", str(tasks), "--log_samples",
                       "--output_path", str(work / "lm-eval-api")], tasks)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    vllm_run = run([*runner, "--model", f"vllm:{model}", "--serve", "--engine-arg=--max-model-len=2048",
                    "--engine-arg=--gpu-memory-utilization=0.4", "--sequential", "--storage", str(work / "run-vllm")],
                   tasks)
    found = compare(work / "run-vllm", lm_eval_files(work / "lm-eval-api"), 1e-4, skip=("configs",))
    failed |= bool(found)
    print(f"lm-eval local-completions at a vLLM replica: lm_eval {api_ref:.1f} s (its server's start not counted), "
          f"runner --serve {vllm_run:.1f} s (the replica's start counted); "
          f"{'same values' if not found else 'DIFFER: ' + '; '.join(found[:5])}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
