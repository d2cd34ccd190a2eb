#!/usr/bin/env bash
# W8: models served by the run, on a GPU machine with no network where torch and transformers are installed and
# nothing else (bring the wheels of scripts/build_device_wheels.sh). Within 8 minutes:
#   1. a model built from a config (random weights, a tokenizer trained on the spot: nothing is downloaded);
#   2. CUDA_VISIBLE_DEVICES honoured: a replica given GPU 0 holds memory on it, one given no GPU holds none and its
#      torch sees no GPU;
#   3. the transformers engine on the GPU (`transformers serve --continuous-batching --device cuda:0`, a replica
#      started by runner.serving), (a) driven by a plain asyncio client, (b) through runner's model layer, the same
#      prompts at the same concurrency: items/s and output tokens/s, and b/a.
#
#   4. lm-eval tasks (issue 26) where lm-eval and vLLM are installed: scripts/device_check_lmeval.py.
#   5. a matrix's weight swap (issue 35): a swappable replica of one checkpoint loads another's weights in place and
#      answers with them as a fresh replica of it does, timed against a cold start (scripts/device_check_swap.py;
#      transformers serve, and vLLM or SGLang where installed).
#
#   bash scripts/device_check.sh [WHEEL_DIR]     # default dist/device-wheels
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-dist/device-wheels}
export RUNNER_CACHE_DIR=${RUNNER_CACHE_DIR:-$(mktemp -d)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
echo "== machine"
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader || true
python - <<'EOF'
import sys, torch, transformers
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda available {torch.cuda.is_available()}, {torch.cuda.device_count()} GPU(s)")
EOF

echo "== install the wheels (no network)"
python -m venv --system-site-packages "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
python -m pip install --quiet --no-index --find-links "$wheels" --no-deps "$wheels"/ray_bench_runner-*.whl
python -m pip install --quiet --no-index --find-links "$wheels" pydantic structlog httpx 'openai<2' psutil PyYAML \
  rich fsspec zstandard fastapi uvicorn starlette
python -c "import runner.serving, runner.models; print('runner', runner.__version__)"

timeout -s INT 420 python scripts/device_check.py "$work"

# lm-eval on the GPU (issue 26): HFLM on cuda and vLLM replicas against the lm_eval command, the same values. It needs
# lm-eval 0.4.13 and vLLM, which the lent GPU machine lacks (and whose wheels are over the 64 MiB that may be brought
# to it): run it where they are installed, e.g. on the runner's vLLM image.
echo "== lm-eval"
if python -c "import lm_eval, vllm" 2>/dev/null; then
  timeout -s INT 900 python scripts/device_check_lmeval.py "$work/lm-eval"
else
  echo "lm-eval check: not run here (needs lm_eval and vllm installed): python scripts/device_check_lmeval.py DIR"
fi
# The matrix's weight swap (issue 35): the swapped replica answers with the new weights, and how long against a cold
# start. transformers serve always; vLLM's sleep mode and SGLang's /update_weights_from_disk where they are installed.
echo "== swap"
timeout -s INT 300 python scripts/device_check_swap.py "$work/swap-transformers" --engine transformers
for engine in vllm sglang; do
  if python -c "import $engine" 2>/dev/null; then
    timeout -s INT 600 python scripts/device_check_swap.py "$work/swap-$engine" --engine "$engine"
  else
    echo "swap check with $engine: not run here ($engine is not installed)"
  fi
done
echo "== done in $(( $(date +%s) - start )) s"
