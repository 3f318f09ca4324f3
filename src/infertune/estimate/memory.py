"""Memory breakdown of one inference workload, from the model's config alone. Every formula is in
docs/estimator.md; the names of the constants below are the ones the docs and the JSON use.

The peak is not the sum of the rows: prefill transients (attention scores, MLP activations) exist
while the KV cache holds only the prompt, and the cache is longest at the end of generation. So
    total = weights + logits + overhead + max(KV(input + output), KV(input) + transient)
    transient = max(MLP activations, attention activations + attention scratch)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from infertune.core.errors import UserError
from infertune.estimate.quant import Quantization, resolve, weight_bytes
from infertune.probe.model import ModelProfile

__all__ = ["EstimateSettings", "MemoryEstimate", "Quantization", "estimate_memory", "kv_cache_bytes", "state_bytes"]

MiB = 2**20
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}

# Named constants (docs/estimator.md says where each comes from).
CUDA_CONTEXT_BYTES = 830 * MiB  # context + libraries of a plain run (estimate/overhead.py has the breakdown)
CUDA_ALLOCATOR_SLACK = 0.05  # reserved-vs-allocated fragmentation of the caching allocator
CPU_RUNTIME_BYTES = 107 * MiB  # CPU: lazily imported modules, kernel workspaces; the tokenizer: overhead.py
KV_QUANT_GROUP = 64  # quanto's default q_group_size: one scale + one zero-point (16-bit each) per group


def resolve_dtype(dtype: str, native: str | None) -> str | None:
    """The estimator's dtype for a user's `dtype` ('auto' = the checkpoint's, fp32 if unknown); None if unknown."""
    from infertune.core.config import DTYPE_ALIASES

    if dtype == "auto":
        return native if native in DTYPE_BYTES else "float32"
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    return dtype if dtype in DTYPE_BYTES else None


class EstimateSettings(BaseModel):
    dtype: str = "bfloat16"
    quantization: Quantization = Field(default_factory=Quantization)
    kv_cache: Literal["dynamic", "static", "quantized", "offloaded"] = "dynamic"
    kv_nbits: int = 4
    kv_residual_len: int = 128
    max_cache_len: int | None = None  # static cache length; default input + output
    attn: str = "sdpa"
    prefill_chunk: int | None = None  # chunked prefill: queries per forward pass (continuous batching)
    paged_kv: bool = Field(
        False,
        description="the KV cache is a pool of fixed blocks written in place (continuous batching, a serving "
        "engine): no torch.cat growth, so none of a growing dynamic cache's copies or allocator fragmentation",
    )
    input_len: int = 512
    max_new_tokens: int = 256
    batch: int = 1
    concurrency: int = 1
    platform: Literal["cuda", "cpu", "mps"] = "cuda"
    tp: int = Field(1, ge=1, description="tensor-parallel ranks: each holds 1/tp of the linear layers and KV heads")
    compute_capability: str | None = Field(
        None, description="CUDA: the GPU's compute capability (context size by generation); filled from the accelerator"
    )
    torch_version: str | None = Field(None, description="CUDA: torch's version (lazy module loading from 1.13)")
    transformers_version: str | None = Field(
        None,
        description="the target's transformers (None: a current 5.x): its slow paths are priced by version "
        "(estimate/library.py: MoE expert loops, sdpa repeating K/V for grouped-query heads)",
    )
    compile: bool = Field(
        False,
        description="torch.compile with a static cache (CUDA graphs on CUDA): removes "
        "the per-layer dispatch cost from the expected speed",
    )
    experts_fused: bool | None = Field(
        None,
        description="MoE: the routed experts are stacked 3D tensors (bitsandbytes and torchao leave them in the "
        "dtype) rather than per-expert Linear layers; None: as the installed transformers builds the model (the "
        "profile's). The target's transformers decides: per-expert Linear layers before 5.0",
    )
    tp_plan: Literal["auto", "mlp"] = Field(
        "auto",
        description="auto: the model's plan (attention heads and MLP split); mlp: only the MLP split, "
        "attention (and its KV cache) replicated on every rank",
    )


class Component(BaseModel):
    name: str
    bytes: int
    phase: Literal["always", "prefill", "generation"]
    formula: str


class MemoryEstimate(BaseModel):
    weights_bytes: int
    kv_cache_bytes: int = Field(
        description="caches that grow with the tokens (full attention; sliding and "
        "chunked up to their window; cross-attention over the encoder)"
    )
    state_bytes: int = Field(
        0,
        description="fixed per-sequence state of linear-attention / SSM layers (conv + recurrent), whatever the length",
    )
    kv_cache_cpu_bytes: int = 0
    attention_scratch_bytes: int
    activations_bytes: int
    logits_bytes: int
    overhead_bytes: int
    total_bytes: int
    load_peak_bytes: int = Field(description="while loading: a dtype conversion holds the checkpoint too")
    components: list[Component]
    per_device: dict[str, int] = Field(default_factory=dict, description="bytes per device and in CPU RAM")
    sharded_weights_bytes: int = Field(
        0,
        description="the decoder layers' linear weights: what tensor "
        "parallelism splits (embeddings, lm_head, norms are replicated)",
    )
    expert_weights_bytes: int = Field(0, description="the routed experts' share of weights_bytes")
    tower_weights_bytes: int = Field(0, description="vision/audio tower or encoder: held, not read by a decode step")
    cuda_context_bytes: int = Field(
        0, description="CUDA: context + library modules, outside torch's counters (part of overhead_bytes)"
    )
    allocator_reserve_bytes: int = Field(
        0,
        description="CUDA: caching allocator's reserve beyond live tensors: "
        "the slack in overhead_bytes + kv_growth_reserve_bytes",
    )
    kv_growth_reserve_bytes: int = Field(
        0,
        description="CUDA: reserve from a growing dynamic cache's fragmentation "
        "(in total_bytes; reserved and nvidia-smi, not allocated)",
    )


def mlp_share(p: ModelProfile) -> float:
    """The gated MLP's share of the decoder layers' linear parameters (3 x hidden x intermediate a layer)."""
    inter = p.intermediate_size or 4 * p.hidden_size
    return min(1.0, p.num_layers * 3 * p.hidden_size * inter / max(p.linear_params, 1))


def kv_bytes_per_token(p: ModelProfile, kv_bytes: float) -> float:
    """Per token, all growing layers: K + V elements per layer-token x bytes."""
    return sum(g.layers * g.kv_per_token for g in p.cache_groups) * kv_bytes


def _cached_tokens(p: ModelProfile, s: EstimateSettings, seq: int):
    """(layers, K+V elements per token, tokens held, kind) per growing group, once `seq` tokens went through.
    Sliding/chunked layers hold at most their window (transformers' dynamic cache keeps W - 1 tokens, a
    static one W). Encoder-decoders: the decoder's self-attention holds the generated tokens, its
    cross-attention the whole encoder output (Whisper: a fixed number of audio frames)."""
    static = s.kv_cache == "static"
    if p.is_encoder_decoder:  # the decoder has fed its start token and every generated token but the last
        enc = p.encoder_length or s.input_len
        seq = max(seq - s.input_len, 0) + 1 if not static else (s.max_cache_len or s.max_new_tokens)
        out = [(g.layers, g.kv_per_token, seq, g.kind) for g in p.cache_groups if g.kv_per_token]
        return [*out, (p.cross_layers, p.cross_kv_per_token, enc, "cross")] if p.cross_layers else out
    if static:
        seq = s.max_cache_len or s.input_len + s.max_new_tokens
    return [
        (g.layers, g.kv_per_token, min(seq, g.window + (1 if static else 0)) if g.window is not None else seq, g.kind)
        for g in p.cache_groups
        if g.kv_per_token
    ]


def kv_cache_bytes(p: ModelProfile, s: EstimateSettings, seq: int, dtype_bytes: int) -> tuple[float, str]:
    """Growing caches of one sequence of `seq` tokens (input + output so far)."""
    rows = _cached_tokens(p, s, seq)
    shape = " + ".join(f"{n} {kind} x {per} x {tok}" for n, per, tok, kind in rows) or "no attention cache"
    elems = sum(n * per * tok for n, per, tok, _ in rows)
    if s.kv_cache != "quantized":
        return elems * dtype_bytes, f"({shape}) layers x elements x tokens x {dtype_bytes} B"
    # quantized: the newest residual_len tokens stay in full precision, the rest at nbits + group scales
    full = sum(n * per * min(tok, s.kv_residual_len) for n, per, tok, _ in rows)
    per_q = s.kv_nbits / 8 + 2 * 2 / KV_QUANT_GROUP
    b = full * dtype_bytes + (elems - full) * per_q
    return b, (
        f"({shape}): {full:,} elements x {dtype_bytes} B + {elems - full:,} x ({s.kv_nbits}/8 + 4/{KV_QUANT_GROUP}) B"
    )


def state_bytes(p: ModelProfile, dtype_bytes: int) -> tuple[int, str]:
    """Fixed state of one sequence: linear-attention / SSM layers keep a conv state in the dtype and a
    recurrent state (float32 for the Mamba and delta-net scans)."""
    rows = [(g.layers, g.state, g.state_fp32) for g in p.cache_groups if g.state or g.state_fp32]
    total = sum(n * (st * dtype_bytes + f32 * 4) for n, st, f32 in rows)
    return total, " + ".join(f"{n} layers x ({st:,} x {dtype_bytes} B + {f32:,} x 4 B)" for n, st, f32 in rows)


def estimate_memory(p: ModelProfile, s: EstimateSettings, checkpoint_dtype: str | None = None) -> MemoryEstimate:
    b = DTYPE_BYTES[s.dtype]
    n = p.num_parameters or 0
    if not n:
        raise UserError(
            f"cannot count the parameters of {p.model_type!r} ({p.architecture}): transformers cannot "
            "build it and the folder has no safetensors weights to read"
        )
    q = resolve(s.quantization, p.quantization)
    if s.experts_fused is not None and p.num_experts and s.experts_fused != p.experts_fused:
        p = p.model_copy(update={"experts_fused": s.experts_fused})
    weights, expert_w, weights_f = weight_bytes(p, q, b)
    if q.from_checkpoint:
        weights_f = f"as stored ({q.method}, the checkpoint's quantization_config): {weights_f}"
    comps = [Component(name="weights", bytes=int(weights), phase="always", formula=weights_f)]
    lin_b = q.linear_bytes(p.linear_params, p.linear_rows or 0, b)[0] if q.quantizes_linear() else p.linear_params * b

    seqs = s.batch * s.concurrency  # sequences holding a KV cache at once
    # generate feeds back every new token but the last: the cache ends holding S + T - 1 tokens
    # (a static cache is allocated at max_cache_len, default S + T, see _cached_tokens)
    kv_one_full, kv_f = kv_cache_bytes(p, s, s.input_len + max(s.max_new_tokens - 1, 0), b)
    # A static cache is allocated at its full length before the prefill.
    kv_one_prompt = kv_one_full if s.kv_cache == "static" else kv_cache_bytes(p, s, s.input_len, b)[0]
    kv_full, kv_prompt = kv_one_full * seqs, kv_one_prompt * seqs
    kv_cpu = 0.0
    if s.kv_cache == "offloaded":  # only the layer in use and the one being prefetched stay on the device
        kv_cpu = kv_full
        on_device = min(2, p.num_layers) / p.num_layers
        kv_full, kv_prompt = kv_full * on_device, kv_prompt * on_device
    comps.append(
        Component(
            name="kv_cache",
            bytes=int(kv_full),
            phase="generation",
            formula=f"{seqs} sequences x {kv_f}" + ("; 2 layers on device" if kv_cpu else ""),
        )
    )
    state_one, state_f = state_bytes(p, b)
    state = state_one * seqs
    if state:
        comps.append(
            Component(
                name="state",
                bytes=int(state),
                phase="always",
                formula=f"{seqs} sequences x ({state_f}), fixed whatever the length",
            )
        )

    # Prefill transients, for one generate call of `batch` prompts (one decoder layer live at a time).
    kv_len = s.input_len
    q_len = min(s.prefill_chunk or kv_len, kv_len)  # a chunk of queries attends to everything before it
    heads = p.num_attention_heads
    if s.attn == "eager" or s.attn.endswith("|eager"):
        # scores in dtype + fp32 softmax output; below fp32 the softmax first upcasts its input (one more
        # fp32 copy); plus the 4D float mask. Measured: 8.2 B/element fp32, 10.1 bf16 (docs/estimator.md).
        per_elem = 2 * b if b == 4 else b + 8
        scratch = s.batch * heads * q_len * kv_len * per_elem + s.batch * q_len * kv_len * b
        scratch_f = (
            f"{s.batch} x {heads} heads x {q_len} x {kv_len} x {per_elem} B"
            f" + mask {s.batch} x {q_len} x {kv_len} x {b} B"
        )
    else:
        scratch, scratch_f = 0, f"{s.attn}: tiled kernel, no q x kv score matrix"
    comps.append(Component(name="attention_scratch", bytes=int(scratch), phase="prefill", formula=scratch_f))

    # Live activations per token: attention runs first (residual, normed input, q/k/v incl. repeated k/v,
    # output), then the MLP (residual, normed input, gate, up, act(gate) x up); never both at once.
    inter = p.intermediate_size or 4 * p.hidden_size
    mlp_w = 2 * p.hidden_size + 3 * inter
    attn_w = 2 * p.hidden_size + (2 * heads + 3 * p.num_kv_heads) * p.head_dim + heads * p.head_dim
    tok = s.batch * q_len * b
    acts = tok * max(mlp_w, attn_w)
    comps.append(
        Component(
            name="activations",
            bytes=int(acts),
            phase="prefill",
            formula=f"{s.batch} x {q_len} tokens x max(MLP {mlp_w}, attention {attn_w}) x {b} B",
        )
    )
    transient = max(tok * mlp_w, tok * attn_w + scratch)
    from infertune.estimate import overhead as ovh

    quant_ws, quant_f = ovh.quant_workspace_bytes(p, s, b)
    if quant_ws:
        comps.append(Component(name="quantization_workspace", bytes=int(quant_ws), phase="prefill", formula=quant_f))
        transient += quant_ws
    growth = ovh.cache_growth_bytes(kv_full, p, s)

    # generate keeps only the last position's logits: lm_head output in dtype + the fp32 copy for sampling.
    logits = s.batch * p.vocab_size * (b + 4)
    comps.append(
        Component(
            name="logits", bytes=int(logits), phase="always", formula=f"{s.batch} x {p.vocab_size} vocab x ({b} + 4) B"
        )
    )

    tensors = weights + logits + state + max(kv_full + growth, kv_prompt + transient)
    context, reserve = 0, 0.0
    growth_reserve = 0.0
    if s.platform == "cuda":
        context, ctx_f = ovh.cuda_context_bytes(s)
        growth_reserve = ovh.growth_reserve_bytes(kv_full, s)
        reserve = CUDA_ALLOCATOR_SLACK * tensors + growth_reserve
        overhead = context + CUDA_ALLOCATOR_SLACK * tensors
        over_f = f"CUDA {ctx_f} + {CUDA_ALLOCATOR_SLACK:.0%} allocator reserve"
        if growth_reserve:  # grows with the cache, so it is the cache's, not a fixed overhead
            comps.append(
                Component(
                    name="kv_growth_reserve",
                    bytes=int(growth_reserve),
                    phase="generation",
                    formula=f"{ovh.CACHE_GROWTH_RESERVE} x KV: allocator fragmentation while the "
                    "dynamic cache grows (reserved, not allocated)",
                )
            )
    else:
        tok_b = ovh.tokenizer_bytes(p)
        overhead = CPU_RUNTIME_BYTES + tok_b
        over_f = f"CPU runtime {CPU_RUNTIME_BYTES // MiB} MiB above the import baseline + tokenizer {tok_b // MiB} MiB"
    comps.append(Component(name="overhead", bytes=int(overhead), phase="always", formula=over_f))

    ckpt = DTYPE_BYTES.get(checkpoint_dtype or s.dtype, b)
    converting = ckpt != b and q.method == "none"
    load_peak = weights + (n * ckpt if converting else 0) + overhead
    return MemoryEstimate(
        weights_bytes=int(weights),
        kv_cache_bytes=int(kv_full),
        state_bytes=int(state),
        kv_cache_cpu_bytes=int(kv_cpu),
        attention_scratch_bytes=int(scratch),
        activations_bytes=int(acts),
        logits_bytes=int(logits),
        overhead_bytes=int(overhead),
        total_bytes=int(tensors + overhead + growth_reserve),
        load_peak_bytes=int(load_peak),
        kv_growth_reserve_bytes=int(growth_reserve),
        components=comps,
        sharded_weights_bytes=int(lin_b * mlp_share(p) if s.tp_plan == "mlp" else lin_b + expert_w),
        expert_weights_bytes=int(expert_w),
        tower_weights_bytes=int(p.tower_parameters * (b if q.from_checkpoint or q.method == "none" else weights / n)),
        cuda_context_bytes=int(context),
        allocator_reserve_bytes=int(reserve),
    )
