"""Batch rules: padding on the wrong side for batched generation (IT024), a pipeline fed a list one item at a time
(IT028), padding asked of a tokenizer that has no pad token (IT037)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    ENCODER_DECODER,
    IGNORECASE,
    const,
    dotted,
    edits,
    id_name,
    kw,
    lazy_compile,
    method,
    receiver,
    task_of,
)
from infertune.doctor.rules.generation import pipe_of
from infertune.doctor.script import Script

# tokenizers whose checkpoints pad on the right unless told otherwise (GPT-2's BPE: GPT-2, OPT, GPT-Neo/J, Pythia,
# Phi, CodeGen, BLOOM, Falcon); others (Llama's, Qwen's...) vary by checkpoint, so only an explicit right is sure
RIGHT_BY_DEFAULT = lazy_compile(
    r"gpt2|distilgpt2|opt-\d|gpt-neo|gpt-j|pythia|phi-[12]|codegen|bloom|falcon", IGNORECASE
)


# tokenizers published with no pad token (GPT-2's and its descendants', Llama 2's and 3.x's, Mistral 7B's), by
# the id's last part: asking them to pad raises "Asking to pad but the tokenizer does not have a padding token"
NO_PAD_TOKEN = lazy_compile(
    r"(^|/)((distil)?gpt2(-medium|-large|-xl)?|dialogpt-(small|medium|large)|gpt-neo-[\d.]+[mb]|gpt-j-6b|"
    r"llama-2-\d+b(-chat)?-hf|(meta-)?llama-3(\.\d)?-\d+b(-instruct)?|mistral-7b(-instruct)?(-v0\.\d)?)$",
    IGNORECASE,
)
ENCODES = ("encode", "encode_plus", "batch_encode_plus")


def _padding_assignments(s: Script) -> list[tuple[ast.AST, str, object]]:
    """`x.<attr> = value` where attr is padding_side or a misspelling of it: (node, attr, value)."""
    out: list[tuple[ast.AST, str, object]] = []
    for n in s.nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and _like_padding_side(t.attr):
                    out.append((t, t.attr, const(n.value)))
    return out


def _like_padding_side(attr: str) -> bool:
    """padding_side, or a name a typo away from it (padding_size, pading_side, pad_side, padding_sides)."""
    a = attr.lower()
    return a.startswith("pad") and (a.endswith(("side", "sides", "size")) or edits(a, "padding_side") <= 2)


# str methods: their result is one text, never a batch
STR_METHODS = {"strip", "lstrip", "rstrip", "format", "lower", "upper", "replace", "join", "title", "capitalize"}


def _one_text(s: Script, node: ast.AST | None) -> bool:
    """The tokenizer's input is a single string, as far as this file shows (a literal, an f-string, a
    concatenation, a str method's result): padding=True then pads nothing, whatever the side."""
    found = s.origins(node) if node is not None else []
    return bool(found) and all(_text(o) or _str_parameter(s, o) for o in found)


def _str_parameter(s: Script, o: ast.AST) -> bool:
    """A name that is a parameter of its function annotated `str` (`async def generate(prompt: str)`)."""
    if not isinstance(o, ast.Name) or (fn := s.enclosing_function(o)) is None:
        return False
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return any(a.arg == o.id and dotted(a.annotation) == "str" for a in args if a.annotation is not None)


def _text(o: ast.AST) -> bool:
    if isinstance(o, ast.BinOp) and isinstance(o.op, (ast.Add, ast.Mod)):  # "a" + x, f"..." + x, "%s" % x
        return _text(o.left) or (isinstance(o.op, ast.Add) and _text(o.right))
    return (
        (isinstance(o, ast.Constant) and isinstance(o.value, str))
        or isinstance(o, ast.JoinedStr)
        or (isinstance(o, ast.Call) and isinstance(o.func, ast.Attribute) and o.func.attr in STR_METHODS)
    )


def _padding_calls(s: Script) -> list[ast.Call]:
    """Tokenizer calls that ask for padding (padding=True / 'longest' / 'max_length')."""
    return [
        c
        for c in s.calls
        if (s.is_tokenizer_call(c) or (method(c) in ENCODES and s.is_tokenizer(receiver(c))))
        and const(kw(c, "padding")) not in (None, False, "do_not_pad")
    ]


def _sets_pad_token(s: Script) -> bool:
    """The file gives a tokenizer a pad token somewhere (`tok.pad_token = tok.eos_token`, `pad_token=` at the
    load, `add_special_tokens({"pad_token": ...})`)."""
    return any(
        (isinstance(n, ast.Attribute) and n.attr in ("pad_token", "pad_token_id") and isinstance(n.ctx, ast.Store))
        or (isinstance(n, ast.keyword) and n.arg in ("pad_token", "pad_token_id"))
        or (isinstance(n, ast.Constant) and n.value == "pad_token")
        for n in s.nodes
    )


