"""IT004 and IT013 through LangChain's `HuggingFacePipeline`, the LLM wrapper of a transformers pipeline.

IT004: langchain_huggingface's (and langchain_community's) wrapper returns the pipeline's `generated_text` as it
comes, cutting the prompt only when called with `skip_prompt=True` (read in
langchain_huggingface/llms/huggingface_pipeline.py, `_generate`); the pipeline's return_full_text defaults to True, so
each answer starts with the whole prompt (a RAG chain's: the retrieved context and the question). doctor-real-8 y06
and doctor-real-12 d07 were labelled so; doctor-real-10 d04's label says the wrapper strips the prompt, as the old
`langchain.llms` one did (it cut `len(prompt)` characters unless the pipeline returned new text only): imported from
there, silent. Silent too: a wrapper built and never used in the file, and a base model's completion demo
(doctor-real-8 y08: GPT-2 continuing a typed phrase, labelled fine).

IT013: the wrapper is an LLM, not a chat model: it hands the pipeline the prompt string as it is, in every version,
so a chat/instruct checkpoint gets raw text (a chain's own template included: RetrievalQA's "Use the following
pieces of context..."), unless `ChatHuggingFace` wraps it, or the file renders the template or writes its markers
(doctor-real-8 y06, TinyLlama-Chat; doctor-real-12 d05, Mistral-7B-Instruct under RetrievalQA: both labelled so).
LlamaIndex's `HuggingFaceLLM` is the same unless told otherwise: a query engine calls its `complete`, which sends
`completion_to_prompt(query_wrapper_prompt)`, the identity of the text by default; `is_chat_model=True`, or either
of those two given, is the author's format (doctor-real-13 d01, TinyLlama-Chat under a query engine, labelled so)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, id_name, kw, method, receiver, task_of
from infertune.doctor.rules.completions import completion_demo
from infertune.doctor.rules.outputs import prompt_removed
from infertune.doctor.rules.prompts import CHAT_MARKERS, CHAT_MODEL, adapter_loaded
from infertune.doctor.script import Script

WRAPPER = "HuggingFacePipeline"
ECHOING = ("langchain_huggingface", "langchain_community")  # (the old langchain.llms cut the prompt)
CALLS = {"invoke", "predict", "__call__", "generate", "batch", "ainvoke"}


def _imported_from(s: Script, packages: tuple[str, ...] | None = None) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and (packages is None or (n.module or "").split(".")[0] in packages)
        and any(a.name == WRAPPER for a in n.names)
        for n in s.nodes
    )


def _full_text(options: ast.expr | None) -> bool:
    """No return_full_text=False among a dict literal of pipeline options (None: none given)."""
    if options is None:
        return True
    if not isinstance(options, ast.Dict) or any(k is None for k in options.keys):
        return False  # options the file does not spell out
    pairs = zip(options.keys, options.values, strict=True)
    return not any(const(k) == "return_full_text" and const(v) is not True for k, v in pairs)


def _text_wrappers(s: Script) -> list[tuple[ast.Call, str | None, bool]]:
    """(wrapper, model id, returns the full text) for each HuggingFacePipeline of a text-generation pipeline:
    `HuggingFacePipeline(pipeline=p)` and `HuggingFacePipeline.from_model_id(task="text-generation", ...)`."""
    out = []
    for c in s.calls:
        if callee(c) == WRAPPER or dotted(c.func) == WRAPPER:
            p = kw(c, "pipeline")
            pipe = next((o for o in s.origins(p) if o in s.pipelines), None) if p is not None else None
            if (
                pipe is not None
                and task_of(pipe) == "text-generation"
                and not any(k.arg is None for k in pipe.keywords)
            ):
                full = const(kw(pipe, "return_full_text")) in (None, True)
                out.append((c, s.pipeline_model_id(pipe), full))
        elif (
            method(c) == "from_model_id"
            and dotted(c.func).startswith(WRAPPER)
            and const(kw(c, "task")) == "text-generation"
        ):
            model = kw(c, "model_id")
            ids = s.id_strings(model) if model is not None else []
            out.append((c, ids[0] if ids else None, _full_text(kw(c, "pipeline_kwargs"))))
    return out


def _handed_on(s: Script, wrapper: ast.Call) -> ast.AST | None:
    """Where the wrapper goes into a chain: an argument (`RetrievalQA.from_chain_type(llm=llm)`) or `prompt | llm`."""
    names = s.flow_names(wrapper)
    for n in s.nodes:
        if isinstance(n, ast.Call) and n is not wrapper:
            if any(dotted(a) in names for a in [*n.args, *(k.value for k in n.keywords)]):
                return n
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr) and dotted(n.right) in names:
            return n
    return None


def _invocations(s: Script, wrapper: ast.Call) -> list[ast.Call]:
    """Calls made on the wrapper's name (`llm.invoke(prompt)`, `llm(prompt)`)."""
    names = s.flow_names(wrapper)
    return [
        c
        for c in s.calls
        if (method(c) in CALLS and dotted(receiver(c)) in names)
        or (isinstance(c.func, ast.Name) and c.func.id in names)
    ]


