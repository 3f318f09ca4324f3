"""Prompt rules: chat templates, by hand or missing, and the generation prompt."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.checkpoint import has_chat_template
from infertune.doctor.nodes import (
    DOTALL,
    IGNORECASE,
    callee,
    const,
    dotted,
    id_name,
    kw,
    lazy_compile,
    method,
    receiver,
    task_of,
)
from infertune.doctor.rules.context import framework_prompt, speed_test_only
from infertune.doctor.script import Script

# Role markers of chat templates written by hand (ChatML, Llama 2/3, Gemma, Zephyr, Phi, plain transcripts).
TEMPLATE_TOKENS = lazy_compile(
    r"<\|im_start\|>|\[INST\]|<\|user\|>|<\|assistant\|>|<start_of_turn>|<\|system\|>|"
    r"<\|start_header_id\|>|<\|begin_of_text\|>|<\|eot_id\|>|<\|(start|end)_header|<<SYS>>"
)
# Plain transcripts: a base model's or a fine-tune's own format; wrong only for a chat model with a template.
TRANSCRIPT = lazy_compile(
    r"(^|\n)\s*(User|Human|USER|Assistant|ASSISTANT|### Instruction|### Human|### Assistant|问：)\s*:?|\[Round \d*\]"
)  # ("[Round 1]\n\n问：...\n\n答：": ChatGLM's own format, doctor-real-15 b09; a line's start, not 请问：, "please
# tell": doctor-real-18 b02)
CHAT_MARKERS = lazy_compile(f"{TEMPLATE_TOKENS.pattern}|{TRANSCRIPT.pattern}")
SINGLE_TOKEN = lazy_compile(r"\s*(<\|?[^<>\s]+\|?>|\[/?INST\])\s*")
CHAT_MODEL = lazy_compile(
    r"instruct|(?<![a-z])chat(?![a-z])|chatglm|chatml|[-_]it(\b|[-_])|zephyr|vicuna|hermes|openchat|tulu|"
    r"deepseek-(v3|r1|v2\.5)(?!-base|-zero)",  # (DeepSeek's chat releases carry no chat word)
    IGNORECASE,
)

# small base (completion) language models: their output is a continuation of the prompt by design, and they are
# demo-sized (a web route serving one of them is a toy, not a service to batch)
BASE_LM = lazy_compile(
    r"^(distil)?gpt2(-(medium|large|xl))?$|^tiny-gpt2$|^openai-gpt$|^gpt-neo-(125m|1\.3b)$|^opt-(125m|350m)$",
    IGNORECASE,
)

# how a sentence left for the model to finish ends: a comma, a dash, or a word that cannot close one (a verb "to be",
# an article, a preposition, a conjunction, a possessive)
UNFINISHED = lazy_compile(
    r"([,\-]|\b(is|are|was|were|be|been|am|of|the|a|an|and|or|but|nor|to|as|that|which|whose|with|without|in|on|at|"
    r"for|by|from|into|about|my|your|his|her|their|our|its|than|like|because|so|if|when|while|where|who|then|"
    r"has|have|had|will|would|can|could|should|must|might|called|named|known))$",
    IGNORECASE,
)


def continuation(text: str) -> bool:
    """A text that reads as the start of a sentence for the model to finish ("The capital of France is", "There is
    a boy, running down the hill,", "Plants make energy through a process known as"): one line of two words or more
    with no question mark, no chat marker, ending where a sentence cannot end. A probe that prints such a prompt's
    continuation means to see both; a chat model fed it is being smoke-tested, not chatted with. ("introduce
    suzhou", "Hello, world!" and questions are not.)"""
    t = text.strip()
    return (
        0 < len(t) <= 200
        and "\n" not in t
        and len(t.split()) >= 2
        and "?" not in t
        and UNFINISHED.search(t) is not None
        and not CHAT_MARKERS.search(t)
    )


def probe_level(s: Script, node: ast.AST) -> bool:
    """At module level or in a main(): the shape of a script run once to see what the model writes (a helper or
    a route hands its text to a caller, who may take all of it for the answer)."""
    fn = s.enclosing_function(node)
    return fn is None or getattr(fn, "name", "") == "main"


def probe_helper(s: Script, fn: ast.AST | None, depth: int = 0) -> bool:
    """A function that only the probe level calls (two levels up): the script's own step, not an API."""
    name = getattr(fn, "name", None)
    callers = [c for c in s.calls if name and callee(c) == name and s.enclosing_function(c) is not fn]
    return (
        depth < 2
        and bool(callers)
        and all(probe_level(s, c) or probe_helper(s, s.enclosing_function(c), depth + 1) for c in callers)
    )


def literal_texts(s: Script, arg: ast.AST | None, lists: bool = True) -> list[str] | None:
    """The strings a text argument can be, when every value it can take is a string literal written in the file
    (with `lists`, also a list or tuple of them); None when any comes from elsewhere (a user's input, a data set
    row, an f-string) or nothing is known."""
    texts: list[str] = []
    for o in s.origins(arg) if arg is not None else []:
        items = o.elts if lists and isinstance(o, (ast.List, ast.Tuple)) else [o]
        for i in items:
            if not (isinstance(i, ast.Constant) and isinstance(i.value, str)):
                return None
            texts.append(i.value)
    return texts or None


def literal_continuations(s: Script, arg: ast.AST | None) -> bool:
    """Every value this text argument can take is a literal written in the file and every one is a continuation
    (a list of them too)."""
    texts = literal_texts(s, arg)
    return texts is not None and all(continuation(t) for t in texts)


def prompts_of(s: Script, gen: ast.Call) -> list[ast.expr]:
    """The text arguments of the tokenizer calls whose ids this generate call runs on."""
    return [a for c in _prompt_sinks(s) if gen in s.sinks_of(c) for a in _text_args(c)]


def generation_prompts(s: Script, call: ast.Call) -> list[ast.expr]:
    """A generation call's prompts: a generate's through its tokenizers, else its first argument (a pipeline's)."""
    return prompts_of(s, call) if call in s.generates else list(call.args[:1])


def every_id(s: Script, pattern) -> bool:
    """The script names its models and every id's last part matches the pattern."""
    ids = s.model_ids()
    return bool(ids) and all(pattern.search(id_name(i)) for i in ids)


def base_models_only(s: Script) -> bool:
    """Every model of the script is a known small base completion model (gpt2, distilgpt2, tiny-gpt2, ...)."""
    return every_id(s, BASE_LM)


# pretrained-only (base) releases of any size, by the last part of the id: the published names carry no
# -Instruct/-Chat/-it suffix (the pattern is anchored at the end, so those never match) and their only use is to
# continue text. A local folder named after one (`models/huggyllama_llama-7b`) counts too.
BASE_RELEASE = lazy_compile(
    r"(^|[_/-])(llama-\d+b|llama-2-\d+b(-hf)?|(meta-)?llama-3(\.\d)?-\d+b|mistral-7b(-v0\.\d)?|"
    r"mixtral-8x\d+b(-v0\.\d)?|falcon-\d+b|gpt-j-6b|gpt-neox-20b|pythia-[\d.]+[mb](-deduped)?|opt-[\d.]+[mb]|"
    r"bloom(-[\d.]+[mb])?|mpt-\d+b|qwen[\d.]*-[\d.]+b|gemma(-\d)?-\d+b|olmo(-\d)?-\d+b|gpt-neox-japanese-[\d.]+b|"
    r"codegen2?-[\d.]+[mb](-(mono|multi|nl))?)$",
    IGNORECASE,
)


def completion_models_only(s: Script, small_only: bool) -> bool:
    """Every model of the script is a base completion model: a small one (BASE_LM), or (small_only False) also a
    larger published base release (BASE_RELEASE: Llama-2-7b-hf, Mistral-7B-v0.3, LLaMA-7B, ...). What they print
    is a continuation of the prompt, so prompt plus continuation is their natural output (IT004's demos)."""
    ids = [id_name(i) for i in s.model_ids()]
    return bool(ids) and all(BASE_LM.search(i) or (not small_only and BASE_RELEASE.search(i)) for i in ids)


def _text_args(c: ast.Call) -> list[ast.expr]:
    return list(c.args[:1]) + [v for k in ("text", "text_inputs", "prompt") if (v := kw(c, k)) is not None]


def _prompt_sinks(s: Script) -> list[ast.Call]:
    """Calls that turn text into the model's input: a pipeline, and a tokenizer (called, or .encode) whose ids
    are generate's input (not a stop word's ids, not a length count). Computed once per script."""
    if "_prompt_sinks" in s.__dict__:
        return s.__dict__["_prompt_sinks"]
    out: list[ast.Call] = []
    s.__dict__["_prompt_sinks"] = out
    for c in s.calls:
        if s.is_pipeline_call(c) or (
            (s.is_tokenizer_call(c) or (method(c) == "encode" and s.is_tokenizer(receiver(c))))
            and (
                any(_feeds_input(s, c, g) for g in s.sinks_of(c) if g in s.generates or g in s.thread_generates)
                or any(s.is_pipeline_call(x) for x in s.sinks_of(c))
            )
        ):
            out.append(c)
    return out


def _feeds_input(s: Script, tok: ast.Call, gen: ast.Call) -> bool:
    """Are the tokenizer's ids generate's input (positional, input_ids=, inputs=, **enc; a Thread's kwargs)? Also
    as items of a list built by a comprehension (`ids = [tok(p).input_ids for p in ps]`, then `for i in ids`)."""
    names = s.flow_names(tok)
    top: ast.AST = tok
    while isinstance(up := s.parents.get(top), (ast.Attribute, ast.Subscript)) or (
        isinstance(up, ast.Call) and up.func is top
    ):
        top = up
    if isinstance(up, ast.ListComp) and up.elt is top:
        names |= s.flow_names(up)
    args = list(gen.args[:1]) + [k.value for k in gen.keywords if k.arg in (None, "input_ids", "inputs", "kwargs")]
    return any(
        n is tok or (isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) in names) for a in args for n in ast.walk(a)
    )


def _template_source(s: Script, node: ast.AST, text: str, whole: bool) -> bool:
    """A template's own Jinja source, a pattern looking for markers, or a lone marker/special token tokenized
    on its own (a stop word, an id lookup)."""
    parent = s.parents.get(node)
    lone = SINGLE_TOKEN.fullmatch(text) is not None or TRANSCRIPT.fullmatch(text.strip()) is not None
    return "{%" in text or (whole and lone) or (isinstance(parent, ast.Call) and dotted(parent.func).startswith("re."))


def _no_template(s: Script) -> bool:
    """Every checkpoint of the script is here and ships no chat template: a hand-built prompt is its only format."""
    known = [has_chat_template(i) for i in s.model_ids()]
    return bool(known) and all(k is False for k in known)


# instruction-tuned families whose tokenizers ship no chat template: their documented prompt is written by hand
# ("USER: ... ASSISTANT:", "### Instruction:", "Instruct: ... Output:", ChatGLM's "[Round 1]\n\n问：...\n\n答："), so a
# hand-built prompt is their format
TEMPLATELESS = lazy_compile(
    r"vicuna-\d+b-v1\.[135]|alpaca|dolly-v2|falcon-(7b|40b)-instruct|mpt-\d+b-(instruct|chat)|^phi-(1_5|2)$|"
    r"^chatglm2?-6b|instructblip",
    IGNORECASE,
)


# of those, the ones whose model card prompts with plain text: no template, no transcript (doctor-real-17 b02, d13;
# InstructBLIP's processor takes the instruction as plain text beside the image: doctor-real-26 c12)
RAW_FORMAT = lazy_compile(r"falcon-(7b|40b)-instruct|instructblip", IGNORECASE)


def _documented_by_hand(s: Script) -> bool:
    """Every model of the script is of a family known to ship no chat template (read by id, offline)."""
    return every_id(s, TEMPLATELESS)


def _own_fine_tune(s: Script) -> bool:
    """The model is a fine-tune from a repository of its own (no chat word in its id) run with another checkpoint's
    tokenizer (`AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-chat-hf")`, model "someone/bank-llm"): the
    tokenizer's template is the base's, and the fine-tune's training format is whatever its author wrote, often
    the very prompt built by hand here. Nothing in the file says which, so a hand-built prompt is not flagged."""
    models = [s.model_id(c) for c in s.loads]
    toks = [s.model_id(c) for c in s.tokenizers]
    return (
        bool(models)
        and bool(toks)
        and all(toks)
        and all(m and not CHAT_MODEL.search(id_name(m)) and m not in toks for m in models)
    )


# chat templates that write the BOS token into their text (Llama 2 and 3, Mistral/Mixtral, Gemma); others (Qwen,
# TinyLlama, Phi-3, ...) write none, so re-tokenizing their text adds exactly one (IT025)
BOS_IN_TEMPLATE = lazy_compile(r"llama-?2|llama-?3|meta-llama|mistral|mixtral|gemma|deepseek", IGNORECASE)
BOS_TEXT = ("<s>", "<|begin_of_text|>", "<bos>")  # Llama 2 / Mistral, Llama 3, Gemma: what their tokenizers add

# Llama 2's and Mistral's one-turn layout, exactly: `<s>[INST] {message} [/INST]` (the spaces included)
INST_LAYOUT = lazy_compile(r"\s*<s>\[INST\] .* \[/INST\]\s*", DOTALL)


def _bos_by_hand(s: Script, text: str) -> bool:
    """The prompt is the model's own [INST] layout, exactly, with a BOS written by hand for a tokenizer that adds
    its own: its one defect is the second BOS, IT025's finding (doctor-real-5 p18, labelled so; doctor-real-1 a18's
    `<s>[INST]` + text + `[/INST]`, without the spaces, is off the layout too, and labelled both)."""
    if not INST_LAYOUT.fullmatch(text):
        return False
    if any(isinstance(n, ast.keyword) and n.arg == "add_special_tokens" and const(n.value) is False for n in s.nodes):
        return False
    return any(i and BOS_IN_TEMPLATE.search(i) for i in s.weight_ids())


def hand_built_chat_prompt(s: Script):
    if s.calls_method("apply_chat_template") or s.trains or not (s.generates or s.pipelines) or _no_template(s):
        return
    if speed_test_only(s):
        return
    if _documented_by_hand(s) or _own_fine_tune(s) or adapter_loaded(s):
        return  # (an adapter's prompt is its training format: doctor-real-8 v06, y01, -9 q03, -11 b04, d02)
    seen: set[ast.AST] = set()
    markers = CHAT_MARKERS if _chat_ids(s) else TEMPLATE_TOKENS
    for c in _prompt_sinks(s):
        for arg in _text_args(c):
            for node, text in s.strings(arg):
                if node in seen or _bos_by_hand(s, text):
                    continue
                if markers.search(text) and not _template_source(s, node, text, node is arg):
                    seen.update(n for n, _ in s.strings(arg))  # (one prompt, however many pieces: one finding)
                    yield node, "a chat prompt built by hand: the model was trained on its own chat template"
                    break


# vision-language chat checkpoints with no chat word in their ids (llava-hf/llava-1.5-7b-hf, llava-v1.6-mistral-...):
# their processors ship a chat template, and a bare prompt is off their format (IT013 only: their documented
# hand-built formats, `USER: <image>\n... ASSISTANT:` and `[INST] <image>\n... [/INST]`, are not IT003's concern)
VLM_CHAT = lazy_compile(r"llava", IGNORECASE)


def _chat_ids(s: Script, vlm: bool = False) -> list[str]:
    return [i for i in s.model_ids() if CHAT_MODEL.search(id_name(i)) or (vlm and VLM_CHAT.search(id_name(i)))]


def _ui_from_pipeline(s: Script):
    """`gr.Interface.from_pipeline(pipe)` of a chat model: the UI hands it a textbox's raw text (doctor-real-3 e31)."""
    for c in s.calls:
        if method(c) != "from_pipeline" or not c.args:
            continue
        pipe = next((o for o in s.origins(c.args[0]) if o in s.pipelines), None)
        model = s.pipeline_model_id(pipe) if pipe is not None else None
        task = task_of(pipe) if pipe is not None else None
        if model and task == "text-generation" and CHAT_MODEL.search(id_name(model)):
            yield (c, f"{model} is a chat model, and the UI feeds it the textbox's raw text without its chat template")


def _raw_text(s: Script, arg: ast.AST) -> bool:
    """A pipeline's input is a string: a literal, an f-string, a concatenation, or a value the file reads from a
    request or a form (`data.get("prompt")`, `payload.prompt`: doctor-real-4 f13) with nothing chat-shaped among
    its sources (a list of messages, a dict, apply_chat_template)."""
    origins = s.origins(arg)
    if not origins:
        return False
    if any(isinstance(o, (ast.Constant, ast.JoinedStr, ast.BinOp)) for o in origins):
        return True
    chat_shaped = (ast.List, ast.ListComp, ast.Dict, ast.Tuple)
    return not any(
        isinstance(o, chat_shaped) or (isinstance(o, ast.Call) and method(o) == "apply_chat_template") for o in origins
    ) and all(isinstance(o, (ast.Call, ast.Attribute, ast.Subscript)) for o in origins)


def adapter_loaded(s: Script) -> bool:
    """A PEFT adapter goes onto the model (`PeftModel.from_pretrained`, `AutoPeftModelFor*`, `.load_adapter`): its
    prompt format is the adapter's training format, which the file does not show (doctor-real-5 p11, doctor-real-4
    g01: both labelled so)."""
    return any(
        method(c) == "load_adapter" or any(p.startswith(("Peft", "AutoPeft")) for p in dotted(c.func).split("."))
        for c in s.calls
    )


def named_as_chat(node: ast.AST, words: tuple[str, ...] = ("messages", "conversation", "chat")) -> bool:
    """A value whose name says it holds a conversation (`messages`, `chat_history`): a list of turns, not one
    string. One message (`user_message`, doctor-real-6 r05) is not a conversation, and a bot message's text
    (aiogram's `message.text`, discord's `message.content`) is one string."""
    if isinstance(node, ast.Attribute) and node.attr in ("text", "content"):
        return False
    return any(w in dotted(node).lower() for w in words)


def chat_model_raw_text(s: Script):
    """One finding per scope (a function, or the module), at its first call that feeds the chat model raw text,
    naming the others' lines (doctor-real-15 d14: a script's first question and its loop's, labelled once)."""
    scopes: dict[ast.AST | None, list] = {}
    for node, message in _raw_text_calls(s):
        scopes.setdefault(s.enclosing_function(node), []).append((node, message))
    for (node, message), *rest in scopes.values():
        lines = sorted({n.lineno for n, _ in rest} - {node.lineno})
        yield node, message + (f" (also at line {', '.join(map(str, lines))})" if lines else "")


def _raw_text_calls(s: Script):
    if s.calls_method("apply_chat_template") or s.trains or speed_test_only(s):
        return
    if not _chat_ids(s, vlm=True) or _no_template(s):
        return
    if adapter_loaded(s) or every_id(s, RAW_FORMAT):
        return  # the adapter's own format, or a family prompted with plain text
    yield from _ui_from_pipeline(s)
    for c in _prompt_sinks(s):
        args = _text_args(c)
        if (
            not args
            or any(CHAT_MARKERS.search(t) for a in args for _, t in s.strings(a))
            or framework_prompt(s, args[0])
        ):
            continue  # hand-built template (IT003's), or one a framework renders (a LangChain LLM's _call)
        if probe_level(s, c) and all(literal_continuations(s, a) for a in args):
            continue  # a fixed sentence to finish: a smoke test of the model, not a conversation
        if s.is_pipeline_call(c):
            pipe = next(o for o in s.origins(c.func) if o in s.pipelines)
            model = s.pipeline_model_id(pipe)
            chatty = isinstance(model, str) and CHAT_MODEL.search(id_name(model))
            raw = _raw_text(s, args[0])
            if chatty and raw and not named_as_chat(args[0]):
                yield (c, f"{model} is a chat model fed raw text: without its chat template it answers off-format")
        elif any(g in s.generates or g in s.thread_generates for g in s.sinks_of(c)):
            if any(isinstance(o, ast.Call) and method(o) == "apply_chat_template" for a in args for o in s.origins(a)):
                continue
            if any(smoke_probe(s, g) for g in s.sinks_of(c) if g in s.generates):
                continue  # a few tokens to see the checkpoint speak: not a conversation
            yield (
                c,
                (
                    f"{_chat_ids(s, vlm=True)[0]} is a chat model fed raw text: without its chat template it answers "
                    "off-format or rambles"
                ),
            )


def smoke_probe(s: Script, gen: ast.Call, kws: dict[str, ast.expr] | None = None) -> bool:
    """A probe of a few tokens: at module level, on prompts written in the file as literals, with max_new_tokens
    of 20 or fewer: a check that the checkpoint loads and speaks, whose printout nobody reads as an answer
    (doctor-real-4 g06, a 10-token probe of Llama 3.1 Instruct; doctor-real-3 e21)."""
    kws = kws if kws is not None else {k.arg: k.value for k in gen.keywords if k.arg}
    n = const(kws.get("max_new_tokens"))
    if not isinstance(n, int) or n > 20 or not probe_level(s, gen):
        return False
    args = generation_prompts(s, gen)
    return bool(args) and all(literal_texts(s, a, lists=False) for a in args)
