"""Is a decoded output meant to hold its prompt? A completion demo (a base model continuing a text, where prompt plus
continuation is the expected output), a chat framing that says otherwise, and the unknown local completions between.
Read by IT004 (rules/outputs.py, and through LangChain: rules/chains.py) and IT017 (rules/serving.py)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, callee, id_name, lazy_compile, local_path
from infertune.doctor.rules.prompts import (
    CHAT_MARKERS,
    CHAT_MODEL,
    completion_models_only,
    literal_continuations,
    literal_texts,
    named_as_chat,
    probe_helper,
    probe_level,
    prompts_of,
)
from infertune.doctor.script import Script


def chat_input(s: Script, node: ast.AST | None) -> bool:
    if node is None:
        return False
    if any(
        isinstance(o, (ast.List, ast.ListComp)) and any(isinstance(e, ast.Dict) for e in ast.walk(o))
        for o in s.origins(node)
    ):
        return True
    return named_as_chat(node, ("messages", "conversation", "chat", "history", "dialog"))


CHATTY = lazy_compile(r"chat|answer|reply|respon|ask|bot|assistant|convers|dialog", IGNORECASE)


def _transcript_in_file(s: Script) -> bool:
    """A chat transcript (User:/Assistant:, template tokens) in some string of the file. Read once per script."""
    if "_transcript" not in s.__dict__:
        s.__dict__["_transcript"] = any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and CHAT_MARKERS.search(n.value) for n in s.nodes
        )
    return s.__dict__["_transcript"]


def completion_demo(s: Script, node: ast.AST, prompts: list[ast.expr] | None = None) -> bool:
    """A completion demo: a base completion model continuing a prompt, where prompt plus continuation is the
    expected output, not a leak. A small one (gpt2, openai-gpt, ...): at module level (a script, a Streamlit page)
    or in a function or web route not named as a chat (chat/answer/reply/respond/ask/bot/...) nor called from one.
    A larger base release (Llama-2-7b-hf, Mistral-7B-v0.3): at module level only, the shape of a completion test
    that prints what the model wrote after a fixed prompt; a function that returns the text hands it to a caller
    (a bot, a Q&A helper) who asked a question and gets it back in front of the answer. Never after a fine-tune,
    nor with a chat transcript (User:/Assistant:, template tokens) anywhere in the file."""
    fn = s.enclosing_function(node)
    if prompts and not completion_models_only(s, small_only=True) and not all(_written(s, a) for a in prompts):
        return False  # a larger base model asked what the file's data asks (doctor-real-8 w11): the text is answers
    return (
        completion_models_only(s, small_only=fn is not None)
        and not s.trains  # a fine-tune (into a chat, an instruction follower) is no longer the base model
        and not _transcript_in_file(s)
        and not _chatty(s, fn)
        and not _framed_as_chat(s)
    )


def _written(s: Script, prompt: ast.expr) -> bool:
    """A prompt written as a literal, or typed into a page's box (doctor-real-14 a02: a base Mistral's Streamlit
    prompt); not `input()`, a console's turn (doctor-real-16 d13), nor a chat box."""
    return bool(literal_texts(s, prompt)) or any(
        callee(o) in BOXES for o in s.origins(prompt) if isinstance(o, ast.Call)
    )


# what a dialogue prints or asks: a speaker's label ("You: ", "Model:", "Bot:") or an input box asking a question
SPEAKER = lazy_compile(
    r"^\W*(you|user|human|me|bot|chatbot|model|ai|assistant|answer|response|reply)\s*[:>]\s*$", IGNORECASE
)
ASKING = lazy_compile(r"\b(ask|question)\w*", IGNORECASE)  # ("Message LLM...", a completion box: doctor-real-1 b15)
BOXES = {"text_input", "text_area", "Textbox"}  # a page's text fields
INPUTS = BOXES | {"input", "chat_input"}


