"""IT016: a model and its inputs on different devices (tokenized inputs left on the CPU for a model on the GPU, or
moved to a GPU the model may not be on)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import MOVES, PLACES, callee, const, dotted, has_star_kwargs, kw, method, receiver
from infertune.doctor.rules.placement import moved, placed_at_load, stays_on_cpu
from infertune.doctor.script import Script


def _placed(s: Script, node, depth: int = 0) -> bool:
    """Was this value (tokenized inputs) moved to a device somewhere along its way?"""
    if depth > 8 or node is None:
        return False
    if isinstance(node, ast.Call) and method(node) in PLACES:
        return True
    if isinstance(node, ast.Call) and method(node) in MOVES | {"items", "values"}:
        return _placed(s, receiver(node), depth + 1)
    if isinstance(node, (ast.DictComp, ast.Dict, ast.ListComp)):
        return any(isinstance(c, ast.Call) and method(c) in PLACES for c in ast.walk(node))
    if isinstance(node, (ast.Subscript, ast.Attribute)) and _placed(s, node.value, depth + 1):
        return True
    if isinstance(node, ast.Call) and s.defined(node):
        return any(isinstance(c, ast.Call) and method(c) in PLACES for fn in s.defined(node) for c in ast.walk(fn))
    name = dotted(node)
    if name and isinstance(node, (ast.Name, ast.Attribute)):
        if any(method(c) in PLACES and dotted(receiver(c)) == name for c in s.calls):
            return True  # inputs.to(device) as a statement: BatchEncoding.to moves in place
        if any(
            isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Subscript) and dotted(t.value) == name for t in a.targets)
            and any(isinstance(c, ast.Call) and method(c) in PLACES for c in ast.walk(a.value))
            for a in s.nodes
        ):
            return True  # for k in inputs: inputs[k] = inputs[k].to(device)
        return any(_placed(s, v, depth + 1) for v in s.assigns.get(name, []) if not isinstance(v, type(None)))
    return False


def _unplaced_tensors(s: Script, node) -> ast.Call | None:
    """The tokenizer call that made these tensors, when they never left the CPU."""
    base = node
    while isinstance(base, (ast.Subscript, ast.Attribute)) and not _placed(s, base):
        base = base.value
    if _placed(s, node) or _placed(s, base):
        return None
    for o in s.origins(base):
        while isinstance(o, (ast.Attribute, ast.Subscript)):  # tok(...).input_ids, tok(...)["input_ids"]
            o = o.value
        if (
            isinstance(o, ast.Call)
            and (s.is_tokenizer_call(o) or method(o) in ("apply_chat_template", "encode"))
            and const(kw(o, "return_tensors")) == "pt"
            and not _placed(s, o)
        ):
            return o
    return None


def _cuda_literal(s: Script, node: ast.AST) -> ast.Call | None:
    """`x.cuda()` / `x.to("cuda")` / `x.to("cuda:0")` inside this argument: the move, when it names CUDA for sure."""
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and (
            (method(c) == "cuda" and not c.args)
            or (method(c) == "to" and c.args and str(const(c.args[0]) or "").startswith("cuda"))
        ):
            return c
    if not isinstance(node, ast.Name | ast.Attribute):
        return None
    # what was assigned (`ids = tok(...).input_ids.cuda()`: origins see through the move), then where it came from
    for o in [*s.assigns.get(dotted(node), []), *s.origins(node)]:
        if isinstance(o, ast.AST) and o is not node and (hit := _cuda_literal(s, o)) is not None:
            return hit
    return None


def _may_name_accelerator(s: Script, value: ast.AST) -> bool:
    """A device value that may be a GPU or Apple's: "cuda"/"mps" among what it may hold, or torch.device("mps")."""
    for o in [value, *s.origins(value)]:
        if isinstance(o, ast.Call) and dotted(o.func) == "torch.device" and o.args:
            o = o.args[0]
        if str(const(o) or "").startswith(("cuda", "mps")):
            return True
    return False


