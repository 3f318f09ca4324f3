#!/usr/bin/env bash
# The main job on the embedded model: set up, prepare SmolLM2-135M-Instruct, measure the default workload.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/infertune models prepare smollm2
.venv/bin/infertune measure --model demo "$@"
