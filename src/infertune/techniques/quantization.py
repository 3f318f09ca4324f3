"""Weight quantization: fewer bytes per parameter. A separate setting from KV-cache quantization.

For memory, any method helps. For speed only methods with fast low-bit matmul kernels help (pre-quantized
AWQ/GPTQ with Marlin/ExLlama kernels, torchao int4 weight-only, fp8); bitsandbytes saves memory and is
usually slower than bf16 at batch 1."""

from __future__ import annotations

from infertune.techniques import versions
from infertune.techniques.base import HF, OVERVIEW, RISK_ORDER, Check, Facts, Risk, Setup, Technique, register

Q = HF + "quantization/"
# What a method may cost in output quality: 8-bit methods little, 4-bit ones measurably (check on your prompts)
METHOD_RISK: dict[str, Risk] = {
    "none": "none",
    "gguf": "none",
    "bnb-8bit": "low",
    "torchao-int8": "low",
    "quanto-int8": "low",
    "fp8": "low",
    "bnb-4bit": "medium",
    "awq": "medium",
    "gptq": "medium",
    "torchao-int4": "medium",
}
# infertune's names -> the estimator's (infertune.estimate.memory.Quantization.parse)
ESTIMATOR_QUANT = {
    "none": "auto",
    "bnb-8bit": "bnb-int8",
    "bnb-4bit": "bnb-nf4-dq",
    "awq": "awq",
    "gptq": "gptq",
    "gguf": "none",
    "torchao-int4": "int4",
    "torchao-int8": "int8",
    "quanto-int8": "int8",
    "fp8": "fp8",
}
ON_THE_FLY = ("bnb-8bit", "bnb-4bit", "torchao-int4", "torchao-int8", "quanto-int8")


def checkpoint_method(f: Facts) -> str | None:
    """The quantization the checkpoint itself ships (quantization_config in config.json), if any."""
    return (f.profile.quantization or {}).get("quant_method")


# shipped methods that a setup names (intake reads them as the current quantization): a setup without one of them
# loads the model's unquantized checkpoint, so its weights are 16-bit, not "as stored"
NAMED_SHIPPED = ("awq", "gptq", "fp8", "bitsandbytes")


def estimator_quant(f: Facts, s: Setup) -> str:
    """The estimator's quantization for setup `s`: "auto" (as stored) for `none` keeps a checkpoint's own format
    that no setup names (MXFP4, GGUF); a shipped method the setup could name but does not (quant-none from an AWQ,
    GPTQ or FP8 checkpoint) is the unquantized model."""
    if s.quantization == "none" and checkpoint_method(f) in NAMED_SHIPPED:
        return "none"
    return ESTIMATOR_QUANT.get(s.quantization, "none")


class _Quant(Technique):
    family = "quantization"
    method = ""

    def applied(self, s: Setup) -> bool:
        return s.quantization == self.method

    def _base(self, f: Facts, s: Setup) -> Check:
        """Switching from one method to another is one change (the quantization knob); quantizing on the fly
        needs the unquantized checkpoint."""
        c = Check()
        c.need(
            s.tp == 1 or self.method not in ON_THE_FLY,
            "tensor parallelism with on-the-fly quantization is not supported",
        )
        pre = checkpoint_method(f)
        if pre and self.method in ON_THE_FLY:
            c.issues.append(
                f"this checkpoint ships {pre} weights: quantizing on the fly loads the unquantized "
                "checkpoint of the model instead (which one?)"
            )
        return c

    def apply(self, f: Facts, s: Setup) -> Setup:
        # One change: the unquantized parts keep the current dtype (the quantized matmuls compute in the
        # GPU's half type, set in the quantization config).
        return s.model_copy(update={"quantization": self.method})

    def risk(self, f: Facts, before: Setup, after: Setup) -> Risk:
        b, a = METHOD_RISK.get(before.quantization, "low"), METHOD_RISK.get(after.quantization, "low")
        if RISK_ORDER[a] > RISK_ORDER[b]:
            return a
        # another method of the same width still rounds differently: the outputs change a little
        return "low" if RISK_ORDER[a] == RISK_ORDER[b] and a != "none" else "none"


