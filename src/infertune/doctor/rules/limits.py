"""IT034: a summarization pipeline on a model with fixed positions, given a text of unknown length untruncated."""

from __future__ import annotations

import ast
import re

from infertune.doctor.nodes import const, has_star_kwargs, kw, lazy_compile
from infertune.doctor.rules.generation import pipe_of, task_of
from infertune.doctor.rules.prompts import pipeline_model_id
from infertune.doctor.script import Script

# encoders with a table of learnt positions (BART, DistilBART, mBART, Pegasus: 1024; LED is not one): a longer input
# indexes past the table and the call fails. T5's relative positions take any length, so T5s are not here.
FIXED_POSITIONS = lazy_compile(r"(^|[-_/])(distil)?m?bart|pegasus(?!-x)", re.I)
SUMMARIZATION_DEFAULT = "sshleifer/distilbart-cnn-12-6"  # what pipeline("summarization") loads without a model


def _sized(s: Script, text: ast.AST) -> bool:
    """The text is a literal, cut to a length ([:N]), or a chunk of a longer one (a name that says so)."""
    origins = s.origins(text)
    if origins and all(isinstance(o, ast.Constant) for o in origins):
        return True
    if any(isinstance(o, ast.Subscript) and isinstance(o.slice, ast.Slice) for o in [text, *origins]):
        return True
    return any(w in ast.unparse(text).lower() for w in ("chunk", "piece", "part", "segment", "batch"))


def summarization_untruncated(s: Script):
    for c in s.calls:
        if not isinstance(c.func, (ast.Name, ast.Attribute)) or (p := pipe_of(s, c)) is None:
            continue
        if task_of(p) != "summarization" or not c.args or has_star_kwargs(c) or has_star_kwargs(p):
            continue
        model = pipeline_model_id(s, p) if kw(p, "model") or len(p.args) > 1 else SUMMARIZATION_DEFAULT
        if not model or not FIXED_POSITIONS.search(model.rstrip("/").rsplit("/", 1)[-1]):
            continue
        if any(const(kw(x, "truncation")) not in (None, False) for x in (c, p)) or kw(p, "tokenizer_kwargs"):
            continue
        if not _sized(s, c.args[0]):
            yield (
                c,
                f"{model} reads at most 1024 tokens and this text's length is not bounded: a longer one makes "
                "the summarization pipeline fail (index out of range); pass truncation=True or summarize it in chunks",
            )
