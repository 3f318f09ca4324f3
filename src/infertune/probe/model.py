"""A model's shape from its config.json, without loading weights.

The parameter count is exact: the model is instantiated on the meta device (no memory, ~10 ms), which
counts tied embeddings once. Safetensors headers are the fallback (for quantized checkpoints those count
packed bytes, not parameters, so they are labelled as such). The checkpoint as stored (bytes, elements per
dtype) comes from the safetensors headers: the folder's own files, or those infertune.hub read from the Hub
by range request for a model fetched without its weights.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from infertune.errors import UserError


class ModelProfile(BaseModel):
    path: str
    model_type: str
    architecture: str | None
    num_layers: int
    hidden_size: int
    intermediate_size: int | None
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    sliding_window: int | None
    layer_types: list[str]
    native_dtype: str | None
    quantization: dict | None
    num_parameters: int | None
    parameter_count_source: Literal["meta-device", "safetensors-header"] | None
    param_groups: dict[str, int] | None = None  # embedding / lm_head / linear / other (see _count_meta)
    linear_rows: int | None = None  # sum of out_features over Linear layers: per-row quantization scales
    checkpoint_format: Literal["safetensors", "pytorch", "gguf"] | None
    checkpoint_bytes: int  # safetensors: the tensors' bytes as stored (from the headers); else the files' sizes
    checkpoint_dtypes: dict[str, int] | None = None  # safetensors: elements per stored dtype (BF16, F32, I32, ...)
    # The model class's own support flags (sdpa, flash_attn, flex_attn, compile, tp_plan); empty: unknown
    # (an architecture transformers does not ship, e.g. remote code).
    supports: dict[str, bool] = {}

    @property
    def linear_params(self) -> int:
        """Linear weights inside the blocks (what quantization touches); without groups, all but the embedding."""
        if self.param_groups:
            return self.param_groups.get("linear", 0)
        return (self.num_parameters or 0) - self.vocab_size * self.hidden_size

    @property
    def num_sliding_layers(self) -> int:
        return sum(t == "sliding_attention" for t in self.layer_types)

    @property
    def num_global_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers


def load_config(path: str | Path, trust_remote_code: bool = False):
    """`AutoConfig` for a local model folder, with one-line errors for the usual breakages."""
    from transformers import AutoConfig

    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise UserError(f"{path} has no config.json: not a Hugging Face model folder")
    try:
        json.loads(cfg_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{cfg_file} is not valid JSON: {e}") from None
    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except ValueError as e:
        msg = str(e).splitlines()[0]
        if "trust_remote_code" in str(e) and not trust_remote_code:
            msg = "the model needs its own code; pass --trust-remote-code if you trust it"
        raise UserError(f"cannot read the config in {path}: {msg}") from None


def _layer_types(cfg, n_layers: int) -> list[str]:
    types = getattr(cfg, "layer_types", None)
    if types:
        return list(types)
    # Mistral-style: one window on every layer (Qwen2 sets sliding_window but switches it off).
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        return ["sliding_attention"] * n_layers
    return ["full_attention"] * n_layers


def _checkpoint(path: Path) -> tuple[str | None, int, dict[str, int] | None]:
    """(format, bytes, elements per stored dtype). Safetensors from the headers: the folder's own files, or
    those infertune.hub read for a hub model fetched without its weights; the bytes are the tensors' data."""
    from infertune.hub import safetensors_metadata

    st = safetensors_metadata(path)
    if st is not None:
        return "safetensors", sum(max((t.data_offsets[1] for t in f.tensors.values()), default=0)
                                  for f in st.files_metadata.values()), dict(st.parameter_count)
    for fmt, pattern in (("safetensors", "*.safetensors"), ("pytorch", "*.bin"), ("gguf", "*.gguf")):
        files = sorted(path.glob(pattern))
        if files:
            return fmt, sum(f.stat().st_size for f in files), None
    return None, 0, None


def _count_meta(cfg, trust_remote_code: bool) -> tuple[int, dict[str, int], int] | None:
    """(total, params per group, sum of Linear out_features) from a meta-device instance.

    Groups matter to quantization: `linear` weights inside the blocks get quantized; `embedding`,
    `lm_head` and `other` (norms, biases) keep the compute dtype. A tied tensor is counted once.
    """
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModelForCausalLM.from_config(cfg, trust_remote_code=trust_remote_code)
    except Exception:  # an architecture without a causal-LM head, or one that needs its own code
        return None
    groups = dict.fromkeys(("embedding", "lm_head", "linear", "other"), 0)
    rows, seen = 0, set()
    emb_in, emb_out = model.get_input_embeddings(), model.get_output_embeddings()
    for module in model.modules():
        for pname, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            if module is emb_in:
                group = "embedding"
            elif module is emb_out:
                group = "lm_head"
            elif isinstance(module, torch.nn.Linear) and pname == "weight":
                group = "linear"
                rows += module.out_features
            else:
                group = "other"
            groups[group] += param.numel()
    return sum(groups.values()), groups, rows


