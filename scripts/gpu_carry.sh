#!/usr/bin/env bash
# What benchmarks/gpu_check.py needs on the GPU machine, which reaches no network, prepared here:
#   .whl/     the wheels its Python 3.12 lacks (pydantic and its parts, gguf), for cp312 manylinux x86_64
#   .devtok/  the embedded model's tokenizer files and config.json, from its prepared folder (models.store)
# Both are ignored (.gitignore) and travel with the device call's carry=[".whl",".devtok"]; the call itself is in
# benchmarks/README.md (gpu_check.py). Usage: bash scripts/gpu_carry.sh   (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-}
[ -n "$py" ] || { [ -x .venv/bin/python ] && py=.venv/bin/python || py=python3; }
rm -rf .whl .devtok
mkdir -p .whl .devtok
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  pydantic==2.14.4 pydantic_core==2.50.5 typing_inspection==0.4.5 annotated_types==0.8.0 typing_extensions==4.16.0 \
  gguf==0.19.0
tok=$(PYTHONPATH=src "$py" -c "from infertune.models import store; print(store.prepare('smollm2'))" | tail -1)
for f in tokenizer.json tokenizer_config.json chat_template.jinja special_tokens_map.json config.json; do
  if [ -f "$tok/$f" ]; then cp "$tok/$f" .devtok/; fi
done
[ -f .devtok/tokenizer.json ] || { echo "no tokenizer.json in $tok" >&2; exit 1; }
du -sh .whl .devtok
ls .whl .devtok
