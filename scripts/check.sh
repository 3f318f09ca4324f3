#!/usr/bin/env bash
# The gates every change passes before its tests: format, lint, types and the one-way layers.
# Usage: scripts/check.sh (after scripts/setup.sh test; scripts/test.sh runs it first).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
"$bin/ruff" format --check --quiet src tests benchmarks   # the house style (ruff format, line length 120)
"$bin/ruff" check --quiet src                              # lint: the rules of [tool.ruff.lint]
"$bin/mypy"                                                # types: src/infertune ([tool.mypy])
layers=$("$bin/lint-imports" --no-cache --no-logo) || { echo "$layers"; exit 1; }   # the one-way layers
echo "check: format, lint, types and layers clean"
