"""Weight quantization: fewer bytes per parameter. A separate setting from KV-cache quantization.

For memory, any method helps. For speed only methods with fast low-bit matmul kernels help (pre-quantized
AWQ/GPTQ with Marlin/ExLlama kernels, torchao int4 weight-only, fp8); bitsandbytes saves memory and is
usually slower than bf16 at batch 1."""

from __future__ import annotations

from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register

Q = HF + "quantization/"


class _Quant(Technique):
    family = "quantization"
    method = ""

    def applied(self, s: Setup) -> bool:
        return s.quantization == self.method

    def _base(self, f: Facts, s: Setup) -> Check:
        c = Check()
        c.need(s.quantization in ("none", self.method),
               f"the weights are already quantized ({s.quantization}): change one method at a time")
        c.need(s.tp == 1, "tensor parallelism with on-the-fly quantization is not supported")
        pre = (f.profile.quantization or {}).get("quant_method")
        c.need(pre is None, f"the checkpoint is already quantized ({pre})")
        return c

    def apply(self, f: Facts, s: Setup) -> Setup:
        # One change: the unquantized parts keep the current dtype (the quantized matmuls compute in the
        # GPU's half type, set in the quantization config).
        return s.model_copy(update={"quantization": self.method})


@register
class Bnb8(_Quant):
    id = "quant-bnb-8bit"
    method = "bnb-8bit"
    title = "bitsandbytes 8-bit weights (LLM.int8)"
    addresses = ("load-memory",)
    priority = 60
    tradeoffs = ("halves bf16 weights; LLM.int8 outlier handling makes decode slower than bf16 (often 2-4x)",
                 "compute stays in fp16/bf16 (set alongside)")
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
    tradeoffs = ("~3.6x smaller linear weights; saves memory, usually NOT faster than bf16 (dequantizes per matmul)",
                 "set bnb_4bit_compute_dtype to bf16/fp16 or compute runs in fp32",
                 "small quality loss; check it on your prompts")
    docs = (Q + "bitsandbytes", Q + "overview", OVERVIEW)

    def check(self, f: Facts, s: Setup) -> Check:
        return self._base(f, s).need_platform(f, "cuda").need_package(f, "bitsandbytes")


@register
class PreQuantized(_Quant):
    id = "quant-prequantized"
    method = "awq"
    title = "A pre-quantized checkpoint (AWQ/GPTQ 4-bit; GGUF for llama.cpp)"
    addresses = ("load-memory", "decode-speed")
    priority = 48
    tradeoffs = ("needs a published AWQ/GPTQ checkpoint of this model (or a calibration run to make one)",
                 "4-bit kernels (Marlin/ExLlama) speed up bandwidth-bound decode; quality loss is usually small",
                 "transformers dequantizes GGUF at load: GGUF saves disk and download, not memory")
    docs = (Q + "awq", Q + "gptq", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._base(f, s).need_platform(f, "cuda", why="AWQ/GPTQ kernels are CUDA (and ROCm) kernels")
        c.issues.append(f"is there an AWQ or GPTQ checkpoint of {f.model}? (not checked: no Hub access)")
        return c.need_package(f, "gptqmodel")


@register
class TorchAO(_Quant):
    id = "quant-torchao"
    method = "torchao-int4"
    title = "torchao int4 weight-only (int8 weight-only on CPU)"
    addresses = ("load-memory", "decode-speed")
    priority = 50
    tradeoffs = ("int4 weight-only has fast CUDA kernels (tinygemm) for bf16 at small batch",
                 "works with torch.compile; first load quantizes on the fly (slower load)")
    docs = (Q + "torchao", Q + "overview")

    def check(self, f: Facts, s: Setup) -> Check:
        return self._base(f, s).need_package(f, "torchao")

    def apply(self, f: Facts, s: Setup) -> Setup:
        s2 = super().apply(f, s)
        if f.platform != "cuda" or (f.cc or 0) < 8.0:  # int4 tinygemm: CUDA on Ampere+; int8 runs everywhere
            s2 = s2.model_copy(update={"quantization": "torchao-int8"})
        return s2

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
