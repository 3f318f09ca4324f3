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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infertune.estimate.factors import MOE_EXPERT_ITER_S

if TYPE_CHECKING:
    from infertune.estimate.memory import EstimateSettings
    from infertune.probe.model import ModelProfile

GROUPED_EXPERTS = (5, 0, 0)  # transformers: MoE experts as one grouped matmul
HIT_EXPERTS_ONLY = (4, 53, 0)  # the expert loop skips experts no token picked (Qwen3-MoE; Mixtral from 4.52)
SDPA_ENABLE_GQA = (4, 54, 0)  # sdpa passes enable_gqa instead of repeating K/V
NO_FA2_UNPAD = (4, 53, 0)  # masking_utils: an all-ones mask reaches FlashAttention-2 as None (no unpadding)


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


def kv_traffic(p: ModelProfile, s: EstimateSettings) -> float:
    """Bytes moved per decode step, per byte of KV cache: a dynamic cache grows by torch.cat (read the old copy,
    write the new: 2); sdpa reads it once (GQA in the kernel); eager first repeats K and V to every query head
    (read 1, write n_rep) then reads the repeated copy (n_rep). A static cache is written in place."""
    n_rep = p.num_attention_heads / max(p.num_kv_heads, 1)
    grow = 2.0 if s.kv_cache == "dynamic" else 0.0
    unpad = 2.0 if fa2_unpads_kv(s) else 0.0
    return grow + unpad + (1 + 2 * n_rep if eager(s) or sdpa_repeats_kv(p, s) else 1.0)


def cache_copies(p: ModelProfile, s: EstimateSettings) -> float:
    """Bytes moved per decode step beside what the attention kernel reads, per byte of KV cache: a dynamic
    cache's torch.cat (read the old copy, write the new: 2) and eager's repeat_kv (read the cache, write one
    copy per query head: 1 + n_rep; the kernel then reads that copy, as the calibration's kernel does)."""
    n_rep = p.num_attention_heads / max(p.num_kv_heads, 1)
    grow = 2.0 if s.kv_cache == "dynamic" else 0.0
    unpad = 2.0 if fa2_unpads_kv(s) else 0.0
    return grow + unpad + (1 + n_rep if (eager(s) or sdpa_repeats_kv(p, s)) and n_rep > 1 else 0.0)


def eager(s: EstimateSettings) -> bool:
    return s.attn == "eager" or s.attn.endswith("|eager")
