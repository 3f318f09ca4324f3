"""Slow paths of the target's transformers version that the expected speed prices (estimate/expected.py).

Each term holds under stated conditions (the transformers version, the model's shape, the GPU) and names its
source; `speed.expected.factors` lists the ones used. The advisor's slow-path entries (techniques/) name the cure.

- MoE expert loop: before 5.0 a MoE block ran its experts in a Python loop, one iteration per expert with a
  device-to-host sync; until 4.52 (Mixtral, Qwen2-MoE: huggingface/transformers#32429) and 4.53 (Qwen3-MoE: #38133)
  over every expert, then over the experts some token picked. 5.0 runs them as one grouped matmul
  (`experts_implementation="grouped_mm"`, batched_mm while decoding: #47107).
- FlashAttention-2 with a mask: before 4.53 generate's all-ones attention mask reached the FA2 integration, which
  unpadded K and V (`_upad_input`: a gather, read and write) every layer and step; 4.53's masking_utils drops a
  mask without padding. On the Qwen1.5 docs' A100 table (FA2, a 7B without grouped heads, 16 GB of cache at 30k
  tokens) this copy is what makes decode 3x slower than at a short prompt.
- sdpa and grouped-query heads: before 4.54 transformers' sdpa path copied K and V to every query head
  (`repeat_kv`) before the kernel; from 4.54 it passes `enable_gqa` (#39412) where no mask is given. The copy is
  read once, written n_rep times and read again by the kernel: 1 + 2 x n_rep bytes per byte of cache per step.
- FlashAttention-2 of Mistral-derived classes (mistral, mixtral, qwen2, qwen2_moe, starcoder2, phi3, qwen2_vl):
  before 4.48's attention refactor their FA2 forward called repeat_kv (Llama's and Gemma 2's did not; read in
  4.38.2, 4.44.0, 4.47.1): n_rep copies written and read, and the unpadding gathers the repeated copy. These
  copies queue like any kernel; only the dynamic cache's growth keeps its place in series (published-gpu-2 dev:
  Qwen2-0.5B decodes at a 30k-token prompt as fast as at 1 token, Qwen2-7B at half the pace).
- AutoAWQ >= 0.2 (casper-hansen/AutoAWQ#316, January 2024) dequantizes each weight and runs an fp16 matmul for
  inputs of 1024+ rows; earlier its GEMM kernel ran prefill at ~0.22 of the fp16 rate. Gated on a stated
  transformers >= 4.38 (the AutoAWQ version is not a setting; 4.38 came after AutoAWQ 0.2).
- Fine-grained FP8 (block-scaled fp8 weights: quant_method "fp8", FineGrainedFP8Config): from 4.49 (#36026) its
  FP8Linear ran two Triton kernels (activation quantization, block matmul) with `torch.cuda.synchronize()`
  after each in 4.49-4.50, after the matmul only from 4.51, until 5.4 (the call is in 5.3.0's
  integrations/finegrained_fp8.py, gone in 5.4.0; a removal was proposed in #43349). A sync per Linear stops
  the host from queueing ahead of the GPU: the step is the host's work plus the device's, not the larger of the
  two, plus a sync round trip per sync.
- Fine-grained FP8 on GPUs below compute capability 8.9 (no FP8 tensor cores: A100, T4, V100): transformers
  refused to load them before 5.0 (4.57.3's quantizer raises) and from 5.0 dequantizes them to bf16 at load: the
  weights take 2 bytes each and run as a bf16 model.
- GPTQ at other than 4 bits: the ExLlama kernels "only work with bits = 4" (transformers' GPTQConfig docs,
  `use_exllama`); an 8-bit checkpoint runs AutoGPTQ's CUDA QuantLinear (casts the input and scales to fp32,
  an fp32 output, the kernel, a cast back: several more launches per call). Priced while transformers used
  AutoGPTQ alone (before 4.49, which added GPTQModel with its own kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from infertune.estimate.factors import (
    FP8_SYNC_S,
    FP8_TRITON_LINEAR_S,
    FP8_TRITON_SMALL_M_EFF,
    GPTQ_CUDA_LINEAR_S,
    LINEARS_PER_LAYER,
    MOE_EXPERT_ITER_S,
    QUANT_KERNELS,
)

if TYPE_CHECKING:
    from infertune.estimate.memory import EstimateSettings
    from infertune.probe.model import ModelProfile

GROUPED_EXPERTS = (5, 0, 0)  # transformers: MoE experts as one grouped matmul
HIT_EXPERTS_ONLY = (4, 53, 0)  # the expert loop skips experts no token picked (Qwen3-MoE; Mixtral from 4.52)
SDPA_ENABLE_GQA = (4, 54, 0)  # sdpa passes enable_gqa instead of repeating K/V
NO_FA2_UNPAD = (4, 53, 0)  # masking_utils: an all-ones mask reaches FlashAttention-2 as None (no unpadding)
FP8_SYNC = ((4, 49, 0), (5, 4, 0))  # fine-grained FP8Linear synchronizes the device after every call
FP8_ONE_SYNC = (4, 51, 0)  # 4.49-4.50 synchronized after the activation quantization too: two per call
AUTOAWQ_02 = (4, 38, 0)  # the first transformers after AutoAWQ 0.2 (a proxy: the AutoAWQ version is not a setting)
AWQ_FP16_ROWS = 1024  # AutoAWQ >= 0.2 (casper-hansen/AutoAWQ#316): from this many rows, dequantize + fp16 matmul
FA2_NO_REPEAT = (4, 48, 0)  # the attention refactor: FlashAttention-2 gets the grouped K/V as they are
# model classes whose FlashAttention2 forward called repeat_kv before 4.48 (copied from Mistral's; Llama's,
# Gemma 2's did not): checked in 4.38.2, 4.44.0 and 4.47.1's modeling files
FA2_REPEAT_KV_MODELS = frozenset({"mistral", "mixtral", "qwen2", "qwen2_moe", "starcoder2", "phi3", "qwen2_vl"})
FP8_DEQUANT_ON_OLD_GPUS = (5, 0, 0)  # below compute capability 8.9: refused before 5.0, dequantized to bf16 from 5.0
GPTQMODEL = (4, 49, 0)  # transformers may load GPTQ through GPTQModel (before: AutoGPTQ's kernels only)


class Factor(BaseModel):  # one named term of speed.expected: what it is, its value, where the value comes from
    name: str
    value: float
    source: str


def version(s: EstimateSettings) -> tuple[int, ...] | None:
    """The target's transformers as (major, minor, patch); None: a current one (5.x)."""
    v = s.transformers_version
    if not v:
        return None
    parts = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in v.split("+")[0].split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def expert_loop_iterations(p: ModelProfile, s: EstimateSettings, tokens: int) -> float:
    """Iterations of the Python expert loop per forward pass of `tokens` tokens (0: grouped kernels)."""
    v = version(s)
    if not p.num_experts or v is None or v >= GROUPED_EXPERTS:
        return 0.0
    per_layer = float(p.num_experts)
    if v >= HIT_EXPERTS_ONLY:
        per_layer = p.num_experts * p.expert_fraction(tokens)
    return p.num_layers * per_layer


