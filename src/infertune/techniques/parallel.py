"""Tensor parallelism: every layer split over N GPUs (DistributedConfig(tp_size=N), launched by torchrun)."""

from __future__ import annotations

from infertune.techniques import versions
from infertune.techniques.base import HF, OVERVIEW, Check, Facts, Setup, Technique, register


def tp_problems(profile, n: int, plan: str = "auto") -> list[str]:
    """Why `n` tensor-parallel ranks cannot split this model (empty: they can). The model must ship a
    tensor-parallel plan. Its own plan ("auto") splits the attention and KV heads and the MLP's columns, so
    n must divide all three; the MLP-only plan ("mlp") replicates attention, so only the MLP's."""
    out = []
    if profile.supports and not profile.supports.get("tp_plan", False):
        out.append(f"{profile.architecture} has no tensor-parallel plan (base_model_tp_plan)")
    inter = profile.intermediate_size or 4 * profile.hidden_size
    split = [(inter, "MLP columns")]
    if plan == "auto":
        split = [(profile.num_attention_heads, "attention heads"), (profile.num_kv_heads, "KV heads"), *split]
    bad = [f"{h} {what}" for h, what in split if h % n]
    if bad:
        ok = [k for k in range(2, 9) if all(h % k == 0 for h, _ in split)]
        problem = f"tp size {n} does not divide {' and '.join(bad)}" + (
            f" (sizes that do: {', '.join(map(str, ok))})" if ok else ""
        )
        if plan == "auto" and inter % n == 0:
            problem += f"; --tp-plan mlp splits only the MLP ({inter} columns) and replicates attention"
        out.append(problem)
    return out


@register
class TensorParallel(Technique):
    id = "tensor-parallel"
    family = "parallel"
    title = "Tensor parallelism over the GPUs (DistributedConfig(tp_size=N), torchrun): replaces device_map"
    addresses = ("load-memory", "decode-speed", "kv-cache-growth", "prefill-speed")
    priority = 30
    tradeoffs = (
        "all-reduce after attention and MLP in every layer: needs NVLink-class links to scale",
        "each rank keeps replicated parts (embeddings, norms); launch with torchrun --nproc-per-node N",
    )
    docs = (HF + "perf_infer_gpu_multi", OVERVIEW)

    def size(self, f: Facts) -> int:
        """The largest power of two <= gpus that divides the attention and KV heads."""
        p, n = f.profile, 1
        while n * 2 <= f.gpus and p.num_attention_heads % (n * 2) == 0 and p.num_kv_heads % (n * 2) == 0:
            n *= 2
        return n

    def applied(self, s: Setup) -> bool:
        return s.tp > 1  # what the tuner skips; the advisor still weighs a larger size

    def candidates(self, f: Facts, s: Setup) -> list[Setup]:
        return [self.apply(f, s)] if self.size(f) not in (1, s.tp) else []

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(f.gpus > 1, "needs more than one GPU (--gpus N)")
        versions.need(c, f, "tensor-parallel-plan")
        c.need_platform(f, "cuda")
        # transformers' continuous batching (generate_batch, serve --continuous-batching) does not run under
        # torchrun's tp ranks: InferenceConfig refuses the pair; an engine's own tp is the serving-engine move
        c.need(
            s.batching != "continuous" or s.engine != "transformers",
            "transformers' continuous batching does not run with tensor parallelism (an engine shards and batches: "
            "serving-engine)",
        )
        if f.profile.supports:
            c.need(f.profile.supports.get("tp_plan", False), f"{f.profile.architecture} has no tensor-parallel plan")
        if f.gpus > 1:
            c.need(
                self.size(f) > 1,
                f"no tp size in 2..{f.gpus} divides {f.profile.num_attention_heads} attention "
                f"and {f.profile.num_kv_heads} KV heads (an MLP-only plan, attention replicated, can still "
                f"split: measure --tp N --tp-plan mlp)",
            )
        return c

    def apply(self, f: Facts, s: Setup) -> Setup:
        return s.model_copy(update={"tp": self.size(f), "device_map": None, "max_memory": None})
