"""Loading rules: dtype and placement (casts and moves of a dispatched model: rules/dispatch.py; memory budget and
attention kernels: rules/hardware.py)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    ENCODER_DECODER,
    IGNORECASE,
    MOVES,
    PLACES,
    QUANTIZED_ID,
    callee,
    const,
    dotted,
    has_star_kwargs,
    id_name,
    kw,
    lazy_compile,
    method,
    pipeline_model,
    receiver,
    task_of,
)
from infertune.doctor.rules.context import (
    CPU_SIZED,
    CPU_WORKABLE,
    PLACERS,
    cpu_named,
    data_set_job,
    gpu_intent,
    helper_places,
    map_on_cpu,
    params_in_id,
)
from infertune.doctor.rules.dispatch import cast_after_dispatch, is_cast
from infertune.doctor.script import Script

SAVES = {"save_pretrained", "push_to_hub"}
HARMLESS = {
    "compile",
    "print",
    "len",
    "str",
    "repr",
    "type",
    "isinstance",
    "getattr",
    "hasattr",
    "id",
    "format",
    "sum",
    "info",
    "debug",
    "warning",
    "save_pretrained",
    "push_to_hub",
    "count_parameters",
    "parameters",
    "get_peft_model",
    "HuggingFaceLLM",  # (LlamaIndex's and LangChain's wrappers run a loaded model where it is)
    "HuggingFacePipeline",
}


def dtype_keywords(c: ast.Call) -> tuple[ast.expr | None, ast.expr | None]:
    return kw(c, "dtype"), kw(c, "torch_dtype")


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


def placed_at_load(s: Script, c: ast.Call, explicit_cpu: bool = False) -> bool:
    """On an accelerator from the load on (device_map, a quantized load, a chained .cuda()); with
    explicit_cpu, a deliberate device_map='cpu' counts as placed too."""
    dm = kw(c, "device_map")
    if (
        (dm is not None and (explicit_cpu or not map_on_cpu(s, dm)))
        or has_star_kwargs(c)
        or s.placed_by_quantization(c)
    ):
        return True
    node: ast.AST = c  # from_pretrained(...).eval().cuda()
    while isinstance(attr := s.parents.get(node), ast.Attribute) and isinstance(call := s.parents.get(attr), ast.Call):
        if attr.attr in PLACES and (explicit_cpu or _not_cpu(s, call)):
            return True
        node = call
    return False


def _not_cpu(s: Script, call: ast.Call) -> bool:
    """Not a move to the CPU: `.to("cpu")`, `.to(device)` where every value device takes is "cpu" (doctor-real-8
    w04: `device = 'cuda'` then `device = 'cpu'`), `.to(torch.device("cpu"))`."""
    if not call.args:
        return True
    values = s.origins(call.args[0]) or [call.args[0]]
    values = [v.args[0] if isinstance(v, ast.Call) and callee(v) == "device" and v.args else v for v in values]
    return not all(const(v) == -1 or str(const(v)).lower() == "cpu" for v in values)  # ("CPU": IT052's, meant so)


def moved(s: Script, use: ast.AST, explicit_cpu: bool = False) -> bool:
    """Is this use of the model a move (x.to(...), x.cuda()), or a hand-over to something that places it?"""
    parent = s.parents.get(use)
    m = s.called_method(use)
    while m is not None and method(m) in MOVES and not (method(m) in PLACES and (explicit_cpu or _not_cpu(s, m))):
        m = s.called_method(m)  # model.half().cuda(), model.eval().to(device): the move further along the chain
        if m is None or method(m) not in MOVES:
            return False
    if m is not None:
        return method(m) in PLACES and (explicit_cpu or _not_cpu(s, m))
    call = (
        parent if isinstance(parent, ast.Call) else (s.parents.get(parent) if isinstance(parent, ast.keyword) else None)
    )
    if not isinstance(call, ast.Call) or call.func is use:
        return False
    name = callee(call)
    if name == "pipeline":
        if any(kw(load, "device_map") is not None for load in s.models_of(use)):
            return False  # a pipeline leaves a model placed by device_map where it is (it reads hf_device_map)
        if kw(call, "device") is None and kw(call, "device_map") is None:
            # 4.47+ moves the model it is given to cuda:0 when there is one: where the script names a GPU, or for a
            # model too large for a CPU by choice (a small one in a script that never names a GPU may run there)
            loads = s.models_of(use)
            if any(dtype_keywords(load) == (None, None) and not s.quantized(load) for load in loads):
                return False  # no dtype either: IT002 reports it once, at the pipeline, with both outcomes
            sizes = [params_in_id(s.model_id(load)) or 0 for load in loads]
            return not pipeline_stays_on_cpu(s) and (gpu_intent(s) or max(sizes, default=0) >= CPU_WORKABLE)
        return any(kw(call, k) is not None and const(kw(call, k)) not in ("cpu", -1) for k in ("device", "device_map"))
    if name in PLACERS:
        return True
    for fn in s.defined(call):  # a helper of this file: does it move its parameter?
        return helper_places(s, fn, call, use)
    if name == "from_pretrained" and dotted(receiver(call)).split(".")[-1].startswith("Peft"):
        return False  # PeftModel.from_pretrained(model, adapter): the adapter joins the model where it is
    return name not in HARMLESS and not s.is_tokenizer(call.func) and method(call) != "generate"


def _used_for_generation(s: Script, c: ast.Call, uses: list[ast.AST]) -> bool:
    if any(c in s.models_of(receiver(g)) for g in s.generates):
        return True
    return any(
        isinstance(s.parents.get(u), (ast.Call, ast.keyword))
        and s.parents.get(u) is not None
        and any(p in s.pipelines for p in (s.parents[u], s.parents.get(s.parents[u])))
        for u in uses
    )


def left_on_cpu(s: Script, c: ast.Call) -> bool:
    """IT002's subject: a generative model run for generation, never placed (not even on the CPU on purpose), in a
    script that neither trains nor sets a default device, and not a CPU-sized model in a script without a GPU."""
    default_device = any(
        dotted(x.func) == "torch.set_default_device"
        or (dotted(x.func) == "torch.device" and isinstance(s.parents.get(x), ast.withitem))
        for x in s.calls
    )
    if s.trains or default_device or not s.torch_generative(c) or placed_at_load(s, c, explicit_cpu=True):
        return False  # a device_map='cpu' or .to('cpu') is a choice, not an oversight
    uses = s.uses(c)
    if any(moved(s, u, explicit_cpu=True) for u in uses) or not _used_for_generation(s, c, uses):
        return False
    return not _cpu_on_purpose(s, s.model_id(c)) and not _fp32_written(s, c)


def _fp32_written(s: Script, c: ast.Call) -> bool:
    """dtype=torch.float32 written at the load: the CPU's own precision chosen on purpose, for a run that is slow
    and meant to be (doctor-real-4 g06: fp32 written, quantization switched off, a 10-token probe)."""
    v = kw(c, "dtype") or kw(c, "torch_dtype")
    found = s.origins(v) if v is not None else []
    return bool(found) and all(const(o) in ("float32", "float") or dotted(o) == "torch.float32" for o in found)


def pipeline_stays_on_cpu(s: Script) -> bool:
    """A pipeline given no device stays on the CPU only before transformers 4.47 (read in the wheels: 4.46.3 sets
    device=None to -1, with a warning since 4.42; 4.47.1 sets it to 0, cuda:0 when there is one, moving a CPU model
    handed to it), so only where the script's pins allow such a version (doctor-real-10 c08: labelled so, blind)."""
    return s.target.may_be_before((4, 47))


