"""Rules about a model's own forward pass run for inference: autograd left on (IT030), embeddings mean-pooled over
padding (IT026)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, callee, const, dotted, id_name, kw, lazy_compile
from infertune.doctor.rules.context import TINY, params_in_id
from infertune.doctor.script import Script

NO_GRAD = {"no_grad", "inference_mode", "set_grad_enabled", "enable_grad"}
TRAINS = lazy_compile(
    r"\.backward\(|optimizer|\.train\(\)|\bloss\s*=|Trainer\(|requires_grad|autograd\.grad", IGNORECASE
)


def forward_calls(s: Script) -> list[tuple[ast.Call, ast.Call]]:
    """`model(...)` / `model.forward(...)` on a model loaded in this file: (call, the load). Computed once per script
    (IT030 reads them, and IT023 for every load in a function)."""
    if "_forward_calls" in s.__dict__:
        return s.__dict__["_forward_calls"]
    out: list[tuple[ast.Call, ast.Call]] = []
    s.__dict__["_forward_calls"] = out
    for c in s.calls:
        f = c.func
        target = f.value if isinstance(f, ast.Attribute) and f.attr == "forward" else f
        if not isinstance(target, ast.Name | ast.Attribute) or s.is_tokenizer(target):
            continue
        loads = s.models_of(target)
        if loads and (c.args or c.keywords) and not s.defined(c):  # (a function of the file named `model`)
            out.append((c, loads[0]))
    return out


LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)


def _enclosing(s: Script, c: ast.Call) -> ast.AST | None:
    """The nearest loop or function around the call; None for a call at module level outside any loop."""
    node: ast.AST = c
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, (*LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return node
    return None


def _one_off(s: Script, c: ast.Call) -> bool:
    """A single pass at module level (no function, no loop): a snippet that runs the model once, or a Streamlit
    page that runs it once per interaction. What autograd keeps for one pass is freed with its output and costs
    nothing that matters (doctor-real-3 e03, e12, e37; doctor-real-5 q17; doctor-real-6 r07, s15: all labelled so,
    blind). In a function (a request handler, a helper) or a loop the pass repeats, and the graphs with it
    (doctor-real-1 a16, doctor-real-3 e34, doctor-real-5 q10, q22: labelled problems)."""
    return _enclosing(s, c) is None


# a base-size checkpoint by its id (bert-base, roberta-base, MiniLM, DistilBERT, t5-small): ~20-170M parameters
BASE_SIZED = lazy_compile(r"(^|[-_/])(base|small|mini|tiny)([-_]|$)|minilm|distil", IGNORECASE)
LARGE = lazy_compile(r"large|(^|[-_])xx?l([-_]|$)|\d+(\.\d+)?b([-_]|$)", IGNORECASE)
BASE_PARAMS = 200e6


def _base_sized(model: str | None) -> bool:
    n = params_in_id(model)
    if n is not None:
        return n <= BASE_PARAMS
    name = id_name(model)
    return bool(BASE_SIZED.search(name)) and not LARGE.search(name)


def _in_loop(s: Script, c: ast.Call) -> bool:
    """A loop around the call inside its own function (or at module level): the pass repeats there."""
    return isinstance(_enclosing(s, c), LOOPS)


def _grad_off(s: Script, node: ast.AST, depth: int = 0) -> bool:
    """Inside `with torch.no_grad()` / `inference_mode()`, or a function decorated with them; or in a function
    whose every call in the file is (one level up), or in a module's own `forward` (`self(x)` calls it, and its
    caller picks the grad mode: doctor-real-5 q13, whose evaluate and predict wrap it in no_grad)."""
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and depth < 2:
            if node.name == "forward" and isinstance(s.parents.get(node), ast.ClassDef):
                return True
            callers = [c for c in s.calls if callee(c) == node.name and c not in ast.walk(node)]
            if callers and all(_grad_off(s, c, depth + 1) for c in callers):
                return True
        if isinstance(node, ast.With | ast.AsyncWith) and any(
            isinstance(i.context_expr, ast.Call) and callee(i.context_expr) in NO_GRAD for i in node.items
        ):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] in NO_GRAD for d in node.decorator_list
        ):
            return True
    return False


def no_grad_missing(s: Script):
    if (
        s.trains
        or TRAINS.search(s.source)
        or any(
            callee(c) == "set_grad_enabled"
            and const(c.args[0] if c.args else None) is False
            and isinstance(s.parents.get(c), ast.Expr)
            for c in s.calls
        )
    ):
        return  # training (gradients wanted), or autograd switched off for the whole script
    for c, load in forward_calls(s):
        if (params_in_id(s.model_id(load)) or TINY) < TINY:
            continue  # a 4M-33M encoder: one request's graph is a few MB (doctor-real-6 r10, doctor-real-9 n03)
        if _base_sized(s.model_id(load)) and not _in_loop(s, c):
            continue  # one pass of a base-size model per call (doctor-real-11 c12, doctor-real-13 a08, a09)
        if not _grad_off(s, c) and not _one_off(s, c):
            yield (
                c,
                "a forward pass for inference with autograd on: every activation is kept for a backward pass that "
                "never comes (more memory, slower); wrap it in `with torch.inference_mode():`",
            )


# embedding checkpoints trained with CLS pooling: their first token is the sentence vector
CLS_POOLED = lazy_compile(r"bge-|gte-(?!.*qwen)|e5-.*-v2-cls|snowflake-arctic-embed", IGNORECASE)


def _mean_over_tokens(s: Script, c: ast.Call) -> ast.AST | None:
    """`x.mean(dim=1)` / `torch.mean(x, dim=1)` / `x.mean(1)` / `x.mean(axis=1)` (or dim 0 of one text's states): x."""
    if not (isinstance(c.func, ast.Attribute) and c.func.attr == "mean"):
        return None
    if dotted(c.func) == "torch.mean":
        x, rest = (c.args[0] if c.args else None), c.args[1:]
    else:
        x, rest = c.func.value, c.args
    dim = const(kw(c, "dim") or kw(c, "axis") or (rest[0] if rest else None))
    return x if dim == 1 or (dim == 0 and _one_text(s, x)) else None


def _one_text(s: Script, x: ast.AST | None) -> bool:
    """`h = out.last_hidden_state[0]`: one text's token states, whose axis 0 is the tokens (doctor-real-11 c14)."""
    return any(
        isinstance(o, ast.Subscript) and isinstance(const(o.slice), int) for o in [x, *s.origins(x)] if o is not None
    )


# sentence-transformers checkpoints trained with mean pooling (their modules.json pools by mean; E5 averages too):
# their first token's state was never trained as the sentence vector (doctor-real-5 q10, doctor-real-13 a11:
# all-MiniLM-L6-v2's [CLS] state taken, labelled other:cls-pooling-on-mean-pooled-model)
MEAN_POOLED = lazy_compile(
    r"^(all-(minilm|mpnet|distilroberta)|paraphrase-|multi-qa-|msmarco-(minilm|distilbert)|e5-(small|base|large))",
    IGNORECASE,
)


def _first_token(node: ast.AST) -> bool:
    """`h[:, 0]` / `h[:, 0, :]` of the token states: the first ([CLS]) token's vector of each text."""
    if not isinstance(node, ast.Subscript):
        return False
    states, index = ast.unparse(node.value), node.slice
    return (
        ("hidden" in states or states.endswith("[0]"))
        and isinstance(index, ast.Tuple)
        and len(index.elts) >= 2
        and isinstance(index.elts[0], ast.Slice)
        and const(index.elts[1]) == 0
    )


def mean_pool_padding(s: Script):
    ids = [s.model_id(c) or "" for c in s.loads + s.tokenizers]
    if mean_model := next((i for i in ids if MEAN_POOLED.search(id_name(i))), None):
        for n in s.nodes:
            if _first_token(n):
                yield (
                    n,
                    f"{mean_model} is trained with mean pooling: its first token's state is no sentence vector "
                    "(average the token states, weighted by attention_mask)",
                )
                break
    ids = [s.model_id(c) or "" for c in s.loads + s.tokenizers]
    cls_model = next((i for i in ids if CLS_POOLED.search(id_name(i))), None)
    padded = any(s.is_tokenizer_call(c) and const(kw(c, "padding")) not in (None, False) for c in s.calls)
    for c in s.calls:
        x = _mean_over_tokens(s, c)
        if x is None or "mask" in ast.unparse(x).lower():
            continue
        if "hidden" not in " ".join(ast.unparse(o) for o in [x, *s.origins(x)] if isinstance(o, ast.AST)):
            continue  # (the token states, by name or where the name was bound: `emb = out.last_hidden_state`)
        if cls_model:
            yield (
                c,
                f"{cls_model} is trained with CLS pooling (its first token's vector): a mean over tokens is "
                "off its embedding space",
            )
        elif padded:
            yield (
                c,
                "mean over every token of a padded batch: the pad positions are averaged in, so a sentence's vector "
                "depends on the longest one beside it (weight by attention_mask)",
            )