def _chat_wrapped(s: Script) -> bool:
    return bool(s.calls_named("ChatHuggingFace"))


def wrapped_full_text(s: Script):
    if not _imported_from(s, ECHOING) or _chat_wrapped(s):
        return
    if any(isinstance(n, ast.keyword) and n.arg == "skip_prompt" for n in s.nodes):
        return
    for w, _, full in _text_wrappers(s):
        calls = _invocations(s, w)
        if not full or (calls and all(prompt_removed(s, c) or completion_demo(s, c, c.args[:1]) for c in calls)):
            continue  # (cut afterwards; or a base model's completion demo: prompt and continuation is its output)
        if not (calls or _handed_on(s, w)):
            continue  # (a wrapper built and never used here: its caller is elsewhere)
        yield (
            (calls or [w])[0],
            "LangChain's HuggingFacePipeline returns the text-generation pipeline's whole text, prompt first "
            "(return_full_text defaults to True; it cuts the prompt only when called with skip_prompt=True): pass "
            "return_full_text=False to the pipeline",
        )


LLAMA_INDEX_FORMAT = {"is_chat_model", "completion_to_prompt", "query_wrapper_prompt", "messages_to_prompt"}


def _llama_index_raw(s: Script):
    """LlamaIndex's HuggingFaceLLM of a chat model (by `model_name=`, or `model=` a load of the file) with no format."""
    for c in s.calls_named("HuggingFaceLLM"):
        if any(k.arg is None or k.arg in LLAMA_INDEX_FORMAT for k in c.keywords):
            continue
        given = kw(c, "model_name")
        ids = s.id_strings(given) if given is not None else []
        if not ids and (m := kw(c, "model")) is not None:
            ids = [i for load in s.models_of(m) if (i := s.model_id(load))]
        model = next((i for i in ids if CHAT_MODEL.search(id_name(i))), None)
        if model is not None:
            yield (
                c,
                f"{model} is a chat model, but LlamaIndex's HuggingFaceLLM sends it the prompt as raw text (no "
                "chat template): pass is_chat_model=True, or completion_to_prompt= in its format",
            )


def wrapped_raw_text(s: Script):
    if s.calls_method("apply_chat_template") or adapter_loaded(s):
        return
    if any(CHAT_MARKERS.search(n.value) for n in s.nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)):
        return  # the template written by hand (IT003's concern)
    yield from _llama_index_raw(s)
    if not _imported_from(s) or _chat_wrapped(s):
        return
    for w, model, _ in _text_wrappers(s):
        if not model or not CHAT_MODEL.search(id_name(model)):
            continue
        where = next(iter(_invocations(s, w)), None) or _handed_on(s, w)
        if where is not None:
            yield (
                where,
                f"{model} is a chat model, but LangChain's HuggingFacePipeline hands it the prompt as raw text "
                "(no chat template): wrap it in ChatHuggingFace(llm=...) and send messages",
            )
