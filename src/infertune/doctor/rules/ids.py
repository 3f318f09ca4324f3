"""IT046: a model id the Hub cannot resolve, by its shape: a GGUF file name given as the repository (the file goes to
gguf_file=), a GGUF-only repository (`...-GGUF`) loaded with no gguf_file=, a revision glued to it with '@', or an
organisation one slip away from the publisher's
(`meta/llama-3.2-1b` for meta-llama's). The load fails before anything runs (doctor-real-1 b18, labelled
`other:invalid-model-id`).

IT049: an Auto class with no mapping for the checkpoint's architecture: a T5-family checkpoint through
AutoModelForCausalLM (T5 has no causal-LM class), or a decoder-only one through AutoModelForSeq2SeqLM (none of them
is in the seq2seq mapping; both read in transformers' modeling_auto). from_pretrained raises "Unrecognized
configuration class" (doctor-real-13 d03: Flan-T5 through AutoModelForCausalLM, labelled `other:wrong-auto-class`)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, dotted, id_name, kw, lazy_compile
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
    if name.lower().endswith("-gguf") and not any(kw(load, k) is not None for k in ("gguf_file", "model_file")):
        return (  # (doctor-real-23 a02: TheBloke's TinyLlama GGUF export behind a Flask route)
            f"{model} is a repository of GGUF files only (no safetensors, no tokenizer files): from_pretrained "
            "fails without gguf_file=<one of its .gguf files>; or load the original repository"
        )
    if "@" in name:  # (doctor-real-15 c15: "jinaai/jina-embeddings-v3@<hash>")
        repo, _, rev = name.partition("@")
        return (
            f"{model}: a revision glued to the id with '@' is not parsed by from_pretrained (the Hub rejects the id): "
            f"pass {org}/{repo} with revision={rev!r}"
        )
    if org.lower() in WRONG_ORG:
        right = WRONG_ORG[org.lower()]
        return f"{model}: the publisher's organisation is {right}, not {org}: the load fails (no such repository)"
    return None


def invalid_model_id(s: Script):
    """One finding per id, at the string that spells it (where the fix goes), else at the load."""
    if s.imports("ctransformers"):
        return  # (its AutoModelForCausalLM reads GGUF repositories with model_file=: another library's ids)
    seen: set[str] = set()
    for c in [*s.loads, *s.tokenizers, *s.pipelines]:
        model = s.pipeline_model_id(c) if c in s.pipelines else s.model_id(c)
        if model is None or model in seen or (message := _problem(model, c)) is None:
            continue
        seen.add(model)
        arg = s.weights_arg(c)
        spelt = next((n for n, text in s.strings(arg) if text == model), None) if arg is not None else None
        yield spelt or c, message


T5_FAMILY = lazy_compile(r"(^|[-_])(flan-|m|um|by)?t5([-_]|$)|^(flan-)?ul2$|^t0(pp|_3b)?$", IGNORECASE)
DECODER_ONLY = lazy_compile(
    r"^((distil)?gpt2|gpt-neo|gpt-j|pythia|opt-|bloom|falcon|llama|meta-llama|tinyllama|mistral|mixtral|qwen|"
    r"phi-|gemma|smollm|deepseek|starcoder|codegen|olmo)",
    IGNORECASE,
)


def _in_branch(s: Script, c: ast.Call) -> bool:
    """The load sits in one branch of an `if`/`elif`: the file picks the class per model (doctor-real-25 d11, a
    T5 branch that only an id other than the default reaches)."""
    node: ast.AST = c
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, ast.If | ast.IfExp) and "__name__" not in {dotted(n) for n in ast.walk(node.test)}:
            return True  # (not the main guard: what it holds runs for every id)
    return False


def wrong_auto_class(s: Script):
    for c in s.loads:
        cls, model = s.model_class(c), s.model_id(c)
        name = id_name(model)
        if not model or model.startswith((".", "/", "~")) or _in_branch(s, c):
            continue
        if cls == "AutoModelForCausalLM" and T5_FAMILY.search(name):
            yield (
                c,
                f"{model} is a T5 encoder-decoder: AutoModelForCausalLM has no class for it and from_pretrained raises",
            )
        elif cls == "AutoModelForSeq2SeqLM" and DECODER_ONLY.search(name):
            yield c, f"{model} is decoder-only: AutoModelForSeq2SeqLM has no class for it and from_pretrained raises"