def fp8_syncs_per_linear(s: EstimateSettings) -> int:
    """Device syncs per call of transformers' fine-grained FP8Linear: 2 in 4.49-4.50, 1 until 5.4, then 0."""
    v, q = version(s), s.quantization
    if q.method != "fp8" or not q.block or v is None or not FP8_SYNC[0] <= v < FP8_SYNC[1]:
        return 0
    return 1 if v >= FP8_ONE_SYNC else 2


def fp8_dequantized_at_load(s: EstimateSettings) -> bool:
    """Fine-grained FP8 weights on a CUDA GPU below compute capability 8.9 (A100, T4, ...): from 5.0 transformers
    dequantizes them to bf16 at load (quantizer_finegrained_fp8; 4.57.3 refuses to load them)."""
    v, cc = version(s), s.compute_capability
    if s.platform != "cuda" or s.quantization.method != "fp8" or not s.quantization.block or not cc:
        return False
    major, _, minor = cc.partition(".")
    below = (int(major), int(minor or 0)) < (8, 9)
    return below and (v is None or v >= FP8_DEQUANT_ON_OLD_GPUS)


def quant_eff(s: EstimateSettings, rows: int) -> float:
    """Share of the bandwidth the quantized kernel reaches on the packed weights at `rows` activation rows."""
    if fp8_syncs_per_linear(s) and rows <= 8:  # transformers' Triton block-FP8 matmul: a 64-row tile
        return FP8_TRITON_SMALL_M_EFF
    return QUANT_KERNELS[s.quantization.method]["eff"]


