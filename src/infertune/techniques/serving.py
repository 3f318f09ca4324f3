"""Serving engine: when concurrency outgrows transformers, move to vLLM or SGLang (paged attention,
prefix caching, CUDA graphs, a scheduler built for it) with the same model and settings."""

from __future__ import annotations

import shlex

from infertune.core.config import vllm_flags
from infertune.techniques import slow_paths, versions
from infertune.techniques.base import Check, EngineEvidence, Facts, Setup, Technique, register
from infertune.techniques.batching import ContinuousBatching, max_batch_tokens
from infertune.techniques.parallel import TensorParallel
from infertune.techniques.versions import experts_fused

ENGINE_CONCURRENCY = 16  # from here on, a dedicated engine's scheduler is worth the migration
USABLE = 0.9  # of each GPU for weights across machines (vLLM's default --gpu-memory-utilization)
ENGINES = ("vllm", "sglang")


def weights_bytes(f: Facts, s: Setup) -> int:
    """The setup's weights as the estimator counts them (dtype and quantization in use); an engine loads
    fp32 checkpoints in bf16. 0 when the parameter count is unknown (the advisor refuses before that)."""
    from infertune.estimate.memory import EstimateSettings, Quantization, estimate_memory
    from infertune.techniques.quantization import estimator_quant

    if not f.profile.num_parameters:
        return 0
    dtype = "bfloat16" if s.dtype == "float32" else s.dtype
    settings = EstimateSettings(
        dtype=dtype,
        quantization=Quantization.parse(estimator_quant(f, s)),
        platform=f.platform,
        input_len=1,
        max_new_tokens=1,
        experts_fused=experts_fused(f),
    )
    return estimate_memory(f.profile, settings, f.profile.native_dtype).weights_bytes


