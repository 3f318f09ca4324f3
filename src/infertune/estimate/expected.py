"""Expected speed: what a user will measure, beside the roofline bound (estimate/speed.py).

The roofline says what the hardware allows. A transformers run also pays, per decoding step, a fixed cost
(Python, dispatch and kernel launches per decoder layer, generate's bookkeeping) and its kernels reach only a
share of the datasheet's bandwidth and FLOP/s, a share that depends on the dtype (CPUs emulate fp16, and bf16
without AVX512-BF16/AMX) and on the quantization backend (its kernel for batch 1 and for larger batches).

    linear  = time of the matmuls: on a calibrated host, the measured F.linear time per weight element at that
              many activation rows (estimate/calibration.py); on a GPU from the datasheet:
              max(weight bytes / (bandwidth x bw_eff), 2 rows x elements / (peak x flops_eff)), with the
              quantization backend's kernel (QUANT_KERNELS) deciding bytes, efficiency and extra launches
    attn    = on a calibrated host: attention FLOPs / the attention FLOP/s measured there for that phase,
              implementation and dtype (calibration.measure_attention); else decode: KV bytes read / bandwidth;
              prefill: attention FLOPs (eager: the full S x S, plus writing and reading its score matrix;
              sdpa/flash: causal half, tiled) / the dtype's FLOP/s
    fixed   = step_s + layers x layer_s (eager), or the compiled figures (CUDA graphs) when compiled
    CPU:    step = x_decode (linear + fixed) + attn              (dispatch and compute take turns; x: the host's
                                                                 in-model factor, estimate/anchor.py)
    CUDA:   step = max(linear + attn, fixed) + SYNC_S            (the host queues kernels ahead of the GPU; what
                                                                 waits in series is added instead: a dynamic
                                                                 cache's attention (FA2: its growth), everything
                                                                 under fine-grained FP8's syncs, estimate/library.py)
    TTFT    = prefill forward (its own linear, attn and one fixed cost) + one generate step's bookkeeping
              (CPU: the linear and fixed parts times x_prefill)

Its factors (estimate/factors.py) name their sources in docs/estimator.md (the table of factors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, Field

from infertune.estimate import library
from infertune.estimate.factors import (
    CPU_BW_EFF,
    CPU_EMULATED_SLOWDOWN,
    CPU_FLOPS_EFF,
    CUDA_COMPILED_LAYER_S,
    CUDA_COMPILED_STEP_S,
    CUDA_LAYER_S,
    CUDA_STEP_S,
    GPU_BW_EFF,
    GPU_FLOPS_EFF,
    HOST_SPEED,
    LINEARS_PER_LAYER,
    QUANT_KERNELS,
    SYNC_S,
)
from infertune.estimate.library import Factor

if TYPE_CHECKING:
    from infertune.estimate.memory import EstimateSettings, MemoryEstimate
    from infertune.estimate.rates import Calibration
    from infertune.probe.model import ModelProfile


class Datasheet(Protocol):
    """What the expected model reads of an `Accelerator` (estimate/accelerators.py, which sits above this
    module: probing a CPU runs the calibration, and the calibration runs this model)."""

    @property
    def name(self) -> str: ...
    @property
    def bandwidth_Bps(self) -> float: ...
    @property
    def flops(self) -> dict[str, float]: ...


class ExpectedSpeed(BaseModel):
    kind: str = "estimate"
    prefill_s: float
    ttft_s: float = Field(description="expected time to first token: prefill forward + one step's bookkeeping")
    tpot_s: float = Field(description="expected time per output token (one decode step of all sequences)")
    tokens_per_s: float = Field(description="sequences / expected step time")
    fixed_s_per_step: float = Field(description="the per-step fixed cost inside tpot_s (dispatch, launches)")
    attention_s_per_step: float = Field(0.0, description="the attention inside tpot_s")
    prefill_attention_s: float = Field(0.0, description="the attention inside prefill_s")
    basis: str = Field(description="'calibrated on this host' or 'datasheet x published factors'")
    factors: list[Factor] = Field(default_factory=list)


def _active_weights(p: ModelProfile, weights: float, tokens: int) -> float:
    """MoE: only the routed experts the step's tokens pick are read (profile.expert_fraction, when known)."""
    frac = getattr(p, "expert_fraction", None)
    experts = getattr(p, "expert_params", 0) or 0
    if not callable(frac) or not experts or not p.num_parameters:
        return weights
    return weights - weights * experts / p.num_parameters * (1 - frac(tokens))


