"""dtype: the precision weights, KV cache and compute run in. fp32 (from_pretrained's old default, still what
many scripts get) doubles the weights, the KV cache and the bytes every decode step reads; fp16 on a CPU is
emulated (see techniques.factors); bf16 needs hardware support (not on T4/V100)."""

from __future__ import annotations

from infertune.probe.host import cpu_flags, native_cpu_dtypes
from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Risk, Setup, Technique, register

DTYPES = ("bfloat16", "float16", "float32")
FP16_KERNELS = ("awq", "gptq")  # quantized kernels built for fp16 activations (AWQ's refuse bf16 in vLLM)


def _target_cpu_flags(f: Facts) -> set[str]:
    """The target CPU's ISA flags: as stated (--cpu, --cpu-flags), else this host's when the target is this host."""
    if f.accelerator.cpu_flags is not None:
        return set(f.accelerator.cpu_flags)
    return cpu_flags() if f.accelerator.vendor == "host" else set()


def bf16_tensor_cores(f: Facts) -> bool:
    """bf16 runs on tensor cores: Ampere (compute capability 8.0) and newer, or a non-CUDA target that says so."""
    if f.platform == "cuda" and f.cc is not None:
        return f.cc >= 8.0
    return f.accelerator.bf16


@register
class Dtype(Technique):
    id = "dtype"
    family = "dtype"
    title = "Change the dtype (bfloat16; float16 where the GPU has no bf16; float32 on a CPU without fast half)"
    addresses = (
        "load-memory",
        "kv-cache-growth",
        "long-input-attention",
        "concurrency",
        "decode-speed",
        "prefill-speed",
    )
    priority = 0  # free and (nearly) lossless: always first
    tradeoffs = (
        "bf16/fp16 round activations; outputs can differ from fp32 after a few tokens (check quality)",
        "float16 can overflow in models trained in bf16 (inf/NaN): prefer bf16 where the GPU has it",
        "on CPUs without native bf16 (no AVX512-BF16/AMX) prefill gets slower while decode gets faster",
        "float16 on a CPU is emulated through fp32: several times slower than bf16 or fp32",
    )
    docs = (HF + "models#model-data-type", OVERVIEW)

    def tradeoffs_for(self, f: Facts, s: Setup) -> list[str]:
        """Rounding always; float16 overflow and its CPU emulation only for float16; bf16's CPU prefill cost
        only for bf16 on a CPU without native bf16 (AVX512-BF16, AMX-BF16, ARM bf16)."""
        rounding, fp16_overflow, bf16_cpu, fp16_cpu = self.tradeoffs
        if not self.applied(s):  # full precision: none of them
            return []
        out = [rounding]
        if s.dtype == "float16":
            out += [fp16_overflow, fp16_cpu] if f.platform == "cpu" else [fp16_overflow]
        elif f.platform == "cpu" and not native_cpu_dtypes(_target_cpu_flags(f))["bfloat16"]:
            out.append(bf16_cpu)
        return out

    def applied(self, s: Setup) -> bool:
        """Half precision already (what the tuner skips); the advisor still weighs every other dtype."""
        return s.dtype in ("bfloat16", "float16")

    def candidates(self, f: Facts, s: Setup) -> list[Setup]:
        return self.moves(f, s)

    def targets(self, f: Facts, s: Setup) -> list[str]:
        """Every other dtype this hardware runs: bf16 only where supported (GPUs from Ampere, CPUs, MPS). bf16 and
        fp16 are different moves: fp16 is the half type of GPUs without bf16 tensor cores (V100, T4) and the
        activation type AWQ/GPTQ kernels are built for; their slow paths (techniques.slow_paths) price the
        difference."""
        return [d for d in DTYPES if d != s.dtype and (d != "bfloat16" or f.accelerator.bf16)]

    def check(self, f: Facts, s: Setup) -> Check:
        return Check().need(bool(self.targets(f, s)), f"{f.accelerator.name} runs no other dtype")

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        return [s.model_copy(update={"dtype": d}) for d in self.targets(f, s)]

    def apply(self, f: Facts, s: Setup) -> Setup:
        """The tuner's one dtype step: bf16 where the hardware has bf16 tensor cores and the kernels take it, else fp16
        on a GPU, else fp32."""
        if f.platform == "cpu":
            best = "bfloat16" if f.accelerator.bf16 else "float32"
        elif s.quantization in FP16_KERNELS or not bf16_tensor_cores(f):
            best = "float16"  # the kernels want fp16 activations, or the GPU has no bf16 tensor cores
        else:
            best = "bfloat16"
        return s.model_copy(update={"dtype": best})

    def risk(self, f: Facts, before: Setup, after: Setup) -> Risk:
        # back to full precision, or to the dtype the checkpoint was trained/published in: nothing lost; fp16 under
        # AWQ/GPTQ kernels is the activation type they were calibrated and built for
        if after.dtype == "float16" and after.quantization in FP16_KERNELS:
            return "none"
        return "none" if after.dtype in ("float32", f.profile.native_dtype) else "low"
