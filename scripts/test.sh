#!/usr/bin/env bash
# Set up, run the gates (scripts/check.sh: format, lint, types, layers), then the whole test suite (unit tests
# on tiny models + integration on the embedded model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# The report tests lay the HTML pages out in a real browser: Debian's chromium. Installed here when apt-get can
# (as root, or with password-less sudo); otherwise those tests skip and say why.
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && sudo="sudo -n"; }
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium; } >/dev/null \
      || echo "warning: apt-get could not install chromium: the browser tests will be skipped" >&2
  else
    echo "note: chromium is not installed and apt-get is not usable here (needs root): the browser tests will be skipped" >&2
  fi
fi
bash scripts/check.sh   # format, lint, types, layers: seconds, before the minutes of tests
exec .venv/bin/python -m pytest "$@"