def _framed_as_chat(s: Script) -> bool:
    """The file frames the exchange as a dialogue: a speaker's label printed or prompted ("You: ", "Model:"), or
    an input (input(), st.text_input, gr.Textbox) whose label asks a question: whatever the model,
    the user reads what comes back as a reply to what they asked (doctor-real-4 f15, a GPT-2 chat loop; f07, a
    GPT-2 "calculator" asked math questions: both labelled, blind, as prompts leaking into the answer)."""
    for c in s.calls:
        given = [*c.args[:1], *(k.value for k in c.keywords if k.arg == "label")]
        texts = [a.value for a in given if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if any(isinstance(t, str) and SPEAKER.match(t) for t in texts):
            return True
        if callee(c) in INPUTS and any(isinstance(t, str) and ASKING.search(t) for t in texts):
            return True
    return False


# a bare name (no organisation) that is neither one of the Hub's legacy ids (gpt2, bert-base-uncased, t5-small)
# nor names a model family is a folder beside the script whose contents the file does not tell (doctor-real-6 s12:
# a GPT-2 fine-tune saved as 'finetuned'; doctor-real-1 b12's 'internlm-model' says what it holds: a chat model)
NAMED = lazy_compile(
    r"^(distil)?(gpt2|bert|roberta|t5|xlnet|xlm|albert|ctrl|openai-gpt|transfo-xl|camembert|flaubert|bart)\b|"
    r"llama|mistral|mixtral|qwen|internlm|baichuan|gemma|phi|falcon|deepseek|glm|bloom|opt|mpt|yi\b",
    IGNORECASE,
)


def local_folder(model_id: str) -> bool:
    return local_path(model_id) or ("/" not in model_id and not NAMED.search(model_id))


def unknown_completion(s: Script, node: ast.AST) -> bool:
    """Every model is a local folder of the author's (./models_finetune) and nothing in the file speaks of a
    chat: no chat template, no role markers, no chat model id, no function named as a chat. What the folder
    holds (a base model's fine-tune continuing text, an instruction follower) is not known here, so whether the
    prompt in the output is a leak or the completion's own shape is not either."""
    weights = [i for i in s.weight_ids() if i]
    return (
        bool(weights)
        and all(local_folder(i) for i in weights)  # (a tokenizer may come from the Hub: its base's)
        and not any(CHAT_MODEL.search(id_name(i)) for i in s.model_ids())
        and not s.calls_method("apply_chat_template")
        and not _transcript_in_file(s)
        and not _chatty(s, s.enclosing_function(node))
        and not _prompt_length_unused(s, node)
    )


def _prompt_length_unused(s: Script, node: ast.AST) -> bool:
    """The prompt's length is taken (`n = inputs["input_ids"].shape[1]`) and never read: the author meant to cut
    the prompt off and the decode forgot (doctor-real-10 a07, a merged fine-tune served over HTTP)."""
    scope = s.enclosing_function(node) or s.tree
    loads = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for a in ast.walk(scope):
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
            continue
        v = a.value
        shape = isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and v.value.attr == "shape"
        length = shape or (isinstance(v, ast.Call) and callee(v) == "len")
        if length and "input" in ast.unparse(v) and a.targets[0].id not in loads:
            return True
    return False


def _chatty(s: Script, fn: ast.AST | None, depth: int = 0) -> bool:
    """Named as a chat, or called (two levels up) from a function named as one: a bot's `respond` calling a
    `generate_text` helper is a chat too."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if CHATTY.search(fn.name):
        return True
    return depth < 2 and any(_chatty(s, s.enclosing_function(c), depth + 1) for c in s.calls if callee(c) == fn.name)


def continues(s: Script, gen: ast.Call) -> bool:
    """generate ran on fixed sentences to finish, written in the file (a probe, a demo): their continuation,
    prompt included, is what the script means to show. Also in a helper that only the probe level calls and that
    reads its sentence itself (doctor-real-6 s08: a generate_from_model helper printed from a module loop); a
    helper handed its sentence (`continue_text(start)`) is text in, text out: its caller wants what is new."""
    args = prompts_of(s, gen)
    fn = s.enclosing_function(gen)
    params = {a.arg for a in fn.args.args} if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) else set()
    fixed = not any(isinstance(a, ast.Name) and a.id in params for a in args)
    level = probe_level(s, gen) or (fixed and probe_helper(s, fn))
    return level and bool(args) and all(literal_continuations(s, a) for a in args)
