"""Continuous batching: requests join and leave a running batch; the cache is paged, the prefill chunked."""

from __future__ import annotations

from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register


def max_batch_tokens(f: Facts) -> int:
    """Tokens per forward pass: enough to prefill a few prompts together, bounded to keep TTFT low."""
    return max(256, min(2048, f.input_len * min(f.concurrency, 4)))


@register
class ContinuousBatching(Technique):
    id = "continuous-batching"
    family = "batching"
    title = "Continuous batching (generate_batch / transformers serve --continuous-batching)"
    addresses = ("concurrency",)
    priority = 10
    tradeoffs = ("throughput up by roughly the number of concurrent requests while decode is bandwidth-bound",
                 "each request's inter-token latency grows with the batch",
                 "not compatible with torch.compile / a static cache; paged attention (paged|sdpa) is used")
    docs = (HF + "continuous_batching", HF + "serving", OVERVIEW)

    def applied(self, s: Setup) -> bool:
        return s.batching == "continuous"

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(f.concurrency > 1 or f.batch > 1, "one request at a time: nothing to batch")
        c.need(s.device_map is None and s.tp == 1, "not with device_map offload or tensor parallelism here")
        return c.need_package(f, "transformers", min_version=(4, 56))

    def apply(self, f: Facts, s: Setup) -> Setup:
        attn = s.attn if s.attn.startswith("paged|") or "/" in s.attn else f"paged|{s.attn}"
        kv = s.kv_cache if s.kv_cache == "dynamic" else "dynamic"
        return s.model_copy(update={"batching": "continuous", "compile": False, "kv_cache": kv, "attn": attn,
                                    "max_batch_tokens": max_batch_tokens(f)})