def _accelerator_move(s: Script, node: ast.AST) -> ast.Call | None:
    """`x.to(device)` inside this argument (or where it was assigned) with a device that may be an accelerator."""
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and method(c) == "to" and c.args and _may_name_accelerator(s, c.args[0]):
            return c
    if isinstance(node, ast.Name | ast.Attribute):
        for o in s.assigns.get(dotted(node), []):
            if isinstance(o, ast.AST) and (hit := _accelerator_move(s, o)) is not None:
                return hit
    return None


def _placed_maybe_cpu(s: Script, model: ast.Call) -> bool:
    """Placed with a device chosen at run time that may be the CPU (`"cuda" if available else "cpu"`)."""
    if kw(model, "device_map") is not None or has_star_kwargs(model) or s.placed_by_quantization(model):
        return False
    node: ast.AST = model
    moves: list[ast.Call] = []  # from_pretrained(...).eval().to(device), then model.to(device) later
    while isinstance(attr := s.parents.get(node), ast.Attribute) and isinstance(call := s.parents.get(attr), ast.Call):
        moves.append(call)
        node = call
    moves += [m for u in s.uses(model) if (m := s.called_method(u)) is not None]
    places = [m for m in moves if method(m) in PLACES]
    return (
        bool(places)
        and all(method(m) == "to" and m.args for m in places)
        and all(_may_be_cpu(s, m.args[0]) for m in places)
    )


def _may_be_cpu(s: Script, device: ast.AST, depth: int = 0) -> bool:
    """A device value one of whose origins is "cpu", through `torch.device(...)` (doctor-real-3 e04:
    `torch.device("cuda" if torch.cuda.is_available() else "cpu")`)."""
    for o in s.origins(device):
        if const(o) == "cpu":
            return True
        if (
            isinstance(o, ast.Call)
            and callee(o) == "device"
            and o.args
            and depth < 2
            and _may_be_cpu(s, o.args[0], depth + 1)
        ):
            return True
    return False


def inputs_device(s: Script):
    if any(callee(c) == "set_default_device" for c in s.calls):
        return
    unmoved: set[int] = set()  # models whose inputs were reported going to an accelerator (one problem each)
    for g in s.generates:
        models = s.models_of(receiver(g))
        args = list(g.args[:1]) + [k.value for k in g.keywords if k.arg in (None, "input_ids", "inputs")]
        if models and all(_placed_maybe_cpu(s, m) for m in models):
            hit = next((h for a in args if (h := _cuda_literal(s, a)) is not None), None)
            if hit is not None:
                yield (
                    hit,
                    "inputs moved to CUDA unconditionally while the model's device is chosen at run time and may be "
                    "the CPU: without a GPU this raises a device mismatch; move them with .to(model.device)",
                )
                continue
        if models and all(m in s.loads and stays_on_cpu(s, m) for m in models):
            hit = next((h for a in args if (h := _accelerator_move(s, a)) is not None), None)
            if hit is not None and not {id(m) for m in models} <= unmoved:  # (doctor-real-28 b09: its move commented)
                unmoved.update(id(m) for m in models)
                yield (
                    hit,
                    "inputs moved to the accelerator the script picks while the model is never moved from the CPU: "
                    "generate raises a device mismatch there; move the model too, or the inputs to model.device",
                )
                continue
        models = s.models_of(receiver(g))
        if not models or not all(placed_at_load(s, m) or any(moved(s, u) for u in s.uses(m)) for m in models):
            continue
        if any(const(kw(m, "device_map")) in ("cpu", None) and kw(m, "device_map") is not None for m in models):
            continue
        args = list(g.args[:1]) + [k.value for k in g.keywords if k.arg in (None, "input_ids", "inputs")]
        for a in args:
            tok = _unplaced_tensors(s, a)
            if tok is not None:
                yield (
                    tok,
                    (
                        "inputs stay on the CPU while the model is on the GPU: transformers 4.x raises a device "
                        "mismatch; 5.x copies them to the GPU on every step"
                    ),
                )
                break
