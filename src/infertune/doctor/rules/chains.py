"""IT004 through LangChain: a text-generation pipeline wrapped in langchain_huggingface's (or langchain_community's)
HuggingFacePipeline. Its `_generate` returns the pipeline's `generated_text` as it comes, cutting the prompt only when
the call passes `skip_prompt=True` (read in langchain_huggingface/llms/huggingface_pipeline.py); the pipeline's
return_full_text defaults to True, so each answer starts with the whole prompt (a RAG chain's: the retrieved
context and the question). doctor-real-8 y06 and doctor-real-12 d07 were labelled so; doctor-real-10 d04's label says
the wrapper strips the prompt, as the old `langchain.llms` one did (it cut `len(prompt)` characters unless the
pipeline returned new text only): imported from there, silent. Silent too: a wrapper built and never used in the
file, and a base model's completion demo (doctor-real-8 y08: GPT-2 continuing a typed phrase, labelled fine)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, kw, method, receiver, task_of
from infertune.doctor.rules.outputs import completion_demo, prompt_removed
from infertune.doctor.script import Script

WRAPPER = "HuggingFacePipeline"
ECHOING = ("langchain_huggingface", "langchain_community")  # (the old langchain.llms cut the prompt)
CALLS = {"invoke", "predict", "__call__", "generate", "batch", "ainvoke"}


def _imported_from_echoing(s: Script) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and (n.module or "").split(".")[0] in ECHOING
        and any(a.name == WRAPPER for a in n.names)
        for n in s.nodes
    )


def _full_text(options: ast.expr | None) -> bool:
    """No return_full_text=False among a dict literal of pipeline options (None: none given)."""
    if options is None:
        return True
    if not isinstance(options, ast.Dict) or any(k is None for k in options.keys):
        return False  # options the file does not spell out
    return not any(
        const(k) == "return_full_text" and const(v) is not True
        for k, v in zip(options.keys, options.values, strict=True)
    )


def _wrapped_text_pipelines(s: Script) -> list[ast.Call]:
    """HuggingFacePipeline(pipeline=p) of a text-generation pipeline p left at return_full_text's default, and
    HuggingFacePipeline.from_model_id(task="text-generation", ...) with no return_full_text=False."""
    out = []
    for c in s.calls:
        if callee(c) == WRAPPER or dotted(c.func) == WRAPPER:
            p = kw(c, "pipeline")
            pipe = next((o for o in s.origins(p) if o in s.pipelines), None) if p is not None else None
            if (
                pipe is not None
                and task_of(pipe) == "text-generation"
                and not any(k.arg is None for k in pipe.keywords)
                and const(kw(pipe, "return_full_text")) in (None, True)
            ):
                out.append(c)
        elif (
            method(c) == "from_model_id"
            and dotted(c.func).startswith(WRAPPER)
            and const(kw(c, "task")) == "text-generation"
            and _full_text(kw(c, "pipeline_kwargs"))
        ):
            out.append(c)
    return out


def _handed_on(s: Script, wrapper: ast.Call) -> bool:
    """The wrapper goes into a chain: an argument (`RetrievalQA.from_chain_type(llm=llm)`) or `prompt | llm`."""
    names = s.flow_names(wrapper)
    return any(
        (isinstance(n, ast.keyword) and dotted(n.value) in names)
        or (isinstance(n, ast.Call) and any(dotted(a) in names for a in n.args))
        or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr) and dotted(n.right) in names)
        for n in s.nodes
    )


def _invocations(s: Script, wrapper: ast.Call) -> list[ast.Call]:
    """Calls made on the wrapper's name (`llm.invoke(prompt)`, `llm(prompt)`)."""
    names = s.flow_names(wrapper)
    return [
        c
        for c in s.calls
        if (method(c) in CALLS and dotted(receiver(c)) in names)
        or (isinstance(c.func, ast.Name) and c.func.id in names)
    ]


def wrapped_full_text(s: Script):
    if (
        not _imported_from_echoing(s)
        or any(isinstance(n, ast.keyword) and n.arg == "skip_prompt" for n in s.nodes)
        or s.calls_named("ChatHuggingFace")
    ):
        return
    for w in _wrapped_text_pipelines(s):
        calls = _invocations(s, w)
        if calls and all(prompt_removed(s, c) or completion_demo(s, c, c.args[:1]) for c in calls):
            continue  # (cut afterwards; or a base model's completion demo: prompt and continuation is its output)
        if not (calls or _handed_on(s, w)):
            continue  # (a wrapper built and never used here: its caller is elsewhere)
        yield (
            (calls or [w])[0],
            "LangChain's HuggingFacePipeline returns the text-generation pipeline's whole text, prompt first "
            "(return_full_text defaults to True; it cuts the prompt only when called with skip_prompt=True): pass "
            "return_full_text=False to the pipeline",
        )
