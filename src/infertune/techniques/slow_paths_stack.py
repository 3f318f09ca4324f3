"""Slow paths of the software stack under the model, as data (techniques.slow_paths adds them to its table): the
torch build a CPU's bf16 runs through, a GPTQ kernel that was not built for the torch it runs with or the activation
type it was not built for, and tensor parallelism's collectives where one GPU would hold the model.

Each reads the target as stated (--cpu / --cpu-flags, --gpu, --lib torch=VERSION, --lib auto-gptq=VERSION): this
host's versions only when the target is this host (Facts.known). `holds` answers None where only a version nobody
stated is missing: a candidate cause when the user saw the symptom, never a term of the estimate.
"""

from __future__ import annotations

from infertune.techniques.base import Facts, Setup
from infertune.techniques.factors import _cpu_without_bf16, package_version
from infertune.techniques.slow_path_entry import SlowPath
from infertune.techniques.upgrade import KNOWN_PROBLEMS

# the torch releases a report measured bf16 slow on a CPU that has native bf16 (AMX): 2.1.1 (transformers#27994);
# no later release is documented as fixing it, so a later one is not priced
BF16_CPU_MEASURED_BELOW = (2, 2)
# one all-reduce of a decode step's activations in eager PyTorch (NCCL launch, sync, a host round trip): measured
# about 500 us per collective with Nsight Systems on two V100 (meta-pytorch/gpt-fast#111); at batch 1 that fixed cost,
# paid twice per layer, is what a small model's step is made of
EAGER_ALLREDUCE_S = 0.5e-3
WIDTH = {"bnb-8bit": 1.0, "fp8": 1.0, "torchao-int8": 1.0}  # bytes per weight; 4-bit methods ~0.55 with scales


def _fp32(s: Setup) -> Setup:
    return s.model_copy(update={"dtype": "float32"})


def _bf16_cpu_torch(f: Facts, s: Setup) -> bool | None:
    """bf16 run by transformers on a CPU with native bf16 (a CPU without it is factors' bf16-on-cpu entry), under a
    torch release measured slow there; None where the target's torch is not known."""
    if f.platform != "cpu" or s.dtype != "bfloat16" or s.engine != "transformers" or _cpu_without_bf16(f):
        return False
    v = package_version(f, s, "torch")
    if v is None:
        return None if not f.known("torch") else False
    return v[:2] < BF16_CPU_MEASURED_BELOW


def weights_bytes(f: Facts, s: Setup) -> float:
    """The weights' bytes as stored for this setup (an approximation for a condition, not the estimate)."""
    if s.quantization == "none":
        width = {"float32": 4.0}.get(s.dtype, 2.0)
    else:
        width = WIDTH.get(s.quantization, 0.55)
    return (f.profile.num_parameters or 0) * width


def _fits_one_gpu(f: Facts, s: Setup) -> bool:
    """The weights and this workload's KV cache fit one of the GPUs (10 % left for the runtime)."""
    p = f.profile
    kv = 2 * p.num_layers * p.num_kv_heads * p.head_dim * 2 * (f.input_len + f.max_new_tokens) * f.batch * f.concurrency
    return weights_bytes(f, s) + kv <= 0.9 * f.accelerator.memory_bytes


def _tp_small_model(f: Facts, s: Setup) -> bool:
    return (
        f.platform == "cuda"
        and f.gpus > 1
        and s.tp > 1
        and s.engine == "transformers"
        and s.batching != "continuous"
        and "NVLink" not in (f.accelerator.interconnect or "")
        and _fits_one_gpu(f, s)
    )


def _tp_ratio(f: Facts, s: Setup) -> float:
    """The collectives' fixed cost over the bandwidth-bound step of 1/tp of the weights (capped at 6x)."""
    step = weights_bytes(f, s) / (s.tp * max(f.accelerator.bandwidth_Bps, 1.0))
    collectives = 2 * f.profile.num_layers  # after attention and after the MLP
    return min(6.0, 1 + collectives * EAGER_ALLREDUCE_S / max(step, 1e-6))


