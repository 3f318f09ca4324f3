#!/usr/bin/env bash
# Set up and run the whole test suite (unit tests on tiny models + integration on the embedded model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