def cpu_emulation_slowdown(dtype: str, flags: list[str] | None = None) -> float:
    """CPU_EMULATED_SLOWDOWN for fp16 / bf16 when the CPU's flags show no native support, else 1. `flags`: a stated
    CPU's (estimate/cpus.py); None: this host's /proc/cpuinfo."""
    if dtype not in ("float16", "bfloat16"):
        return 1.0
    from infertune.probe.host import cpu_flags, native_cpu_dtypes

    have = set(flags) if flags is not None else cpu_flags()
    return 1.0 if native_cpu_dtypes(have).get(dtype) else CPU_EMULATED_SLOWDOWN


def attention_flops(heads: int, head_dim: int, q: int, kv: int, rows: int, causal: bool) -> float:
    """FLOPs of attention as the expected model counts them: QK^T and the weighted sum, halved when the kernel
    skips the masked half (causal sdpa over more than one query); eager computes the full square and masks it.
    One layer: the expected model multiplies by the layer count."""
    full = 4 * heads * head_dim * q * kv * rows
    return full / 2 if causal and q > 1 else full


def _attn_flops(p: ModelProfile, q: int, kv: int, rows: int, causal: bool) -> float:
    return p.num_layers * attention_flops(p.num_attention_heads, p.head_dim, q, kv, rows, causal)


def _overhead(s: EstimateSettings, layers: int, cal: Calibration | None, on_gpu: bool) -> tuple[float, float, str]:
    """(per step, per layer, source) of the fixed cost."""
    attn = "eager" if library.eager(s) else "sdpa"
    if getattr(s, "compile", False) and on_gpu:
        return CUDA_COMPILED_STEP_S, CUDA_COMPILED_LAYER_S, "published (CUDA graphs), see docs/estimator.md"
    if cal is not None and attn in cal.layer_s:
        return cal.step_s[attn], cal.layer_s[attn], f"measured on this host ({cal.device})"
    if on_gpu:
        return (CUDA_STEP_S, CUDA_LAYER_S.get(s.attn, CUDA_LAYER_S["sdpa"]), "fitted to published eager GPU runs")
    return 2e-3, 0.3e-3, "default (no calibration of this CPU)"


def matrix_mix(p: ModelProfile) -> list[tuple[float, float]]:
    """(weight elements per matrix, share of a decoder layer's Linear elements) for q, k, v, o and the MLP's
    three: a small model's Linears run slower per element than large ones (Calibration.linear_s)."""
    h, hd = p.hidden_size, p.head_dim
    sizes = [h * p.num_attention_heads * hd] * 2 + [h * p.num_kv_heads * hd] * 2
    sizes += [h * p.intermediate_size] * 3 if p.intermediate_size else []
    total = sum(sizes) or 1
    return [(m, m / total) for m in sizes if m]


def calibrated_linear(cal: Calibration, dtype: str, rows: int, elems: float, mix: list[tuple[float, float]]) -> float:
    """The calibrated F.linear time of `elems` weight elements shaped as `mix` (matrix_mix)."""
    return (
        sum(share * cal.linear_s(dtype, rows, elems, matrix=m) for m, share in mix)
        if mix
        else cal.linear_s(dtype, rows, elems)
    )


def _cpu_linear(
    cal: Calibration, s: EstimateSettings, rows: int, elems: float, quant_bytes: float, mix: list[tuple[float, float]]
) -> float:
    """Calibrated CPU matmul time; weight-only quantization is dequantized per call on CPU: the dtype's matmul
    plus reading the packed bytes and writing the dequantized copy at the copy rate (the matmul reads it)."""
    t = calibrated_linear(cal, s.dtype, rows, elems, mix)
    if s.quantization.method not in ("none", "gguf"):
        from infertune.estimate.memory import DTYPE_BYTES

        t += (quant_bytes + elems * DTYPE_BYTES.get(s.dtype, 2)) / cal.copy_Bps
    return t


