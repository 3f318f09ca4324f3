"""Attention backends: what holds the q x k score matrix, and how fast the kernel is.

eager materialises batch x heads x q x k scores (quadratic memory); every other backend tiles them."""

from __future__ import annotations

from infertune.techniques import versions
from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register

ATTN_DOCS = (HF + "attention_interface", HF + "perf_infer_gpu_one#flashattention", OVERVIEW)
HALF = ("bfloat16", "float16")


def kernel_tier(attn: str) -> int:
    """Kernel quality of an attention backend (what the roofline cannot see): eager < sdpa/flex < flash."""
    a = attn.removeprefix("paged|")
    if a == "eager":
        return 0
    if a == "flash_attention_3":
        return 3
    return 2 if "flash" in a else 1


class _Attention(Technique):
    family = "attention"
    impl = ""

    def note(self, before: Setup, after: Setup) -> str | None:
        if kernel_tier(after.attn) > kernel_tier(before.attn) and "eager" not in before.attn:
            return "a faster attention kernel: the roofline bound is unchanged; the gain shows at long prompts"
        return None

    def applied(self, s: Setup) -> bool:
        return s.attn == self.impl or s.attn.endswith("|" + self.impl)

    def apply(self, f: Facts, s: Setup) -> Setup:
        paged = s.batching == "continuous"  # continuous batching runs the paged variant of a backend
        return s.model_copy(update={"attn": ("paged|" if paged and "/" not in self.impl else "") + self.impl})

    def _flash(self, f: Facts, s: Setup, min_cc: float, table_ok: bool, kernel: str) -> Check:
        """FlashAttention-family rules: the model's flash support, a CUDA GPU of `min_cc`, half precision."""
        c = self._model(f, "flash_attn", "FlashAttention")
        c.need_platform(f, "cuda")
        if f.platform == "cuda":
            c.need(
                table_ok and (f.cc or 0) >= min_cc,
                f"{kernel} needs compute capability >= {min_cc}; "
                f"{f.accelerator.name} has {f.accelerator.compute_capability or 'none'}",
            )
        return c.need(s.dtype in HALF, f"needs fp16 or bf16 weights (current: {s.dtype}); change the dtype first")

    def _model(self, f: Facts, flag: str, name: str) -> Check:
        sup = f.profile.supports
        c = Check()
        if not sup:
            c.issues.append(f"the model class is unknown to this transformers: {name} support not verified")
        elif not sup.get(flag):
            c.blockers.append(f"{f.profile.architecture or f.profile.model_type} does not support {name}")
        return c


@register
class Sdpa(_Attention):
    id = "attn-sdpa"
    impl = "sdpa"
    title = "PyTorch scaled_dot_product_attention (sdpa)"
    addresses = ("long-input-attention", "prefill-speed")
    priority = 5
    tradeoffs = ("none in memory; numerics differ from eager in the last bits",)
    docs = ATTN_DOCS

    def check(self, f: Facts, s: Setup) -> Check:
        return versions.need(self._model(f, "sdpa", "sdpa"), f, "sdpa-attention")


@register
class Flash2(_Attention):
    id = "attn-flash2"
    impl = "flash_attention_2"
    title = "FlashAttention-2 (flash-attn package)"
    addresses = ("long-input-attention", "prefill-speed", "concurrency")
    priority = 10
    tradeoffs = (
        "needs fp16/bf16 and an Ampere or newer GPU; the flash-attn wheel must match torch and CUDA",
        "padding-free batching helps most with mixed lengths; little gain at short prompts",
    )
    docs = ATTN_DOCS

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._flash(f, s, 8.0, f.accelerator.flash_attn_2, "FlashAttention-2 (Ampere+)")
        versions.need(c, f, "flash-attention-2")
        return c.need_package(f, "flash_attn", "flash-attn")


@register
class Flash3(_Attention):
    id = "attn-flash3"
    impl = "flash_attention_3"
    title = "FlashAttention-3 (Hopper)"
    addresses = ("long-input-attention", "prefill-speed", "concurrency")
    priority = 11
    tradeoffs = ("Hopper only (H100/H200); built from source (flash-attn's hopper/ directory)",)
    docs = ATTN_DOCS

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._flash(f, s, 9.0, f.accelerator.flash_attn_3, "FlashAttention-3 (Hopper)")
        return c.need_package(f, "flash_attn_3", "flash_attn_3 (build from flash-attention/hopper)")


@register
class Flex(_Attention):
    id = "attn-flex"
    impl = "flex_attention"
    title = "FlexAttention (torch.nn.attention.flex_attention)"
    addresses = ("long-input-attention",)
    priority = 20
    tradeoffs = (
        "compiles its kernel on first use (seconds); best with custom masks, not faster than sdpa for plain causal",
    )
    docs = ATTN_DOCS

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._model(f, "flex_attn", "FlexAttention")
        c.need(s.batching != "continuous", "continuous batching runs a paged backend, and FlexAttention has none")
        versions.need(c, f, "flex-attention")
        return c.need_package(f, "torch")


@register
class KernelsHub(_Attention):
    id = "attn-kernels-hub"
    impl = "kernels-community/flash-attn2"
    title = "FlashAttention-2 from the Hub (kernels-community/flash-attn2 via `kernels`)"
    addresses = ("long-input-attention", "prefill-speed", "concurrency")
    priority = 9  # same kernel as attn-flash2 without compiling a wheel: try it first
    tradeoffs = (
        "downloads a pre-built kernel from the Hub at load (needs Hub access once, then cached)",
        "same hardware limits as FlashAttention-2: Ampere+ and fp16/bf16",
    )
    docs = ("https://huggingface.co/docs/kernels/index", OVERVIEW)

    def check(self, f: Facts, s: Setup) -> Check:
        c = self._flash(f, s, 8.0, f.accelerator.flash_attn_2, "the Hub flash-attn2 kernel")
        return c.need_package(f, "kernels")


@register
class MetalFlash(_Attention):
    id = "attn-metal-flash"
    impl = "kernels-community/metal-flash-sdpa"
    title = "Metal flash SDPA on Apple silicon (with continuous batching)"
    addresses = ("concurrency", "decode-speed")
    priority = 12
    tradeoffs = ("Apple silicon only; measured upstream 1.66x over SDPA with generate_batch (Qwen2.5-0.5B, fp16)",)
    docs = (HF + "serving#apple-silicon", "https://huggingface.co/docs/kernels/index")

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need_platform(f, "mps")
        c.need(s.batching == "continuous", "pays off with continuous batching: switch that on first")
        return c.need_package(f, "kernels")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"attn": self.impl})
