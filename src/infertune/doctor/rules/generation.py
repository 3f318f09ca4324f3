"""Generation rules: what goes into `generate` (or a text-generation pipeline). What comes out: rules/outputs.py."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    ENCODER_DECODER,
    IGNORECASE,
    callee,
    const,
    dotted,
    has_star_kwargs,
    kw,
    lazy_compile,
    local_path,
    method,
    receiver,
    task_given,
    task_of,
)
from infertune.doctor.script import Script

TYPE_CHECKING = False  # (collections.abc costs a check ~2 ms of start-up; type checkers read this as True)
if TYPE_CHECKING:
    from collections.abc import Sequence

SAMPLING = ("temperature", "top_p", "top_k", "repetition_penalty", "typical_p", "min_p")
SAMPLE_ONLY = ("temperature", "top_p", "top_k", "typical_p", "min_p")
OPENAI_ONLY = {
    "presence_penalty": "repetition_penalty",
    "frequency_penalty": "repetition_penalty",
    "stop": "stop_strings=[...] with tokenizer=tok",
    "max_tokens": "max_new_tokens",
    "n": "num_return_sequences",
    "logit_bias": "sequence_bias",
    "best_of": "num_beams",
    "logprobs": "output_scores=True",
    "user": None,
}
TEXT_TASKS = (None, "text-generation", "image-text-to-text")


def pipe_of(s: Script, c: ast.Call) -> ast.Call | None:
    """The pipeline this call calls, if it is one of the file's pipelines."""
    return next((o for o in s.origins(c.func) if o in s.pipelines and o is not c), None)  # (pipeline = pipeline(...))


def variable_task(p: ast.Call) -> bool:
    """The pipeline's task is given but not as a literal (`pipeline(task, model=name)` from a request): a
    pass-through whose task and model are the caller's, about which the generation rules have nothing to say."""
    return task_given(p) is not None and task_of(p) is None


def _dict_kws(s: Script, node: ast.AST | None) -> tuple[dict[str, ast.expr], bool]:
    """The keywords a `**x` / `kwargs=x` carries when x is a dict(...) or {...} of this file; (kws, opaque)."""
    out: dict[str, ast.expr] = {}
    found = opaque = False
    for o in s.origins(node):
        if isinstance(o, ast.Call) and callee(o) == "dict":
            found = True
            out |= {k.arg: k.value for k in o.keywords if k.arg}
            opaque |= any(k.arg is None and s.star_options_value(k.value) for k in o.keywords)
        elif isinstance(o, ast.Dict):
            found = True
            out |= {const(k): v for k, v in zip(o.keys, o.values, strict=True) if isinstance(const(k), str)}
            opaque |= any(k is None for k in o.keys)
    return out, opaque or not found


def call_options(s: Script, c: ast.Call, extra: Sequence[ast.keyword] = ()) -> tuple[dict[str, ast.expr], bool]:
    """A call's keywords, with a **dict's it unpacks (and `extra`, a pipeline's); and whether some are unknown."""
    kws = {k.arg: k.value for k in [*extra, *c.keywords] if k.arg}
    opaque = False
    for k in c.keywords:
        if k.arg is None and s.star_options_value(k.value):
            more, o = _dict_kws(s, k.value)
            kws, opaque = more | kws, opaque or o
    return kws, opaque


def generation_calls(s: Script) -> list[tuple[ast.Call, dict[str, ast.expr], bool, bool]]:
    """generate and text-generation pipeline calls (also Thread(target=model.generate, kwargs=...)):
    (call, its keywords with the pipeline's and a **dict's, known transformers model, options unknown)."""
    out = []
    for g in s.generates:
        kws, opaque = call_options(s, g)
        out.append((g, kws, bool(s.models_of(receiver(g))), opaque))
    for c in s.calls:
        target = kw(c, "target") or (c.args[0] if callee(c) == "submit" and c.args else None)
        if callee(c) in ("Thread", "submit") and isinstance(target, ast.Attribute) and target.attr == "generate":
            kws, opaque = _dict_kws(s, kw(c, "kwargs")) if kw(c, "kwargs") is not None else ({}, True)
            out.append((c, kws, bool(s.models_of(target.value)), opaque))
        p = pipe_of(s, c) if isinstance(c.func, (ast.Name, ast.Attribute)) else None
        if p is not None and task_of(p) in TEXT_TASKS and not variable_task(p):
            kws, opaque = call_options(s, c, [k for k in p.keywords if k.arg])
            out.append((c, kws, True, opaque))
    return out


