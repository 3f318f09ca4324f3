"""Roofline speed model: the best a device can do (`speed.bound`); the expected figure is estimate/expected.py.

prefill (compute-bound):  FLOPs = 2 x active matmul params x tokens + 2 x heads x head_dim x S x min(S, W)
                          x batch per attention layer (causal QK^T and AV) + 2 x vocab x hidden x batch
decode step:              time = max(bytes read / bandwidth, FLOPs / peak FLOP/s)
                          bytes = weights a step reads + KV of every sequence at its mean length + fixed state;
                          a step reads the shared weights and, of the routed experts, the share the batch's
                          b tokens activate: 1 - (1 - k/E)^b (towers and encoders are not read)
                          FLOPs = 2 x active matmul params per token (k of E experts) + attention
tensor parallel (tp):     per rank: 1/tp of the linear weights, KV and FLOPs, replicated parts whole, plus
                          2 all-reduces per layer: latency + 2 (tp-1)/tp x tokens x hidden x bytes / link
                          (MLP-only plan: 1/tp of the MLP alone, attention and KV whole, 1 all-reduce)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from infertune.estimate.accelerators import Accelerator
from infertune.estimate.bands import Band
from infertune.estimate.expected import ExpectedSpeed
from infertune.estimate.memory import DTYPE_BYTES, EstimateSettings, MemoryEstimate, mlp_share
from infertune.probe.model import ModelProfile

# Host-to-GPU copy rate for weights offloaded by device_map (pageable memory over PCIe 4.0 x16; pinned
# transfers reach ~25 GB/s). Offloaded weights cross it at every forward pass.
HOST_LINK_Bps = 12e9
# Weights device_map put on disk are read back from the offload folder at every forward, tensor by tensor,
# through accelerate's hooks. Effective rate measured on the development machine, quiet, page cache warm:
# SmolLM2 fp32 layers of 14.2 MB took 8.4 ms against 1.74 ms resident, 2.1 GB/s (with the 2 cores shared
# by other work it fell to ~0.25 GB/s). A roofline takes the faster figure; a cold disk is slower.
DISK_OFFLOAD_Bps = 2.1e9
# Fixed cost of one small all-reduce (NCCL launch + link latency), per tensor-parallel collective.
ALLREDUCE_LATENCY_S = 10e-6


def allreduce_s(p: ModelProfile, s: EstimateSettings, acc: Accelerator, tokens: int) -> float:
    """Tensor parallel: two all-reduces per layer (after attention, after the MLP; one with the MLP-only
    plan) of tokens x hidden activations; a ring moves 2 (tp-1)/tp of the bytes over each GPU's link
    (acc.interconnect_Bps)."""
    if s.tp <= 1:
        return 0.0
    nbytes = tokens * p.hidden_size * DTYPE_BYTES.get(s.dtype, 2)
    link = acc.interconnect_Bps or acc.bandwidth_Bps  # no peer link listed: through the device's own memory
    per = ALLREDUCE_LATENCY_S + 2 * (s.tp - 1) / s.tp * nbytes / link
    return (1 if s.tp_plan == "mlp" else 2) * p.num_layers * per


Limit = Literal["memory-bandwidth", "compute", "host-link", "disk"]


class BatchPoint(BaseModel):
    batch: int
    tpot_s: float
    tokens_per_s: float
    bound: Limit


_DEPRECATED = "deprecated (schema 1 only): the roofline bound, now under speed.bound; "


class Roofline(BaseModel):
    """The roofline figures: the hardware's limit for this shape, never beaten by a real run."""

    prefill_s: float
    ttft_s: float
    tpot_s: float
    tokens_per_s: float
    limited_by: Limit


