"""Documented speed factors: effects the roofline has no term for yet, taken from the technique's own
documentation or from measurements published in its issue tracker, each with its sources.

Every factor here is labelled in the advice as a documented factor, never as the roofline's figure. They
live in this one table so that the estimator's expected-speed model can take them over.

A factor says: under this setup, decode (or prefill) takes `ratio` x what the roofline gives for the
`reference` setup (the same setup without the effect: 16-bit weights instead of int8, fp32 instead of fp16
on a CPU). Factors that apply together multiply, over the reference with all their changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from infertune.techniques.base import Facts, Setup, parse_version

Phase = Literal["decode", "prefill", "both"]


def package_version(f: Facts, s: Setup, package: str) -> tuple[int, ...] | None:
    """The version a setup runs with: what a move requires (an upgrade), else what the target has."""
    need = (s.packages or {}).get(package)
    return parse_version(need) if need else f.version(package)


def _steps_at_once(f: Facts, s: Setup) -> int:
    """Sequences in one decode step."""
    return f.batch * (f.concurrency if s.batching != "serial" else 1)


@dataclass(frozen=True)
class Factor:
    id: str
    what: str
    phase: Phase
    ratio: float
    applies: Callable[[Facts, Setup], bool]
    reference: Callable[[Setup], Setup]  # the setup whose roofline the ratio multiplies
    reference_name: str
    sources: tuple[str, ...]

    def label(self) -> str:
        return (
            f"documented factor {self.id}: {self.phase} x{self.ratio:g} of the roofline for {self.reference_name} "
            f"({self.what}; {', '.join(self.sources)})"
        )


def _unquantized(s: Setup) -> Setup:
    return s.model_copy(update={"quantization": "none"})


def _fp32(s: Setup) -> Setup:
    return s.model_copy(update={"dtype": "float32"})


BNB_FIXED_4BIT_KERNELS = (0, 40, 0)  # bitsandbytes release with the fast batch-1 4-bit inference kernels

FACTORS: tuple[Factor, ...] = (
    Factor(
        id="bnb-int8-decode",
        phase="decode",
        ratio=4.0,
        what="LLM.int8 kernels were built for memory, not speed: decode measured 2x-5x slower than fp16",
        applies=lambda f, s: s.quantization == "bnb-8bit",
        reference=_unquantized,
        reference_name="the same model in 16-bit",
        sources=(
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/347",
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/490",
            "https://github.com/lm-sys/FastChat/issues/1698",
        ),
    ),
    Factor(
        id="bnb-4bit-decode",
        phase="decode",
        ratio=1.3,
        what="NF4 weights are dequantized for every matmul: decode measured ~1.3x slower than fp16, not faster",
        applies=lambda f, s: s.quantization == "bnb-4bit",
        reference=_unquantized,
        reference_name="the same model in 16-bit",
        sources=(
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/611",
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/605",
        ),
    ),
    Factor(
        id="bnb-4bit-old-kernels",
        phase="decode",
        ratio=3.4,
        what="bitsandbytes before 0.40.0 had no fast batch-1 4-bit inference kernel (0.40.0 release: ~3.4x faster)",
        applies=lambda f, s: (
            s.quantization == "bnb-4bit"
            and _steps_at_once(f, s) == 1
            and (package_version(f, s, "bitsandbytes") or BNB_FIXED_4BIT_KERNELS) < BNB_FIXED_4BIT_KERNELS
        ),
        reference=_unquantized,
        reference_name="the same model in 16-bit",
        sources=(
            "https://github.com/TimDettmers/bitsandbytes/releases/tag/0.40.0",
            "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/518",
        ),
    ),
    Factor(
        id="torchao-eager",
        phase="decode",
        ratio=1.15,
        what="torchao weight-only kernels need torch.compile to be fast; without it decode measured ~1.15x "
        "slower than bf16",
        applies=lambda f, s: s.quantization.startswith("torchao") and not s.compile,
        reference=_unquantized,
        reference_name="the same model in 16-bit",
        sources=("https://github.com/huggingface/transformers/issues/34310",),
    ),
    Factor(
        id="fp16-on-cpu",
        phase="both",
        ratio=5.0,
        what="CPUs have no fp16 matmul: torch converts to fp32 and back at every op; measured ~5x slower than fp32 "
        "(an order of magnitude beyond fp16's own roofline)",
        applies=lambda f, s: f.platform == "cpu" and s.dtype == "float16",
        reference=_fp32,
        reference_name="the same model in float32",
        sources=(
            "https://github.com/huggingface/transformers/issues/34692",
            "https://github.com/pytorch/pytorch/issues/146508",
        ),
    ),
    Factor(
        id="bf16-on-cpu-without-native-bf16",
        phase="decode",
        ratio=2.0,
        what="on a CPU without native bf16 (its measured bf16 matmul rate below half the fp32 one) bf16 goes "
        "through conversions: generation measured ~2x slower than fp32",
        applies=lambda f, s: s.dtype == "bfloat16" and _cpu_without_bf16(f),
        reference=_fp32,
        reference_name="the same model in float32",
        sources=(
            "https://github.com/huggingface/transformers/issues/30588",
            "https://github.com/intel/intel-extension-for-pytorch/issues/637",
            "https://github.com/pytorch/pytorch/issues/146508",
        ),
    ),
)


def _cpu_without_bf16(f: Facts) -> bool:
    """The CPU's matmul rate in bf16 (measured by probe_cpu) is below half its fp32 rate: no AVX512-BF16/AMX."""
    rates = f.accelerator.flops
    return f.platform == "cpu" and rates.get("bfloat16", 0) < 0.5 * rates.get("float32", 0)


def applicable(f: Facts, s: Setup) -> list[Factor]:
    return [x for x in FACTORS if x.applies(f, s)]


def reference(factors: list[Factor], s: Setup) -> Setup:
    for x in factors:
        s = x.reference(s)
    return s


def ratio(factors: list[Factor], phase: str) -> float:
    r = 1.0
    for x in factors:
        if x.phase in (phase, "both"):
            r *= x.ratio
    return r
