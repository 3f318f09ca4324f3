"""Loading rules: the dtype a model loads in (IT001). Where it runs is rules/placement.py; casts and moves of a
dispatched model rules/dispatch.py; memory budget and attention kernels rules/hardware.py."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    ENCODER_DECODER,
    IGNORECASE,
    PLACES,
    QUANTIZED_ID,
    const,
    dtype_keywords,
    has_star_kwargs,
    id_name,
    kw,
    lazy_compile,
    method,
    pipeline_model,
    task_of,
)
from infertune.doctor.rules.context import params_in_id
from infertune.doctor.rules.dispatch import cast_after_dispatch, is_cast
from infertune.doctor.rules.placement import cpu_by_choice, cpu_by_hand, left_on_cpu, not_cpu
from infertune.doctor.script import Script

SAVES = {"save_pretrained", "push_to_hub"}


def _saved_only(s: Script, c: ast.Call) -> bool:
    """Loaded to be saved (a download or conversion script): nothing runs it here."""
    if s.generates or s.pipelines:
        return False
    m = s.called_method(c)
    uses = s.uses(c)
    return (m is not None and method(m) in SAVES) or (
        bool(uses) and all((x := s.called_method(u)) is not None and method(x) in SAVES for u in uses)
    )


# checkpoints published in fp32 (GPT-2 and DistilGPT-2, GPT-Neo, GPT-J's main branch, DialoGPT: doctor-real-5 p13):
# fp32 is their own dtype
FP32_CHECKPOINT = lazy_compile(
    r"^(distil)?gpt2(-(medium|large|xl))?$|^gpt-neo-(125m|1\.3b|2\.7b)$|^gpt-j-6b$|^dialogpt-(small|medium|large)$",
    IGNORECASE,
)
# GPT-2's own classes: every checkpoint they load (GPT-2, DialoGPT, a fine-tune of either) is GPT-2-sized and saved
# in fp32 (doctor-real-6 s12: a local GPT-2 fine-tune, labelled "fp32 costs little for this size")
FP32_CLASS = lazy_compile(r"^GPT2(LMHeadModel|Model|DoubleHeadsModel)$")
# encoder-decoders published in half precision (Whisper large-v3 and its turbo, distil-large-v3, and fine-tunes
# named after them), unlike the fp32 T5s, BARTs and earlier Whispers: a load with no dtype doubles them
# (doctor-real-3 e04, doctor-real-5 q09, labelled so; whisper-large-v2 and -medium, stored in fp32, stay silent)
HALF_SEQ2SEQ = lazy_compile(r"whisper-large-v3|distil-large-v3", IGNORECASE)
# checkpoints whose own modelling code (trust_remote_code) picks half precision when none is given: Qwen (v1)'s
# QWenLMHeadModel sets bf16, else fp16, on a card that supports it and casts itself (`autoset_precision`); by the
# id's last part, so a local copy counts too (doctor-real-16 d12 ".../qwen/Qwen-7B-Chat"; Qwen-VL's code, -22 a04)
CASTS_ITSELF = lazy_compile(r"^qwen-((1_8b|7b|14b|72b)(-chat)?(-int[48])?|vl(-chat)?(-int4)?(-7b)?)$", IGNORECASE)


def _half_pipelines_in_fp32(s: Script) -> list[ast.Call]:
    """pipeline(task, model="<id>") of a half-precision checkpoint on a GPU with no dtype at the pipeline or in
    model_kwargs: 4.x loads it in fp32. Whisper large-v3 (a half-precision encoder-decoder; doctor-real-8 x11), or a
    generative pipeline whose id names 1B parameters or more (those are published in bf16/fp16; doctor-real-10 c08,
    a LLaVA-1.5-7B pipeline). On the GPU: a device that is not the CPU, a device_map, or no device at all where the
    pins allow transformers 4.47 or later (which takes cuda:0 when there is one) and the script names a GPU or the
    model is too large for a CPU by choice."""
    out = []
    for p in s.pipelines:
        m = pipeline_model(p)
        if m is None or s.models_of(m) or has_star_kwargs(p):
            continue
        model = s.pipeline_model_id(p)
        n = params_in_id(model) or 0
        decoder = task_of(p) in DECODER_TASKS and n >= 1e9 and not FP32_CHECKPOINT.search(id_name(model))
        if not (HALF_SEQ2SEQ.search(id_name(model)) or decoder):
            continue
        device = kw(p, "device")
        values = [const(v) for v in (s.origins(device) or [device])] if device is not None else []
        on_gpu = kw(p, "device_map") is not None or any(v not in ("cpu", -1) for v in values)
        # (no device at all: IT002's one finding names both versions' outcomes, the CPU and fp32 on cuda:0)
        if on_gpu and not pipeline_typed(s, p) and not QUANTIZED_ID.search(model or ""):
            out.append(p)
    return out


def pipeline_typed(s: Script, p: ast.Call) -> bool:
    """A dtype given to the pipeline, or in its model_kwargs (with a quantization request, which sets its own)."""
    extra = kw(p, "model_kwargs")
    return any(kw(p, k) is not None for k in ("dtype", "torch_dtype")) or (
        extra is not None and any(DTYPE_KEYS.search(ast.unparse(o)) for o in s.origins(extra) or [extra])
    )


DECODER_TASKS = ("text-generation", "image-text-to-text", "image-to-text", "visual-question-answering")
DTYPE_KEYS = lazy_compile(r"dtype|quantization_config|load_in_[48]bit")


def dtype_rule(s: Script):
    if s.trains:
        return  # training picks its precision in its arguments (bf16=True, mixed precision)
    t = s.target
    major = t.pinned_major
    pinned = t.version_source is not None
    where = (
        ""
        if not pinned
        else (" (--target-version)" if t.version_source == "--target-version" else f" (pinned in {t.version_source})")
    )
    if major is None or major < 5:
        for p in _half_pipelines_in_fp32(s):
            yield (
                p,
                f"a pipeline of {s.pipeline_model_id(p)} on the GPU with no torch_dtype loads its half-precision "
                "weights in fp32 on transformers 4.x: twice the memory, slower; pass torch_dtype=torch.bfloat16 "
                "(or float16)",
            )
    for c in s.loads:
        if (
            not s.torch_generative(c)
            or (ENCODER_DECODER.search(s.model_class(c)) and not HALF_SEQ2SEQ.search(id_name(s.model_id(c))))
            or has_star_kwargs(c)
            or s.quantized(c)
            or _saved_only(s, c)
            or cpu_by_choice(s, c)
            or cpu_by_hand(s, c)
            or left_on_cpu(s, c)
            or cast_after_dispatch(s, c)
            or _halved_after_load(s, c)
            or FP32_CHECKPOINT.search(id_name(s.model_id(c)))
            or FP32_CLASS.search(s.model_class(c))
            or CASTS_ITSELF.search(id_name(s.model_id(c)))
        ):
            # classifiers are small, T5-style checkpoints are fp32; bitsandbytes/GPTQ/AWQ choose theirs; a model
            # run on the CPU computes in fp32 there (a choice, or IT002's finding on this load: one per problem)
            continue
        dtype, torch_dtype = dtype_keywords(c)
        if dtype is None and torch_dtype is None:
            if major is not None and major >= 5:
                continue  # 5.x loads the checkpoint's dtype ("auto")
            if major == 4:
                keyword = "torch_dtype=" if t.may_be_before((4, 56)) else "dtype= (torch_dtype= is the older name)"
                yield (
                    c,
                    (
                        f"from_pretrained without dtype loads fp32 on transformers 4.x{where}: twice the memory, "
                        f"slower; pass {keyword}"
                    ),
                )
            else:
                yield (
                    c,
                    (
                        "from_pretrained without dtype: transformers 4.x loads fp32 (twice the memory of a bf16 "
                        "checkpoint), 5.x the checkpoint's dtype; no pin says which this script gets (pass dtype=; "
                        "before 4.56 the keyword is torch_dtype=)"
                    ),
                )
        elif dtype is not None and torch_dtype is None and pinned and t.may_be_before((4, 56)):
            yield (
                dtype,
                (
                    f"`dtype=` is read by from_pretrained only from transformers 4.56{where}: older versions "
                    "do not take it as the weights' dtype (fp32 loads, or an error); use torch_dtype="
                ),
            )


def _halved_after_load(s: Script, c: ast.Call) -> bool:
    """Cast to half precision right after the load or on a later use (`.half()`, `.bfloat16()`,
    `.to("cuda", dtype=torch.bfloat16)`) before any move to the GPU: the copy that runs is not fp32, whatever
    from_pretrained read. A cast after `.cuda()` comes too late: the fp32 copy filled the GPU first (doctor-real-18
    d10: ChatGLM2 `.cuda()` at the load, `.half()` on its adapter-wrapped model below)."""
    node: ast.AST = c
    calls = []
    while isinstance(dot := s.parents.get(node), ast.Attribute) and isinstance(call := s.parents.get(dot), ast.Call):
        calls.append(call)
        node = call
    for u in sorted(s.uses(c), key=lambda u: (getattr(u, "lineno", 0), getattr(u, "col_offset", 0))):
        m = s.called_method(u)
        while m is not None:
            calls.append(m)
            m = s.called_method(m)
    for m in calls:
        if is_cast(m):
            if method(m) != "float" and "float32" not in ast.unparse(m):
                return True
        elif method(m) in PLACES and not_cpu(s, m):
            return False
    return False
