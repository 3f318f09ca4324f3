"""Placement rules: where a model's weights run (IT002: a model left on the CPU), and the reading of placements
that the dtype, device and serving rules share: placed at the load, moved later, kept on the CPU by choice."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    MOVES,
    PLACES,
    callee,
    const,
    dotted,
    dtype_keywords,
    has_star_kwargs,
    kw,
    method,
    receiver,
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
from infertune.doctor.script import Script

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
        if attr.attr in PLACES and (explicit_cpu or not_cpu(s, call)):
            return True
        node = call
    return False


def not_cpu(s: Script, call: ast.Call) -> bool:
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
    while m is not None and method(m) in MOVES and not (method(m) in PLACES and (explicit_cpu or not_cpu(s, m))):
        m = s.called_method(m)  # model.half().cuda(), model.eval().to(device): the move further along the chain
        if m is None or method(m) not in MOVES:
            return False
    if m is not None:
        return method(m) in PLACES and (explicit_cpu or not_cpu(s, m))
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
