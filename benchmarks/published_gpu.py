"""The estimate against published, measured GPU runs (benchmarks/published_gpu.csv), without a GPU.

Each row of the table is one figure someone measured and published (model, GPU, dtype or quantization,
lengths, batch, what was measured, the source URL). The models' shapes are written below from their public
config.json files (no download: a config.json is generated and profiled on the meta device), the GPU comes
from the datasheet table, and the estimate's figure of the same convention is printed beside the measured one:

    tpot_s / ttft_s / tokens_per_s / e2e_tokens_per_s speed.expected (and the roofline bound, which a run never beats)
    max_memory_allocated_bytes     total - overhead - growth reserve (what torch's allocator counts)
    max_memory_reserved_bytes      total - CUDA context + allocator reserve
    device_used_bytes              total (nvidia-smi / NVML: context and reserve included)

    PYTHONPATH=src .venv/bin/python benchmarks/published_gpu.py [--csv benchmarks/published_gpu.csv]
    PYTHONPATH=src .venv/bin/python benchmarks/published_gpu.py --csv benchmarks/corpora/published-gpu-2/rows.csv \
        --part test|dev|all

A corpus with `id` and `split` columns (benchmarks/corpora/published-gpu-2) is reported by part, the test part
first. e2e_tokens_per_s: batch x new tokens over the whole generate call (TTFT + (n - 1) x TPOT), as speed
tables that time one generate call and divide the new tokens by it report.

Goals (issue 19): memory median |error| < 8 %; speed expected/measured within 0.5-2 for >= 80 % of rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import tempfile
from pathlib import Path

from infertune.estimate import estimate
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.memory import EstimateSettings, Quantization
from infertune.probe.model import profile_model

# Shapes from the models' public config.json files (huggingface.co/<id>/blob/main/config.json).
ARCH = {
    "Qwen2.5-3B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
    },
    "Qwen2.5-14B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen2.5-32B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Llama-3.1-8B": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    },
    "Llama-3.1-70B": {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    },
    "Mistral-7B": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Llama-2-13b": {
        "model_type": "llama",
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
        "max_position_embeddings": 4096,
    },
    "Llama-2-7b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
        "max_position_embeddings": 4096,
    },
    "octocoder": {
        "model_type": "gpt_bigcode",
        "n_embd": 6144,
        "n_inner": 24576,
        "n_layer": 40,
        "n_head": 48,
        "multi_query": True,
        "vocab_size": 49152,
        "n_positions": 8192,
    },
    # published-gpu-2 (Qwen2 and Qwen1.5 docs' transformers speed tables)
    "Qwen2-0.5B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
    },
    "Qwen2-1.5B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
    },
    "Qwen2-7B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen2-57B-A14B-Instruct": {
        "model_type": "qwen2_moe",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "moe_intermediate_size": 2560,
        "shared_expert_intermediate_size": 20480,
        "num_experts": 64,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen2-72B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-0.5B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-1.8B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 2048,
        "intermediate_size": 5504,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-4B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 2560,
        "intermediate_size": 6912,
        "num_hidden_layers": 40,
        "num_attention_heads": 20,
        "num_key_value_heads": 20,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-7B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-14B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-72B-Chat": {
        "model_type": "qwen2",
        "hidden_size": 8192,
        "intermediate_size": 24576,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    },
    "Qwen1.5-MoE-A2.7B-Chat": {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 1,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "max_position_embeddings": 8192,
    },
    # GLM-4-9B-Chat ran on its remote code (model_type chatglm: 40 layers, hidden 4096, ffn 13696, 32 heads, 2
    # multi-query groups, padded vocab 151552); written here as transformers' own GLM class spells the same shape
    # (THUDM/glm-4-9b-chat-hf). The 1M variant differs only in its positions.
    "glm-4-9b-chat": {
        "model_type": "glm",
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "partial_rotary_factor": 0.5,
        "attention_bias": True,
        "vocab_size": 151552,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
    },
    "glm-4-9b-chat-1m": {
        "model_type": "glm",
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "partial_rotary_factor": 0.5,
        "attention_bias": True,
        "vocab_size": 151552,
        "tie_word_embeddings": False,
        "max_position_embeddings": 1048576,
    },
}


def profile(name: str, cache: dict):
    if name not in cache:
        folder = Path(tempfile.mkdtemp(prefix="infertune-arch-"))
        (folder / "config.json").write_text(json.dumps({**ARCH[name], "torch_dtype": "bfloat16"}))
        cache[name] = profile_model(folder)
    return cache[name]


def stated_transformers(note: str) -> str | None:
    """The transformers version a row's note states ('transformers 4.46.3'), which prices its slow paths. A note
    that gives only the model's minimum ('transformers version not given (>= 4.37 ...') is read at it: the
    Qwen1.5 page (2024-03-31) ran 4.37-4.39, and every release of that window prices the same slow paths."""
    m = re.search(r"transformers[ =v]*([0-9]+\.[0-9]+(?:\.[0-9]+)?)", note)
    m = m or re.search(r"transformers version not given \(>= ([0-9]+\.[0-9]+)", note)
    return m.group(1) if m else None


def predicted(row: dict, cache: dict) -> tuple[float, float | None]:
    """(the estimate in the row's convention, the roofline bound for speed rows)."""
    p = profile(row["model"], cache)
    s = EstimateSettings(
        dtype=row["dtype"],
        quantization=Quantization.parse(row["quantization"]),
        attn=row["attn"],
        input_len=int(row["input_len"]),
        max_new_tokens=int(row["output_len"]),
        batch=int(row["batch"]),
        platform="cuda",
        compile=row["mode"] == "compiled",
        transformers_version=stated_transformers(row.get("note") or ""),
    )
    e = estimate(p, s, find_accelerator(row["gpu"]), model=row["model"])
    m, metric = e.memory, row["metric"]
    if metric == "tpot_s":
        return e.speed.expected.tpot_s, e.speed.tpot_s
    if metric == "tokens_per_s":
        return e.speed.expected.tokens_per_s, e.speed.tokens_per_s
    if metric == "ttft_s":
        return e.speed.expected.ttft_s, e.speed.ttft_s
    if metric == "e2e_tokens_per_s":  # new tokens over the whole generate call, prefill included
        n, b = int(row["output_len"]), int(row["batch"])
        x, r = e.speed.expected, e.speed.bound
        return b * n / (x.ttft_s + (n - 1) * x.tpot_s), b * n / (r.ttft_s + (n - 1) * r.tpot_s)
    if metric == "max_memory_allocated_bytes":
        return m.total_bytes - m.overhead_bytes - m.kv_growth_reserve_bytes, None
    if metric == "max_memory_reserved_bytes":
        return m.total_bytes - m.cuda_context_bytes, None
    return m.total_bytes, None  # device_used_bytes


def summary(label: str, speed: list[float], memory: list[float]) -> None:
    if speed:
        inside = sum(0.5 <= x <= 2 for x in speed) / len(speed)
        tight = sum(0.8 <= x <= 1.25 for x in speed) / len(speed)
        print(
            f"{label}speed: {len(speed)} rows, expected/measured median {statistics.median(speed):.2f}, "
            f"min {min(speed):.2f}, max {max(speed):.2f}; within 0.5-2: {inside:.0%} (goal >= 80 %, #31: 95 %); "
            f"within 0.8-1.25: {tight:.0%} (#31: 60 %)"
        )
    if memory:
        errs = [abs(x - 1) for x in memory]
        print(
            f"{label}memory: {len(memory)} rows, median |error| {statistics.median(errs):.1%}, max {max(errs):.1%} "
            f"(goal: median < 8 %, #31: < 3 %)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=Path(__file__).with_name("published_gpu.csv"))
    ap.add_argument(
        "--part",
        choices=("test", "dev", "all"),
        default="all",
        help="rows of a corpus with a split column: that part only; all: both, the test part reported first",
    )
    args = ap.parse_args()
    rows = list(csv.DictReader(args.csv.open()))
    split = bool(rows) and "split" in rows[0]
    if split:
        parts = ("test", "dev") if args.part == "all" else (args.part,)
        rows = [r for part in parts for r in rows if r["split"] == part]
    cache: dict = {}
    results: dict[str, tuple[list[float], list[float]]] = {}
    lead = f"{'part':5} {'id':40} " if split else ""
    print(
        f"{lead}{'model':22} {'gpu':9} {'dtype':8} {'quant':10} {'b':>3} {'in':>6} {'metric':26} {'measured':>10}"
        f" {'expected':>10} {'exp/meas':>8} {'bound/meas':>10}"
    )
    for r in rows:
        exp, bound = predicted(r, cache)
        meas = float(r["value"])
        # a rate: invert so that > 1 means the estimate is slower, as for times
        if r["metric"].endswith("tokens_per_s"):
            ratio, bratio = meas / exp, (meas / bound if bound else None)
        else:
            ratio, bratio = exp / meas, (bound / meas if bound else None)
        speed, memory = results.setdefault(r.get("split", ""), ([], []))
        (speed if bound is not None else memory).append(ratio)
        fmt = (lambda v: f"{v / 2**30:8.2f}Gi") if "bytes" in r["metric"] else (lambda v: f"{v:10.4f}")
        lead = f"{r['split']:5} {r['id'][:40]:40} " if split else ""
        print(
            f"{lead}{r['model'][:22]:22} {r['gpu'][:9]:9} {r['dtype'][:8]:8} {r['quantization'][:10]:10} "
            f"{r['batch']:>3} {r['input_len']:>6} {r['metric'][:26]:26} {fmt(meas)} {fmt(exp)} {ratio:8.2f} "
            f"{bratio if bratio is None else round(bratio, 2)!s:>10}"
        )
    print()
    for part, (speed, memory) in results.items():
        summary(f"[{part}] " if part else "", speed, memory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
