#!/usr/bin/env bash
# constraints.txt: the releases of .ci/run's environment (after a green run, its .ci-venv), which the README's install
# commands take with -c. torch is written without its local label (2.13.0+cpu -> 2.13.0: CI's CPU build, the same
# release as PyPI's); the CUDA packages a GPU build of torch brings are left to it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.ci-venv}
{
  echo "# The releases the tests ran with (.ci/run's environment): pip install -c constraints.txt -e '.[EXTRAS]' installs"
  echo "# exactly these wherever a package is needed. torch is CI's CPU build's release; the CUDA packages a GPU build"
  echo "# of torch brings are left to it. Refresh after a green .ci/run: scripts/freeze_constraints.sh [VENV]."
  "$venv/bin/pip" freeze --exclude-editable | grep -viE '^(nvidia-|cuda-|triton==)' | sed -E 's/^(torch==[^+]+)\+.*/\1/'
} > constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) releases from $venv"
