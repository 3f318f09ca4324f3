"""KV-cache strategies: what the per-token state of each sequence costs. A separate setting from weight
quantization: quantizing the cache does not touch the weights, and the reverse."""

from __future__ import annotations

from infertune.techniques import versions
from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register

KV_DOCS = (HF + "kv_cache", HF + "cache_explanation", OVERVIEW)


@register
class QuantizedKV(Technique):
    id = "kv-quantized"
    family = "kv-cache"
    title = 'Quantized KV cache (cache_implementation="quantized", quanto backend, 4 bits)'
    addresses = ("kv-cache-growth", "concurrency")
    priority = 30
    quality_risk = "low"
    tradeoffs = (
        "~3.5x smaller cache beyond the residual window (the newest 128 tokens stay in full precision)",
        "slower decode (quantize/dequantize every step); small quality loss, larger at 2 bits",
        "not with a static cache / torch.compile, nor with continuous batching",
    )
    docs = KV_DOCS

    def applied(self, s: Setup) -> bool:
        return s.kv_cache == "quantized"

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(s.batching != "continuous", "continuous batching manages its own paged cache")
        c.need(not s.compile, "a quantized cache cannot be compiled: drop the static cache first")
        versions.need(c, f, "quantized-kv-cache")
        return c.need_package(f, "optimum.quanto", "optimum-quanto")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kv_cache": "quantized", "compile": False})


@register
class OffloadedKV(Technique):
    id = "kv-offloaded"
    family = "kv-cache"
    title = 'Offloaded KV cache (cache_implementation="offloaded": only the current layer on the GPU)'
    addresses = ("kv-cache-growth", "long-input-attention")
    priority = 35
    tradeoffs = (
        "the whole cache moves to CPU RAM, one layer prefetched at a time: GPU memory for KV ~2/L",
        "every decode step copies the cache over PCIe: slower, worst at long contexts",
        "needs CPU RAM for the whole cache",
    )
    docs = KV_DOCS

    def applied(self, s: Setup) -> bool:
        return s.kv_cache == "offloaded"

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need_platform(f, "cuda", why="offloading moves the cache from GPU memory to CPU RAM")
        c.need(s.batching != "continuous", "continuous batching manages its own paged cache")
        return c.need(not s.compile, "not with the static cache + compile: drop it first")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kv_cache": "offloaded", "compile": False})


@register
class DynamicKV(Technique):
    id = "kv-dynamic"
    family = "kv-cache"
    title = "Back to the default dynamic KV cache (drops a quantized, offloaded or static cache)"
    addresses = ("decode-speed", "prefill-speed")
    priority = 8
    tradeoffs = (
        "the cache grows with the sequence at full precision: more memory than a quantized or offloaded one",
        "a static cache + compile is dropped with it",
    )
    docs = KV_DOCS

    def applied(self, s: Setup) -> bool:
        return s.kv_cache == "dynamic"

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kv_cache": "dynamic", "compile": False})


@register
class SlidingWindowKV(Technique):
    id = "kv-sliding-window"
    family = "kv-cache"
    title = "Sliding-window cache for the model's sliding layers"
    addresses = ("kv-cache-growth",)
    priority = 15
    tradeoffs = ("only for models trained with sliding-window attention; forcing a window on others changes outputs",)
    docs = KV_DOCS

    def check(self, f: Facts, s: Setup) -> Check:
        p = f.profile
        c = Check()
        if not p.num_sliding_layers:
            return c.need(
                False,
                f"{p.architecture or p.model_type} has no sliding-window layers: every layer needs "
                "the whole context, and a window would change its outputs",
            )
        # transformers' default dynamic cache already keeps only the window on sliding layers
        return c.need(
            s.kv_cache != "dynamic",
            "already in effect: the default dynamic cache keeps only the "
            f"window ({p.sliding_window} tokens) on the {p.num_sliding_layers} sliding layers",
        )

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"kv_cache": "dynamic", "compile": False})
