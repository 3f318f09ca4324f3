"""Output rules: what comes out of generate or a text-generation pipeline (IT004: the prompt decoded with the
answer; IT045, one row handed to batch_decode, is rules/decoding.py). What goes into them is rules/generation.py."""

from __future__ import annotations

from infertune.doctor import patterns
from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    SEQ2SEQ_ID,
    callee,
    const,
    dotted,
    id_name,
    kw,
    lazy_compile,
    local_path,
    method,
    receiver,
    task_of,
)
from infertune.doctor.rules.generation import encoder_decoder_call, generation_calls, no_text_input, pipe_of, unprompted
from infertune.doctor.rules.prompts import (
    CHAT_MARKERS,
    CHAT_MODEL,
    TEMPLATE_TOKENS,
    completion_models_only,
    literal_continuations,
    literal_texts,
    named_as_chat,
    probe_helper,
    probe_level,
    prompts_of,
    smoke_probe,
)
from infertune.doctor.script import Script

STRIPS_PROMPT = {
    "split",
    "rsplit",
    "replace",
    "removeprefix",
    "partition",
    "rpartition",
    "find",
    "index",
    "rfind",
    "lstrip",
    "startswith",
    "splitlines",
}


# calls that take the decoded text apart: a length, a processor's own parser (Florence-2's task output), and one
# named for taking the answer out (alpaca-lora's `prompter.get_response`, splitting at "### Response:": doctor-real-14
# d15, labelled so)
PARSERS = {"len", "post_process_generation"}
ANSWER_PARSER = lazy_compile(r"^_?(get|extract|parse|strip|clean|post_?process)_?(the_)?(response|answer|reply)s?$")


def _has_slice(node: ast.AST) -> bool:
    return isinstance(node, ast.Slice) or (
        isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts)
    )


def _raw_output(s: Script, node, depth: int = 0) -> ast.Call | None:
    """The generate call whose full rows (prompt included) this value is, if it is one."""
    if depth > 8 or node is None:
        return None
    if isinstance(node, ast.Subscript):
        return None if _has_slice(node.slice) else _raw_output(s, node.value, depth + 1)
    if isinstance(node, ast.Attribute) and node.attr == "sequences":
        return _raw_output(s, node.value, depth + 1)
    if isinstance(node, ast.Call) and method(node) in ("tolist", "numpy", "detach", "cpu", "squeeze"):
        return _raw_output(s, receiver(node), depth + 1)
    for o in s.origins(node):
        if o in s.generates:  # (from inputs_embeds alone, or from nothing, the output holds only new tokens)
            return None if encoder_decoder_call(s, o) or kw(o, "inputs_embeds") is not None or unprompted(s, o) else o
        if isinstance(o, (ast.ListComp, ast.GeneratorExp)):
            targets = {dotted(t) for g in o.generators for t in ast.walk(g.target)}
            elt = o.elt
            if isinstance(elt, ast.Name) and elt.id in targets:
                return next((r for g in o.generators if (r := _raw_output(s, g.iter, depth + 1))), None)
            if isinstance(elt, (ast.Subscript, ast.Call, ast.Attribute)) and not (
                isinstance(elt, ast.Subscript) and _has_slice(elt.slice)
            ):
                base: ast.expr | None = elt
                while isinstance(base, (ast.Subscript, ast.Attribute)) or (isinstance(base, ast.Call) and method(base)):
                    base = receiver(base) if isinstance(base, ast.Call) else base.value
                if isinstance(base, ast.Name) and base.id in targets:
                    return next((r for g in o.generators if (r := _raw_output(s, g.iter, depth + 1))), None)
        elif isinstance(o, (ast.Subscript, ast.Attribute)) and o is not node:
            r = _raw_output(s, o, depth + 1)
            if r is not None:
                return r
    return None