def _gpu_linear(
    acc: Datasheet,
    s: EstimateSettings,
    rows: int,
    elems: float,
    weight_bytes: float,
    cal: Calibration | None,
    mix: list[tuple[float, float]],
) -> tuple[float, float]:
    """(device time, extra host time per layer) of the matmuls on a GPU."""
    from infertune.estimate.memory import DTYPE_BYTES

    b = DTYPE_BYTES.get(s.dtype, 2)
    dtype = "fp8" if s.quantization.method == "fp8" else s.dtype
    peak = acc.flops.get(dtype, acc.flops["float32"]) * GPU_FLOPS_EFF
    bw = acc.bandwidth_Bps * GPU_BW_EFF
    if cal is not None and s.dtype in cal.linear_s_per_elem:  # measured on this GPU
        dense = calibrated_linear(cal, s.dtype, rows, elems, mix)
    else:
        dense = max(elems * b / bw, 2 * rows * elems / peak)
    q = QUANT_KERNELS.get(s.quantization.method)
    if q is None:
        return dense, 0.0
    dequant = rows >= library.dequant_rows(s)  # compiled: the extra launches fused into the graph
    host = 0.0 if s.compile else library.quant_linear_host_s(s, dequant) * LINEARS_PER_LAYER
    if dequant:  # dequantize the weight, then a dense matmul
        return weight_bytes / bw + 2 * elems * b / bw + dense, host
    eff = library.quant_eff(s, rows)
    return max(weight_bytes / (acc.bandwidth_Bps * eff), 2 * rows * elems / (peak * q.get("flops_eff", 1.0))), host


def _datasheet(acc: Datasheet | None) -> Datasheet:
    """`acc` where a figure comes from the datasheet: only a calibrated CPU does without one."""
    if acc is None:
        raise ValueError("expected_speed needs the accelerator's datasheet unless the CPU is calibrated")
    return acc


