"""IT046: a model id the Hub cannot resolve, by its shape: a GGUF file name given as the repository (the file goes to
gguf_file=), or an organisation one slip away from the publisher's (`meta/llama-3.2-1b` for meta-llama's). The load
fails before anything runs (doctor-real-1 b18, labelled `other:invalid-model-id`)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import kw
from infertune.doctor.rules.prompts import pipeline_model_id
from infertune.doctor.script import Script

# organisations a script means and misspells: the short forms people write for the publishers' own
WRONG_ORG = {"meta": "meta-llama", "mistral": "mistralai", "deepseek": "deepseek-ai", "qwenlm": "Qwen"}


def _problem(model: str, load: ast.Call) -> str | None:
    org, _, name = model.partition("/")
    if not name or model.startswith((".", "/", "~")) or org.count(".") or "\\" in model:
        return None  # a path, not a Hub id
    if name.lower().endswith(".gguf") and kw(load, "gguf_file") is None:
        return (
            f"{model} names a GGUF file, not a repository: the load fails; pass the repository as the id and the "
            "file as gguf_file="
        )
    if org.lower() in WRONG_ORG:
        right = WRONG_ORG[org.lower()]
        return f"{model}: the publisher's organisation is {right}, not {org}: the load fails (no such repository)"
    return None


def invalid_model_id(s: Script):
    """One finding per id, at the string that spells it (where the fix goes), else at the load."""
    seen: set[str] = set()
    for c in [*s.loads, *s.tokenizers, *s.pipelines]:
        model = pipeline_model_id(s, c) if c in s.pipelines else s.model_id(c)
        if model is None or model in seen or (message := _problem(model, c)) is None:
            continue
        seen.add(model)
        arg = s.weights_arg(c)
        spelt = next((n for n, text in s.strings(arg) if text == model), None) if arg is not None else None
        yield spelt or c, message
