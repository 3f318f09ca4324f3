"""Slow paths and known problems as data: setups that run far slower than the hardware's roofline (or crash, or
run out of memory) for a reason the estimate has no term for, each with where it applies, its measured factor
when one is published, the moves that cure it, and its public sources.

`matching(f, s)` is what the advisor calls: the entries whose conditions hold for a setup on the target.
`applicable(f, s)` is the documented factors the estimate folds in (techniques.factors' own, plus every
entry here that holds and carries a measured ratio). An entry's `holds` answers None when everything matches
but a library version nobody stated (another machine): a candidate cause when the user saw the symptom, never
a term of the estimate.

The library versions are read as a move would run them (`factors.package_version`: what an upgrade requires,
else what the target has), so an upgrade removes the entries it cures.
"""

from __future__ import annotations

from typing import cast

from infertune.techniques import factors as documented
from infertune.techniques.base import Facts, Setup
from infertune.techniques.factors import Factor, package_version
from infertune.techniques.slow_path_entry import SlowPath, Symptom
from infertune.techniques.slow_paths_stack import STACK_ENTRIES
from infertune.techniques.upgrade import KNOWN_PROBLEMS, KnownProblem
from infertune.techniques.versions import BY_ID


def _tf(f: Facts, s: Setup) -> tuple[int, ...] | None:
    return package_version(f, s, "transformers")


def _cuda_below(f: Facts, cc: float) -> bool:
    return f.platform == "cuda" and f.cc is not None and f.cc < cc


def _unquantized(s: Setup) -> Setup:
    return s.model_copy(update={"quantization": "none"})


def _fp16(s: Setup) -> Setup:
    return s.model_copy(update={"dtype": "float16"})


def _spread(f: Facts, s: Setup) -> bool:
    """Layers split over several GPUs by device_map (accelerate's pipeline without overlap)."""
    return f.platform == "cuda" and f.gpus > 1 and s.device_map is not None and s.tp * s.pp == 1


HOOK_S = 0.25e-3  # accelerate's per-layer hooks and device moves, host time per decoder layer per step


def _spread_ratio(f: Facts, s: Setup) -> float:
    """A fixed host cost per layer over the bandwidth-bound step of the weights: large for small models (the
    2x-6x reported on 7B-13B), small for 40B+ where each step reads tens of GB."""
    width = {"float32": 4, "bfloat16": 2, "float16": 2}.get(s.dtype, 1) if s.quantization == "none" else 0.6
    step = (f.profile.num_parameters or 0) * width / max(f.accelerator.bandwidth_Bps, 1.0)
    return min(6.0, 1 + f.profile.num_layers * HOOK_S / max(step, 1e-6))


GROUPED_EXPERTS = BY_ID["grouped-experts"].version


def _moe_loop(f: Facts, s: Setup) -> bool | None:
    if not f.profile.num_experts or s.engine != "transformers":
        return False
    v = _tf(f, s)
    if v is None:
        return None if not f.known("transformers") else False
    return v < GROUPED_EXPERTS