class SpeedEstimate(BaseModel):
    device: str
    peak_flops: float
    bandwidth_Bps: float
    prefill_s: float = Field(description=_DEPRECATED + "bound.prefill_s")
    ttft_s: float = Field(description=_DEPRECATED + "bound.ttft_s; the expected figure is expected.ttft_s")
    tpot_s: float = Field(description=_DEPRECATED + "bound.tpot_s; the expected figure is expected.tpot_s")
    tokens_per_s: float = Field(description=_DEPRECATED + "bound.tokens_per_s")
    limited_by: Limit = Field(description="what limits the roofline's decode step")
    crossover_batch: int | None  # smallest batch at which a decode step turns compute-bound
    per_batch: list[BatchPoint]
    bound: Roofline | None = Field(None, description="the roofline: an upper bound on speed")
    expected: ExpectedSpeed | None = Field(
        None,
        description="what a run is expected to measure: the roofline plus fixed per-step costs and kernel "
        "efficiencies (estimate/expected.py)",
    )
    kind_ttft: str = Field("", description="the kind of row expected.ttft_s belongs to (estimate/bands.py)")
    kind_tpot: str = Field("", description="the kind of row expected.tpot_s belongs to")
    band_ttft: Band | None = Field(
        None,
        description="measured/expected time its validation measured for this kind (10th-90th pct.); None: "
        "no validation rows of this kind",
    )
    band_tpot: Band | None = Field(None, description="as band_ttft, for expected.tpot_s")


def _flops_rate(s: EstimateSettings, acc: Accelerator) -> float:
    """Peak FLOP/s of the compute dtype (fp8 weights compute in fp8); fp32's rate when the table has none."""
    dtype = "fp8" if s.quantization.method == "fp8" or s.dtype == "fp8" else s.dtype
    return acc.flops.get(dtype, acc.flops["float32"])


def _matmul_params(p: ModelProfile) -> float:
    """Matmul weights one token computes with: the blocks' Linear weights (a tower's excepted) plus the
    k of E routed experts it picks, plus lm_head (tied or not) for the sampled position."""
    blocks = max(p.linear_params - p.tower_parameters, 0) + p.expert_params * p.expert_fraction(1)
    return blocks + p.vocab_size * p.hidden_size


def _attention_flops(p: ModelProfile, queries: float, ctx: float) -> float:
    """2 x heads x head_dim x keys per query per attention layer, for QK^T and again for AV (sliding and
    chunked layers see at most their window). Linear/SSM layers: no per-key work."""
    per = 2 * 2 * p.num_attention_heads * p.head_dim
    return sum(
        g.layers * per * queries * (min(ctx, g.window) if g.window is not None else ctx)
        for g in p.cache_groups
        if g.kv_per_token
    )


def weights_read(p: ModelProfile, mem: MemoryEstimate, tokens: int, dtype_bytes: int) -> float:
    """Weight bytes one decode step reads for `tokens` sequences: all but the routed experts none of the
    tokens picked, the towers (vision, audio, encoder) a decode step never runs, and an untied input
    embedding, of which a step gathers only its tokens' rows."""
    unread = mem.expert_weights_bytes * (1 - p.expert_fraction(tokens))
    embedding = (p.param_groups or {}).get("embedding", 0) if not p.tie_word_embeddings else 0
    embedding_bytes = embedding * dtype_bytes  # embeddings keep the dtype (GGUF aside)
    return mem.weights_bytes - unread - mem.tower_weights_bytes - embedding_bytes


