"""IT020: a model placed by device_map (accelerate's hooks) or quantized, then moved or cast by hand."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, kw, method, receiver
from infertune.doctor.rules.context import cpu_loads
from infertune.doctor.script import Script

DISPATCH_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def _bnb(s: Script, c: ast.Call) -> bool:
    if any(const(kw(c, k)) is True for k in ("load_in_4bit", "load_in_8bit")):
        return True
    q = kw(c, "quantization_config")
    return q is not None and any(isinstance(o, ast.Call) and callee(o) == "BitsAndBytesConfig" for o in s.origins(q))


def is_cast(m: ast.Call) -> bool:
    """.half()/.float()/.bfloat16(), or .to(<a dtype>)."""
    if method(m) in ("half", "float", "bfloat16"):
        return True
    args = list(m.args) + [k.value for k in m.keywords if k.arg == "dtype"]
    return method(m) == "to" and any(
        "dtype" in dotted(a) or (isinstance(const(a), str) and ("float" in const(a) or "int" in const(a))) for a in args
    )


def _dispatched(c: ast.Call) -> bool:
    dm = kw(c, "device_map")
    return dm is not None and (
        const(dm) in DISPATCH_MAPS or (isinstance(dm, ast.Dict) and len({const(v) for v in dm.values}) > 1)
    )  # {"": 0} is one device: no hooks


def cast_after_dispatch(s: Script, c: ast.Call) -> bool:
    """`from_pretrained(..., device_map="auto").half()`: IT020's finding on the cast (one problem, one finding)."""
    node: ast.AST = c
    casts = []
    while isinstance(dot := s.parents.get(node), ast.Attribute) and isinstance(call := s.parents.get(dot), ast.Call):
        casts.append(call)
        node = call
    casts += [m for u in s.uses(c) if (m := s.called_method(u)) is not None]
    return _dispatched(c) and any(is_cast(m) for m in casts)


def move_dispatched(s: Script):
    for c in s.loads:
        dm = kw(c, "device_map")
        dispatched = _dispatched(c)
        bnb, quantized = _bnb(s, c), s.quantized(c) and kw(c, "gguf_file") is None  # GGUF loads dequantized
        if not (dispatched or quantized):
            continue
        node: ast.AST = c
        chain: list[ast.Call] = []
        while isinstance(dot := s.parents.get(node), ast.Attribute) and isinstance(
            call := s.parents.get(dot), ast.Call
        ):
            chain.append(call)
            node = call
        moves = chain + [m for u in s.uses(c) if (m := s.called_method(u)) is not None]
        for m in moves:
            attr = method(m)
            if attr not in ("to", "cuda", "half", "float", "bfloat16"):
                continue
            if attr == "half" and cpu_loads(s, receiver(m)):
                continue  # the cast also meets the CPU path's model: IT031's finding (one problem, one finding)
            if quantized and is_cast(m) and attr != "bfloat16":
                yield (
                    m,
                    (
                        f"`.{attr}()` casts a quantized model: transformers raises (load it with the dtype you "
                        "want instead)"
                    ),
                )
            elif dispatched:
                yield (
                    m,
                    (
                        f"`.{attr}()` on a model placed by device_map={const(dm) or '{...}'!r}: accelerate's hooks "
                        "already placed every layer; moving or casting it breaks offloaded layers or does nothing"
                    ),
                )
            elif bnb and attr in ("to", "cuda"):
                yield (
                    m,
                    (
                        f"`.{attr}()` on a bitsandbytes model: it is already on the GPU; transformers 4.x refuses "
                        "it (5.x needs bitsandbytes>=0.48 for 8-bit)"
                    ),
                )
