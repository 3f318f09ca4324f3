"""IT025: the BOS token twice (chat-template text tokenized again with special tokens, or written by hand)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.checkpoint import chat_template
from infertune.doctor.nodes import const, kw, method, receiver
from infertune.doctor.rules.prompts import BOS_IN_TEMPLATE, BOS_TEXT
from infertune.doctor.script import Script

# --- IT025: BOS twice ------------------------------------------------------------------------------------------


def _writes_bos(model: str | None) -> bool:
    """Its template writes BOS: read from the checkpoint when it is here, else known by the id."""
    text = chat_template(model)
    if text is not None:
        return "bos_token" in text
    return bool(model and BOS_IN_TEMPLATE.search(model))


def _templated_text(s: Script, value: ast.AST | None, depth: int = 0) -> ast.Call | None:
    """The apply_chat_template(..., tokenize=False) call a value's text comes from: directly, as an item of a list
    (`tok([text])`, a comprehension over prompts), or as what a helper of the file returns."""
    if value is None or depth > 4:
        return None
    for o in s.origins(value):
        if isinstance(o, ast.Call) and method(o) == "apply_chat_template":
            if const(kw(o, "tokenize")) is False:
                return o
            continue
        items = (
            o.elts if isinstance(o, ast.List) else [o.elt] if isinstance(o, (ast.ListComp, ast.GeneratorExp)) else []
        )
        if isinstance(o, ast.Call):
            items = [r.value for fn in s.defined(o) for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value]
        for item in items:
            if (found := _templated_text(s, item, depth + 1)) is not None:
                return found
    return None


ENCODES = {"encode", "encode_plus", "batch_encode_plus"}
# a text-generation pipeline tokenizes a string with add_special_tokens=False before 4.43, with the tokenizer's
# default (BOS added) since (read in the 4.42.4 and 4.43.4 wheels' TextGenerationPipeline.preprocess; doctor-real-15
# d07, pinned to 4.38, labelled so)
PIPELINE_BOS = (4, 43)


def _leading_text(s: Script, value: ast.AST | None, depth: int = 0) -> str | None:
    """How a text value starts, when the file says: a literal, an f-string's first part, a concatenation's left."""
    if value is None or depth > 4:
        return None
    for o in s.origins(value):
        if isinstance(o, ast.Constant) and isinstance(o.value, str):
            return o.value
        if isinstance(o, ast.JoinedStr) and o.values:
            return _leading_text(s, o.values[0], depth + 1)
        if isinstance(o, ast.BinOp) and isinstance(o.op, ast.Add):
            return _leading_text(s, o.left, depth + 1)
    return None


def double_bos(s: Script):
    ids = s.model_ids()
    model = next((m for m in ids if _writes_bos(m)), None)
    adds_bos = next((m for m in ids if BOS_IN_TEMPLATE.search(m)), None)  # its tokenizer adds BOS itself
    if model is None and adds_bos is None:
        return
    for c in s.calls:
        encodes = method(c) in ENCODES and s.is_tokenizer(receiver(c))
        if not (s.is_tokenizer_call(c) or s.is_pipeline_call(c) or encodes) or not c.args:
            continue
        if const(kw(c, "add_special_tokens")) is False:
            continue
        if s.is_pipeline_call(c) and s.target.may_be_before(PIPELINE_BOS):
            continue  # the pinned transformers' pipeline tokenizes text without special tokens
        if model is not None and _templated_text(s, c.args[0]) is not None:
            yield (
                c,
                f"{model}'s chat template already writes the BOS token into the text; tokenizing that text again "
                "adds a second one (the model sees <bos><bos>)",
            )
        elif adds_bos is not None:
            lead = (_leading_text(s, c.args[0]) or "").lstrip()
            if lead.startswith(BOS_TEXT):
                yield (
                    c,
                    f"the text starts with {next(b for b in BOS_TEXT if lead.startswith(b))} written by hand and "
                    f"{adds_bos}'s tokenizer adds its own BOS: the model sees two (pass add_special_tokens=False, "
                    "or drop it from the text)",
                )
