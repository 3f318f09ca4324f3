"""Exact parameter counts from a meta-device instance (no memory, ~10 ms to a few seconds), split into
the groups quantization and the roofline treat differently. Imported only the first time a model is seen.

Groups: `embedding` (input embeddings), `lm_head` (untied output head), `experts` (routed experts: fused
3D tensors or per-expert Linear layers), `linear` (every other Linear weight: attention, dense and shared
MLPs, routers, vision tower), `other` (norms, biases, convolutions, position tables). A tied tensor is
counted once. `towers` are the parameters a decode step does not read: a vision or audio tower, or the
encoder of an encoder-decoder (counted in the groups too).
"""

from __future__ import annotations

import warnings

TOWER_NAMES = ("vision", "visual", "image", "audio", "encoder", "multi_modal_projector", "mm_projector")


def _model_classes(cfg):
    from transformers import (
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
        AutoModelForSeq2SeqLM,
        AutoModelForSpeechSeq2Seq,
    )

    classes = [AutoModelForCausalLM, AutoModel]
    if getattr(cfg, "is_encoder_decoder", False):
        classes = [AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq, *classes]
    if any(getattr(cfg, n, None) is not None for n in ("vision_config", "audio_config")):
        classes = [AutoModelForImageTextToText, *classes]
    return classes


def meta_model(cfg, trust_remote_code: bool):
    """The model with its generation head (the whole model: towers included) on the meta device, or None."""
    import torch

    for auto in _model_classes(cfg):
        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return auto.from_config(cfg, trust_remote_code=trust_remote_code)
        except Exception:
            continue
    return None


def count(model) -> dict:
    """{'groups', 'rows', 'expert_rows', 'towers', 'experts_fused'} of a meta-device model."""
    import torch

    groups = dict.fromkeys(("embedding", "lm_head", "experts", "linear", "other"), 0)
    rows = expert_rows = towers = 0
    fused, seen = False, set()
    emb_in, emb_out = model.get_input_embeddings(), model.get_output_embeddings()
    for mname, module in model.named_modules():
        in_experts = ".experts" in f".{mname}" and "shared" not in mname
        in_tower = any(t in mname for t in TOWER_NAMES)
        for pname, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            n = param.numel()
            if module is emb_in:
                group = "embedding"
            elif module is emb_out:
                group = "lm_head"
            elif in_experts and param.dim() >= 3:  # fused experts: (experts, out, in) or (experts, in, out)
                group, fused = "experts", True
                expert_rows += n // param.shape[-1]
            elif isinstance(module, torch.nn.Linear) and pname == "weight":
                group = "experts" if in_experts else "linear"
                if in_experts:
                    expert_rows += module.out_features
                else:
                    rows += module.out_features
            else:
                group = "other"
            groups[group] += n
            towers += n if in_tower else 0
    return {"groups": groups, "rows": rows, "expert_rows": expert_rows, "towers": towers, "experts_fused": fused}


def supports(cfg) -> dict[str, bool]:
    """The generation class's support flags, read without instantiating it."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING

    cls = None
    for mapping in (MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING):
        try:
            cls = mapping[type(cfg)]
            break
        except KeyError:
            continue
    if cls is None:
        return {}
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return {
        "sdpa": bool(getattr(cls, "_supports_sdpa", False)),
        "flash_attn": bool(getattr(cls, "_supports_flash_attn", False)),
        "flex_attn": bool(getattr(cls, "_supports_flex_attn", False)),
        "compile": bool(getattr(cls, "_can_compile_fullgraph", False)),  # static cache + torch.compile
        "tp_plan": bool(getattr(text, "base_model_tp_plan", None)),
    }