[_AUTO_GPTQ] = [p for p in KNOWN_PROBLEMS if p.factor == "gptq-kernel-unbuilt"]

STACK_ENTRIES: tuple[SlowPath, ...] = (
    SlowPath(
        id="bf16-cpu-eager-torch",
        what="bf16 in eager PyTorch on a CPU measured slower than fp32 even where the CPU has AMX/AVX512-BF16: 2x on "
        "an Emerald Rapids Xeon (transformers 4.36), 9x on a Sapphire Rapids Xeon with torch 2.1.1; bf16 matmuls "
        "that miss oneDNN's fast path run a slow reference path, and AMX needs a Linux kernel >= 5.16",
        symptoms=("decode-speed", "prefill-speed"),
        where="bfloat16 in transformers on a CPU with native bf16, torch before 2.2 (the releases measured slow; "
        "unstated: a candidate cause)",
        holds=_bf16_cpu_torch,
        cures=("dtype",),
        phase="both",
        ratio=2.0,
        reference=_fp32,
        reference_name="the same model in float32",
        sources=(
            "https://github.com/huggingface/transformers/issues/30588",
            "https://github.com/huggingface/transformers/issues/27994",
            "https://github.com/pytorch/pytorch/issues/95125",
            "https://github.com/intel/intel-extension-for-pytorch/issues/637",
        ),
    ),
    SlowPath(
        id="gptq-kernel-unbuilt",
        what="auto-gptq's CUDA kernels were not loaded ('CUDA extension not installed': its prebuilt wheel was made "
        "for another torch): GPTQ layers run a fallback path, decode measured ~6x slower (2-3 against 16 tokens/s "
        "once torch and the build matched)",
        symptoms=("decode-speed",),
        where="GPTQ weights in transformers on CUDA, an auto-gptq release whose wheel was built for another torch "
        "than the target's (its installation table; versions unstated: a candidate cause)",
        holds=_AUTO_GPTQ.affects,
        cures=("upgrade", "quant-none"),
        phase="decode",
        ratio=6.0,
        sources=(
            "https://github.com/AutoGPTQ/AutoGPTQ/blob/main/docs/INSTALLATION.md",
            "https://github.com/AutoGPTQ/AutoGPTQ/issues/203",
            "https://github.com/AutoGPTQ/AutoGPTQ/issues/249",
            "https://github.com/AutoGPTQ/AutoGPTQ/issues/694",
        ),
    ),
    SlowPath(
        id="gptq-bf16-activations",
        what="GPTQ's CUDA (exllama) kernels are built for fp16 activations: bf16 is refused (vLLM before its Marlin "
        "kernels) or runs a slower path (a bf16 GPTQ kernel measured much slower than fp16 on sm80-sm89)",
        symptoms=("decode-speed",),
        where="GPTQ weights with bfloat16 compute",
        holds=lambda f, s: s.quantization == "gptq" and s.dtype == "bfloat16" and f.platform == "cuda",
        cures=("dtype",),
        sources=("https://github.com/vllm-project/vllm/issues/2149", "https://github.com/vllm-project/vllm/pull/4781"),
    ),
    SlowPath(
        id="tp-collectives-small-model",
        what="tensor parallelism in eager PyTorch pays a fixed cost per all-reduce (two per layer, ~0.5 ms each "
        "measured): at small batches a model one GPU holds decodes slower over two GPUs than on one (7B: 1.7x-2.7x "
        "measured)",
        symptoms=("decode-speed",),
        where="--tp over GPUs linked by PCIe, transformers or a tensor-parallel wrapper (no CUDA-graph all-reduce), "
        "where the weights and the cache fit one GPU",
        holds=_tp_small_model,
        cures=("single-device",),
        phase="decode",
        ratio=_tp_ratio,
        sources=(
            "https://github.com/meta-pytorch/gpt-fast/issues/111",
            "https://github.com/huggingface/transformers/issues/36222",
            "https://github.com/BlackSamorez/tensor_parallel/issues/66",
            "https://github.com/vllm-project/vllm/issues/6027",
            "https://github.com/lm-sys/FastChat/issues/2702",
        ),
    ),
)