def written_at(s: Script, c: ast.Call, kws: dict[str, ast.expr], keys: list[str]) -> ast.AST:
    """Where the first of these keywords is written (its value, like ruff points at the argument: in the call,
    the pipeline's construction or a kwargs dict), else the call itself."""
    return next((kws[k] for k in keys if k in kws and hasattr(kws[k], "lineno")), c)


def encoder_decoder_call(s: Script, g: ast.Call) -> bool:
    """Does this call run an encoder-decoder model (its generate's model, else any model or pipeline of the file)?"""
    models = s.models_of(receiver(g)) if method(g) == "generate" else []
    if models:
        return any(ENCODER_DECODER.search(s.model_class(m)) for m in models)
    # forced_bos_token_id picks the target language of NLLB, M2M100 and mBART-50, multilingual encoder-decoders
    # (doctor-real-27 c11: a translate helper handed its model)
    return s.encoder_decoder() or kw(g, "forced_bos_token_id") is not None or _padded_past_its_cap(s, g)


def _padded_past_its_cap(s: Script, g: ast.Call) -> bool:
    """The input is padded to N tokens (`padding="max_length", max_length=N`) and generate's max_length is at most N:
    a decoder-only model would have no room to write a token, so the model writes a sequence of its own, an
    encoder-decoder's (doctor-real-28 a10: a summarizer padding dialogues to 512 and capping summaries at 150)."""
    cap = s.number(kw(g, "max_length")) if method(g) == "generate" else None
    if not isinstance(cap, int):
        return False
    for c in s.calls:
        if s.is_tokenizer_call(c) and const(kw(c, "padding")) == "max_length" and g in s.sinks_of(c):
            n = s.number(kw(c, "max_length"))
            if isinstance(n, int) and n >= cap:
                return True
    return False


# transformers 4.52 gave the pipelines that generate a default of their own (PR 38129, read in the 4.51.3 and 4.52.4
# wheels): the text-generation pipeline's is max_new_tokens=256 with do_sample=True, applied where the model's
# generation config sets none. Before it the pipeline took the checkpoint's max_length, 20 unless its
# generation_config.json says otherwise, counting the prompt (doctor-real-12 d11, doctor-real-13 d09: both labelled
# so), and decoded greedily (IT014's and IT015's findings)
PIPELINE_DEFAULT = (4, 52)


# --- IT006, IT010, IT014, IT015 -------------------------------------------------------------------------


def _static_cache(s: Script) -> bool:
    if any(callee(c) in ("StaticCache", "CompileConfig") for c in s.calls):
        return True
    for n in s.nodes:
        if (
            isinstance(n, ast.keyword)
            and n.arg in ("cache_implementation", "compile_config")
            and const(n.value) in ("static", "hybrid", "sliding_window")
        ) or (isinstance(n, ast.keyword) and n.arg == "compile_config"):
            return True
        if isinstance(n, ast.Assign) and any(dotted(t).endswith("cache_implementation") for t in n.targets):
            return True
    return False


def compile_outside_generate(s: Script):
    if _static_cache(s):
        return  # the documented recipe: static cache (+ compiling forward)
    for c in s.calls:
        if dotted(c.func) != "torch.compile" or not c.args:
            continue
        arg = c.args[0]
        base = arg.value if isinstance(arg, ast.Attribute) and arg.attr == "forward" else arg
        models = s.models_of(base)
        generative = [m for m in models if any(m in s.models_of(receiver(g)) for g in s.generates)]
        if generative or (not models and dotted(base) in ("model", "self.model") and s.generates):
            yield (
                c,
                (
                    "torch.compile on the model outside generate: every decode step has a new shape and "
                    "recompiles (or falls back)"
                ),
            )


