"""GPU memory beside the tensors a model names: the CUDA context and the libraries' kernels and workspaces,
the caching allocator's reserve, what a quantization backend holds beside its packed weights, and the
cache's transient copy while it grows. docs/estimator.md gives each figure's source.

Three conventions are in use and `measure` reports all three on CUDA:
    max_memory_allocated = tensors                                   (torch's allocator, live tensors)
    max_memory_reserved  = tensors + allocator reserve               (what the allocator holds from CUDA)
    device used (NVML)   = reserved + CUDA context + library modules (what nvidia-smi shows)
"""

from __future__ import annotations

from typing import Any

from infertune.probe.model import ModelProfile

# `s` below is an estimate.memory.EstimateSettings (not imported: memory.py imports this module)
EstimateSettings = Any

MiB = 2**20
# The context itself (driver, runtime, torch's kernels loaded on first use): ~300 MB with CUDA's lazy module
# loading (CUDA >= 11.7, on by default since torch 1.13) and "> 1000 MB" before it, when every kernel was
# loaded at start (ptrblck, pytorch/pytorch#107667); 426 MiB measured for torch 2.10 + CUDA 13 on an RTX 6000
# Ada (unslothai/unsloth-zoo PR #1053).
CONTEXT_LAZY_BYTES = 430 * MiB
CONTEXT_EAGER_LOADING_BYTES = 1100 * MiB
# Kernel modules loaded while a transformers model generates (cuBLAS/cuBLASLt GEMM kernels, attention,
# elementwise): fitted so that context + libraries span the 0.8-1.7 GB that earlier comparisons of
# published A100 runs found between nvidia-smi and torch's reserved counter (issue 19).
LIBRARY_BYTES = 400 * MiB
# What each backend adds: its own kernel library in the context (bitsandbytes' CUDA library, the exllama /
# marlin kernels of GPTQ and AWQ, Triton kernels and CUDA-graph pools of torch.compile).
BACKEND_LIBRARY_BYTES = {
    "bnb-int8": 150 * MiB,
    "bnb-nf4": 150 * MiB,
    "bnb-fp4": 150 * MiB,
    "gptq": 300 * MiB,
    "awq": 300 * MiB,
    "int4": 100 * MiB,
    "int8": 100 * MiB,
}
COMPILE_BYTES = 300 * MiB
# Blackwell and Hopper contexts are larger than Ampere's (more SMs, larger per-SM reservations); a small
# allowance per generation, by compute capability major.
GENERATION_EXTRA_BYTES = {9: 100 * MiB, 10: 150 * MiB, 12: 150 * MiB}


def _torch_before_lazy(torch_version: str | None) -> bool:
    if not torch_version:
        return False
    try:
        major, minor = (int(x) for x in torch_version.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < (1, 13)


# A dynamic cache grows by torch.cat: each layer's K and V are reallocated one token longer every step, between
# live blocks of the other layers, so the caching allocator cannot reuse the freed ones for the next, larger
# size and reserves new memory: fragmentation near the cache's own size. Fitted to optimum's GPTQ benchmark
# (A100, Llama-2-13B, 512 + 512 tokens, batch 1-16: device memory above the tensors = 0.67-0.88 x the final KV).
CACHE_GROWTH_RESERVE = 0.8


def growth_reserve_bytes(kv_full: float, s: EstimateSettings) -> float:
    """Allocator reserve from a growing dynamic cache (in max_memory_reserved and nvidia-smi, not in allocated)."""
    grows = s.kv_cache == "dynamic" and not s.paged_kv and s.max_new_tokens > 1
    return CACHE_GROWTH_RESERVE * kv_full if grows else 0.0


def cuda_context_bytes(s: EstimateSettings) -> tuple[int, str]:
    """CUDA context + library modules for this GPU generation, torch version and backend; and the formula."""
    base = CONTEXT_EAGER_LOADING_BYTES if _torch_before_lazy(s.torch_version) else CONTEXT_LAZY_BYTES
    major = int(s.compute_capability.split(".")[0]) if s.compute_capability else 8
    gen = GENERATION_EXTRA_BYTES.get(major, 0)
    backend = BACKEND_LIBRARY_BYTES.get(s.quantization.method, 0)
    comp = COMPILE_BYTES if s.compile else 0
    total = base + gen + LIBRARY_BYTES + backend + comp
    parts = [f"context {base // MiB}", f"libraries {LIBRARY_BYTES // MiB}"]
    parts += [f"sm{major}x {gen // MiB}"] if gen else []
    parts += [f"{s.quantization.method} kernels {backend // MiB}"] if backend else []
    parts += [f"torch.compile {comp // MiB}"] if comp else []
    return total, " + ".join(parts) + " MiB"


def largest_linear(p: ModelProfile) -> int:
    """Elements of the largest Linear weight in a block (the MLP's hidden x intermediate, or q_proj)."""
    inter = p.intermediate_size or 4 * p.hidden_size
    return max(p.hidden_size * inter, p.hidden_size * p.num_attention_heads * p.head_dim)


def quant_workspace_bytes(p: ModelProfile, s: EstimateSettings, dtype_bytes: int) -> tuple[int, str]:
    """What a weight-quantization backend holds beside its packed weights while a forward runs: bitsandbytes
    4-bit, GPTQ/AWQ and quanto dequantize a weight to the compute dtype for inputs of more than one row (the
    prefill; bitsandbytes' fast kernel covers batch 1 decode only), one Linear at a time; LLM.int8 keeps the
    int8 copy of the activations and an fp16 copy of the outlier columns (small beside one weight)."""
    m = s.quantization.method
    if m in ("bnb-nf4", "bnb-fp4", "gptq", "awq", "int4"):
        n = largest_linear(p)
        return n * dtype_bytes, f"one dequantized weight: {n:,} x {dtype_bytes} B"
    return 0, ""


def cache_growth_bytes(kv_full: float, p: ModelProfile, s: EstimateSettings) -> float:
    """A dynamic cache grows by torch.cat per layer: the longer copy of one layer's keys (or values) exists
    beside the old one for a moment. A static cache is written in place."""
    if s.kv_cache != "dynamic" or s.paged_kv or not p.num_layers:
        return 0.0
    return kv_full / (2 * p.num_layers)


# CPU: the tokenizer stays resident beside the model (transformers' fast tokenizer: vocab, reverse vocab and
# merges maps in Rust, plus the Python side). Measured in the trial's own order (imports, tokenizer, model,
# generate; generation-phase peak above the post-import baseline), the same model with different tokenizers:
# a 61-token BPE ~0, SmolLM2's 49,152 vocab +14-21 MiB, Gemma 3's 262,144 vocab (515k merges) +247-255 MiB
# (SmolLM2 and Gemma 3 270M, bf16, 128 + 32 tokens; Gemma 3's vocab truncated to 64k/128k: +40/+84 MiB).
# Fitted through the two real tokenizers: nothing up to 32k tokens, then ~1.1 KiB a token.
TOKENIZER_FREE_VOCAB = 32768
TOKENIZER_BYTES_PER_TOKEN = 1150


def tokenizer_bytes(p: ModelProfile) -> int:
    """Resident memory of the loaded tokenizer on the host, from the vocabulary size (docs/estimator.md)."""
    return max(0, (p.vocab_size or 0) - TOKENIZER_FREE_VOCAB) * TOKENIZER_BYTES_PER_TOKEN
