"""IT012: trust_remote_code=True where nothing needs it (a checkpoint transformers implements natively)."""

from __future__ import annotations

import re

from infertune.doctor.nodes import const, kw, lazy_compile, method, pipeline_model
from infertune.doctor.script import Script

# Checkpoints whose architecture transformers implements itself (by the id's last part); those that need their own
# code win over them (Qwen 1's "Qwen-7B", ChatGLM, InternLM, Florence-2, IndicTrans2, jina/nomic BERTs, ...).
NATIVE_ID = lazy_compile(
    r"llama|mistral|mixtral|qwen1\.5|qwen2|qwen3|gemma|phi-?[34]|gpt2|gpt-neo|gpt-j|pythia|opt-\d|bloom|starcoder2|"
    r"codellama|tinyllama|zephyr|vicuna|smollm|smolvlm|olmo|granite|stablelm|llava|idefics|whisper|"
    r"^t5|flan-t5|^bart|m2m100|nllb|opus-mt|bert|roberta|deepseek-r1-distill",
    re.I,
)
NEEDS_CODE_ID = lazy_compile(
    r"qwen-|chatglm|glm-4|baichuan|internlm|internvl|minicpm|florence|indictrans|deepseek-v[23]|jina|nomic|mpt-|"
    r"xgen|moss|cogvlm|molmo|kimi|aquila|telechat|openelm|falcon|phi-1|phi-2|yi-vl|mplug|blip-3|xgen|sfr-",
    re.I,
)


def _native_checkpoint(model: str | None) -> bool:
    name = (model or "").rstrip("/").rsplit("/", 1)[-1]
    return bool(name) and bool(NATIVE_ID.search(name)) and not NEEDS_CODE_ID.search(name)


def trust_remote_code(s: Script):
    """Only on transformers' loaders (not datasets.load_dataset), for a checkpoint transformers runs natively."""
    for c in s.calls:
        v = kw(c, "trust_remote_code")
        if v is None or not (origins := s.origins(v)) or not all(const(o) is True for o in origins):
            continue
        if method(c) == "from_pretrained":
            model = s.model_id(c)
        elif c in s.pipelines and (m := pipeline_model(c)) is not None:
            loads = s.models_of(m)
            model = s.model_id(loads[0]) if loads else next((t for _, t in s.strings(m)), None)
        else:
            continue
        if _native_checkpoint(model):
            yield (
                v,
                f"trust_remote_code=True for {model}, an architecture transformers implements itself: nothing needs "
                "the repository's Python, which this flag would run (now or after a later push); drop it",
            )