def _decode_step(
    p: ModelProfile, mem: MemoryEstimate, s: EstimateSettings, acc: Accelerator, seqs: int, kv_per_seq: float
) -> tuple[float, Limit]:
    flops_rate = _flops_rate(s, acc)
    state = mem.state_bytes / max(s.batch * s.concurrency, 1)  # fixed per sequence, read and written each step
    ctx = s.input_len + s.max_new_tokens / 2
    # tensor parallel: each rank reads its shard of the linear weights and of the KV, the replicated rest whole;
    # the MLP-only plan splits the MLP's weights and FLOPs, attention (and its KV) stays whole on every rank
    weights = weights_read(p, mem, seqs, DTYPE_BYTES[s.dtype]) - mem.sharded_weights_bytes * (1 - 1 / s.tp)
    linear = 2 * _matmul_params(p) * seqs
    attention = _attention_flops(p, seqs, ctx)
    if s.tp_plan == "mlp":
        mlp = 2 * p.linear_params * mlp_share(p) * seqs
        bytes_read = weights + (kv_per_seq + state) * seqs
        flops = linear - mlp * (1 - 1 / s.tp) + attention
    else:
        bytes_read = weights + (kv_per_seq + state) * seqs / s.tp
        flops = (linear + attention) / s.tp
    t_mem, t_cmp = bytes_read / acc.bandwidth_Bps, flops / flops_rate
    return max(t_mem, t_cmp) + allreduce_s(p, s, acc, seqs), ("compute" if t_cmp > t_mem else "memory-bandwidth")


def estimate_speed(
    p: ModelProfile,
    mem: MemoryEstimate,
    s: EstimateSettings,
    acc: Accelerator,
    offloaded_bytes: int = 0,
    disk_bytes: int = 0,
) -> SpeedEstimate:
    """`offloaded_bytes`: weights kept in CPU RAM by device_map, copied to the GPU every forward pass;
    `disk_bytes`: weights device_map put on disk, read back every forward pass."""
    flops_rate = _flops_rate(s, acc)
    S, B = s.input_len, s.batch
    blocks = _matmul_params(p) - p.vocab_size * p.hidden_size
    if p.is_encoder_decoder:  # the prefill runs the encoder over the input (a vision tower's work depends on images)
        blocks += p.tower_parameters
    prefill_flops = 2 * blocks * B * S + _attention_flops(p, B * S, S) / 2 + 2 * p.vocab_size * p.hidden_size * B
    copy = offloaded_bytes / HOST_LINK_Bps + disk_bytes / DISK_OFFLOAD_Bps
    link: Limit = "disk" if disk_bytes / DISK_OFFLOAD_Bps > offloaded_bytes / HOST_LINK_Bps else "host-link"
    if s.tp_plan == "mlp":  # only the MLP's share of the work splits
        prefill_flops -= 2 * p.linear_params * mlp_share(p) * B * S * (1 - 1 / s.tp)
    else:
        prefill_flops /= s.tp
    prefill = prefill_flops / flops_rate + allreduce_s(p, s, acc, B * S) + copy
    seqs = s.batch * s.concurrency
    # KV bytes per sequence at the mean length during generation (the cache grows linearly).
    kv_per_seq = (mem.kv_cache_bytes + mem.kv_cache_cpu_bytes) / max(seqs, 1)
    mean_frac = (S + s.max_new_tokens / 2) / max(S + s.max_new_tokens, 1)
    kv_mean = kv_per_seq * mean_frac
    tpot, bound = _decode_step(p, mem, s, acc, seqs, kv_mean)
    if copy > tpot:
        bound = link
    tpot += copy
    points, crossover = [], None
    b = 1
    while b <= 1024:
        t, bd = _decode_step(p, mem, s, acc, b, kv_mean)
        bd = link if copy > t else bd
        t += copy
        points.append(BatchPoint(batch=b, tpot_s=t, tokens_per_s=b / t, bound=bd))
        if bd == "compute" and crossover is None:
            crossover = b
        b *= 2
    return SpeedEstimate(
        device=acc.name,
        peak_flops=flops_rate,
        bandwidth_Bps=acc.bandwidth_Bps,
        prefill_s=prefill,
        ttft_s=prefill + tpot,
        tpot_s=tpot,
        tokens_per_s=seqs / tpot,
        limited_by=bound,
        crossover_batch=crossover,
        per_batch=points,
        bound=Roofline(
            prefill_s=prefill, ttft_s=prefill + tpot, tpot_s=tpot, tokens_per_s=seqs / tpot, limited_by=bound
        ),
    )
