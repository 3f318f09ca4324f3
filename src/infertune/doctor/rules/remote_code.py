"""IT012: trust_remote_code=True where nothing needs it (a checkpoint transformers implements natively); IT035: its
absence where the checkpoint needs its own code."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    TOKENIZER_CLASS,
    const,
    dotted,
    has_star_kwargs,
    id_name,
    kw,
    lazy_compile,
    method,
    pipeline_model,
    receiver,
    task_given,
)
from infertune.doctor.script import Script

# Checkpoints whose architecture transformers implements itself (by the id's last part); those that need their own
# code win over them (Qwen 1's "Qwen-7B", ChatGLM, InternLM, Florence-2, IndicTrans2, jina/nomic BERTs, ...). Phi-1,
# -1.5 and -2 shipped their own code in 2023 and are native since transformers 4.37, their repositories converted
# (doctor-real-4 f03 and doctor-real-7 t17, labelled so). RLHFlow's ArmoRM names Llama 3 but ships its own gated
# reward head (doctor-real-8 w10). Microsoft's CodeGPT checkpoints are GPT-2 (GPT2LMHeadModel; doctor-real-14 b01's
# fine-tune of one). DeepSeek-Coder (1.3B to 33B) is Llama (LlamaForCausalLM, a 32256-token vocabulary and linear
# RoPE scaling, all native; doctor-real-22 d02, d03, d01: labelled so); DeepSeek-Coder-V2 ships its own code.
NATIVE_ID = lazy_compile(
    r"llama|mistral|mixtral|qwen1\.5|qwen2|qwen3|gemma|phi-?[1-4]|gpt2|codegpt|gpt-neo|gpt-j|pythia|opt-\d|bloom|starcoder2|"
    r"codellama|tinyllama|zephyr|vicuna|smollm|smolvlm|olmo|granite|stablelm|llava|idefics|whisper|"
    r"^t5|flan-t5|^bart|m2m100|nllb|opus-mt|bert|roberta|deepseek-r1-distill|deepseek-coder",
    IGNORECASE,
)
NEEDS_CODE_ID = lazy_compile(
    r"qwen-(1_8b|\d+b|vl|audio)|chatglm|glm-4|baichuan|internlm|internvl|minicpm|florence|indictrans|"
    r"deepseek-(coder-)?v[23]|jina|nomic|mpt-|"
    r"xgen|moss|cogvlm|molmo|kimi|aquila|telechat|openelm|falcon|yi-vl|mplug|blip-3|sfr-|armorm",
    IGNORECASE,
)
# Microsoft's Phi-3 and Phi-3.5 repositories still ship the modelling code their cards load with the flag (from
# before transformers had Phi3: 4.41, read in the 4.40.2 and 4.41.2 wheels). That code calls
# DynamicCache.get_max_length, gone from transformers 4.49 (read in the 4.48.3 and 4.49.0 wheels): generate fails
# (transformers issue 36071). Before 4.49 the flag ran working code, as the card said (doctor-real-6 r14, May 2024).
PHI3_CODE_ID = lazy_compile(r"phi-3", IGNORECASE)


def _native_checkpoint(model: str | None) -> bool:
    name = id_name(model)
    return bool(name) and bool(NATIVE_ID.search(name)) and not NEEDS_CODE_ID.search(name)


def trust_remote_code(s: Script):
    """Only on transformers' loaders (not datasets.load_dataset), for a checkpoint transformers runs natively. Not on
    a pipeline given no task: with the flag, `pipeline()` takes the task and its class from the checkpoint's
    config.json `custom_pipelines` when it has one (read in 5.x's pipelines/__init__.py, the same in vendored 4.x
    copies: kotoba-whisper v2.2's diarizing ASR, doctor-real-21 c07, labelled fine)."""
    for c in s.calls:
        v = kw(c, "trust_remote_code")
        if v is None or not (origins := s.origins(v)) or not all(const(o) is True for o in origins):
            continue
        if method(c) == "from_pretrained":
            model = s.model_id(c)
        elif c in s.pipelines and (m := pipeline_model(c)) is not None:
            if task_given(c) is None:
                continue  # no task: a checkpoint's config.json `custom_pipelines` picks its own pipeline code
            loads = s.models_of(m)
            model = s.model_id(loads[0]) if loads else next((t for _, t in s.strings(m)), None)
        else:
            continue
        if PHI3_CODE_ID.search(id_name(model)) and not _is_tokenizer(c):  # (its tokenizer is Llama's)
            if not s.target.may_be_before((4, 49)):
                yield (
                    v,
                    f"trust_remote_code=True for {model} runs its repository's Phi-3 code (the card's advice from "
                    "before transformers 4.41 had Phi-3), which fails in generate from transformers 4.49 on "
                    "('DynamicCache' object has no attribute 'get_max_length'); drop the flag",
                )
        elif _native_checkpoint(model):
            yield (
                v,
                f"trust_remote_code=True for {model}, an architecture transformers implements itself: nothing needs "
                "the repository's Python, which this flag would run (now or after a later push); drop it",
            )


# --- IT035: a checkpoint that needs its own code, loaded without trust_remote_code -------------------------------

# architectures transformers does not ship (by the id's last part): their repositories hold the modelling (and often
# tokenizer) code, and an Auto class refuses them without trust_remote_code=True. Native conversions end in -hf.
OWN_CODE_ID = lazy_compile(
    r"^(chatglm\d?|internlm\d?(\.5)?|baichuan\d?|indictrans2|qwen-(1_8b|\d+b|vl|audio)|minicpm|cogvlm|molmo|moss-|"
    r"telechat|openelm|internvl\d?)",
    IGNORECASE,
)
AUTO_LOADERS = lazy_compile(r"^Auto\w+$")


def _is_tokenizer(c: ast.Call) -> bool:
    return method(c) == "from_pretrained" and bool(TOKENIZER_CLASS.search(dotted(receiver(c)).rsplit(".", 1)[-1]))


def _needs_code(model: str | None) -> bool:
    name = id_name(model)
    return bool(OWN_CODE_ID.search(name)) and not name.lower().endswith("-hf")


def missing_remote_code(s: Script):
    """An Auto class (or a pipeline) given a literal id of an architecture only its repository implements,
    with no trust_remote_code (or a literal False) and no **kwargs that might carry it. One finding per id: at
    the model's load (the tokenizer's fails the same way, and takes the same flag)."""
    found: dict[str, ast.Call] = {}
    for c in s.calls:
        if method(c) == "from_pretrained":
            cls = dotted(receiver(c)).rsplit(".", 1)[-1]
            if not AUTO_LOADERS.match(cls):
                continue  # the repository's own class, imported: it needs no flag
            model = s.model_id(c)
        elif c in s.pipelines and (m := pipeline_model(c)) is not None:
            cls, model = "pipeline", next((t for _, t in s.strings(m)), None)
        else:
            continue
        v = kw(c, "trust_remote_code")
        if model is None or has_star_kwargs(c) or not _needs_code(model):
            continue
        if v is not None and not all(const(o) is False for o in s.origins(v) or [v]):
            continue
        if model not in found or (_is_tokenizer(found[model]) and not TOKENIZER_CLASS.search(cls)):
            found[model] = c
    for model, c in found.items():
        yield (
            c,
            f"{model} ships its own modelling code (transformers does not implement it): without "
            "trust_remote_code=True the load fails",
        )
