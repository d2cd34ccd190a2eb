#!/usr/bin/env bash
# Build the wheels that scripts/device_check.sh needs on a GPU machine that has torch and transformers but no network
# and no other package: the runner's own wheel (installed there without its dependencies: the check imports only
# runner.serving and runner.models) and the small packages those and `transformers serve` import. Checks that they
# stay under the 64 MiB that may be brought to that machine.
#
#   bash scripts/build_device_wheels.sh [OUT_DIR] [PYTHON_VERSION]   # defaults: dist/device-wheels, 3.11
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist/device-wheels}
python_version=${2:-3.11}
rm -rf "$out" && mkdir -p "$out"

python -m pip wheel --quiet --no-deps --wheel-dir "$out" .
# What `import runner.serving, runner.models` loads besides the standard library (pydantic, structlog, httpx, openai,
# psutil, PyYAML, rich, fsspec), and transformers[serving]'s server (fastapi, uvicorn, starlette); their own
# dependencies come with them. Versions within the runner's pins (pyproject.toml).
python -m pip download --quiet --dest "$out" --only-binary=:all: --python-version "$python_version" \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  'pydantic>=2.7,<3' 'structlog>=24.1,<27' 'httpx>=0.27,<1' 'openai>=1.40,<2' 'psutil>=5.9,<8' 'PyYAML>=6,<7' \
  'rich>=13.7,<16' 'fsspec>=2026.6.0' 'zstandard' fastapi uvicorn starlette

size=$(du -sm "$out" | cut -f1)
echo "device wheels: $(ls "$out" | wc -l) files, ${size} MiB in $out"
if [ "$size" -ge 64 ]; then
  echo "build_device_wheels: ${size} MiB is over the 64 MiB that may be brought to the GPU machine" >&2
  exit 1
fi