def hardcoded_sampling(s: Script):
    known = s.generation_defaults
    for c, kws, hf, _ in generation_calls(s):
        given = [k for k in SAMPLING if isinstance(kws.get(k), ast.Constant)]
        if not hf or not given or const(kws.get("do_sample")) is False:
            continue  # (greedy chosen on purpose: values it ignores are IT015's)
        if known is None:
            yield (
                written_at(s, c, kws, given),
                (
                    f"sampling parameters hard-coded ({', '.join(given)}): they override the tuned defaults in "
                    "the model's generation_config.json"
                ),
            )
        else:
            over = [f"{k} (model: {known[k]})" for k in given if k in known]
            if over:
                yield (written_at(s, c, kws, given), f"overrides the model's generation_config.json: {', '.join(over)}")


def unprompted(s: Script, c: ast.Call) -> bool:
    """model.generate(...) given no input at all (no ids, no **inputs, no embeddings): it samples from BOS, so
    there is no prompt to count or to decode back."""
    inputs = ("input_ids", "inputs", "inputs_embeds", "input_features", "pixel_values", "input_values")
    return c in s.generates and not c.args and not any(k.arg is None or k.arg in inputs for k in c.keywords)


FEATURES = ("pixel_values", "input_features", "input_values")


def _features(s: Script, e: ast.expr) -> bool:
    """An image's or a sound's features: `pixel_values`, `inputs.pixel_values`, `inputs["input_features"]`, or a
    name bound to one of those."""
    for o in [e, *s.origins(e)]:
        if isinstance(o, ast.Subscript) and const(o.slice) in FEATURES:
            return True
        if isinstance(o, (ast.Name, ast.Attribute)) and dotted(o).rsplit(".", 1)[-1] in FEATURES:
            return True
    return False


def no_text_input(s: Script, c: ast.Call) -> bool:
    """model.generate(pixel_values=...) (or input_features/input_values, by keyword or as its one positional input)
    with no text ids: a caption or a transcript from the image or audio alone, whose output holds no prompt
    (doctor-real-26 c09: BLIP, ViT-GPT2, GIT captions; doctor-real-28 c10: TrOCR's `generate(pixel_values, ...)`)."""
    text = ("input_ids", "inputs", "inputs_embeds")
    given = [k.arg for k in c.keywords if k.arg in FEATURES]
    return (
        c in s.generates
        and (len(c.args) == 1 and _features(s, c.args[0]) if c.args else bool(given))
        and not any(k.arg in text or (k.arg is None and not s.star_options_value(k.value)) for k in c.keywords)
    )


# published checkpoints whose generation_config.json says do_sample: true, so a temperature given without
# do_sample is used (docs/doctor.md#it015 lists the files): Llama 2 and 3.x, the Qwen2/2.5 instruct and Qwen3
# releases, the DeepSeek-R1 distills; by the id's last part
SAMPLES_BY_DEFAULT = lazy_compile(
    r"(^|/)(llama-2-\d+b(-chat)?-hf|(meta-)?llama-3(\.\d)?-\d+b(-instruct)?|qwen(2|2\.5)-[\d.]+b-instruct|"
    r"qwen3-[\d.]+b(-fp8)?|deepseek-r1-distill-[\w.-]+)$",
    IGNORECASE,
)
# GPT-2's config.json carries task_specific_params {"text-generation": {"do_sample": true, ...}}, which the
# text-generation pipeline applies to the model's generation config: its pipelines sample
GPT2_PIPELINE = lazy_compile(r"(^|/)(distil)?gpt2(-medium|-large|-xl)?$", IGNORECASE)