@register
class NoQuantization(_Quant):
    id = "quant-none"
    method = "none"
    title = "Drop the weight quantization: 16-bit weights (when they fit)"
    addresses = ("decode-speed", "prefill-speed")
    priority = 2
    tradeoffs = (
        "the weights take 2x (from 8-bit) to ~3.6x (from 4-bit) the memory",
        "quantization kernels built for memory (bitsandbytes) dequantize at every matmul: 16-bit "
        "weights decode faster wherever they fit",
    )
    docs = (Q + "bitsandbytes", Q + "overview", "https://github.com/bitsandbytes-foundation/bitsandbytes/issues/490")

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check()
        pre = checkpoint_method(f)
        if pre:
            c.issues.append(
                f"this checkpoint ships {pre} weights: load the model's unquantized checkpoint instead (which one?)"
            )
        return c


@register
class Bnb8(_Quant):
    id = "quant-bnb-8bit"
    method = "bnb-8bit"
    title = "bitsandbytes 8-bit weights (LLM.int8)"
    addresses = ("load-memory",)
    priority = 60
    tradeoffs = (
        "halves bf16 weights; LLM.int8 outlier handling makes decode slower than bf16 (often 2-4x)",
        "compute stays in fp16/bf16 (set alongside)",
    )
    docs = (Q + "bitsandbytes", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        return self._base(f, s).need_platform(f, "cuda").need_package(f, "bitsandbytes")


@register
class Bnb4(_Quant):
    id = "quant-bnb-4bit"
    method = "bnb-4bit"
    title = "bitsandbytes 4-bit NF4 weights, double quantization, half-precision compute"
    addresses = ("load-memory",)
    priority = 45  # the standard on-the-fly memory fix, on every CUDA GPU
    tradeoffs = (
        "~3.6x smaller linear weights; saves memory, usually NOT faster than bf16 (dequantizes per matmul)",
        "set bnb_4bit_compute_dtype to bf16/fp16 or compute runs in fp32",
        "small quality loss; check it on your prompts",
    )
    docs = (Q + "bitsandbytes", Q + "overview", OVERVIEW)

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._base(f, s).need_platform(f, "cuda").need_package(f, "bitsandbytes")
        return versions.need(versions.need(c, f, "bnb-4bit"), f, "bnb-4bit-kernels")


@register
class PreQuantized(_Quant):
    id = "quant-prequantized"
    method = "awq"
    title = "A pre-quantized checkpoint (AWQ/GPTQ 4-bit; GGUF for llama.cpp)"
    addresses = ("load-memory", "decode-speed", "concurrency")  # 4-bit weights leave room for more KV
    priority = 48
    tradeoffs = (
        "needs a published AWQ/GPTQ checkpoint of this model (or a calibration run to make one)",
        "4-bit kernels (Marlin/ExLlama) speed up bandwidth-bound decode; quality loss is usually small",
        "transformers dequantizes GGUF at load: GGUF saves disk and download, not memory",
    )
    docs = (Q + "awq", Q + "gptq", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._base(f, s).need_platform(f, "cuda", why="AWQ/GPTQ kernels are CUDA (and ROCm) kernels")
        c.issues.append(f"is there an AWQ or GPTQ checkpoint of {f.model}? (not checked: no Hub access)")
        return c.need_package(f, "gptqmodel")

    def applied(self, s: Setup) -> bool:
        return s.quantization in ("awq", "gptq")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"quantization": "awq"})


@register
class TorchAO(_Quant):
    id = "quant-torchao"
    method = "torchao-int4"
    title = "torchao weight-only quantization: int4 (CUDA, Ampere+) or int8"
    addresses = ("load-memory", "decode-speed")
    priority = 50
    tradeoffs = (
        "int4 weight-only has fast CUDA kernels (tinygemm) for bf16 at small batch",
        "works with torch.compile; first load quantizes on the fly (slower load)",
    )
    docs = (Q + "torchao", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        return self._base(f, s).need_package(f, "torchao")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return self.moves(f, s)[0]

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        """int4 weight-only where its tinygemm kernel runs (CUDA, Ampere+), int8 weight-only everywhere."""
        methods = (["torchao-int4"] if f.platform == "cuda" and (f.cc or 0) >= 8.0 else []) + ["torchao-int8"]
        return [s.model_copy(update={"quantization": m}) for m in methods if m != s.quantization]

    def applied(self, s: Setup) -> bool:
        return s.quantization.startswith("torchao")


@register
class Quanto(_Quant):
    id = "quant-quanto"
    method = "quanto-int8"
    title = "optimum-quanto int8 weights (CPU, CUDA, MPS)"
    addresses = ("load-memory",)
    priority = 58
    tradeoffs = ("device-agnostic (also Apple and CPU); saves memory, not faster without its marlin kernels",)
    docs = (Q + "quanto", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        return self._base(f, s).need_package(f, "optimum.quanto", "optimum-quanto")
