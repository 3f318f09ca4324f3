"""dtype: load in half precision. fp32 (from_pretrained's old default, still what many scripts get) doubles
the weights, the KV cache and the bytes every decode step reads."""

from __future__ import annotations

from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register


@register
class HalfPrecision(Technique):
    id = "dtype"
    family = "dtype"
    title = "Load in bfloat16 (float16 where the GPU has no bf16)"
    addresses = ("load-memory", "kv-cache-growth", "long-input-attention", "concurrency", "decode-speed",
                 "prefill-speed")
    priority = 0  # lossless in practice and free: always first
    tradeoffs = ("bf16/fp16 round activations; outputs can differ from fp32 after a few tokens (check quality)",
                 "float16 can overflow in models trained in bf16 (inf/NaN): prefer bf16 where the GPU has it",
                 "on CPUs without native bf16 (no AVX512-BF16/AMX) prefill gets slower while decode gets faster")
    docs = (HF + "models#model-data-type", OVERVIEW)

    def target(self, f: Facts) -> str:
        return "bfloat16" if f.accelerator.bf16 else "float16"

    def applied(self, s: Setup) -> bool:
        return s.dtype in ("bfloat16", "float16")

    def check(self, f: Facts, s: Setup) -> Check:
        return Check()

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"dtype": self.target(f)})
