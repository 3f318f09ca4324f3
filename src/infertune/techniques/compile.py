"""Compilation and fused kernels: cut the Python and launch overhead of small decode steps."""

from __future__ import annotations

from infertune.techniques import versions
from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register


@register
class StaticCacheCompile(Technique):
    id = "static-cache-compile"
    family = "compile"
    title = 'Static KV cache (cache_implementation="static"): generate then torch.compiles the decode step'
    addresses = ("decode-speed",)
    priority = 20
    tradeoffs = (
        "the first calls compile (tens of seconds; again for new shapes); warm up before serving",
        "the cache is preallocated to its full length: memory is the worst case from the start",
        "never call torch.compile(model) outside generate: it recompiles at every step",
        "not compatible with continuous batching",
    )
    docs = (HF + "llm_optims#static-kv-cache-and-torchcompile", OVERVIEW)

    def applied(self, s: Setup) -> bool:
        return s.kv_cache == "static" and s.compile

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check()
        if f.profile.supports:
            c.need(
                f.profile.supports.get("compile", False),
                f"{f.profile.architecture} cannot be compiled with a static cache (no fullgraph support)",
            )
        # generate only auto-compiles on accelerators (cuda/xpu); on CPU/MPS a static cache is just preallocation
        c.need_platform(f, "cuda", why="generate auto-compiles only on CUDA/XPU")
        c.need(s.batching != "continuous", "torch.compile is not compatible with continuous batching")
        c.need(
            s.quantization in ("none", "torchao-int4", "torchao-int8", "fp8"),
            f"{s.quantization} weights are not compileable in generate (bitsandbytes/GPTQ/AWQ kernels)",
        )
        c.need(s.device_map is None, "generate skips compile when weights are offloaded with device_map")
        c.need(s.kv_cache in ("dynamic", "static"), f"a {s.kv_cache} KV cache cannot be combined with a static cache")
        versions.need(c, f, "static-cache-compile")
        return versions.need(c.need_package(f, "torch"), f, "torch-compile-static-cache")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kv_cache": "static", "compile": True})

    def note(self, before: Setup, after: Setup) -> str | None:
        if after.compile and not before.compile:
            return "removes Python/launch overhead, which the roofline does not model: measure it"
        return None


@register
class HubKernels(Technique):
    id = "kernels"
    family = "kernels"
    title = "Fused Hub kernels (from_pretrained(use_kernels=True): RMSNorm, MLP, rotary)"
    addresses = ("decode-speed", "prefill-speed")
    priority = 25
    tradeoffs = (
        "downloads kernels from the Hub at load; coverage depends on the architecture",
        "gains are largest at small batch where launch overhead dominates",
    )
    docs = ("https://huggingface.co/docs/kernels/index", OVERVIEW)

    def applied(self, s: Setup) -> bool:
        return s.kernels

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need_platform(f, "cuda", "mps", why="Hub kernels are built for CUDA and Metal")
        return c.need_package(f, "kernels")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kernels": True})

    def note(self, before: Setup, after: Setup) -> str | None:
        if after.kernels and not before.kernels:
            return "fused kernels cut launches and memory traffic beyond the roofline's view: measure it"
        return None
