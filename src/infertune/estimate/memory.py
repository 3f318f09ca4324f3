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

from infertune.errors import UserError
from infertune.probe.model import ModelProfile

MiB = 2**20
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}

# Named constants (docs/estimator.md says where each comes from).
CUDA_CONTEXT_BYTES = 500 * MiB  # CUDA context + cuBLAS/cuDNN handles; outside torch's allocator counters
CUDA_ALLOCATOR_SLACK = 0.05  # reserved-vs-allocated fragmentation of the caching allocator
CPU_RUNTIME_BYTES = 125 * MiB  # CPU: lazily imported modules, tokenizer, kernel workspaces (measured)
KV_QUANT_GROUP = 64  # quanto's default q_group_size: one scale + one zero-point (16-bit each) per group
BNB_BLOCK = 64  # bitsandbytes 4-bit block size
BNB_DQ_BLOCK = 256  # double quantization: absmax blocks per second-level fp32 constant


def resolve_dtype(dtype: str, native: str | None) -> str | None:
    """The estimator's dtype for a user's `dtype` ('auto' = the checkpoint's, fp32 if unknown); None if unknown."""
    from infertune.config import DTYPE_ALIASES

    if dtype == "auto":
        return native if native in DTYPE_BYTES else "float32"
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    return dtype if dtype in DTYPE_BYTES else None


