"""Per-architecture facts the estimator needs, read with the architecture's own rules.

Run once, the first time a model is seen (the result is cached with the profile, see probe/model.py):
it takes a transformers config object and the model instantiated on the meta device, and reads
- the cache layout: transformers' own `get_layer_types_and_kwargs` (cache_utils) decides which layer
  keeps a growing cache (full attention), a window (sliding and chunked: transformers keeps W - 1
  tokens), a fixed state (linear attention, Mamba/SSM, conv) or nothing (KV shared with another layer);
- the elements a growing layer caches per token, by the attention's own rules: multi-head latent
  attention caches the compressed latent and the rope key (`kv_lora_rank + qk_rope_head_dim`, one
  "head"); Falcon's `multi_query` (unless `new_decoder_architecture`) and GPTBigCode's `multi_query`
  keep one KV head; Falcon's `new_decoder_architecture` caches its `num_kv_heads` groups from
  transformers 5.25 on (before, it broadcast them to every head first and the cache held all); otherwise
  `num_key_value_heads` (or all heads) x head_dim, for K and for V;
- the fixed state of linear layers from the mixer modules themselves (the attributes their __init__
  computed): a depthwise Conv1d keeps `channels x kernel`; Mamba-1 `intermediate x state`, Mamba-2
  `heads x head_dim x state`, gated delta-net `v_heads x k_head_dim x v_head_dim`;
- Mllama's cross-attention layers cache the image's states, not the text's: nothing for a text prompt
  (an image adds 4 tiles x 1601 positions to each of them, not counted);
- experts (routed count, top-k, shared) and the context length.
Nothing here imports torch or transformers at module level.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

CacheKind = Literal["full", "sliding", "chunked", "linear", "hybrid", "cross", "none"]


class CacheGroup(BaseModel):
    """Layers that cache alike. Elements, not bytes (the dtype is the estimate's)."""

    kind: CacheKind
    layers: int
    kv_per_token: int = 0  # K + V elements one layer caches per token (0: no growing cache)
    window: int | None = None  # tokens a sliding/chunked layer keeps at most (W - 1 in transformers)
    state: int = 0  # elements one layer keeps per sequence in the dtype, whatever the length (conv state)
    state_fp32: int = 0  # ... and in float32 whatever the dtype (Mamba and delta-net recurrent states)


def _get(cfg, *names, default=None):
    for n in names:
        try:
            v = getattr(cfg, n, None)
        except Exception:
            v = None
        if v is not None:
            return v
    return default


def layer_configs(t, n: int) -> list:
    """Each layer's config: heterogeneous models (Gemma 4) give some layers their own head_dim / KV heads."""
    try:
        cfgs = list(t.per_layer_config)
    except (AttributeError, TypeError):
        cfgs = []
    return cfgs if len(cfgs) == n else [t] * n


def text_config(cfg):
    if getattr(cfg, "is_encoder_decoder", False) and getattr(cfg, "text_config", None) is None:
        return cfg  # BART/Whisper/T5: get_text_config(decoder=True) builds a fresh default config
    try:
        return cfg.get_text_config(decoder=True)
    except (AttributeError, TypeError):
        return cfg


def _falcon_caches_groups() -> bool:
    """Whether the installed transformers caches Falcon's KV groups as they are (5.25 and later)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return (major, minor) >= (5, 25)


def kv_heads_and_dims(t, model_type: str) -> tuple[int, int, int]:
    """(KV heads, K head size, V head size) of a growing attention layer, by the architecture's rules.
    MLA: one 'head' holding the latent (K slot) and the rope key (V slot)."""
    if _get(t, "kv_lora_rank"):
        return 1, int(t.kv_lora_rank), int(t.qk_rope_head_dim)
    heads = _get(t, "num_attention_heads", "decoder_attention_heads", "num_heads")
    if not heads:  # attention-free (Mamba)
        return 0, 0, 0
    heads, hidden = int(heads), int(_get(t, "hidden_size", "d_model"))
    if model_type == "falcon":
        new_arch = getattr(t, "new_decoder_architecture", False)
        if getattr(t, "multi_query", False) and not new_arch:
            kv = 1
        elif new_arch and _falcon_caches_groups():
            kv = int(_get(t, "num_kv_heads", default=heads))  # transformers >= 5.25 caches the KV groups
        else:
            kv = heads  # before 5.25, new_decoder_architecture broadcast its KV groups to every head first
    elif model_type == "gpt_bigcode":
        kv = 1 if getattr(t, "multi_query", True) else heads
    else:
        kv = int(_get(t, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads))
    d = int(_get(t, "head_dim", "d_kv", "attention_head_dim", default=hidden // heads))
    return kv, d, int(_get(t, "v_head_dim", default=d))


def _state_of(module) -> tuple[int, int]:
    """Recurrent state elements of one linear-attention / SSM mixer, from its own attributes: (in the
    dtype, in float32). The Mamba and delta-net scans return their final state in float32."""

    def a(name: str) -> Any:
        return getattr(module, name, None)

    if a("head_k_dim") and a("head_v_dim") and a("num_v_heads"):  # gated delta-net (Qwen3-Next, ...)
        return 0, int(a("num_v_heads") * a("head_k_dim") * a("head_v_dim"))
    if a("ssm_state_size") and a("num_heads") and a("head_dim"):  # Mamba-2 family
        return 0, int(a("num_heads") * a("head_dim") * a("ssm_state_size"))
    if a("ssm_state_size") and a("intermediate_size"):  # Mamba-1 (Mamba, Falcon-Mamba, Jamba)
        return 0, int(a("intermediate_size") * a("ssm_state_size"))
    if a("slope_rate") is not None and a("num_attention_heads") and a("head_dim"):  # lightning attention (MiniMax)
        return int(a("num_attention_heads") * a("head_dim") ** 2), 0
    return 0, 0


def linear_state(model, n_linear: int) -> tuple[int, int]:
    """Per linear layer: (conv state, every depthwise Conv1d: channels x kernel, + dtype recurrent state;
    float32 recurrent state)."""
    import torch

    conv = fp32 = 0
    for name, m in model.named_modules():
        if any(k in name for k in ("vision", "visual", "audio", "encoder")):
            continue
        if isinstance(m, torch.nn.Conv1d) and m.groups == m.in_channels and m.groups > 1:
            conv += m.in_channels * m.kernel_size[0]
        in_dtype, in_fp32 = _state_of(m)
        conv, fp32 = conv + in_dtype, fp32 + in_fp32
    return conv // max(n_linear, 1), fp32 // max(n_linear, 1)


def cache_groups(cfg, model_type: str, model=None) -> list[CacheGroup]:
    """The text stack's cache, grouped by kind, with transformers' own layer-type rules."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    t = text_config(cfg)
    types, kwargs = get_layer_types_and_kwargs(t)
    layer_cfgs = layer_configs(t, len(types))
    kinds: dict[str, CacheKind] = {
        "full_attention": "full",
        "sliding_attention": "sliding",
        "chunked_attention": "chunked",
        "linear_attention": "linear",
        "conv": "linear",
        "mamba": "linear",
        "hybrid": "hybrid",
        "hybrid_sliding": "hybrid",
        "dummy": "none",
    }
    n_state = sum(kinds.get(x) in ("linear", "hybrid") for x in types)
    state, fp32 = linear_state(model, n_state) if (n_state and model is not None) else (0, 0)
    groups: dict[tuple, CacheGroup] = {}
    image_layers = set(_get(t, "cross_attention_layers", default=()) or ())  # Mllama: attend to the image only
    for i, (lt, kw, lc) in enumerate(zip(types, kwargs, layer_cfgs, strict=False)):
        kv, dk, dv = kv_heads_and_dims(lc, model_type)
        per_token = kv * (dk + dv)
        kind: CacheKind = "none" if i in image_layers else kinds.get(lt, "full")
        window = kw.get("sliding_window")
        window = int(window) - 1 if window and kind in ("sliding", "chunked", "hybrid") else None
        g = CacheGroup(
            kind=kind,
            layers=0,
            window=window,
            kv_per_token=0 if kind in ("linear", "none") else per_token,
            state=state if kind in ("linear", "hybrid") else 0,
            state_fp32=fp32 if kind in ("linear", "hybrid") else 0,
        )
        key = (g.kind, g.kv_per_token, g.window, g.state, g.state_fp32)
        groups.setdefault(key, g).layers += 1
    return list(groups.values())


def cross_attention(cfg) -> tuple[int, int, int | None]:
    """Encoder-decoders: (decoder layers with cross-attention, K + V elements per encoder token, the fixed
    encoder length when the architecture has one: Whisper's audio frames after the conv stem)."""
    if not getattr(cfg, "is_encoder_decoder", False):
        return 0, 0, None
    t = text_config(cfg)
    layers = int(_get(t, "decoder_layers", "num_decoder_layers", "num_hidden_layers"))
    heads = int(_get(t, "decoder_attention_heads", "num_heads", "num_attention_heads"))
    d = int(_get(t, "d_kv", default=int(_get(t, "d_model", "hidden_size")) // heads))
    fixed = _get(cfg, "max_source_positions")  # Whisper: 1500 frames for 30 s of audio
    return layers, 2 * heads * d, int(fixed) if fixed else None


def experts(cfg) -> tuple[int | None, int | None, int]:
    """(routed experts, experts per token, shared experts) from the config's own names."""
    t = text_config(cfg)
    e = _get(t, "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", "n_experts")
    if not e or int(e) <= 1:
        return None, None, 0
    k = _get(t, "num_experts_per_tok", "moe_top_k", "top_k", "num_experts_per_token", "moe_k", default=1)
    shared = _get(t, "n_shared_experts", "num_shared_experts", "moe_shared_expert_count", default=0)
    if not shared and _get(t, "shared_expert_intermediate_size"):
        shared = 1
    return int(e), int(k), int(shared or 0)


def context_length(cfg) -> int | None:
    """Longest sequence the model is built for (positions of the text stack)."""
    t = text_config(cfg)
    n = _get(
        t,
        "max_position_embeddings",
        "n_positions",
        "max_sequence_length",
        "seq_length",
        "n_ctx",
        "max_target_positions",
    )
    return int(n) if n else None