# role markers that are special tokens (dropped by skip_special_tokens=True); [INST] and <|user|> are plain text in
# Llama 2's and Zephyr's tokenizers, so they survive it
SPECIAL_MARKERS = lazy_compile(r"<\|im_start\|>|<\|im_end\|>|<\|start_header_id\|>|<\|eot_id\|>|<start_of_turn>")
# the markers each template family writes, by model id (a pattern for another family's markers never matches)
FAMILIES = {
    r"qwen|chatml|yi-|openhermes|dolphin": r"<\|im_start\|>|<\|im_end\|>",
    r"llama-?3|meta-llama-3": r"<\|start_header_id\|>|<\|end_header_id\|>|<\|eot_id\|>|<\|begin_of_text\|>",
    r"llama-?2|mistral|mixtral": r"\[/?INST\]|<<SYS>>",
    r"gemma": r"<start_of_turn>|<end_of_turn>",
}


def _family(s: Script) -> str | None:
    """The markers of the script's model's template family, when every model id names the same one."""
    found = {m for i in s.model_ids() for k, m in FAMILIES.items() if patterns.compile(k, IGNORECASE).search(i)}
    return found.pop() if len(found) == 1 else None


def _cannot_match(s: Script, search: ast.Call, skipped: bool) -> bool:
    """A cleanup pattern that looks only for chat-template markers the decoded text cannot hold: special tokens
    dropped by skip_special_tokens=True, or another template family's markers (`[/INST]` for a Llama 3)."""
    pattern = search.args[0] if search.args else kw(search, "pattern")
    texts = [t.replace("\\", "") for _, t in s.strings(pattern)] if pattern is not None else []
    marked = [t for t in texts if TEMPLATE_TOKENS.search(t) or "[/INST]" in t]
    if not marked:
        return False
    if skipped and all(SPECIAL_MARKERS.search(t) for t in marked):
        return True
    own = _family(s)
    return own is not None and not any(patterns.compile(own).search(t) for t in marked)


def _measured(s: Script, n: ast.AST) -> bool:
    parent = s.parents.get(n)
    return isinstance(parent, ast.Call) and callee(parent) == "len"


def prompt_removed(s: Script, node: ast.AST, depth: int = 0, skipped: bool = False) -> bool:
    """Is this text (a decode result, a pipeline's output) cut or searched afterwards: [len(p):], .split(M)[-1]?
    skipped: it was decoded with skip_special_tokens=True (a search for a special token then finds nothing)."""
    if depth > 5:
        return False
    parent = s.parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.attr in STRIPS_PROMPT:
        return True
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _has_slice(parent.slice) or prompt_removed(s, parent, depth + 1, skipped)
    if isinstance(parent, ast.Attribute) and parent.attr in ("strip", "rstrip", "lower"):
        return prompt_removed(s, up, depth + 1, skipped) if isinstance(up := s.parents.get(parent), ast.Call) else False
    if isinstance(parent, ast.Call) and dotted(parent.func).startswith("re."):
        return not _cannot_match(s, parent, skipped)  # searched (unless for a token decoding dropped)
    if isinstance(parent, ast.Call) and (
        callee(parent) in PARSERS or ANSWER_PARSER.match(callee(parent)) or s.defined(parent)
    ):
        return True  # measured, parsed, or handed to a helper of the file (which may cut it)
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        names = {dotted(t) for t in targets} - {""}
        uses = [
            n
            for n in s.nodes
            if isinstance(n, (ast.Name, ast.Attribute))
            and dotted(n) in names
            and isinstance(getattr(n, "ctx", None), ast.Load)
        ]
        if any(not _measured(s, n) for n in uses):  # len(response) logged beside the response itself cuts nothing
            uses = [n for n in uses if not _measured(s, n)]
        if any(prompt_removed(s, n, depth + 1, skipped) for n in uses):
            return True
    if isinstance(parent, ast.Call) and callee(parent) in ("zip", "enumerate"):
        return prompt_removed(s, parent, depth + 1, skipped)  # (each item, beside its prompt or index)
    if isinstance(parent, ast.comprehension | ast.For) and parent.iter is node:  # each item: cut one by one?
        scope = s.parents.get(parent, parent) if isinstance(parent, ast.comprehension) else parent
        items = {n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)}
        looked = [
            n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id in items and isinstance(n.ctx, ast.Load)
        ]
        if any(prompt_removed(s, n, depth + 1, skipped) for n in looked):
            return True  # (doctor-real-11 b04: `completion[len(prompt):]` for each decoded completion)
    if isinstance(parent, (ast.ListComp, ast.GeneratorExp, ast.comprehension)):
        return prompt_removed(s, parent, depth + 1, skipped)
    if isinstance(parent, ast.Return) and (fn := s.enclosing_function(node)) is not None:
        sites = s.call_sites(fn)  # returned: cut where the helper's result is used?
        return any(prompt_removed(s, c, depth + 1, skipped) for c in sites)
    return False


