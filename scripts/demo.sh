#!/usr/bin/env bash
# The main job on the embedded model: set up, then `infertune demo`: prepare SmolLM2-135M-Instruct and tune
# a chat workload on it from a naive script's settings, writing the report. Extra arguments go to
# `infertune demo` (only --output DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/infertune demo "$@"