def _unpaddable(s: Script, c: ast.Call) -> str | None:
    """The id of the padless tokenizer this padding call uses, when every tokenizer it may be is one."""
    target = c.func if s.is_tokenizer_call(c) else receiver(c)
    ids = [s.model_id(t) for t in s.origins(target) if t in s.tokenizers]
    if ids and all(i and NO_PAD_TOKEN.search(i.rstrip("/")) for i in ids):
        return ids[0]
    return None


def pad_token_missing(s: Script):
    calls = _padding_calls(s)
    if not calls or _sets_pad_token(s):
        return
    for c in calls:
        name = _unpaddable(s, c)
        if name:
            yield (
                c,
                f"padding asked of the {name} tokenizer, which has no pad token: the call raises 'Asking to pad but "
                "the tokenizer does not have a padding token' (set tokenizer.pad_token = tokenizer.eos_token first)",
            )


def _batched_tokenizer_calls(s: Script) -> list[ast.Call]:
    """Tokenizer calls that pad a batch (padding=True / 'longest' / 'max_length'; not of one string) and whose ids
    reach generate on a decoder-only model of this file; not those that raise for want of a pad token (IT037)."""
    out = []
    padless = not _sets_pad_token(s)
    for c in _padding_calls(s):
        if not s.is_tokenizer_call(c):
            continue
        if padless and _unpaddable(s, c):
            continue
        if _one_text(s, c.args[0] if c.args else kw(c, "text")):
            continue
        gens = [g for g in s.sinks_of(c) if g in s.generates]
        models = [m for g in gens for m in s.models_of(receiver(g))]
        if models and not any(ENCODER_DECODER.search(s.model_class(m)) for m in models):
            out.append(c)
    return out


def right_padding_batch(s: Script):
    batched = _batched_tokenizer_calls(s)
    if not batched:
        return
    assigned = _padding_assignments(s)
    for node, attr, _ in assigned:
        if attr != "padding_side":
            yield (
                node,
                f"`{attr}` is not a tokenizer setting (padding_side is): the tokenizer keeps padding on its default "
                "side, the right for many decoder-only models, and batched generate then continues pad tokens",
            )
            return
    sides = [v for _, a, v in assigned if a == "padding_side"]
    sides += [const(kw(c, "padding_side")) for c in s.tokenizers]
    if "left" in sides:
        return
    rights = "right" in sides
    ids = [s.model_id(c) or "" for c in s.tokenizers]
    if rights or (ids and all(RIGHT_BY_DEFAULT.search(id_name(i)) for i in ids)):
        yield (
            batched[0],
            "a padded batch for a decoder-only model's generate with padding on the right: the shorter prompts "
            "end in pad tokens and their answers continue after them (set tokenizer.padding_side = 'left')",
        )


LIST_ANNOTATION = lazy_compile(r"^(typing\.)?(List|list|Sequence|Iterable)\[")


def _listy(s: Script, node: ast.AST) -> bool:
    """A list of inputs: a list literal or comprehension, a dataset column, KeyDataset(...), a parameter annotated
    as a list (`texts: List[str]`: doctor-real-8 v15, a service's predict_batch)."""
    fn = s.enclosing_function(node)
    if isinstance(node, ast.Name) and fn is not None:
        params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        if any(a.arg == node.id and a.annotation and LIST_ANNOTATION.search(ast.unparse(a.annotation)) for a in params):
            return True
    for o in s.origins(node):
        if isinstance(o, ast.List | ast.ListComp) and not (isinstance(o, ast.List) and len(o.elts) <= 1):
            return True
        if isinstance(o, ast.Call) and dotted(o.func).split(".")[-1] in ("KeyDataset", "load_dataset", "tolist"):
            return True
    return False


def _conversation(s: Script, node: ast.AST) -> bool:
    """A list of chat turns (`[{"role": "user", "content": ...}, ...]`): one input, not a batch (doctor-real-13 d09)."""
    return any(
        isinstance(o, ast.List)
        and o.elts
        and all(isinstance(e, ast.Dict) and any(const(k) == "role" for k in e.keys) for e in o.elts)
        for o in s.origins(node)
    )


def pipeline_list_unbatched(s: Script):
    for c in s.calls:
        pipe = pipe_of(s, c) if isinstance(c.func, ast.Name | ast.Attribute) else None
        if pipe is None or not c.args or kw(c, "batch_size") is not None or kw(pipe, "batch_size") is not None:
            continue
        if any(k.arg is None for k in c.keywords) or any(k.arg is None for k in pipe.keywords):
            continue
        device = kw(pipe, "device")
        on_gpu = kw(pipe, "device_map") is not None or (device is not None and const(device) not in ("cpu", -1))
        if on_gpu and _listy(s, c.args[0]) and not _conversation(s, c.args[0]):
            task = task_of(pipe) or "pipeline"
            yield (
                c,
                f"a {task} pipeline given a list with no batch_size runs the items one at a time on the GPU: "
                "pass batch_size= (8-64) to batch them",
            )
