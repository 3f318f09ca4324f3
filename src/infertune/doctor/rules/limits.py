"""Length limits: IT034, a summarization pipeline on a model with fixed positions given a text of unknown length
untruncated; IT036, generate with no length at all."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    SEQ2SEQ_ID,
    callee,
    const,
    dotted,
    has_star_kwargs,
    id_name,
    kw,
    lazy_compile,
    local_path,
    method,
    receiver,
    task_of,
)
from infertune.doctor.rules.generation import (
    PIPELINE_DEFAULT,
    encoder_decoder_call,
    generation_calls,
    no_text_input,
    pipe_of,
    unprompted,
)
from infertune.doctor.rules.prompts import generation_prompts, literal_texts, prompts_of
from infertune.doctor.script import Script

# encoders with a table of learnt positions (BART, DistilBART, mBART, Pegasus: 1024; LED is not one): a longer input
# indexes past the table and the call fails. T5's relative positions take any length, so T5s are not here.
FIXED_POSITIONS = lazy_compile(r"(^|[-_/])(distil)?m?bart|pegasus(?!-x)", IGNORECASE)
SUMMARIZATION_DEFAULT = "sshleifer/distilbart-cnn-12-6"  # what pipeline("summarization") loads without a model


def _sized(s: Script, text: ast.AST) -> bool:
    """The text is a literal, cut to a length ([:N]), or a chunk of a longer one (a name that says so)."""
    if literal_texts(s, text, lists=False):
        return True
    origins = s.origins(text)
    if any(isinstance(n, ast.Slice) for o in [text, *origins] for n in ast.walk(o)):
        return True  # cut somewhere on its way: text[:3000], " ".join(words[:500])
    names = " ".join(dotted(n) for n in ast.walk(text) if isinstance(n, ast.Name | ast.Attribute)).lower()
    return any(w in names for w in ("chunk", "piece", "part", "segment", "batch"))


def summarization_untruncated(s: Script):
    for c in s.calls:
        if not isinstance(c.func, (ast.Name, ast.Attribute)) or (p := pipe_of(s, c)) is None:
            continue
        if task_of(p) != "summarization" or not c.args or has_star_kwargs(c) or has_star_kwargs(p):
            continue
        model = s.pipeline_model_id(p) if kw(p, "model") or len(p.args) > 1 else SUMMARIZATION_DEFAULT
        if not model or not FIXED_POSITIONS.search(id_name(model)):
            continue
        if any(const(kw(x, "truncation")) not in (None, False) for x in (c, p)) or kw(p, "tokenizer_kwargs"):
            continue
        if not _sized(s, c.args[0]):
            yield (
                c,
                f"{model} reads at most 1024 tokens and this text's length is not bounded: a longer one makes "
                "the summarization pipeline fail (index out of range); pass truncation=True or summarize it in chunks",
            )
    for c, model in _bart_generate_untruncated(s):
        yield (
            c,
            f"{model} reads at most 1024 tokens and this text is tokenized without truncation: a longer one makes "
            "generate fail (index out of range); pass truncation=True, max_length=1024",
        )


def _bart_generate_untruncated(s: Script):
    """The same with the model's own generate: a tokenizer call, with neither truncation nor max_length, whose ids
    a BART/Pegasus model generates from, on a text of unbounded length (doctor-real-8 v03: a posted text summarized
    by a local bart-large-cnn in an HTTP handler)."""
    for g in s.generates:
        models = [m for m in s.models_of(receiver(g)) if FIXED_POSITIONS.search(id_name(s.model_id(m)))]
        if not models or not encoder_decoder_call(s, g):
            continue
        for c in s.calls:
            if not s.is_tokenizer_call(c) or g not in s.sinks_of(c) or has_star_kwargs(c) or not c.args:
                continue
            if const(kw(c, "truncation")) not in (None, False) or kw(c, "max_length") is not None:
                continue
            if not _sized(s, c.args[0]):
                yield c, id_name(s.model_id(models[0]))


# --- IT014: max_length as if it were max_new_tokens ----------------------------------------------------------


def _dialogpt_budget(s: Script, value: ast.expr) -> bool:
    """DialoGPT's documented use: max_length (1000 in its card) bounds the whole dialogue, history included; a
    budget of 100 or more is that for its one-line turns (doctor-real-4 f09: 500, "DialoGPT's usual total budget";
    doctor-real-9 k12: 100, "leaves room for its short replies"; no DialoGPT budget was ever labelled a problem)."""
    n, ids = s.number(value), s.model_ids()
    return isinstance(n, int) and n >= 100 and bool(ids) and all("dialogpt" in i.lower() for i in ids)


def _sized_to_input(s: Script, value: ast.expr) -> bool:
    """max_length written from the input's own length (`inputs.shape[1] + 50`, `len(ids) + n`), or as the
    length the prompt is truncated to plus more (`tok(p, truncation=True, max_length=L)`, then `max_length=L + 50`,
    doctor-real-4 f02): a new-token budget."""
    if any(
        (isinstance(n, ast.Attribute) and n.attr == "shape")
        or (isinstance(n, ast.Call) and callee(n) in ("len", "size"))
        for n in ast.walk(value)
    ):
        return True
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return False
    caps = {
        ast.unparse(cap)
        for c in s.calls
        if s.is_tokenizer_call(c) and const(kw(c, "truncation")) and (cap := kw(c, "max_length")) is not None
    }
    return bool(caps & {ast.unparse(value.left), ast.unparse(value.right)})


def _tiny_prompt(s: Script, c: ast.Call, value: ast.expr) -> bool:
    """Every prompt of this generate is a literal (or a list of them) of a few tokens (under 40 characters) and
    max_length is 64 or more, or a literal of at most a tenth of max_length in tokens (about 4 characters each):
    the budget is left all but whole (doctor-real-3 e38: a two-character prompt, max_length=200; doctor-real-4 g22:
    a 75-character prompt, max_length=500; doctor-real-6 s12: three one-to-three-word prompts, max_length=100)."""
    n = s.number(value)
    if c in s.pipelines:
        return False  # a pipeline handed to another library: its prompts are not in the file
    texts = generation_prompts(s, c)
    if not isinstance(n, int) or n < 64 or not texts:
        return False
    return all((t := literal_texts(s, a)) and all(len(x) < 40 or len(x) / 4 <= n / 10 for x in t) for a in texts)


def _handed_off(s: Script) -> list[tuple[ast.Call, dict[str, ast.expr]]]:
    """Text-generation pipelines never called in the file but handed to another library (LangChain's
    HuggingFacePipeline(pipeline=pipe)), which calls them with its prompts: (pipeline, its keywords)."""
    called = {  # every pipeline a call's name may hold (a try and its fallback build two: doctor-real-5 p09)
        o
        for c in s.calls
        if isinstance(c.func, ast.Name | ast.Attribute)
        for o in s.origins(c.func)
        if o in s.pipelines and o is not c  # (`pipeline = pipeline(...)` does not call itself)
    }
    out = []
    for p in s.pipelines:
        if p in called or task_of(p) != "text-generation" or has_star_kwargs(p):
            continue
        names = s.flow_names(p)
        if any(
            isinstance(a, ast.Name) and a.id in names
            for c in s.calls
            for a in [*c.args, *(k.value for k in c.keywords)]
        ):
            out.append((p, {k.arg: k.value for k in p.keywords if k.arg}))
    return out


# a max_length at a context's own scale is a ceiling on the whole sequence, not an answer's budget that the prompt
# eats into (doctor-real-11 b10: 131072, Llama 3.1's context, labelled so)
CONTEXT_SCALE = 8192
# a thousand tokens or more is that too for a prompt a person types (doctor-real-12 a02: 1512 over a chat message,
# labelled so; of the seen material's 40 IT014 findings labelled problems none had a max_length over 256), but not
# for one built from retrieved text or a history, which fills it (THUDM/WebGLM issue 5: 1024 over web references)
TYPED_SCALE = 1000
LONG_PARTS = lazy_compile(
    r"^(refs?|references|contexts?|docs?|documents?|passages?|retrieved\w*|history|chunks?|knowledge|evidence|"
    r"transcripts?|articles?|sources?)$",
    IGNORECASE,
)


def _filled_by_context(s: Script, c: ast.Call) -> bool:
    """A prompt joined from retrieved text or a history (`refs + question`, f"{context}...")."""
    texts = generation_prompts(s, c)
    return any(
        isinstance(n, ast.Name) and LONG_PARTS.match(n.id)
        for t in texts
        for o in [t, *s.origins(t)]
        if isinstance(o, ast.AST)
        for n in ast.walk(o)
    )


def max_length_budget(s: Script):
    handed = [(p, kws, False, False) for p, kws in _handed_off(s)]
    for c, kws, _, opaque in generation_calls(s) + handed:
        if unprompted(s, c) or no_text_input(s, c):
            continue  # (no prompt: max_length counts the caption's or the transcript's tokens alone)
        if "max_length" in kws and (
            _sized_to_input(s, kws["max_length"])
            or _tiny_prompt(s, c, kws["max_length"])
            or (isinstance(n := s.number(kws["max_length"]), int) and n >= CONTEXT_SCALE)
            or (isinstance(n, int) and n >= TYPED_SCALE and not _filled_by_context(s, c))
        ):
            continue
        if (
            "max_length" in kws
            and "max_new_tokens" not in kws
            and not opaque
            and not encoder_decoder_call(s, c)
            and not _dialogpt_budget(s, kws["max_length"])
        ):
            yield (
                kws["max_length"],
                (
                    "max_length counts the prompt's tokens too: a long prompt leaves few or no "
                    "new tokens (max_new_tokens counts only the answer)"
                ),
            )


# --- IT036: generate with no length ------------------------------------------------------------------------------

# a length given (max_tokens is an OpenAI name transformers ignores: IT019 says so, once)
LENGTHS = {"max_new_tokens", "max_length", "generation_config", "max_time", "stopping_criteria", "max_tokens"}
# checkpoints whose generation_config.json sets a length (Llama 2's: max_length 4096)
SETS_LENGTH = lazy_compile(r"llama-?2", IGNORECASE)


def _length_set_elsewhere(s: Script) -> bool:
    """A length written outside the call (model.generation_config.max_new_tokens = N, a GenerationConfig), or in
    the cached checkpoint's generation_config.json, or a checkpoint known to set one."""
    if any(isinstance(n, ast.Attribute) and n.attr in ("max_new_tokens", "max_length") for n in s.nodes):
        return True
    if any(callee(c) == "GenerationConfig" for c in s.calls):
        return True
    defaults = s.generation_defaults or {}
    if defaults.get("max_length") not in (None, 20) or defaults.get("max_new_tokens") is not None:
        return True
    return any(SETS_LENGTH.search(i) for i in s.model_ids())