def _handed_to_pipeline(s: Script, c: ast.Call) -> ast.Call | None:
    """The pipeline (given no device) that this model is handed to: where a device= would place it."""
    for u in s.uses(c):
        k = s.parents.get(u)
        p = s.parents.get(k) if isinstance(k, ast.keyword) and k.arg == "model" else None
        if isinstance(p, ast.Call) and p in s.pipelines:
            return p
    return None


def model_on_cpu(s: Script):
    for c in s.loads:
        if left_on_cpu(s, c):
            name = next((dotted(u) for u in s.uses(c)), "the model")
            pipe = _handed_to_pipeline(s, c)
            if pipe is not None:  # said where the fix goes: the pipeline that could have placed it
                where = (
                    "the pinned transformers (before 4.47) runs it on the CPU"
                    if pipeline_stays_on_cpu(s)
                    else "before transformers 4.47 it runs on the CPU; 4.47+ moves it to cuda:0, in fp32 on 4.x when "
                    "no dtype was given"
                )
                yield pipe, f"`{name}` is handed to a pipeline with no device and never moved: {where}"
            else:
                yield (
                    c,
                    f"`{name}` is loaded without device_map and never moved: it runs on the CPU (seconds per token)",
                )


def _cpu_on_purpose(s: Script, model: str | None) -> bool:
    """A script that never mentions a GPU, on a model a CPU can run (no size in its id: gpt2, distilgpt2,
    opus-mt, bart-large...; or under 5B by its id or KNOWN_PARAMS; an id naming no size takes the size its
    tokenizer's checkpoint names), or in a file named as the CPU run (cpu_named): the CPU is the author's choice.
    Real scripts run that way on purpose (toy demos, data-preparation helpers); a 7B or an 8x7B is not."""
    if gpu_intent(s):
        return False
    n = params_in_id(model)
    if n is None:  # a fine-tune or a local folder: the tokenizer's checkpoint is its base, and names its size
        n = max((p for t in s.tokenizers if (p := params_in_id(s.model_id(t))) is not None), default=None)
    if data_set_job(s):  # a job over a whole data set is no toy demo: on a CPU it runs for hours, unless the model is
        return n is not None and n < CPU_SIZED  # known to be small (doctor-real-18 b12: BLIP-base over a folder)
    return n is None or n < CPU_WORKABLE or cpu_named(s)


def stays_on_cpu(s: Script, c: ast.Call) -> bool:
    """Never placed on an accelerator: not at the load, and no later move or hand-over to a device."""
    return not placed_at_load(s, c) and not any(moved(s, u) for u in s.uses(c))


def cpu_by_hand(s: Script, c: ast.Call) -> bool:
    """Placed on the CPU in so many words (device_map='cpu', `.to("cpu")`, `.to(device)` with device 'cpu') and
    never on an accelerator: fp32 is the precision the author runs there (doctor-real-8 w04)."""
    placed = placed_at_load(s, c, explicit_cpu=True) or any(moved(s, u, explicit_cpu=True) for u in s.uses(c))
    return placed and stays_on_cpu(s, c)


def cpu_by_choice(s: Script, c: ast.Call) -> bool:
    """A CPU-sized model in a script that never mentions a GPU, never placed on one: fp32 is the CPU's own
    precision there, so a missing dtype is the author's choice (as IT002's silence says)."""
    return stays_on_cpu(s, c) and _cpu_on_purpose(s, s.model_id(c))


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
        elif method(m) in PLACES and _not_cpu(s, m):
            return False
    return False