ENTRIES: tuple[SlowPath, ...] = (
    SlowPath(
        id="device-map-pipeline",
        what="layers spread over GPUs by device_map run one GPU at a time, with accelerate's hooks moving the "
        "activations at every layer: decode measured 2x-6x slower than one GPU on 7B-13B models (a host cost "
        "per layer, so less on large models)",
        symptoms=("decode-speed", "prefill-speed"),
        where="device_map over several GPUs in transformers/accelerate (no tensor parallelism)",
        holds=lambda f, s: _spread(f, s) and s.engine == "transformers",
        cures=("single-device", "tensor-parallel", "serving-engine"),
        phase="decode",
        ratio=_spread_ratio,
        sources=(
            "https://github.com/oobabooga/textgen/issues/1220",
            "https://github.com/Lightning-AI/litgpt/issues/135",
            "https://huggingface.co/docs/accelerate/concept_guides/big_model_inference",
        ),
    ),
    SlowPath(
        id="moe-expert-loop",
        what="transformers before 5.0 runs MoE experts as a Python loop over per-expert nn.Linear modules "
        "(many small GEMMs, a host sync per expert): decode far below the active-parameter roofline",
        symptoms=("decode-speed", "prefill-speed"),
        where="mixture-of-experts models in transformers < 5.0 (grouped/batched experts from 5.0)",
        holds=_moe_loop,
        cures=("upgrade", "serving-engine"),
        # priced by the estimator itself from the target's transformers (estimate/library.py: iterations x cost)
        sources=(
            "https://github.com/huggingface/text-generation-inference/issues/1501",
            "https://github.com/NVIDIA/TransformerEngine/pull/2642",
            "https://github.com/huggingface/transformers/pull/42697",
        ),
    ),
    SlowPath(
        id="gptq-pre-ampere",
        what="GPTQ's fast kernels (Marlin) need compute capability 8.0; older GPUs fall back to ExLlama/CUDA "
        "kernels that run far below the 4-bit roofline (or slower than fp16)",
        symptoms=("decode-speed",),
        where="GPTQ weights on a GPU below compute capability 8.0 (V100, T4, P40)",
        holds=lambda f, s: s.quantization == "gptq" and _cuda_below(f, 8.0),
        cures=("quant-none", "serving-engine"),
        phase="decode",
        ratio=2.0,
        sources=(
            "https://github.com/IST-DASLab/marlin",
            "https://github.com/oobabooga/textgen/pull/3545",
            "https://github.com/huggingface/text-generation-inference/pull/553",
        ),
    ),
    SlowPath(
        id="awq-needs-turing",
        what="AutoAWQ's GEMM kernels need compute capability 7.5 (Turing): on older GPUs they do not load",
        symptoms=("crash",),
        where="AWQ weights on a GPU below compute capability 7.5 (V100, P100)",
        holds=lambda f, s: s.quantization == "awq" and _cuda_below(f, 7.5),
        cures=("quant-none",),
        sources=("https://github.com/casper-hansen/AutoAWQ#requirements",),
    ),
    SlowPath(
        id="awq-bf16-activations",
        what="AWQ kernels are built for fp16 activations: bf16 is refused (vLLM) or cast through fp16 (slower, "
        "and less accurate)",
        symptoms=("crash", "decode-speed", "wrong-output"),
        where="AWQ weights with bfloat16 compute",
        holds=lambda f, s: s.quantization == "awq" and s.dtype == "bfloat16",
        cures=("dtype",),
        sources=(
            "https://github.com/vllm-project/vllm/issues/1941",
            "https://github.com/vllm-project/vllm/issues/1114",
            "https://github.com/ModelCloud/GPTQModel/pull/2546",
        ),
    ),
    SlowPath(
        id="bf16-pre-ampere",
        what="GPUs before Ampere have no bf16 tensor cores: bf16 is emulated through fp32 (matmuls below half "
        "the fp32 rate on a T4); fp16 runs on the tensor cores",
        symptoms=("decode-speed", "prefill-speed"),
        where="bfloat16 on a CUDA GPU below compute capability 8.0 (V100 7.0, T4 7.5)",
        holds=lambda f, s: s.dtype == "bfloat16" and _cuda_below(f, 8.0),
        cures=("dtype",),
        phase="decode",
        ratio=2.0,
        reference=_fp16,
        reference_name="the same model in float16",
        sources=(
            "https://github.com/openxla/xla/issues/12429",
            "https://github.com/microsoft/VPTQ/pull/51",
            "https://github.com/pytorch/pytorch/issues/124996",
        ),
    ),
    SlowPath(
        id="fp8-in-transformers",
        what="FP8 checkpoints in transformers run weight-only paths (dequantize or scaled matmuls per call, no "
        "fused kernels at batch 1): decode measured ~2x slower than bf16 rather than faster",
        symptoms=("decode-speed",),
        where="fp8 weights loaded by transformers (not a serving engine)",
        holds=lambda f, s: s.quantization == "fp8" and s.engine == "transformers",
        cures=("quant-none", "serving-engine"),
        phase="decode",
        ratio=2.2,
        reference=_unquantized,
        reference_name="the same model in 16-bit",
        sources=(
            "https://github.com/meta-pytorch/float8_experimental/issues/314",
            "https://github.com/sgl-project/sglang/issues/11045",
        ),
    ),
    SlowPath(
        id="dynamic-cache-long-prompt",
        what="a dynamic KV cache grows by concatenation: at long prompts every decode step copies the cache it "
        "appends to, so decode slows (and the peak doubles) as the context grows",
        symptoms=("decode-speed", "memory"),
        where="transformers generate with a dynamic cache and prompts of 8k tokens or more",
        holds=lambda f, s: (
            s.engine == "transformers"
            and s.kv_cache == "dynamic"
            and s.batching != "continuous"
            and f.input_len >= 8192
        ),
        cures=("static-cache-compile", "serving-engine"),
        sources=("https://github.com/huggingface/transformers/pull/30536",),
    ),
    SlowPath(
        id="flash-attn2-pre-ampere",
        what="FlashAttention-2 supports Ampere and newer only: on older GPUs it refuses to load",
        symptoms=("crash",),
        where='attn_implementation="flash_attention_2" on a GPU below compute capability 8.0',
        holds=lambda f, s: "flash_attention_2" in s.attn and s.engine == "transformers" and _cuda_below(f, 8.0),
        cures=("attn-sdpa",),
        sources=("https://github.com/Dao-AILab/flash-attention#installation-and-features",),
    ),
)