# T5 and Flan-T5 set no length of their own (their generation_config.json has none, unlike Marian's 512, BART-CNN's
# 142 or Whisper's 448): a generate or text2text-generation call with none stops at 20 tokens (doctor-real-7 t05, a
# Flan-T5 endpoint, labelled so; doctor-real-4 g09, a fixed three-word prompt, silent: 20 tokens answer it)
NO_OWN_LENGTH = lazy_compile(r"(^|[-_/])(flan-|m)?t5([-_]|$)", IGNORECASE)


def _t5_unbounded(s: Script):
    """generate on a T5 load, or a text2text-generation pipeline of one, given no length, in a function (a route, a
    helper: its text comes from a caller) on a text not written in the file. At module level, fixed sentences
    (doctor-real-2 d09: three short ones to translate) are answered within 20 tokens."""
    for c in s.calls:
        if c in s.generates:
            ids, given, texts = [s.model_id(m) for m in s.models_of(receiver(c))], c.keywords, prompts_of(s, c)
        elif (p := pipe_of(s, c)) is not None and task_of(p) == "text2text-generation":
            ids, given, texts = [s.pipeline_model_id(p)], [*c.keywords, *p.keywords], list(c.args[:1])
        else:
            continue
        if (
            ids
            and s.enclosing_function(c) is not None
            and all(NO_OWN_LENGTH.search(i or "") for i in ids)
            and not any(k.arg is None or k.arg in LENGTHS or k.arg == "generate_kwargs" for k in given)
            and texts
            and not all(literal_texts(s, a) for a in texts)
        ):
            yield c


