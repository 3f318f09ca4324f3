"""Serving engine: when concurrency outgrows transformers, move to vLLM or SGLang (paged attention,
prefix caching, CUDA graphs, a scheduler built for it) with the same model and settings."""

from __future__ import annotations

import shlex

from infertune.config import vllm_flags
from infertune.techniques.base import Check, Facts, Setup, Technique, register
from infertune.techniques.batching import max_batch_tokens

ENGINE_CONCURRENCY = 16  # from here on, a dedicated engine's scheduler is worth the migration
USABLE = 0.9  # of each GPU for weights across machines (vLLM's default --gpu-memory-utilization)


def machines_needed(f: Facts, s: Setup) -> int:
    """Machines of `f.gpus` such GPUs that the weights alone need (1: they fit this one). Weights at the
    setup's dtype; the KV pool needs more on top, so this is a lower bound."""
    from infertune.estimate.memory import DTYPE_BYTES

    weights = (f.profile.num_parameters or 0) * DTYPE_BYTES.get(s.dtype if s.dtype != "float32" else "bfloat16", 2)
    per_machine = f.gpus * f.accelerator.memory_bytes * USABLE
    return max(1, -(-int(weights) // int(per_machine))) if per_machine else 1


@register
class ServingEngine(Technique):
    id = "serving-engine"
    family = "serving"
    title = "A dedicated serving engine (vLLM; SGLang alike) with the translated settings"
    addresses = ("concurrency", "load-memory")
    priority = 20
    tradeoffs = ("another stack to deploy and monitor; feature and model support differ from transformers",
                 "vLLM reserves 90 % of the GPU for weights + a paged KV pool by default (--gpu-memory-utilization)")
    docs = ("https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html",
            "https://docs.sglang.ai/", "https://docs.vllm.ai/en/latest/serving/distributed_serving.html")

    def applied(self, s: Setup) -> bool:
        return s.engine != "transformers"

    def check(self, f: Facts, s: Setup) -> Check:
        beyond = f.platform == "cuda" and machines_needed(f, s) > 1
        c = Check().need(f.concurrency >= ENGINE_CONCURRENCY or beyond,
                         f"concurrency {f.concurrency}: transformers' continuous batching is enough "
                         f"below ~{ENGINE_CONCURRENCY}, and the model fits one machine")
        if beyond:
            c.issues.append(f"the weights need {machines_needed(f, s)} machines of {f.gpus} x {f.accelerator.name}: "
                            "a Ray cluster across them (vLLM --pipeline-parallel-size); is there one?")
        c.need_platform(f, "cuda", why="vLLM/SGLang target CUDA and ROCm GPUs")
        c.issues.append(f"does vLLM support {f.profile.architecture}? (check its supported-models list)")
        return c

    def apply(self, f: Facts, s: Setup) -> Setup:
        # vLLM batches continuously with a paged cache and compiles/graphs its own decode step
        update = {"engine": "vllm", "batching": "continuous", "compile": False, "max_batch_tokens": max_batch_tokens(f)}
        nodes = machines_needed(f, s) if f.platform == "cuda" else 1
        if nodes > 1:  # tensor parallel inside each machine, pipeline stages across them
            from infertune.techniques.parallel import TensorParallel

            update.update(tp=TensorParallel().size(f), pp=nodes, device_map=None, max_memory=None)
        return s.model_copy(update=update)


def vllm_command(model: str, s: Setup, max_model_len: int, max_num_seqs: int) -> str:
    return shlex.join(["vllm", "serve", model, "--host", "127.0.0.1", *vllm_flags(
        dtype=s.dtype, max_model_len=max_model_len, max_num_seqs=max_num_seqs, quantization=s.quantization, tp=s.tp,
        pp=s.pp, kv_cache_dtype="fp8" if s.kv_cache == "quantized" else None)])