def fp8_as_bf16_factor(s: EstimateSettings) -> Factor:
    """The term speed.expected names when fine-grained FP8 weights were loaded as bf16 (fp8_dequantized_at_load)."""
    src = f"transformers >= 5.0 on compute capability {s.compute_capability} (quantizer_finegrained_fp8: < 8.9)"
    return Factor(name="fine-grained FP8 dequantized to bf16 at load: bytes per weight", value=2.0, source=src)


def gptq_cuda_kernel(s: EstimateSettings) -> bool:
    """A GPTQ checkpoint at other than 4 bits on AutoGPTQ's CUDA QuantLinear (no ExLlama), before GPTQModel."""
    v, q = version(s), s.quantization
    return q.method == "gptq" and q.bits != 4 and v is not None and v < GPTQMODEL


def dequant_rows(s: EstimateSettings) -> int:
    """From how many activation rows the backend dequantizes each weight and runs a dense matmul."""
    q = QUANT_KERNELS.get(s.quantization.method) or {}
    v = version(s)
    if s.quantization.method == "awq" and v is not None and v >= AUTOAWQ_02:
        return AWQ_FP16_ROWS
    return int(q.get("dequant_rows", 1 << 30))


def quant_linear_host_s(s: EstimateSettings, dequant: bool) -> float:
    """Extra host time per quantized Linear call beside a 16-bit F.linear (QUANT_KERNELS and the stack's terms)."""
    q = QUANT_KERNELS.get(s.quantization.method)
    if q is None:
        return 0.0
    t = q.get("dequant_linear_s", q["linear_s"]) if dequant else q["linear_s"]
    t += q.get("dq_linear_s", 0.0) if s.quantization.double_quant else 0.0
    if gptq_cuda_kernel(s):
        t += GPTQ_CUDA_LINEAR_S
    if fp8_syncs_per_linear(s):
        t += FP8_TRITON_LINEAR_S + FP8_SYNC_S * fp8_syncs_per_linear(s)
    return t


def terms(p: ModelProfile, s: EstimateSettings, seqs: int) -> list[tuple[str, float, str]]:
    """(name, value, source) of each slow-path term that holds for this setup, for speed.expected.factors. The
    kernel and host terms are priced on a GPU only; the K/V copies everywhere."""
    v, gpu = s.transformers_version, s.platform != "cpu"
    out = []
    if gpu and expert_loop_s(p, s, seqs):
        n = expert_loop_iterations(p, s, seqs)
        src = f"transformers {v} loops over experts in Python (estimate/library.py)"
        out.append((f"MoE expert loop: {n:.0f} iterations per step, s each", MOE_EXPERT_ITER_S, src))
    per_byte = "cache bytes moved per step, per byte"
    if sdpa_repeats_kv(p, s):
        src = f"transformers {v} < 4.54 (huggingface/transformers#39412)"
        out.append((f"sdpa copies K/V to every query head: {per_byte}", kv_traffic(p, s), src))
    if fa2_repeats_kv(p, s):
        src = f"transformers {v} < 4.48: {p.model_type}'s FlashAttention2.forward calls repeat_kv"
        out.append((f"FlashAttention-2 copies K/V to every query head: {per_byte}", kv_traffic(p, s), src))
    if gpu and (n := fp8_syncs_per_linear(s)):
        src = f"transformers {v}: FP8Linear calls torch.cuda.synchronize() (4.49-5.3, integrations/finegrained_fp8.py)"
        host = FP8_TRITON_LINEAR_S + n * FP8_SYNC_S
        out.append(("fine-grained FP8: host cost per Linear (2 Triton launches + syncs), s", host, src))
        syncs = float(n * LINEARS_PER_LAYER * p.num_layers)
        out.append(("fine-grained FP8: device syncs per step (host and GPU take turns)", syncs, src))
    if gpu and gptq_cuda_kernel(s):
        src = f"transformers {v} < 4.49: ExLlama is 4-bit only (GPTQConfig.use_exllama); AutoGPTQ's CUDA kernel"
        out.append(
            (f"GPTQ {s.quantization.bits}-bit CUDA kernel: extra host cost per Linear, s", GPTQ_CUDA_LINEAR_S, src)
        )
    if gpu and s.quantization.method == "awq" and dequant_rows(s) == AWQ_FP16_ROWS <= s.batch * s.input_len:
        src = f"AutoAWQ >= 0.2 (casper-hansen/AutoAWQ#316; read from transformers {v} >= 4.38)"
        out.append(("AWQ prefill: dequantize + fp16 matmul from this many rows", float(AWQ_FP16_ROWS), src))
    return out


