"""Serving engine: when concurrency outgrows transformers, move to vLLM or SGLang (paged attention,
prefix caching, CUDA graphs, a scheduler built for it) with the same model and settings."""

from __future__ import annotations

import shlex

from infertune.techniques.base import Check, Facts, Setup, Technique, register
from infertune.techniques.batching import max_batch_tokens

ENGINE_CONCURRENCY = 16  # from here on, a dedicated engine's scheduler is worth the migration


@register
class ServingEngine(Technique):
    id = "serving-engine"
    family = "serving"
    title = "A dedicated serving engine (vLLM; SGLang alike) with the translated settings"
    addresses = ("concurrency",)
    priority = 20
    tradeoffs = ("another stack to deploy and monitor; feature and model support differ from transformers",
                 "vLLM reserves 90 % of the GPU for weights + a paged KV pool by default (--gpu-memory-utilization)")
    docs = ("https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html",
            "https://docs.sglang.ai/")

    def applied(self, s: Setup) -> bool:
        return s.engine != "transformers"

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(f.concurrency >= ENGINE_CONCURRENCY,
                         f"concurrency {f.concurrency}: transformers' continuous batching is enough "
                         f"below ~{ENGINE_CONCURRENCY}")
        c.need_platform(f, "cuda", why="vLLM/SGLang target CUDA and ROCm GPUs")
        c.issues.append(f"does vLLM support {f.profile.architecture}? (check its supported-models list)")
        return c

    def apply(self, f: Facts, s: Setup) -> Setup:
        # vLLM batches continuously with a paged cache and compiles/graphs its own decode step
        return s.model_copy(update={"engine": "vllm", "batching": "continuous", "compile": False,
                                    "max_batch_tokens": max_batch_tokens(f)})


def vllm_command(model: str, s: Setup, max_model_len: int, max_num_seqs: int) -> str:
    args = ["vllm", "serve", model, "--host", "127.0.0.1", "--dtype", s.dtype if s.dtype != "float32" else "bfloat16",
            "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs)]
    if s.tp > 1:
        args += ["--tensor-parallel-size", str(s.tp)]
    if s.quantization in ("awq", "gptq", "fp8"):
        args += ["--quantization", s.quantization]
    elif s.quantization.startswith("bnb"):
        args += ["--quantization", "bitsandbytes"]
    if s.kv_cache == "quantized":
        args += ["--kv-cache-dtype", "fp8"]
    return shlex.join(args)
