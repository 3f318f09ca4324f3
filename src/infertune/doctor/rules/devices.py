"""Rules about where the weights live and what that device can compute: fp16 on a CPU (IT031), a masked GPU
named by its old index (IT032); a pipeline named by a large model id with no device (IT002's second half). Inputs
on another device than the model's (IT016) are rules/inputs.py's."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, kw, lazy_compile, method, pipeline_model, receiver, task_of
from infertune.doctor.rules.context import CPU_SIZED, CPU_WORKABLE, cpu_loads, cpu_named, gpu_intent, params_in_id
from infertune.doctor.rules.loading import pipeline_typed
from infertune.doctor.rules.placement import pipeline_stays_on_cpu, stays_on_cpu
from infertune.doctor.script import Script

FP16 = {"torch.float16", "torch.half", "float16", "fp16", "half"}


def _fp16(s: Script, value: ast.AST | None) -> bool:
    """The dtype is half precision whatever runs (a literal, not `float16 if cuda else float32`)."""
    found = s.origins(value) if value is not None else []
    return bool(found) and all(dotted(o) in FP16 or const(o) in FP16 for o in found)


def _fp16_with_cuda(s: Script, value: ast.AST | None) -> bool:
    """Half precision whenever CUDA is there (`float16 if torch.cuda.is_available() else float32`): on a CUDA
    machine these are fp16 weights, wherever the model then goes."""
    found = s.origins(value) if value is not None else []
    return any(
        isinstance(n, ast.IfExp)
        and any("cuda" in dotted(x) for x in ast.walk(n.test) if isinstance(x, ast.Name | ast.Attribute))
        and any(o is n.body for o in found)
        and (dotted(n.body) in FP16 or const(n.body) in FP16)
        for n in s.nodes
    )


def _fp16_without_cuda(s: Script, value: ast.AST | None) -> bool:
    """Half precision exactly when there is no CUDA (`bfloat16 if torch.cuda.is_available() else float16`): the
    branch that runs on a machine without a GPU, where the weights can only be on the CPU (doctor-real-27 d06)."""
    found = s.origins(value) if value is not None else []
    for n in s.nodes:
        if not isinstance(n, ast.IfExp) or not any(o in (n.body, n.orelse) for o in found):
            continue
        names = [dotted(x) for x in ast.walk(n.test) if isinstance(x, ast.Name | ast.Attribute)]
        if not any("cuda" in x and x.endswith(("is_available", "device_count")) for x in names):
            continue  # (a test of bf16 support, `is_bf16_supported()`, runs on a GPU: doctor-real-28 d03)
        negated = isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not)
        cpu_branch = n.body if negated else n.orelse
        if any(o is cpu_branch for o in found) and (dotted(cpu_branch) in FP16 or const(cpu_branch) in FP16):
            return True
    return False


def _on_cpu(c: ast.Call) -> bool:
    return const(kw(c, "device_map")) == "cpu" or const(kw(c, "device")) in ("cpu", -1)


def _cpu_fallback(s: Script, c: ast.Call) -> bool:
    """Placed (`device_map=device`, `.to(device)`) on a device that is a GPU or, without one, the CPU (doctor-real-6
    r09, -18 b11, -19 b06: fp16 loads with that fallback, labelled problems)."""
    moves = [m for u in [c, *s.uses(c)] if (m := s.called_method(u)) is not None and method(m) == "to" and m.args]
    places = [kw(c, "device_map"), *(m.args[0] for m in moves)]
    for p in places:
        values = {const(o) for o in s.origins(p)} if p is not None else set()
        if "cpu" in values and any(isinstance(v, str) and v.startswith(("cuda", "mps")) for v in values):
            return True
    return False


def fp16_on_cpu(s: Script):
    gpu = gpu_intent(s)
    for c in [*s.loads, *s.pipelines]:
        value = kw(c, "dtype") or kw(c, "torch_dtype")
        if c in s.loads and not s.uses(c) and not s.generates and not s.pipelines:
            continue  # loaded only to fill the cache (doctor-real-9 m10): nothing runs on the CPU
        if _fp16(s, value) and (_on_cpu(c) or (not gpu and c in s.loads and stays_on_cpu(s, c))):
            yield (
                value or c,
                "float16 weights on a CPU: most CPUs have no fp16 arithmetic (emulated, often slower than fp32, "
                "some ops unsupported); on a CPU use bfloat16 (AVX512-BF16/AMX) or float32",
            )
        elif c in s.loads and _fp16(s, value) and _cpu_fallback(s, c):
            yield (
                value,
                "float16 weights whatever the device: where there is no GPU the script falls back to the CPU "
                "('cuda' if torch.cuda.is_available() else 'cpu') and runs them there (emulated, slow, some ops "
                "missing); choose the dtype with the device",
            )
        elif c in s.loads and _fp16_without_cuda(s, value):
            yield (
                value,
                "float16 exactly when there is no CUDA: on a machine without a GPU the weights can only be on the "
                "CPU, which has no fp16 arithmetic (emulated, slow, some ops missing); use float32 (or bfloat16) there",
            )
        elif c in s.loads and _fp16_with_cuda(s, value) and stays_on_cpu(s, c):
            yield (
                value or c,
                "float16 whenever CUDA is there, but the model is never moved to the GPU: on a CUDA machine the "
                "fp16 weights run on the CPU (emulated, slow); move the model to the device the dtype was chosen for",
            )
    for m in s.calls:
        if method(m) == "half" and not m.args and cpu_loads(s, receiver(m)):
            yield (
                m,
                "`.half()` on a model the script's CPU path loads: fp16 weights on a CPU (no fp16 matmul before "
                "PyTorch 2.1, emulated and slow after); cast only on the GPU path",
            )


# --- IT032: CUDA_VISIBLE_DEVICES=<id>, then cuda:<id> --------------------------------------------------------


def _visible_devices(s: Script) -> list[tuple[ast.AST, str]]:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = "3"` (or setdefault / putenv): (node, the single id)."""
    out = []
    for n in s.nodes:
        value = None
        if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Subscript) and const(t.slice) == "CUDA_VISIBLE_DEVICES" for t in n.targets
        ):
            value = n.value
        elif (
            isinstance(n, ast.Call)
            and callee(n) in ("setdefault", "putenv")
            and len(n.args) > 1
            and const(n.args[0]) == "CUDA_VISIBLE_DEVICES"
        ):
            value = n.args[1]
        v = const(value) if value is not None else None
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if isinstance(v, str) and v.strip().isdigit():
            out.append((n, v.strip()))
    return out