def expert_loop_s(p: ModelProfile, s: EstimateSettings, tokens: int) -> float:
    """Host time of the expert loop per forward pass (compiled graphs still sync in torch.where: not removed)."""
    return expert_loop_iterations(p, s, tokens) * MOE_EXPERT_ITER_S


def fa2_unpads_kv(s: EstimateSettings) -> bool:
    v = version(s)
    return s.attn == "flash_attention_2" and v is not None and v < NO_FA2_UNPAD


def sdpa_repeats_kv(p: ModelProfile, s: EstimateSettings) -> bool:
    """transformers' sdpa copies K/V to every query head (grouped-query models, before 4.54)."""
    v = version(s)
    attn_is_sdpa = s.attn == "sdpa" or s.attn.endswith("|sdpa")
    return attn_is_sdpa and p.num_attention_heads > p.num_kv_heads and v is not None and v < SDPA_ENABLE_GQA


def fa2_repeats_kv(p: ModelProfile, s: EstimateSettings) -> bool:
    """FlashAttention-2 of a Mistral-derived class copies K/V to every query head first (before 4.48)."""
    v = version(s)
    grouped = p.num_attention_heads > p.num_kv_heads
    fa2 = s.attn == "flash_attention_2" and p.model_type in FA2_REPEAT_KV_MODELS
    return fa2 and grouped and v is not None and v < FA2_NO_REPEAT


def repeats_kv(p: ModelProfile, s: EstimateSettings) -> bool:
    return eager(s) or sdpa_repeats_kv(p, s) or fa2_repeats_kv(p, s)


def _unpad(p: ModelProfile, s: EstimateSettings) -> float:
    """FA2's unpadding gathers K and V (read, write): the repeated copy where the class repeats them first."""
    if not fa2_unpads_kv(s):
        return 0.0
    return 2.0 * (p.num_attention_heads / max(p.num_kv_heads, 1) if fa2_repeats_kv(p, s) else 1.0)


def kv_traffic(p: ModelProfile, s: EstimateSettings) -> float:
    """Bytes moved per decode step, per byte of KV cache: a dynamic cache grows by torch.cat (read the old copy,
    write the new: 2); sdpa reads it once (GQA in the kernel); eager first repeats K and V to every query head
    (read 1, write n_rep) then reads the repeated copy (n_rep). A static cache is written in place."""
    n_rep = p.num_attention_heads / max(p.num_kv_heads, 1)
    grow = 2.0 if s.kv_cache == "dynamic" else 0.0
    return grow + _unpad(p, s) + (1 + 2 * n_rep if repeats_kv(p, s) else 1.0)


def cache_copies(p: ModelProfile, s: EstimateSettings) -> float:
    """Bytes moved per decode step beside what the attention kernel reads, per byte of KV cache: a dynamic
    cache's torch.cat (read the old copy, write the new: 2) and eager's repeat_kv (read the cache, write one
    copy per query head: 1 + n_rep; the kernel then reads that copy, as the calibration's kernel does)."""
    n_rep = p.num_attention_heads / max(p.num_kv_heads, 1)
    grow = 2.0 if s.kv_cache == "dynamic" else 0.0
    return grow + _unpad(p, s) + (1 + n_rep if repeats_kv(p, s) and n_rep > 1 else 0.0)


def eager(s: EstimateSettings) -> bool:
    return s.attn == "eager" or s.attn.endswith("|eager")
