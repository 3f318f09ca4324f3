"""IT008: bitsandbytes 4-bit computing in fp32 (no compute dtype), or chosen for speed."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, has_star_kwargs, kw, lazy_compile
from infertune.doctor.script import Script

SPEED = lazy_compile(r"speed|fast|latency|throughput")  # a comment saying why bitsandbytes was chosen


def _bf16_inputs(s: Script, load: ast.Call) -> bool:
    """The load's other layers are bf16 (`dtype=torch.bfloat16`), or unsloth builds the config from its dtype: bnb's
    Linear4bit then computes in bf16, switching its compute dtype to its input's on the first forward when that input
    is bf16 or fp32 (`set_compute_type`, read in the bitsandbytes 0.41.1 to 0.45.0 wheels); fp16 inputs keep the fp32
    default (doctor-real-19 d09: unsloth's FastLanguageModel with dtype=torch.bfloat16)."""
    if dotted(load.func).split(".")[0] == "FastLanguageModel":
        return True
    values = [o for k in ("dtype", "torch_dtype") if (v := kw(load, k)) is not None for o in s.origins(v)]
    return bool(values) and all(dotted(o).endswith("bfloat16") or const(o) == "bfloat16" for o in values)


def _plain_4bit_requests(s: Script) -> list[ast.AST]:
    """4-bit asked for without a BitsAndBytesConfig: load_in_4bit=True on from_pretrained, or in a pipeline's
    model_kwargs dict (also as a plain quantization_config dict), with no compute dtype beside it (doctor-real-8
    y04: `bnb_4bit_compute_dtype=torch.float16` as a from_pretrained keyword next to load_in_4bit is read)."""
    out: list[ast.AST] = []
    for c in s.loads:
        v = kw(c, "load_in_4bit")
        given = kw(c, "quantization_config") is not None or kw(c, "bnb_4bit_compute_dtype") is not None
        if v is not None and const(v) is True and not given and not _bf16_inputs(s, c):
            out.append(v)  # (from_pretrained builds its BitsAndBytesConfig from bnb_* keywords beside load_in_4bit)
    for p in s.pipelines:
        mk = kw(p, "model_kwargs")
        for d in [o for o in s.origins(mk) if isinstance(o, ast.Dict)] if mk is not None else []:
            items = {const(k): v for k, v in zip(d.keys, d.values, strict=True)}
            qc = items.get("quantization_config")
            if isinstance(qc, ast.Dict):
                items = {const(k): v for k, v in zip(qc.keys, qc.values, strict=True)}
            four = items.get("load_in_4bit")
            if four is not None and const(four) is True and "bnb_4bit_compute_dtype" not in items:
                out.append(four)
    return out


def bnb_4bit(s: Script):
    for v in _plain_4bit_requests(s):
        yield v, "4-bit bitsandbytes asked for as load_in_4bit=True: its compute dtype stays fp32 (slow)"
    unused = _unused_configs(s)
    for c in s.calls_named("BitsAndBytesConfig"):
        if const(kw(c, "load_in_4bit")) is not True or has_star_kwargs(c) or c in unused:
            continue  # (a config never passed to the load beside it is IT056's finding)
        users = [load for load in s.loads if c in s.origins(kw(load, "quantization_config"))]
        if kw(c, "bnb_4bit_compute_dtype") is None and not (users and all(_bf16_inputs(s, u) for u in users)):
            yield c, "4-bit bitsandbytes without bnb_4bit_compute_dtype computes in fp32: slow"
        elif SPEED.search(s.comment_near(c.lineno)):
            yield (c, "bitsandbytes 4-bit chosen for speed: it saves memory but dequantizes every matmul (slower)")


# --- IT056: a quantization config built and never passed ---------------------------------------------------------

QUANT_CONFIGS = {"BitsAndBytesConfig", "GPTQConfig", "AwqConfig", "HqqConfig", "QuantoConfig", "TorchAoConfig"}


def _never_read(s: Script, config: ast.Call) -> bool:
    """The config is stored under a name (or attribute) that nothing in the file reads."""
    stmt = s.parents.get(config)
    if not isinstance(stmt, ast.Assign):
        return False
    names = {dotted(t) for t in stmt.targets if isinstance(t, ast.Name | ast.Attribute)}
    return bool(names) and not s.reads(names)


def _unquantized(s: Script, load: ast.Call) -> bool:
    return not has_star_kwargs(load) and not s.quantized(load) and s.model_class(load) != "PeftModel"


def _unused_configs(s: Script) -> dict[ast.Call, ast.Call]:
    """Each quantization config nothing reads, with the unquantized load of its scope it was meant for."""
    out = {}
    for q in s.calls:
        if callee(q) not in QUANT_CONFIGS or not _never_read(s, q):
            continue
        scope = s.enclosing_function(q)
        loads = [c for c in s.loads if s.enclosing_function(c) is scope and _unquantized(s, c)]
        load = next((c for c in loads if c.lineno > q.lineno), None) or next(iter(loads), None)
        if load is not None:
            out[q] = load
    return out


def unused_quantization_config(s: Script):
    """A BitsAndBytesConfig (or GPTQ, AWQ, HQQ, Quanto, torchao config) stored and never read, beside a model load
    without quantization_config: the model loads at full size, not quantized as the file means (doctor-real-4 f13,
    -24 a15: both labelled at the load)."""
    for q, load in _unused_configs(s).items():
        yield (
            load,
            f"the {callee(q)} built at line {q.lineno} is never passed (quantization_config=...): this model "
            "loads at full size, not quantized",
        )