class Quantization(BaseModel):
    """Weight quantization of the Linear layers inside the blocks (lm_head and embeddings keep the dtype)."""

    method: Literal["none", "bnb-int8", "bnb-nf4", "bnb-fp4", "gptq", "awq", "int8", "int4", "fp8", "gguf"] = "none"
    bits: int = 4  # gptq/awq
    group_size: int = 128  # gptq/awq/int4
    double_quant: bool = False  # bnb 4-bit
    gguf_type: str | None = None  # GGML type name (Q4_K, Q8_0, ...): every 2D weight incl. embeddings

    @property
    def gguf_block(self) -> tuple[int, int]:
        """(weights per block, bytes per block) of the GGML type, from the gguf package's own table."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        return GGML_QUANT_SIZES[GGMLQuantizationType[self.gguf_type]]

    @classmethod
    def parse(cls, text: str | None) -> Quantization:
        """'bnb-nf4', 'bnb-nf4-dq', 'gptq-4bit-g128', 'awq', 'int8', 'int4-g64', 'fp8', 'none'."""
        if not text or text == "none":
            return cls()
        if text.lower().startswith("gguf-"):
            return cls._parse_gguf(text[5:])
        parts = text.lower().split("-")
        kw: dict = {}
        if parts[-1] == "dq":
            kw["double_quant"] = True
            parts = parts[:-1]
        for p in list(parts[1:]):
            if p.endswith("bit") and p[:-3].isdigit():
                kw["bits"] = int(p[:-3])
                parts.remove(p)
            elif p.startswith("g") and p[1:].isdigit():
                kw["group_size"] = int(p[1:])
                parts.remove(p)
        method = "-".join(parts)
        try:
            return cls(method=method, **kw)
        except Exception:
            from typing import get_args

            from infertune.validate import one_of

            starting = {m: m for m in get_args(cls.model_fields["method"].annotation) if m.startswith(method) and method}
            if len(starting) > 1:
                one_of("quantization", text, starting, "method")
            raise UserError(
                f"unknown quantization {text!r}; use none, bnb-int8, bnb-nf4[-dq], bnb-fp4[-dq], "
                "gptq[-4bit][-g128], awq[-4bit][-g128], int8, int4[-g128], fp8 or gguf-TYPE (gguf-q4_k_m)"
            ) from None

    @classmethod
    def _parse_gguf(cls, name: str) -> Quantization:
        """'q4_k_m' -> Q4_K: llama.cpp's _S/_M/_L mixes keep a few tensors at a larger type; we use the base."""
        from gguf.constants import GGMLQuantizationType

        t = name.upper()
        for suffix in ("_XS", "_S", "_M", "_L"):
            if t.endswith(suffix) and t not in GGMLQuantizationType.__members__:
                t = t[: -len(suffix)]
        if t not in GGMLQuantizationType.__members__:
            known = ", ".join(n.lower() for n in ("Q2_K", "Q3_K", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16", "BF16"))
            raise UserError(f"unknown GGUF type {name!r}; e.g. gguf-{known.replace(', ', ', gguf-')}")
        return cls(method="gguf", gguf_type=t)

    def linear_bytes(self, params: int, rows: int, dtype_bytes: int) -> tuple[float, str]:
        """Bytes of the quantized Linear weights, and the formula with the numbers in."""
        m, g = self.method, self.group_size
        if m == "none":
            return params * dtype_bytes, f"{params:,} x {dtype_bytes} B"
        if m in ("bnb-int8", "fp8"):  # int8/fp8 weight + one fp32 scale per output row
            return params + 4 * rows, f"{params:,} x 1 B + {rows:,} rows x 4 B"
        if m in ("bnb-nf4", "bnb-fp4"):
            if self.double_quant:  # absmax itself quantized to 8 bits, one fp32 per 256 blocks
                per = 0.5 + 1 / BNB_BLOCK + 4 / (BNB_BLOCK * BNB_DQ_BLOCK)
                return params * per, f"{params:,} x (0.5 + 1/{BNB_BLOCK} + 4/({BNB_BLOCK}x{BNB_DQ_BLOCK})) B"
            return params * (0.5 + 4 / BNB_BLOCK), f"{params:,} x (0.5 + 4/{BNB_BLOCK}) B"
        if m in ("gptq", "awq"):  # packed b-bit weights + per group: fp16 scale and packed b-bit zero
            b = self.bits
            return params * (b / 8 + (2 + b / 8) / g), f"{params:,} x ({b}/8 + (2 + {b}/8)/{g}) B"
        if m == "gguf":
            per, size = self.gguf_block
            return params * size / per, f"{params:,} x {size}/{per} B ({self.gguf_type} blocks)"
        if m == "int8":  # torchao/quanto weight-only: int8 + per-row scale in the compute dtype
            return params + dtype_bytes * rows, f"{params:,} x 1 B + {rows:,} rows x {dtype_bytes} B"
        # int4: packed 4-bit + per group a scale and a zero-point in the compute dtype
        return params * (0.5 + 2 * dtype_bytes / g), f"{params:,} x (0.5 + 2x{dtype_bytes}/{g}) B"


class EstimateSettings(BaseModel):
    dtype: str = "bfloat16"
    quantization: Quantization = Field(default_factory=Quantization)
    kv_cache: Literal["dynamic", "static", "quantized", "offloaded"] = "dynamic"
    kv_nbits: int = 4
    kv_residual_len: int = 128
    max_cache_len: int | None = None  # static cache length; default input + output
    attn: str = "sdpa"
    prefill_chunk: int | None = None  # chunked prefill: queries per forward pass (continuous batching)
    input_len: int = 512
    max_new_tokens: int = 256
    batch: int = 1
    concurrency: int = 1
    platform: Literal["cuda", "cpu", "mps"] = "cuda"
    tp: int = Field(1, ge=1, description="tensor-parallel ranks: each holds 1/tp of the linear layers and KV heads")
    tp_plan: Literal["auto", "mlp"] = Field(
        "auto", description="auto: the model's plan (attention heads and MLP split); mlp: only the MLP split, "
                            "attention (and its KV cache) replicated on every rank")


class Component(BaseModel):
    name: str
    bytes: int
    phase: Literal["always", "prefill", "generation"]
    formula: str


class MemoryEstimate(BaseModel):
    weights_bytes: int
    kv_cache_bytes: int
    kv_cache_cpu_bytes: int = 0
    attention_scratch_bytes: int
    activations_bytes: int
    logits_bytes: int
    overhead_bytes: int
    total_bytes: int
    load_peak_bytes: int = Field(description="while loading: a dtype conversion holds the checkpoint too")
    components: list[Component]
    per_device: dict[str, int] = Field(default_factory=dict, description="bytes per device and in CPU RAM")
    sharded_weights_bytes: int = Field(0, description="the decoder layers' linear weights: what tensor "
                                                      "parallelism splits (embeddings, lm_head, norms are replicated)")


def mlp_share(p: ModelProfile) -> float:
    """The gated MLP's share of the decoder layers' linear parameters (3 x hidden x intermediate a layer)."""
    inter = p.intermediate_size or 4 * p.hidden_size
    return min(1.0, p.num_layers * 3 * p.hidden_size * inter / max(p.linear_params, 1))


def kv_bytes_per_token(p: ModelProfile, kv_bytes: float) -> float:
    """Per token, all layers: 2 (K and V) x layers x kv_heads x head_dim x bytes."""
    return 2 * p.num_layers * p.num_kv_heads * p.head_dim * kv_bytes


def kv_cache_bytes(p: ModelProfile, s: EstimateSettings, seq: int, dtype_bytes: int) -> tuple[float, str]:
    """KV cache of one sequence of `seq` tokens; sliding layers keep only their window."""
    if s.kv_cache == "static":
        seq = s.max_cache_len or seq
    per_layer_token = 2 * p.num_kv_heads * p.head_dim  # elements
    window = p.sliding_window or seq
    tokens = p.num_global_layers * seq + p.num_sliding_layers * min(window, seq)  # layer-tokens
    shape = f"2 x {p.num_kv_heads} kv_heads x {p.head_dim} head_dim x ({p.num_global_layers} x {seq}"
    shape += f" + {p.num_sliding_layers} x {min(window, seq)})" if p.num_sliding_layers else ")"
    if s.kv_cache != "quantized":
        return tokens * per_layer_token * dtype_bytes, f"{shape} layer-tokens x {dtype_bytes} B"
    # quantized: the newest residual_len tokens stay in full precision, the rest at nbits + group scales
    layers = p.num_layers
    full = min(seq, s.kv_residual_len) * layers
    q_tok = max(tokens - full, 0)
    per_q = s.kv_nbits / 8 + 2 * 2 / KV_QUANT_GROUP
    b = full * per_layer_token * dtype_bytes + q_tok * per_layer_token * per_q
    return b, f"{shape}: {full:,} layer-tokens x {dtype_bytes} B + {q_tok:,} x ({s.kv_nbits}/8 + 4/{KV_QUANT_GROUP}) B"


def estimate_memory(p: ModelProfile, s: EstimateSettings, checkpoint_dtype: str | None = None) -> MemoryEstimate:
    b = DTYPE_BYTES[s.dtype]
    n = p.num_parameters or 0
    linear, rows = p.linear_params, p.linear_rows or 0
    if s.quantization.method == "gguf":  # GGUF stores every matrix (embeddings too) in blocks, norms in F32
        other = (p.param_groups or {}).get("other", 0)
        lin_b, lin_f = s.quantization.linear_bytes(n - other, rows, b)
        weights = lin_b + other * 4
        weights_f = f"matrices: {lin_f}; {other:,} norm/bias params x 4 B (F32)"
    else:
        lin_b, lin_f = s.quantization.linear_bytes(linear, rows, b)
        weights = lin_b + (n - linear) * b
        weights_f = f"linear: {lin_f}; other {n - linear:,} params x {b} B"
    comps = [Component(name="weights", bytes=int(weights), phase="always", formula=weights_f)]

    seqs = s.batch * s.concurrency  # sequences holding a KV cache at once
    kv_one_full, kv_f = kv_cache_bytes(p, s, s.input_len + s.max_new_tokens, b)
    # A static cache is allocated at its full length before the prefill.
    kv_one_prompt = kv_one_full if s.kv_cache == "static" else kv_cache_bytes(p, s, s.input_len, b)[0]
    kv_full, kv_prompt = kv_one_full * seqs, kv_one_prompt * seqs
    kv_cpu = 0.0
    if s.kv_cache == "offloaded":  # only the layer in use and the one being prefetched stay on the device
        kv_cpu = kv_full
        on_device = min(2, p.num_layers) / p.num_layers
        kv_full, kv_prompt = kv_full * on_device, kv_prompt * on_device
    comps.append(Component(name="kv_cache", bytes=int(kv_full), phase="generation",
                           formula=f"{seqs} sequences x {kv_f}" + ("; 2 layers on device" if kv_cpu else "")))

    # Prefill transients, for one generate call of `batch` prompts (one decoder layer live at a time).
    kv_len = s.input_len
    q_len = min(s.prefill_chunk or kv_len, kv_len)  # a chunk of queries attends to everything before it
    heads = p.num_attention_heads
    if s.attn == "eager" or s.attn.endswith("|eager"):
        # scores in dtype + fp32 softmax output; below fp32 the softmax first upcasts its input (one more
        # fp32 copy); plus the 4D float mask. Measured: 8.2 B/element fp32, 10.1 bf16 (docs/estimator.md).
        per_elem = 2 * b if b == 4 else b + 8
        scratch = s.batch * heads * q_len * kv_len * per_elem + s.batch * q_len * kv_len * b
        scratch_f = f"{s.batch} x {heads} heads x {q_len} x {kv_len} x {per_elem} B + mask {s.batch} x {q_len} x {kv_len} x {b} B"
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
    comps.append(Component(name="activations", bytes=int(acts), phase="prefill",
                           formula=f"{s.batch} x {q_len} tokens x max(MLP {mlp_w}, attention {attn_w}) x {b} B"))
    transient = max(tok * mlp_w, tok * attn_w + scratch)

    # generate keeps only the last position's logits: lm_head output in dtype + the fp32 copy for sampling.
    logits = s.batch * p.vocab_size * (b + 4)
    comps.append(Component(name="logits", bytes=int(logits), phase="always",
                           formula=f"{s.batch} x {p.vocab_size} vocab x ({b} + 4) B"))

    tensors = weights + logits + max(kv_full, kv_prompt + transient)
    if s.platform == "cuda":
        overhead = CUDA_CONTEXT_BYTES + CUDA_ALLOCATOR_SLACK * tensors
        over_f = f"CUDA context {CUDA_CONTEXT_BYTES // MiB} MiB + {CUDA_ALLOCATOR_SLACK:.0%} allocator slack"
    else:
        overhead, over_f = CPU_RUNTIME_BYTES, f"CPU runtime {CPU_RUNTIME_BYTES // MiB} MiB above the import baseline"
    comps.append(Component(name="overhead", bytes=int(overhead), phase="always", formula=over_f))

    ckpt = DTYPE_BYTES.get(checkpoint_dtype or s.dtype, b)
    converting = ckpt != b and s.quantization.method == "none"
    load_peak = weights + (n * ckpt if converting else 0) + overhead
    return MemoryEstimate(
        weights_bytes=int(weights), kv_cache_bytes=int(kv_full), kv_cache_cpu_bytes=int(kv_cpu),
        attention_scratch_bytes=int(scratch), activations_bytes=int(acts), logits_bytes=int(logits),
        overhead_bytes=int(overhead), total_bytes=int(tensors + overhead), load_peak_bytes=int(load_peak),
        components=comps, sharded_weights_bytes=int(lin_b * (mlp_share(p) if s.tp_plan == "mlp" else 1)),
    )
