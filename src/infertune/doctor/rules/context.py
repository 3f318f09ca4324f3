"""What a script says about where it means to run and how large its model is: a GPU named in the code, a parameter
count in a model id, a data set looped over. Read by the placement rules (IT001, IT002, IT011, IT031)."""

from __future__ import annotations

import os

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    PLACES,
    callee,
    const,
    dotted,
    id_name,
    kw,
    lazy_compile,
    method,
    parameter_of,
    receiver,
)
from infertune.doctor.script import Script

# a parameter count in a model id: "Llama-2-7b", "Mixtral-8x7B", "Qwen2.5-0.5B-Instruct", "nllb-200-distilled-600M"
PARAMS_IN_ID = lazy_compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", IGNORECASE)
CPU_SIZED = 2e9  # below this a CPU generates at a usable pace (tens of tokens/s for a few hundred M parameters)
# below this a model left on the CPU in a script that never names a GPU is a choice: fp32 weights fit a 16-32 GB
# machine and it answers at a few tokens/s (Phi-2 2.7B, Phi-3-mini 3.8B, NLLB 3.3B, GPT-NeoX-Japanese 2.7B: each
# labelled so in doctor-real-4 and -5); every such load labelled a problem was 7B or more
CPU_WORKABLE = 5e9
TIMERS = {"time.time", "time.perf_counter", "time.monotonic", "perf_counter", "timeit.default_timer"}
# Calls that take a model and place it themselves (or may): a model handed to one is not "left on the CPU".
PLACERS = {
    "Trainer",
    "SFTTrainer",
    "DPOTrainer",
    "prepare",
    "prepare_model",
    "dispatch_model",
    "DataParallel",
    "load_checkpoint_and_dispatch",
    "DistributedDataParallel",
    "init_inference",
    "cpu_offload",
    "optimize",
    "ipex_optimize",
    "FSDP",
    "wrap",
    "to_bettertransformer",
}
# well-known checkpoints whose ids name no size, by the id's last part: their parameter counts (model cards)
KNOWN_PARAMS = {
    "starcoder": 15.5e9,
    "starcoderbase": 15.5e9,
    "starcoderplus": 15.5e9,
    "bloom": 176e9,
    "phi-1": 1.3e9,
    "phi-1_5": 1.4e9,
    "phi-2": 2.7e9,
    "phi-4": 14.7e9,
    "flan-ul2": 20e9,
    # flagship MoE releases named without a size (their model cards: 671B, 236B, 15.7B total parameters)
    "deepseek-v3": 671e9,
    "deepseek-v3-base": 671e9,
    "deepseek-v3-0324": 671e9,
    "deepseek-r1": 671e9,
    "deepseek-r1-zero": 671e9,
    "deepseek-v2": 236e9,
    "deepseek-v2-chat": 236e9,
    "deepseek-v2.5": 236e9,
    "deepseek-v2-lite": 15.7e9,
    "deepseek-v2-lite-chat": 15.7e9,
    "t0pp": 11e9,
    "blip-image-captioning-base": 247e6,
    "blip-image-captioning-large": 470e6,
    # small encoders, whose autograd graph for one request is negligible (IT030)
    "all-minilm-l6-v2": 22.7e6,
    "all-minilm-l12-v2": 33.4e6,
    "paraphrase-minilm-l6-v2": 22.7e6,
    "bert-tiny": 4.4e6,
    "bert-mini": 11.3e6,
    "bert-small": 29.1e6,
}
TINY = 50e6  # parameters: below this a forward pass's activations are a few MB
PHI3 = lazy_compile(r"phi-3(\.5)?-(mini|small|medium)", IGNORECASE)
DATA_SETS = {"read_csv", "read_json", "read_parquet", "read_excel", "read_table", "load_dataset", "load_from_disk"}
GPU_INTENT = lazy_compile(r"\bcuda\b|\bmps\b|\.cuda\(|torch\.cuda|\bgpu\b", IGNORECASE)