# techniques.factors' entries, with where they apply and what cures them
_FACTOR_ENTRIES: dict[str, tuple[tuple[Symptom, ...], str, tuple[str, ...]]] = {
    "bnb-int8-decode": (
        ("decode-speed",),
        "bitsandbytes 8-bit (LLM.int8) weights",
        ("quant-none", "quant-prequantized"),
    ),
    "bnb-4bit-decode": (("decode-speed",), "bitsandbytes 4-bit weights", ("quant-none", "quant-prequantized")),
    "bnb-4bit-old-kernels": (("decode-speed",), "bitsandbytes < 0.40.0, 4-bit, batch 1", ("upgrade",)),
    "torchao-eager": (
        ("decode-speed",),
        "torchao weight-only quantization without torch.compile",
        ("static-cache-compile",),
    ),
    "fp16-on-cpu": (("decode-speed", "prefill-speed"), "float16 on a CPU", ("dtype",)),
    "bf16-on-cpu-without-native-bf16": (
        ("decode-speed", "prefill-speed"),
        "bfloat16 on a CPU without AVX512-BF16/AMX",
        ("dtype",),
    ),
}


def _from_factor(x: Factor) -> SlowPath:
    symptoms, where, cures = _FACTOR_ENTRIES[x.id]
    return SlowPath(
        id=x.id,
        what=x.what,
        symptoms=symptoms,
        where=where,
        holds=x.applies,
        cures=cures,
        sources=x.sources,
        phase=x.phase,
        ratio=x.ratio,
        reference=x.reference,
        reference_name=x.reference_name,
    )


_SYMPTOM: dict[str, Symptom] = {"load-memory": "memory", "kv-cache-growth": "memory", "long-input-attention": "memory"}


def _from_problem(p: KnownProblem) -> SlowPath:
    symptoms = tuple(dict.fromkeys(_SYMPTOM.get(a, cast(Symptom, a)) for a in p.addresses)) + (
        ("crash",) if p.refuses else ()
    )
    span = f"{p.bad_from} to before {p.fixed}" if p.bad_from else f"before {p.fixed}"
    return SlowPath(
        id=f"known-{p.package}-{p.bad_from or 'old'}-{p.fixed}",
        what=p.what,
        symptoms=symptoms,
        where=f"{p.package} {span}",
        holds=p.affects,
        cures=("upgrade",),
        sources=(p.source,),
    )


ALL: tuple[SlowPath, ...] = (
    ENTRIES
    + STACK_ENTRIES
    + tuple(_from_factor(x) for x in documented.FACTORS)
    + tuple(_from_problem(p) for p in KNOWN_PROBLEMS if p.factor is None)
)


def matching(f: Facts, s: Setup, maybe: bool = False) -> list[SlowPath]:
    """The entries whose conditions hold for `s` on the target; `maybe`: also those that hold but for a
    library version nobody stated."""
    out = []
    for p in ALL:
        h = p.holds(f, s)
        if h is True or (maybe and h is None):
            out.append(p)
    return out


def applicable(f: Facts, s: Setup) -> list[Factor]:
    """The documented factors that apply to `s`: every matching entry with a measured ratio."""
    return [x for p in matching(f, s) if (x := p.factor(f, s)) is not None]


def cured(f: Facts, before: Setup, after: Setup, maybe: bool = True) -> list[SlowPath]:
    """The entries `before` is on and `after` leaves."""
    return [p for p in matching(f, before, maybe) if p.holds(f, after) is False]
