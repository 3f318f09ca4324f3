"""IT018: a chat prompt that never opens the assistant's turn (apply_chat_template without
add_generation_prompt=True), where the checkpoint's template reads the flag."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.checkpoint import chat_template
from infertune.doctor.nodes import IGNORECASE, callee, const, kw, lazy_compile, method, receiver
from infertune.doctor.script import Script

# chat templates that never read add_generation_prompt: the user turn ends with [/INST], itself the cue for the
# reply (Llama 2 chat, Mistral/Mixtral Instruct, CodeLlama Instruct), by id when the template is not here
INST_TEMPLATE = lazy_compile(
    r"llama-2-\d+b-chat|mistral-7b-instruct|mixtral-8x\d+b-instruct|codellama-\d+b-instruct", IGNORECASE
)


def _flag_ignored(s: Script) -> bool:
    """Every checkpoint's template ignores add_generation_prompt (read when it is here, else known by id)."""
    ids = s.model_ids()
    for i in ids:
        text = chat_template(i)
        if (text is not None and "add_generation_prompt" in text) or (text is None and not INST_TEMPLATE.search(i)):
            return False
    return bool(ids)


def _keys(s: Script, node: ast.AST | None) -> list[str]:
    """The string keys a value was looked up by on its way (`models["Llama-2-7b-chat-hf"]["tokenizer"]`): a
    registry of models by id names the checkpoint (doctor-real-10 a08, a service's routes, one per model)."""
    out = []
    for o in [node, *s.origins(node)] if node is not None else []:
        while isinstance(o, ast.Subscript | ast.Attribute):
            if isinstance(o, ast.Subscript) and isinstance(k := const(o.slice), str):
                out.append(k)
            o = o.value
    return out


def _opened_by_hand(s: Script, c: ast.Call) -> bool:
    """The templated text is stored and then extended with the assistant's turn by hand (`prompt +=
    "<|assistant|>\n"`, doctor-real-24 d05): the turn is open."""
    stmt = s.parents.get(c)
    names = {t.id for t in stmt.targets if isinstance(t, ast.Name)} if isinstance(stmt, ast.Assign) else set()
    return any(
        isinstance(n, ast.AugAssign)
        and isinstance(n.target, ast.Name)
        and n.target.id in names
        and any(isinstance(x, ast.Constant) and "assistant" in str(x.value).lower() for x in ast.walk(n.value))
        for n in s.nodes
    )


def no_generation_prompt(s: Script):
    if s.trains or _flag_ignored(s):
        return  # (doctor-real-5 q21: Mistral v0.1's template, labelled so)
    for c in s.calls_method("apply_chat_template"):
        if any(INST_TEMPLATE.search(k) for k in _keys(s, receiver(c))):
            continue
        agp, cont = kw(c, "add_generation_prompt"), kw(c, "continue_final_message")
        if (agp is not None and const(agp) is not False) or (cont is not None and const(cont) is not False):
            continue
        if any(k.arg is None for k in c.keywords) or _opened_by_hand(s, c):
            continue
        sinks = s.sinks_of(c)
        runs = {*s.generates, *s.thread_generates}  # Thread(target=model.generate, kwargs=...) too
        if any(x in runs or s.is_pipeline_call(x) or any(g in runs for g in s.sinks_of(x)) for x in sinks):
            yield (
                c,
                (
                    "apply_chat_template without add_generation_prompt=True: the prompt does not open the "
                    "assistant's turn, so the model may continue the user's message"
                ),
            )


# --- IT013's DialoGPT half: a turn not ended with the EOS token --------------------------------------------------

DIALOGPT = lazy_compile(r"dialogpt", IGNORECASE)


def _ends_turn(s: Script, text: ast.AST) -> bool:
    """The text (or what it is built from) appends the EOS token: `+ tok.eos_token`, or `<|endoftext|>` written."""
    return any(
        (isinstance(n, ast.Attribute) and n.attr in ("eos_token", "eos_token_id"))
        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "<|endoftext|>" in n.value)
        for o in [text, *s.origins(text)]
        for n in ast.walk(o)
    )


def dialogpt_turn_unended(s: Script):
    """DialoGPT reads a dialogue as turns each ended by its EOS token (`tok.encode(text + tok.eos_token)`, its model
    card); a user's text without it is a sentence to continue, not a turn to answer: the model extends it instead
    of replying (doctor-real-24 a11, a Flask chatbot; -1 b05, a pipeline given the bare input)."""
    ids = s.model_ids()
    if not ids or not all(DIALOGPT.search(i) for i in ids):
        return
    for c in s.calls:
        feeds = (s.is_tokenizer_call(c) or (method(c) == "encode" and s.is_tokenizer(receiver(c)))) and any(
            g in s.generates for g in s.sinks_of(c)
        )
        if not (feeds or s.is_pipeline_call(c)) or not c.args or _ends_turn(s, c.args[0]):
            continue
        if any(isinstance(o, ast.Call) and callee(o) == "Conversation" for o in s.origins(c.args[0])):
            continue  # (the conversational pipeline ends each turn itself)
        yield (
            c,
            "DialoGPT's turns end with its EOS token, and this text has none: the model continues the user's "
            "sentence instead of replying; encode `text + tok.eos_token`",
        )