def gpu_intent(s: Script) -> bool:
    """The code (not its comments nor its docstrings: "no GPU needed", "switch to a GPU for throughput" are no
    intent; doctor-real-28 b01, a CPU-only job whose docstrings say how to use a GPU) names CUDA, MPS or a GPU.
    Read once per script."""
    if "_gpu_intent" not in s.__dict__:
        prose = {
            i
            for n in s.nodes
            if isinstance(n, ast.Expr) and isinstance(const(n.value), str)
            for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)
        }
        s.__dict__["_gpu_intent"] = any(
            GPU_INTENT.search(line.split("#", 1)[0]) for i, line in enumerate(s.lines, 1) if i not in prose
        )
    return s.__dict__["_gpu_intent"]


def cpu_named(s: Script) -> bool:
    """The file's own name starts or ends with the word cpu (`run_qwen_cpu.py`, `cpu-infer.py`): it is the CPU run
    of a project that has others (doctor-real-20 b02 and doctor-real-18 b01, a 7B chat model run so, labelled fine).
    Read with string operations: the doctor's start-up path does not import `re`."""
    stem = os.path.splitext(os.path.basename(s.path))[0].lower()
    parts = stem.replace("-", "_").replace(".", "_").split("_")
    return "cpu" in (parts[0], parts[-1])


def params_in_id(model: str | None) -> float | None:
    """Parameters as a model id names them (the largest count it writes), else as KNOWN_PARAMS knows the id (and
    Phi-3's mini/small/medium: 3.8B, 7B, 14B), or None."""
    counts = [
        (int(m.group(1) or 1)) * float(m.group(2)) * (1e9 if m.group(3).lower() == "b" else 1e6)
        for m in PARAMS_IN_ID.finditer(model or "")
    ]
    if counts:
        return max(counts)
    last = id_name(model).lower()
    if (m := PHI3.search(last)) is not None:
        return {"mini": 3.8e9, "small": 7e9, "medium": 14e9}[m.group(2).lower()]
    return KNOWN_PARAMS.get(last)


LOOPING_METHODS = {"map", "apply", "progress_apply", "progress_map", "iterrows", "itertuples"}


FOLDER_LISTINGS = {"listdir", "glob", "iglob", "rglob", "iterdir", "walk", "scandir"}


def data_set_job(s: Script) -> bool:
    """A data set is loaded and looped over (a for, a comprehension, .map/.apply): not one sample taken with
    next(iter(ds)) or ds[0] (doctor-real-3 e13: one streamed clip through Whisper, labelled fine on a CPU). Also a
    for over a folder's files (os.listdir, glob, Path.iterdir) whose body generates (doctor-real-6 s06: 5,000
    ImageNet images captioned by BLIP-2 on the CPU)."""
    for n in s.nodes:
        listed = isinstance(n, ast.For) and any(
            isinstance(x, ast.Call) and method(x) in FOLDER_LISTINGS for x in ast.walk(n.iter)
        )
        if listed and any(g in s.generates or s.is_pipeline_call(g) for g in ast.walk(n) if isinstance(g, ast.Call)):
            return True
    for c in s.calls:
        if callee(c) not in DATA_SETS:
            continue
        names = s.flow_names(c)
        for n in s.nodes:
            it = n.iter if isinstance(n, ast.For | ast.comprehension) else None
            if it is not None and any(dotted(x) in names for x in ast.walk(it)):
                return True
            over = receiver(n) if isinstance(n, ast.Call) and method(n) in LOOPING_METHODS else None
            if over is not None and any(dotted(x) in names for x in ast.walk(over)):
                return True
    return False


# the hooks a framework calls with a prompt it rendered itself: LangChain's custom-LLM methods
FRAMEWORK_HOOKS = {"_call", "_acall", "_stream", "_astream", "_generate", "_agenerate"}