CUDA_INDEX = lazy_compile(r"cuda:(\d+)")


def _device_index(node: ast.AST) -> str | None:
    """The CUDA index a device value names: "cuda:3", torch.device("cuda", 3), .cuda(3), device=3."""
    v = const(node)
    if isinstance(v, str) and (m := CUDA_INDEX.fullmatch(v.strip())):
        return m.group(1)
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(node, ast.Call) and dotted(node.func) == "torch.device" and len(node.args) == 2:
        i = const(node.args[1])
        return str(i) if const(node.args[0]) == "cuda" and isinstance(i, int) else None
    return None


def _placements(s: Script) -> list[ast.AST]:
    """Values that name a device: .to(x) / .cuda(x), torch.device(...), device= and device_map= (a dict's values)."""
    out: list[ast.AST] = []
    for c in s.calls:
        if method(c) in ("to", "cuda") and c.args:
            out.append(c.args[0])
        if dotted(c.func) == "torch.device":
            out.append(c if len(c.args) == 2 else (c.args[0] if c.args else c))
        if (d := kw(c, "device")) is not None:
            out.append(d)
        if isinstance(dm := kw(c, "device_map"), ast.Dict):
            out += dm.values
        elif dm is not None:
            out.append(dm)
    return out


def visible_devices_index(s: Script):
    masked = _visible_devices(s)
    if len({i for _, i in masked}) != 1 or masked[0][1] == "0":
        return
    index = masked[0][1]
    for p in _placements(s):
        named = next((o for o in s.origins(p) if _device_index(o) == index), None)
        if named is not None:
            yield (
                named if hasattr(named, "lineno") else p,  # the literal that names the old index
                f"CUDA_VISIBLE_DEVICES={index} leaves one GPU visible, numbered 0 in this process: cuda:{index} does "
                "not exist here (invalid device ordinal); use cuda:0",
            )
            return


# --- IT002 for pipelines named by id -------------------------------------------------------------------------------

PIPELINE_PLACES = ("device", "device_map")  # (a pipeline's keywords; nodes.PLACES are move methods)
QUANTIZED = ("quantization_config", "load_in_4bit", "load_in_8bit")  # bitsandbytes places the weights on the GPU


def _places(s: Script, p: ast.Call) -> bool:
    """The pipeline is told where to run: device=/device_map= (also in model_kwargs), or **kwargs it cannot read."""
    if any(kw(p, k) is not None for k in (*PIPELINE_PLACES, *QUANTIZED)) or any(k.arg is None for k in p.keywords):
        return True
    mk = kw(p, "model_kwargs")
    return mk is not None and (
        not isinstance(mk, ast.Dict) or any(const(k) in (*PIPELINE_PLACES, *QUANTIZED) or k is None for k in mk.keys)
    )


def pipeline_on_cpu(s: Script):
    """A generative pipeline given a model id (not a loaded model: IT002 reads those at their load) that names 2B
    parameters or more, with no device: before transformers 4.47 it loads and runs on the CPU (doctor-real-3 e31: a
    Llama-2-7B chat pipeline behind Gradio); 4.47+ takes cuda:0, where 4.x loads it in fp32 if no dtype is given.
    So where the pins allow 4.47+, only a pipeline given neither device nor dtype is reported, once, naming both
    outcomes (doctor-real-10 d02, doctor-real-11 d13: labelled as the CPU run). In a script that never names a GPU,
    5B or more (a smaller one there is a choice, as for IT002's loads); an id that names no size says nothing."""
    if s.trains:
        return
    for p in s.pipelines:
        m = pipeline_model(p)
        if m is None or s.models_of(m) or task_of(p) not in GENERATIVE_TASKS or _places(s, p):
            continue
        typed = pipeline_typed(s, p)
        if typed and not pipeline_stays_on_cpu(s):
            continue
        model = s.pipeline_model_id(p)
        n = params_in_id(model)
        if model and n is not None and n >= (CPU_SIZED if gpu_intent(s) else CPU_WORKABLE) and not cpu_named(s):
            where = (
                "the pinned transformers (before 4.47) loads and runs it on the CPU (seconds per token)"
                if pipeline_stays_on_cpu(s)
                else "before transformers 4.47 it loads and runs on the CPU (seconds per token); 4.47+ puts it on "
                "cuda:0, in fp32 on 4.x (twice the memory)"
            )
            yield (
                p,
                f"a pipeline of {model} with no device{'' if typed else ' and no dtype'}: {where}; pass "
                + ("device_map='auto'" + ("" if typed else " and dtype='auto'")),
            )


GENERATIVE_TASKS = ("text-generation", "text2text-generation", "image-text-to-text", "summarization", None)