def _chat_input(s: Script, node: ast.AST | None) -> bool:
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


def _unknown_completion(s: Script, node: ast.AST) -> bool:
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


def _continues(s: Script, gen: ast.Call) -> bool:
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


def _fixed_probe(s: Script, gen: ast.Call) -> bool:
    """A one-shot check at the probe level on prompts written in the file (no chat transcript: "Human: hi\n
    Assistant:" asks for the answer alone), whose decoded output only goes to print(): a person reads the question
    and its answer together (doctor-real-8 y03, labelled so; doctor-real-2 d24's "Hello, world!" to Mistral-Instruct
    was labelled a problem, doctor-real-1 a18 and doctor-real-4 g01, g06, g11 silent)."""
    args = prompts_of(s, gen)
    texts = [x for a in args for x in literal_texts(s, a) or [""]]
    return probe_level(s, gen) and bool(texts) and all(texts) and not any(CHAT_MARKERS.search(x) for x in texts)


def _printed_only(s: Script, c: ast.Call) -> bool:
    """The decoded text goes straight to print(): a console echo, where a copy stored or returned is the output."""
    parent = s.parents.get(c)
    return isinstance(parent, ast.Call) and callee(parent) == "print"


def _unconditional(s: Script, gen: ast.Call) -> bool:
    """Generation from an empty prompt (only the tokenizer's start token): nothing to strip (doctor-real-18 b14)."""
    texts = [literal_texts(s, p) for p in prompts_of(s, gen)]
    return bool(texts) and all(t is not None and not "".join(t).strip() for t in texts)


def prompt_in_output(s: Script):
    by_gen: dict[ast.Call, list[ast.Call]] = {}
    for c in s.calls_method("decode") + s.calls_method("batch_decode"):
        skipped = const(kw(c, "skip_special_tokens")) is True
        if (
            c.args
            and (gen := _raw_output(s, c.args[0])) is not None
            and not prompt_removed(s, c, 0, skipped)
            and not completion_demo(s, c, prompts_of(s, gen))
            and not _continues(s, gen)
            and not _unknown_completion(s, c)
            and not smoke_probe(s, gen)
            and not _unconditional(s, gen)
            and not no_text_input(s, gen)
        ):
            by_gen.setdefault(gen, []).append(c)
    for gen, decodes in by_gen.items():  # one finding per generate: the copy kept (stored, returned) over a print
        kept = [c for c in decodes if not _printed_only(s, c)]
        if not kept and _fixed_probe(s, gen):
            continue
        yield (kept or decodes)[0], "decoding the whole generate output: it starts with the prompt tokens"
    for c, kws, _, opaque in generation_calls(s):
        if completion_demo(s, c, c.args[:1]) or _unknown_completion(s, c) or smoke_probe(s, c, kws):
            continue
        if (pipe := pipe_of(s, c)) is None or task_of(pipe) not in ("text-generation", None):
            continue
        if SEQ2SEQ_ID.search(id_name(s.pipeline_model_id(pipe))):
            continue  # (an encoder-decoder's output holds no prompt, whatever the task was left to infer)
        full = kws.get("return_full_text")
        if (full is not None and const(full) is not True) or opaque or not c.args or _chat_input(s, c.args[0]):
            continue
        if probe_level(s, c) and literal_continuations(s, c.args[0]):
            continue  # a fixed sentence to finish: prompt plus continuation is the demo's output
        if not prompt_removed(s, c):
            yield (
                c,
                ("a text-generation pipeline returns the prompt with the answer (return_full_text defaults to True)"),
            )