def framework_prompt(s: Script, text: ast.AST) -> bool:
    """The text is a parameter of a LangChain custom LLM's `_call` (or `_stream`, ...): the chain renders the prompt,
    template included, in another file (doctor-real-11 b10: Llama-3.1 and Qwen2 wrappers a labelling chain calls)."""
    fn = s.enclosing_function(text)
    if fn is None or fn.name not in FRAMEWORK_HOOKS or not isinstance(text, ast.Name):
        return False
    cls = s.parents.get(fn)
    return (
        isinstance(cls, ast.ClassDef)
        and any(dotted(b).split(".")[-1].endswith("LLM") for b in cls.bases)
        and text.id in {a.arg for a in fn.args.args}
    )


def branch_values(s: Script, node: ast.AST) -> set[object] | None:
    """The literal values a name can hold where it is read, after the tests on it around the read: in the `else:` of
    `if device == "cuda": ... elif device == "mps": ...` only "cpu" is left (alpaca-lora's generate.py, doctor-real-14
    d15). None where some value it may hold is not a literal."""
    values = {const(o) for o in s.origins(node)}
    if not values or None in values:
        return None
    name, child = dotted(node), node
    while (parent := s.parents.get(child)) is not None:
        if (
            isinstance(parent, ast.If)
            and isinstance(test := parent.test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq | ast.NotEq)
            and dotted(test.left) == name
            and isinstance(value := const(test.comparators[0]), str)
        ):
            inside = any(child is b for b in parent.body) == isinstance(test.ops[0], ast.Eq)
            values = values & {value} if inside else values - {value}
        child = parent
    return values


def map_on_cpu(s: Script, dm: ast.expr) -> bool:
    """device_map="cpu", or {"": device} where the tests around the load leave device only "cpu"."""
    places = dm.values if isinstance(dm, ast.Dict) else [dm]
    return bool(places) and all(const(p) == "cpu" or branch_values(s, p) == {"cpu"} for p in places)


def cpu_loads(s: Script, model: ast.AST | None) -> list[ast.Call]:
    """The loads this model value may come from that a device_map puts on the CPU (alpaca-lora's `else:` branch,
    `device_map={"": device}` where only "cpu" is left)."""
    models = s.models_of(model) if model is not None else []
    return [m for m in models if (dm := kw(m, "device_map")) is not None and map_on_cpu(s, dm)]


def helper_places(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, arg: ast.AST) -> bool:
    """Does this file's helper, called with the model as `arg`, place it: a `.to()`/`.cuda()` on that parameter (or
    a name or attribute bound from it), or the parameter handed to a placer, a pipeline or another helper? A move
    of something else in it (`input_ids.to(device)`) is not one (doctor-real-17 b14: the CPU branch's model handed
    to an evaluate() that moves only the inputs). Where the parameter is unknown, any move in it counts."""
    calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call)]
    param = parameter_of(fn, call, arg)
    if param is None:
        return any(method(c) in PLACES or callee(c) in PLACERS for c in calls)
    aliases = {param}
    for _ in range(2):  # m = model; self.model = m
        for a in ast.walk(fn):
            if isinstance(a, ast.Assign) and any(dotted(x) in aliases for x in ast.walk(a.value)):
                aliases |= {dotted(t) for t in a.targets} - {""}
    for c in calls:
        if method(c) in PLACES and (r := receiver(c)) is not None and any(dotted(x) in aliases for x in ast.walk(r)):
            return True
        handed = [a for a in [*c.args, *(k.value for k in c.keywords)] if dotted(a) in aliases]
        if handed and (callee(c) in PLACERS or callee(c) == "pipeline" or s.defined(c)):
            return True
    return False


def speed_test_only(s: Script) -> bool:
    """A speed test that never reads what it generates: the file times generate (a clock, CUDA events) and decodes
    nothing, runs no pipeline and no streamer. The prompt's format changes no figure it reports, so the prompt-format
    rules leave it alone (doctor-real-18 b05: Llama-2-70b-chat greeted in plain text, only latencies printed)."""
    if not s.generates or s.pipelines:
        return False
    if any(method(c) in ("decode", "batch_decode") or "Streamer" in callee(c) for c in s.calls):
        return False
    return any(dotted(c.func) in TIMERS or method(c) == "elapsed_time" for c in s.calls)
