"""The device-side steps of `gpu_check.py`, each run by it as its own child process (with its own timeout):

- `env`: the versions of python, torch, CUDA, transformers, accelerate and pydantic, and the GPU's name.
- `build`: random-weight models of real shapes, built on the device from the configs below (nothing downloaded),
  saved with the embedded model's tokenizer; one JSON line per model built.
- `crosscheck`: one cell timed by hand in this process, outside infertune: a prefill and a decode loop over the
  model's forward with `torch.cuda.synchronize` after each step, and `generate` timed whole at 1 and N new tokens.
- `calibrate`: infertune's calibration (`infertune.estimate.calibration.measure`), each microbenchmark timed and
  printed as it ends (a killed run still says how far it got), then cached where infertune reads it, and read back
  as infertune will (`reads_back`: the host key matches).

Usage: `python benchmarks/gpu_check_device.py env|build|crosscheck|calibrate ...` (gpu_check.py passes the arguments).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

# The real shapes: each model's published config.json values (random weights are built from them). Facts, with
# their source; only the layer count of the MoE is cut (4 of Qwen3-30B-A3B's 48 layers, for time and disk).
SHAPES: dict[str, dict] = {
    # https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct (config.json; infertune's embedded model)
    "smollm2-135m": {
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
    },
    # https://huggingface.co/meta-llama/Llama-3.2-1B (config.json; its llama3 rope scaling left out: no effect on speed)
    "llama-1b": {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
    },
    # https://huggingface.co/meta-llama/Llama-3.1-8B (config.json; rope scaling left out as above)
    "llama-8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
    # https://huggingface.co/Qwen/Qwen3-30B-A3B (config.json): its layer shape, 4 of its 48 layers (3.1B params)
    "qwen3-moe-4l": {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "num_hidden_layers": 4,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
    },
}
# --tiny (the CPU test of the check's logic): the same architectures at toy sizes, the embedded tokenizer's vocabulary
_TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 49152}
TINY: dict[str, dict] = {
    "tiny-llama": dict(
        model_type="llama", intermediate_size=128, num_hidden_layers=2, tie_word_embeddings=True, **_TINY
    ),
    "tiny-moe": dict(
        model_type="qwen3_moe",
        intermediate_size=128,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
        **_TINY,
    ),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def say(**row) -> None:
    print(json.dumps(row), flush=True)


def build(args) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    shapes = {**SHAPES, **TINY}
    dtype = getattr(torch, args.dtype)
    for name in args.models.split(","):
        t0 = time.perf_counter()
        out = Path(args.out) / name
        try:
            d = dict(shapes[name])
            cfg = AutoConfig.for_model(d.pop("model_type"), bos_token_id=1, eos_token_id=2, pad_token_id=2, **d)
            torch.manual_seed(0)
            with torch.device(args.device):
                model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
            model.save_pretrained(out)
            for f in TOKENIZER_FILES:
                if (Path(args.tok) / f).is_file():
                    shutil.copy(Path(args.tok) / f, out / f)
            params = sum(p.numel() for p in model.parameters())
            del model
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
            size = sum(f.stat().st_size for f in out.iterdir())
            say(model=name, status="ok", params=params, bytes_on_disk=size, seconds=time.perf_counter() - t0)
        except Exception as e:  # one model failing leaves the others to build
            say(model=name, status="failed", error=f"{type(e).__name__}: {e}"[:500], seconds=time.perf_counter() - t0)


def crosscheck(args) -> None:
    """TTFT and time per token by hand: the prefill forward (plus the first token's argmax) and each decode step,
    synchronised; and generate timed whole at 1 and N tokens (time per token = (t_N - t_1) / (N - 1))."""
    import torch
    from transformers import AutoModelForCausalLM

    dev = args.device
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        args.model, dtype=getattr(torch, args.dtype), attn_implementation=args.attn
    )
    model = model.to(dev).eval()
    sync()
    load_s = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 10000, (args.batch, args.input_len), generator=gen).to(dev)
    n = args.new_tokens
    kw = {"do_sample": False, "pad_token_id": 2, "temperature": None, "top_p": None, "top_k": None}

    def loop() -> tuple[float, list[float]]:
        sync()
        t = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        sync()
        ttft, steps = time.perf_counter() - t, []
        cache = out.past_key_values
        for _ in range(n - 1):
            t = time.perf_counter()
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
            nxt, cache = out.logits[:, -1:].argmax(-1), out.past_key_values
            sync()
            steps.append(time.perf_counter() - t)
        return ttft, steps

    def whole(tokens: int) -> float:
        sync()
        t = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, min_new_tokens=tokens, **kw)
        sync()
        return time.perf_counter() - t

    with torch.inference_mode():
        loop(), whole(1), whole(n)  # warm-up
        ttfts, tpots, g1, gn = [], [], [], []
        for _ in range(args.repeats):
            ttft, steps = loop()
            ttfts.append(ttft)
            tpots.append(statistics.mean(steps) if steps else 0.0)
            g1.append(whole(1))
            gn.append(whole(n))
    peak = torch.cuda.max_memory_allocated(dev) if dev.startswith("cuda") else None
    say(
        status="ok",
        load_s=load_s,
        loop_ttft_s=statistics.median(ttfts),
        loop_tpot_s=statistics.median(tpots),
        generate_ttft_s=statistics.median(g1),
        generate_tpot_s=(statistics.median(gn) - statistics.median(g1)) / max(n - 1, 1),
        peak_allocated_bytes=peak,
        repeats=args.repeats,
    )


def calibrate(args) -> None:
    from infertune.core.paths import write_json_atomic
    from infertune.estimate import calibration

    def timed(name, fn):
        def run(*a, **kw):
            t = time.perf_counter()
            out = fn(*a, **kw)
            say(phase=name, seconds=time.perf_counter() - t)
            return out

        return run

    for name in ("measure_linear", "measure_overhead", "measure_attention"):  # the names calibration.measure calls
        setattr(calibration, name, timed(name, getattr(calibration, name)))
    t0 = time.perf_counter()
    cal = calibration.measure(args.device)
    path = calibration.cache_path("cpu" if args.device == "cpu" else "cuda")
    write_json_atomic(path, cal.model_dump(mode="json"))
    seconds = time.perf_counter() - t0
    back = calibration.cached("cpu" if args.device == "cpu" else "cuda", measure_if_missing=False) is not None
    say(status="ok", seconds=seconds, path=str(path), reads_back=back, step_s=cal.step_s, layer_s=cal.layer_s)


def env(args) -> None:
    import platform

    import torch
    import transformers

    v = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    v.update(transformers=transformers.__version__, cuda_available=torch.cuda.is_available())
    for name in ("accelerate", "pydantic"):
        try:
            v[name] = __import__(name).__version__
        except Exception as e:  # absent: said, not fatal
            v[name] = repr(e)
    if torch.cuda.is_available():
        v["gpu"] = torch.cuda.get_device_name(0)
    say(**v)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="step", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--tok", required=True, help="folder holding the embedded model's tokenizer files")
    b.add_argument("--models", required=True, help="comma-separated names of SHAPES or TINY")
    b.add_argument("--device", default="cuda")
    b.add_argument("--dtype", default="bfloat16")
    c = sub.add_parser("crosscheck")
    c.add_argument("--model", required=True)
    c.add_argument("--device", default="cuda")
    c.add_argument("--dtype", default="bfloat16")
    c.add_argument("--attn", default="sdpa")
    c.add_argument("--batch", type=int, default=1)
    c.add_argument("--input-len", type=int, default=512)
    c.add_argument("--new-tokens", type=int, default=64)
    c.add_argument("--repeats", type=int, default=3)
    k = sub.add_parser("calibrate")
    k.add_argument("--device", default="cuda")
    sub.add_parser("env")
    args = p.parse_args()
    {"build": build, "crosscheck": crosscheck, "calibrate": calibrate, "env": env}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