def expected_speed(
    p: ModelProfile,
    mem: MemoryEstimate,
    s: EstimateSettings,
    acc: Datasheet | None,
    cal: Calibration | None = None,
    extra_step_s: float = 0.0,
) -> ExpectedSpeed:
    """`cal`: this host's calibration (CPU, or the CUDA device it ran on); `acc`: the datasheet (None only with a
    CPU calibration, which needs none); `extra_step_s`: what the bound adds per forward pass beside the kernels
    (offloaded weights crossing the host link, tensor-parallel all-reduces)."""
    from infertune.estimate.memory import DTYPE_BYTES

    on_gpu = s.platform != "cpu"
    b = DTYPE_BYTES.get(s.dtype, 2)
    seqs = s.batch * s.concurrency
    L = p.num_layers
    step_s, layer_s, over_src = _overhead(s, L, cal, on_gpu)
    host_x = 1.0 if cal is not None or not on_gpu else HOST_SPEED.get(_datasheet(acc).name, 1.0)
    step_s, layer_s = step_s * host_x, layer_s * host_x
    fixed = step_s + L * layer_s
    lm = p.vocab_size * p.hidden_size
    emb_bytes = lm * b  # the lm_head / tied embedding stays in the dtype whatever the quantization
    # a dynamic cache is read at its mean length during generation; a static one is attended over whole (masked)
    full = s.input_len + s.max_new_tokens
    ctx = (s.max_cache_len or full) if s.kv_cache == "static" else s.input_len + s.max_new_tokens / 2
    kv_read = (mem.kv_cache_bytes + mem.kv_cache_cpu_bytes) * (1.0 if s.kv_cache == "static" else ctx / max(full, 1))
    # memory traffic rate (bytes read + written per second): the calibrated copy, else the datasheet at the efficiency
    traffic_Bps = cal.copy_Bps if cal else _datasheet(acc).bandwidth_Bps * (GPU_BW_EFF if on_gpu else CPU_BW_EFF)

    def dense(rows: int, elems: float, nbytes: float, matrix: float | None = None) -> float:
        """A dense matmul of `rows` activations against `elems` weights (`nbytes` of them), in one matrix of
        `matrix` elements (None: large)."""
        if cal is not None and (not on_gpu or s.dtype in cal.linear_s_per_elem):
            return cal.linear_s(s.dtype, rows, elems, matrix=matrix)
        eff_bw, eff_fl = (GPU_BW_EFF, GPU_FLOPS_EFF) if on_gpu else (CPU_BW_EFF, CPU_FLOPS_EFF)
        sheet = _datasheet(acc)
        peak = sheet.flops.get(s.dtype, sheet.flops["float32"])
        t_mem, t_flop = nbytes / (sheet.bandwidth_Bps * eff_bw), 2 * rows * elems / (peak * eff_fl)
        if on_gpu:
            return max(t_mem, t_flop)
        stated = getattr(sheet, "cpu_flags", None)  # a stated CPU: its table rate already prices an emulated dtype
        slow = cpu_emulation_slowdown(s.dtype, stated)
        return max(t_mem * slow, t_flop) if stated is not None else max(t_mem, t_flop) * slow

    mix = matrix_mix(p)

    def linear_time(rows: int, with_lm_rows: int) -> tuple[float, float]:
        elems = _active_weights(p, p.linear_params, rows)
        packed = max(_active_weights(p, mem.weights_bytes, rows) - emb_bytes, 0.0)
        if on_gpu:
            t, host = _gpu_linear(_datasheet(acc), s, rows, elems, packed, cal, mix)
        elif cal is not None:
            t, host = _cpu_linear(cal, s, rows, elems, packed, mix), 0.0
        else:
            t, host = dense(rows, elems, packed), 0.0
        # the lm_head at the rate of a hidden x hidden matrix: a GEMV's pace follows its inner dimension (fp32
        # 49152 x 576 here ran at 269 ps per element, as 640 x 640 did at 274, where 2048 x 2048 ran at 206)
        return t / max(s.tp, 1) + dense(with_lm_rows, lm, lm * b, matrix=p.hidden_size**2), host

    flops_rate = 2 * 256 * 1e6 / dense(256, 1e6, 1e6 * b)  # the dtype's matmul rate at many rows

    # decode step
    lin, host = linear_time(seqs, seqs)
    host *= host_x
    impl = "eager" if library.eager(s) else "sdpa"
    rate_dec = cal.attn_rate("decode", impl, s.dtype) if cal is not None else None
    if rate_dec:  # the kernel as measured (K/V read from memory), plus the cache's growth and eager's copies
        attn_dec = (
            _attn_flops(p, 1, int(ctx), seqs, False) / rate_dec + library.cache_copies(p, s) * kv_read / traffic_Bps
        ) / max(s.tp, 1)
    else:
        attn_dec = (
            library.kv_traffic(p, s) * kv_read / traffic_Bps / max(s.tp, 1)
            + _attn_flops(p, 1, int(ctx), seqs, False) / flops_rate
        )
    # a calibrated CPU: what is not attention at the pace a reference model ran at on this host (anchor.py)
    x_dec, x_pre = (
        (cal.in_model("decode", impl, s.dtype), cal.in_model("prefill", impl, s.dtype))
        if cal is not None and not on_gpu
        else (1.0, 1.0)
    )
    device = lin + attn_dec
    loop_dec = library.expert_loop_s(p, s, seqs) if on_gpu else 0.0  # transformers' MoE loop (estimate/library.py)
    host_total = fixed + L * host + loop_dec
    # a dynamic cache's attention waits on its own allocations (the cache grows by torch.cat every step; before
    # 4.54 sdpa also copies it per query head): its time adds to the step instead of hiding under the host's
    serial = attn_dec if on_gpu and s.kv_cache == "dynamic" else 0.0
    if serial and s.attn == "flash_attention_2":  # FA2's reads and copies queue: only the cache's growth waits
        serial = attn_dec * 2.0 / library.kv_traffic(p, s)
    serial = device if on_gpu and library.fp8_syncs_per_linear(s) else serial  # a sync per Linear: turns
    tpot = (
        max(device - serial, host_total) + serial + SYNC_S if on_gpu else x_dec * (lin + host_total) + attn_dec
    ) + extra_step_s

    # prefill: one generate call of `batch` prompts (chunks of `prefill_chunk` queries)
    S, B = s.input_len, s.batch
    q = min(s.prefill_chunk or S, S)
    chunks = -(-S // q)
    lin_p, host_p = linear_time(B * q, B)
    host_p *= host_x
    lin_p = lin_p * chunks
    rate_p = (
        None
        if cal is None
        # eager: its fp32 score matrix (one layer) fits the caches better when small
        else (
            cal.eager_prefill_rate(s.dtype, 4.0 * B * p.num_attention_heads * S * S)
            if impl == "eager"
            else cal.attn_rate("prefill", impl, s.dtype)
        )
    )
    if rate_p:  # measured: the eager score matrix's traffic and the softmax included
        attn_p = _attn_flops(p, S, S, B, causal=not library.eager(s)) / rate_p
    else:
        attn_p = _attn_flops(p, S, S, B, causal=not library.eager(s)) / flops_rate
        if library.eager(s):  # the score matrix is written, softmaxed (fp32) and read back: memory traffic
            attn_p += L * B * p.num_attention_heads * S * S * (6 * b + 8) / traffic_Bps
    dev_p = lin_p + attn_p
    loop_pre = library.expert_loop_s(p, s, B * q) if on_gpu else 0.0
    host_p_total = chunks * (step_s + L * (layer_s + host_p) + loop_pre)
    turns = library.fp8_syncs_per_linear(s)  # host and GPU take turns: their sum, not the larger
    prefill = (
        (dev_p + host_p_total if turns else max(dev_p, host_p_total))
        if on_gpu
        else x_pre * (lin_p + host_p_total) + attn_p
    ) + extra_step_s * chunks
    ttft = prefill + step_s * x_pre
    factors = [
        Factor(name="fixed cost per step", value=step_s, source=over_src),
        Factor(name="fixed cost per layer and step", value=layer_s, source=over_src),
    ]
    factors += [Factor(name=n, value=v, source=src) for n, v, src in library.terms(p, s, seqs)]
    if cal is not None:
        factors.append(
            Factor(
                name=f"{s.dtype} F.linear at {seqs} rows, s per weight element",
                value=calibrated_linear(cal, s.dtype, seqs, 1.0, mix),
                source=f"measured on this host ({cal.device}), at this model's matrix sizes",
            )
        )
        if rate_dec:
            factors.append(
                Factor(
                    name=f"{impl} {s.dtype} decode attention, FLOP/s",
                    value=rate_dec,
                    source=f"measured on this host ({cal.device})",
                )
            )
        if cal.in_model_x and not on_gpu:
            src = f"a reference model's generate on this host ({cal.device}) against its expected figures"
            factors += [
                Factor(name=f"in-model factor, decode ({impl}, {s.dtype})", value=x_dec, source=src),
                Factor(name=f"in-model factor, prefill ({impl}, {s.dtype})", value=x_pre, source=src),
            ]
    elif on_gpu:
        factors += [
            Factor(name="bandwidth efficiency", value=GPU_BW_EFF, source="gpt-fast README (A100, fp16)"),
            Factor(name="FLOP/s efficiency", value=GPU_FLOPS_EFF, source="assumed for cuBLAS GEMMs"),
        ]
    if s.quantization.method in QUANT_KERNELS and on_gpu:
        name, src = f"{s.quantization.method} kernel bandwidth efficiency", "QUANT_KERNELS (docs/estimator.md)"
        factors.append(Factor(name=name, value=library.quant_eff(s, seqs), source=src))
    return ExpectedSpeed(
        prefill_s=prefill,
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s=seqs / tpot,
        fixed_s_per_step=host_total,
        attention_s_per_step=attn_dec,
        prefill_attention_s=attn_p,
        basis=(
            f"calibrated on this host ({cal.device})"
            if cal
            else "datasheet x published factors"
            if on_gpu
            else "probed CPU rates x assumed efficiencies (no calibration)"
        )
        + (
            ""
            if on_gpu or s.attn in ("eager", "sdpa") or s.attn.endswith(("|eager", "|sdpa"))
            else f"; {s.attn} is not calibrated here: timed as sdpa"
        ),
        factors=factors,
    )