def _samples_elsewhere(s: Script) -> bool:
    """do_sample=True set outside the call: a GenerationConfig, generation_config.do_sample = True, the model's
    (its generation_config.json when it is here, else a published one that samples)."""
    if (s.generation_defaults or {}).get("do_sample") is True:
        return True
    if any(SAMPLES_BY_DEFAULT.search(i.rstrip("/")) for i in s.model_ids()):
        return True
    weights = s.weight_ids()
    if weights and not any(i and not local_path(i) for i in weights):
        return True  # (unknown weights: whether their generation_config.json samples is not known here)
    for n in s.nodes:
        if (
            isinstance(n, ast.keyword)
            and n.arg == "do_sample"
            and const(n.value) is not False
            and (not isinstance(s.parents.get(n), ast.Call) or method(s.parents[n]) != "generate")
        ):
            return True
        if isinstance(n, ast.Assign) and any(dotted(t).endswith("do_sample") for t in n.targets):
            return True
    return False


def _unfilled_kwargs(s: Script, c: ast.Call) -> bool:
    """Every `**x` of the call is its function's own `**kwargs`, and no call of that function in the file passes a
    keyword beyond its named parameters (alpaca-lora's `evaluate(..., **kwargs)`, a Gradio callback called with
    its inputs only: doctor-real-14 d15, doctor-real-15 b05): nothing comes in through it."""
    fn = s.enclosing_function(c)
    if fn is None or (rest := fn.args.kwarg) is None:
        return False
    if any(k.arg is None and dotted(k.value) != rest.arg for k in c.keywords):
        return False
    named = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    return all(k.arg in named for x in s.call_sites(fn) for k in x.keywords)


def sampling_ignored(s: Script):
    elsewhere = None
    configs = [
        (g, {k.arg: k.value for k in g.keywords if k.arg}, True, has_star_kwargs(g) and not _unfilled_kwargs(s, g))
        for g in s.calls_named("GenerationConfig")
    ]
    for c, kws, hf, opaque in generation_calls(s) + configs:
        given = [
            k
            for k in SAMPLE_ONLY
            if (k in kws and const(kws[k]) not in (0, 0.0, 1.0, None) and (k, const(kws[k])) != ("top_k", 50))
            or (k in kws and not isinstance(kws[k], ast.Constant))
        ]
        if not hf or not given or opaque or "generation_config" in kws:
            continue
        ds, beams = kws.get("do_sample"), const(kws.get("num_beams"))
        if ds is not None and const(ds) is not False:
            continue
        pipe = pipe_of(s, c) if ds is None and isinstance(c.func, (ast.Name, ast.Attribute)) else None
        if pipe is not None and GPT2_PIPELINE.search((s.pipeline_model_id(pipe) or "").rstrip("/")):
            continue
        if ds is None:
            elsewhere = _samples_elsewhere(s) if elsewhere is None else elsewhere
            if elsewhere:
                continue
        if isinstance(beams, int) and beams > 1:
            yield (
                written_at(s, c, kws, given),
                (f"{', '.join(given)} with beam search and no do_sample=True: beam search ignores them"),
            )
        elif pipe is not None and task_of(pipe) in ("text-generation", None):
            if not s.target.at_least(PIPELINE_DEFAULT):  # from 4.52 its own defaults sample
                yield (
                    written_at(s, c, kws, given),
                    f"{', '.join(given)} without do_sample=True: before transformers 4.52 the pipeline decodes "
                    "greedily and ignores them (from 4.52 it samples by default, unless the model's "
                    "generation_config.json says otherwise)",
                )
        else:
            yield (
                written_at(s, c, kws, given),
                (
                    f"{', '.join(given)} without do_sample=True: greedy decoding ignores them (unless the model's "
                    "generation_config.json samples)"
                ),
            )


# --- IT019 ----------------------------------------------------------------------------------------------


def openai_args(s: Script):
    for c, kws, hf, _ in generation_calls(s):
        if not hf:
            continue
        bad = [k for k in kws if k in OPENAI_ONLY]
        if bad:
            fixes = [f"{k} -> {OPENAI_ONLY[k]}" for k in bad if OPENAI_ONLY[k]]
            yield (
                written_at(s, c, kws, bad),
                (
                    f"{', '.join(bad)}: OpenAI API arguments, not generate's; transformers raises 'model_kwargs are "
                    "not used'" + (f" ({'; '.join(fixes)})" if fixes else "")
                ),
            )


# --- IT033 ----------------------------------------------------------------------------------------------