def machines_needed(f: Facts, s: Setup) -> int:
    """Machines of `f.gpus` such GPUs that the weights alone need at the setup's dtype and quantization
    (1: they fit this one). The KV pool needs more on top, so this is a lower bound."""
    per_machine = f.gpus * f.accelerator.memory_bytes * USABLE
    return max(1, -(-weights_bytes(f, s) // int(per_machine))) if per_machine else 1


@register
class ServingEngine(Technique):
    id = "serving-engine"
    family = "serving"
    measured_when_served = True
    title = "A dedicated serving engine (vLLM or SGLang) with the translated settings"
    addresses = ("concurrency", "load-memory", "decode-speed")
    priority = 20
    tradeoffs = (
        "another stack to deploy and monitor; feature and model support differ from transformers",
        "vLLM reserves 90 % of the GPU for weights + a paged KV pool by default (--gpu-memory-utilization)",
        "beyond one machine (weights above the machine's GPUs x 90 %): `--tensor-parallel-size` within a "
        "machine, `--pipeline-parallel-size` across machines over a Ray cluster",
    )
    docs = (
        "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html",
        "https://docs.sglang.ai/",
        "https://docs.vllm.ai/en/latest/serving/distributed_serving.html",
    )

    def applied(self, s: Setup) -> bool:
        return s.engine != "transformers"

    def check(self, f: Facts, s: Setup) -> Check:
        measured = measured_verdict(f)
        if measured is not None:  # measured on this workload and host: that outranks every rule of thumb
            return Check() if measured.better else Check(blockers=[f"measured here: {measured.line()}"])
        beyond = f.platform == "cuda" and machines_needed(f, s) > 1
        # over several GPUs (device_map or tp) transformers batches nothing continuously and device_map runs
        # the GPUs one after another: an engine shards the model with tensor parallelism and batches
        spread = f.gpus > 1 and (s.device_map is not None or s.tp > 1)
        # transformers' own path is the slow one (an MoE expert loop, FP8 weight-only matmuls, ...): an engine's
        # kernels leave it, at any concurrency
        slow = [p.id for p in slow_paths.matching(f, s, maybe=True) if self.id in p.cures]
        # concurrent requests that transformers cannot batch here (its version has no continuous batching, or
        # the placement rules it out): an engine batches them, so "continuous batching is enough" would be false
        unbatched = (
            f.concurrency > 1
            and s.batching != "continuous"
            and bool(ContinuousBatching().check(f, s).blockers or versions.lacks(f, "continuous-batching"))
        )
        if f.concurrency > 1:
            why = (
                f"concurrency {f.concurrency}: transformers' continuous batching is enough below "
                f"~{ENGINE_CONCURRENCY}, the model fits one machine and one GPU"
            )
        else:
            why = (
                "one request at a time on one GPU: an engine's scheduler has nothing to batch, and no known "
                "slow path of transformers holds for this setup"
            )
        c = Check().need(f.concurrency >= ENGINE_CONCURRENCY or beyond or spread or bool(slow) or unbatched, why)
        if slow:
            c.issues.append(f"leaves transformers' slow path: {', '.join(slow)} (see docs/slow-paths.md)")
        if beyond:
            c.issues.append(
                f"needs {machines_needed(f, s)} machines of {f.gpus} x {f.accelerator.name} "
                f"(stated: 1): a Ray cluster across them (vLLM --pipeline-parallel-size); is there one?"
            )
        c.need_platform(f, "cuda", why="vLLM/SGLang target CUDA and ROCm GPUs")
        c.issues.append(f"does the engine support {f.profile.architecture}? (check its supported-models list)")
        return c

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        # the engine batches continuously with a paged cache and compiles/graphs its own decode step
        update = {
            # the engine runs its own paged/flash attention: no eager score matrix, whatever transformers ran
            "attn": "sdpa",
            "batching": "continuous",
            "compile": False,
            "max_batch_tokens": max_batch_tokens(f),
            "device_map": None,
            "max_memory": None,
            "tp": TensorParallel().size(f) if f.gpus > 1 else 1,
        }
        nodes = machines_needed(f, s) if f.platform == "cuda" else 1
        if nodes > 1:  # tensor parallel inside each machine, pipeline stages across them
            update["pp"] = nodes
        won = {e.engine for e in f.engines_measured if e.better}  # an engine measured better here comes first
        return [s.model_copy(update={**update, "engine": e}) for e in sorted(ENGINES, key=lambda e: e not in won)]

    def apply(self, f: Facts, s: Setup) -> Setup:
        return self.moves(f, s)[0]

    def evidence(self, f: Facts, after: Setup) -> list[EngineEvidence]:
        return [e for e in f.engines_measured if e.engine == after.engine]


def measured_verdict(f: Facts) -> EngineEvidence | None:
    """The best measured engine on these facts' workload (a clear win first), or None when none was measured."""
    found = [e for e in f.engines_measured if e.engine in ENGINES]
    if not found:
        return None
    return max(found, key=lambda e: (e.better, not e.clear, e.throughput_ratio or 0))


def engine_command(model: str, s: Setup, max_model_len: int, max_num_seqs: int) -> str:
    """The serve command of the setup's engine (vLLM or SGLang)."""
    dtype = s.dtype if s.dtype != "float32" else "bfloat16"
    quant = (
        s.quantization
        if s.quantization in ("awq", "gptq", "fp8")
        else ("bitsandbytes" if s.quantization.startswith("bnb") else None)
    )
    if s.engine == "sglang":
        args = [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            "8000",
            "--dtype",
            dtype,
            "--context-length",
            str(max_model_len),
            "--max-running-requests",
            str(max_num_seqs),
        ]
        if s.tp > 1:
            args += ["--tp-size", str(s.tp)]
        if s.pp > 1:
            args += ["--pp-size", str(s.pp)]
        if quant:
            args += ["--quantization", quant]
        if s.kv_cache == "quantized":
            args += ["--kv-cache-dtype", "fp8_e5m2"]
        return shlex.join(args)
    return vllm_command(model, s, max_model_len, max_num_seqs)


def vllm_command(model: str, s: Setup, max_model_len: int, max_num_seqs: int) -> str:
    return shlex.join(
        [
            "vllm",
            "serve",
            model,
            "--host",
            "127.0.0.1",
            *vllm_flags(
                dtype=s.dtype,
                max_model_len=max_model_len,
                max_num_seqs=max_num_seqs,
                quantization=s.quantization,
                tp=s.tp,
                pp=s.pp,
                kv_cache_dtype="fp8" if s.kv_cache == "quantized" else None,
            ),
        ]
    )