def _supports(cfg) -> dict[str, bool]:
    """Read the causal-LM class's support flags without instantiating it."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)]
    except KeyError:
        return {}
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return {
        "sdpa": bool(getattr(cls, "_supports_sdpa", False)),
        "flash_attn": bool(getattr(cls, "_supports_flash_attn", False)),
        "flex_attn": bool(getattr(cls, "_supports_flex_attn", False)),
        "compile": bool(getattr(cls, "_can_compile_fullgraph", False)),  # static cache + torch.compile
        "tp_plan": bool(getattr(text, "base_model_tp_plan", None)),
    }


def _count_safetensors(path: Path) -> int | None:
    from infertune.hub import safetensors_metadata

    st = safetensors_metadata(path)
    return sum(st.parameter_count.values()) if st is not None else None


ST_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


def _main_float(stored: dict[str, int] | None) -> str | None:
    """The checkpoint's main float dtype, for a config that names none."""
    floats = {ST_DTYPES[d]: n for d, n in (stored or {}).items() if d in ST_DTYPES}
    return max(floats, key=floats.get) if floats else None


def profile_model(path: str | Path, trust_remote_code: bool = False) -> ModelProfile:
    path = Path(path)
    cfg = load_config(path, trust_remote_code)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n_layers = int(text.num_hidden_layers)
    n_heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    head_dim = getattr(text, "head_dim", None) or hidden // n_heads  # an explicit head_dim wins (Gemma, Qwen3)
    meta = _count_meta(cfg, trust_remote_code)
    n_params, groups, rows = meta if meta is not None else (None, None, None)
    source = "meta-device" if n_params is not None else None
    if n_params is None:
        n_params = _count_safetensors(path)
        source = "safetensors-header" if n_params is not None else None
    fmt, nbytes, stored = _checkpoint(path)
    dtype = getattr(cfg, "dtype", None) or getattr(text, "dtype", None) or _main_float(stored)
    quant = getattr(cfg, "quantization_config", None)
    if quant is not None and not isinstance(quant, dict):
        quant = quant.to_dict()
    return ModelProfile(
        path=str(path),
        model_type=cfg.model_type,
        architecture=(cfg.architectures or [None])[0],
        num_layers=n_layers,
        hidden_size=hidden,
        intermediate_size=getattr(text, "intermediate_size", None),
        num_attention_heads=n_heads,
        num_kv_heads=int(getattr(text, "num_key_value_heads", None) or n_heads),
        head_dim=int(head_dim),
        vocab_size=int(text.vocab_size),
        tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
        max_position_embeddings=getattr(text, "max_position_embeddings", None),
        sliding_window=getattr(text, "sliding_window", None),
        layer_types=_layer_types(text, n_layers),
        native_dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
        quantization=quant,
        num_parameters=n_params,
        parameter_count_source=source,
        param_groups=groups,
        linear_rows=rows,
        checkpoint_format=fmt,
        checkpoint_bytes=nbytes,
        checkpoint_dtypes=stored,
        supports=_supports(cfg),
    )


def mlp_only_tp_plan(model_path: str, trust_remote_code: bool = False) -> dict[str, str]:
    """Overrides of the model's own tensor-parallel plan that replicate every attention projection, so
    only the MLP is split: for models whose head counts no useful size divides (SmolLM2: 9 and 3 heads).
    Keys carry the base model's prefix (model.layers.*.self_attn.q_proj), as from_pretrained matches them."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from infertune.errors import UserError

    cfg = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    plan = getattr(cfg, "base_model_tp_plan", None) or {}
    cls = AutoModelForCausalLM._model_mapping.get(type(cfg), None)
    prefix = getattr(cls, "base_model_prefix", "model") if cls is not None else "model"
    out = {f"{prefix}.{k}": "replicate" for k in plan if "attn" in k or "attention" in k}
    if not out:
        raise UserError(f"--tp-plan mlp: {type(cfg).__name__} has no attention rules in its tensor-parallel plan "
                        "to replicate")
    return out