# checkpoints whose config.json sets `task_specific_params: {"text-generation": {"max_length": 50, ...}}`, which the
# pipeline applies (transformers PR 4295: GPT-2, OpenAI GPT, XLNet, Transformer-XL, CTRL, Reformer)
TASK_LENGTH = lazy_compile(
    r"^((distil)?gpt2(-(medium|large|xl))?|openai-gpt|xlnet-\w+|transfo-xl-\w+|ctrl)$", IGNORECASE
)


def _pipeline_unbounded(s: Script):
    """A text-generation pipeline given no length, where the pins allow transformers before 4.52 (or say nothing): one
    finding per pipeline, naming both outcomes. Silent for GPT-2, whose config.json sets max_length 50 for this task,
    and for an encoder-decoder's checkpoint."""
    if s.target.at_least(PIPELINE_DEFAULT):
        return
    seen: set[ast.Call] = set()
    for c, kws, _, opaque in generation_calls(s):
        pipe = pipe_of(s, c) if method(c) != "generate" else None
        if pipe is None or pipe in seen or opaque or LENGTHS & set(kws) or task_of(pipe) != "text-generation":
            continue
        model = s.pipeline_model_id(pipe)
        if not model or local_path(model) or TASK_LENGTH.search(id_name(model)) or SEQ2SEQ_ID.search(id_name(model)):
            continue  # (a local folder's generation_config.json is not known here)
        seen.add(pipe)
        yield (
            c,
            "a text-generation pipeline called with no max_new_tokens: before transformers 4.52 it stops at the "
            "checkpoint's max_length, 20 tokens counting the prompt unless its generation_config.json sets one (a "
            "chat prompt leaves no room); 4.52+ allows 256 new tokens; pass max_new_tokens=N",
        )


def default_length(s: Script):
    if _length_set_elsewhere(s):
        return
    for c in _t5_unbounded(s):
        yield (
            c,
            "no max_new_tokens for a T5 checkpoint, which sets no length of its own: every output stops at "
            "transformers' default of 20 tokens",
        )
    yield from _pipeline_unbounded(s)
    for c, kws, known, opaque in generation_calls(s):
        if method(c) != "generate" or opaque or LENGTHS & set(kws) or not known:
            continue
        if encoder_decoder_call(s, c) or unprompted(s, c):
            continue  # seq2seq checkpoints carry their own max_length (Marian 512, Whisper 448)
        yield (
            c,
            "generate with no max_new_tokens: unless the checkpoint's generation_config.json sets a length, it "
            "stops after transformers' default of 20 tokens (older releases: 20 tokens, prompt included)",
        )
