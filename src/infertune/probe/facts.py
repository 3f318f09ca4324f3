"""The profile's fields from a transformers config object: the first sight of a model (imports torch and
transformers; probe/model.py caches what this returns)."""

from __future__ import annotations

from infertune.core.errors import UserError
from infertune.probe import arch, count


def _dtype(cfg, text) -> str | None:
    dtype = getattr(cfg, "dtype", None) or getattr(text, "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else None


def _legacy_layer_types(groups: list[arch.CacheGroup]) -> list[str]:
    names = {
        "full": "full_attention",
        "sliding": "sliding_attention",
        "chunked": "chunked_attention",
        "linear": "linear_attention",
        "hybrid": "hybrid",
        "cross": "full_attention",
        "none": "none",
    }
    return [names[g.kind] for g in groups for _ in range(g.layers)]


def facts_of(cfg, trust_remote_code: bool = False) -> dict:
    t = arch.text_config(cfg)
    model_type = cfg.model_type
    try:
        n_layers = int(arch._get(t, "num_hidden_layers", "decoder_layers", "num_decoder_layers", "num_layers"))
        n_heads = int(arch._get(t, "num_attention_heads", "decoder_attention_heads", "num_heads", default=0))
        hidden = int(arch._get(t, "hidden_size", "d_model"))
        vocab = int(t.vocab_size)
    except (TypeError, AttributeError) as e:
        raise UserError(f"cannot read the shape of a {model_type!r} config: {e}") from None
    kv_heads, dk, _ = arch.kv_heads_and_dims(arch.layer_configs(t, n_layers)[0], model_type)  # first layer's
    if arch._get(t, "kv_lora_rank"):  # MLA: K and V expand per head from the latent; heads of q_nope + q_rope
        kv_heads, dk = (n_heads, int(arch._get(t, "qk_head_dim", default=t.qk_nope_head_dim + t.qk_rope_head_dim)))
    model = count.meta_model(cfg, trust_remote_code)
    counted = count.count(model) if model is not None else None
    groups = arch.cache_groups(cfg, model_type, model) if not getattr(cfg, "is_encoder_decoder", False) else []
    cross_layers, cross_kv, enc_len = arch.cross_attention(cfg)
    if cross_layers:  # encoder-decoder: the decoder's self-attention grows, its cross-attention is fixed
        self_heads = int(arch._get(t, "decoder_attention_heads", "num_heads", "num_attention_heads"))
        d = int(arch._get(t, "d_kv", default=hidden // self_heads))
        groups = [arch.CacheGroup(kind="full", layers=cross_layers, kv_per_token=2 * self_heads * d)]
        n_layers, kv_heads, dk = cross_layers, self_heads, d
    n_exp, top_k, shared = arch.experts(cfg)
    quant = getattr(cfg, "quantization_config", None)
    if quant is not None and not isinstance(quant, dict):
        quant = quant.to_dict()
    inter = arch._get(
        t,
        "intermediate_size",
        "ffn_dim",
        "n_inner",
        "d_ff",
        "decoder_ffn_dim",
        "ffn_hidden_size",
        "moe_intermediate_size",
    )
    return {
        "model_type": model_type,
        "architecture": (getattr(cfg, "architectures", None) or [None])[0],
        "num_layers": n_layers,
        "hidden_size": hidden,
        "intermediate_size": int(inter) if inter else None,
        "num_attention_heads": n_heads,
        "num_kv_heads": kv_heads,
        "head_dim": dk,
        "vocab_size": vocab,
        "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", False)),
        "max_position_embeddings": arch.context_length(cfg),
        "sliding_window": arch._get(t, "sliding_window", "attention_chunk_size"),
        "layer_types": _legacy_layer_types(groups),
        "native_dtype": _dtype(cfg, t),
        "quantization": quant,
        "num_parameters": sum(counted["groups"].values()) if counted else None,
        "parameter_count_source": "meta-device" if counted else None,
        "param_groups": counted["groups"] if counted else None,
        "linear_rows": counted["rows"] if counted else None,
        "expert_rows": counted["expert_rows"] if counted else 0,
        "experts_fused": counted["experts_fused"] if counted else False,
        "tower_parameters": counted["towers"] if counted else 0,
        "supports": count.supports(cfg),
        "cache": groups,
        "kv_lora_rank": arch._get(t, "kv_lora_rank"),
        "qk_rope_head_dim": arch._get(t, "qk_rope_head_dim") if arch._get(t, "kv_lora_rank") else None,
        "num_experts": n_exp,
        "experts_per_token": top_k,
        "shared_experts": shared,
        "is_encoder_decoder": bool(getattr(cfg, "is_encoder_decoder", False)),
        "cross_layers": cross_layers,
        "cross_kv_per_token": cross_kv,
        "encoder_length": enc_len,
    }
