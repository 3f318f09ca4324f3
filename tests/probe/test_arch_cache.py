"""The estimator against transformers itself, one architecture class at a time.

Each case builds a tiny random-weight variant from the architecture's own config class (small sizes,
seeded), runs it through transformers' default cache, and checks that
- the estimated cache (growing KV + fixed state) equals the bytes of the tensors the cache holds, and
- the estimated weights equal the parameters of the built model (tied tensors once).
"""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from infertune.estimate.memory import EstimateSettings, estimate_memory, kv_cache_bytes, state_bytes  # noqa: E402
from infertune.probe.model import profile_model  # noqa: E402

V = 320  # vocab
BASE = dict(
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    vocab_size=V,
    max_position_embeddings=256,
)
MLA = dict(
    kv_lora_rank=32,
    qk_rope_head_dim=8,
    qk_nope_head_dim=16,
    v_head_dim=24,
    n_routed_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    first_k_dense_replace=1,
    num_key_value_heads=4,
)
MAMBA2 = dict(mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2)

# (class, model_type, config kwargs, what to build)
CASES = [
    ("dense GQA", "llama", dict(BASE, num_key_value_heads=2), "causal"),
    ("sliding window on every layer", "mistral", dict(BASE, num_key_value_heads=2, sliding_window=8), "causal"),
    (
        "hybrid sliding / global",
        "gemma3_text",
        dict(BASE, num_hidden_layers=6, num_key_value_heads=2, head_dim=16, sliding_window=8),
        "causal",
    ),
    (
        "per-layer head sizes + KV shared across layers, Gemma 4",
        "gemma4_text",
        dict(
            BASE,
            num_hidden_layers=12,
            num_key_value_heads=2,
            head_dim=16,
            global_head_dim=32,
            num_global_key_value_heads=1,
            attention_k_eq_v=True,
            sliding_window=8,
            num_kv_shared_layers=2,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=V,
        ),
        "causal",
    ),
    ("window switched off (Qwen2)", "qwen2", dict(BASE, num_key_value_heads=2, sliding_window=8), "causal"),
    (
        "multi-query, Falcon multi_query",
        "falcon",
        dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, vocab_size=V, multi_query=True),
        "causal",
    ),
    (
        "grouped KV, Falcon new_decoder_architecture",
        "falcon",
        dict(
            hidden_size=64,
            num_hidden_layers=3,
            num_attention_heads=8,
            num_kv_heads=2,
            vocab_size=V,
            new_decoder_architecture=True,
        ),
        "causal",
    ),
    (
        "multi-query, GPTBigCode",
        "gpt_bigcode",
        dict(n_embd=64, n_layer=3, n_head=8, vocab_size=V, n_positions=256, multi_query=True),
        "causal",
    ),
    (
        "multi-head, GPT-2 n_inner",
        "gpt2",
        dict(n_embd=64, n_layer=3, n_head=4, n_inner=80, vocab_size=V, n_positions=256),
        "causal",
    ),
    (
        "multi-head, OPT ffn_dim",
        "opt",
        dict(
            hidden_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            ffn_dim=80,
            vocab_size=V,
            word_embed_proj_dim=64,
            max_position_embeddings=256,
        ),
        "causal",
    ),
    (
        "latent attention + MoE, DeepSeek-V3",
        "deepseek_v3",
        dict(BASE, q_lora_rank=48, n_group=2, topk_group=1, **MLA),
        "causal",
    ),
    ("latent attention, DeepSeek-V2", "deepseek_v2", dict(BASE, q_lora_rank=None, **MLA), "causal"),
    (
        "MoE, Mixtral",
        "mixtral",
        dict(BASE, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
        "causal",
    ),
    (
        "MoE, Qwen3-MoE",
        "qwen3_moe",
        dict(BASE, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32),
        "causal",
    ),
    (
        "MoE + shared expert, Qwen2-MoE",
        "qwen2_moe",
        dict(
            BASE,
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
        ),
        "causal",
    ),
    (
        "Mamba + attention + MoE, Jamba",
        "jamba",
        dict(
            BASE,
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            attn_layer_period=2,
            attn_layer_offset=1,
            expert_layer_period=2,
            expert_layer_offset=1,
            mamba_d_state=8,
        ),
        "causal",
    ),
    (
        "linear attention (gated delta-net) + MoE, Qwen3-Next",
        "qwen3_next",
        dict(
            BASE,
            num_key_value_heads=2,
            head_dim=16,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            linear_num_value_heads=4,
            linear_num_key_heads=2,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_conv_kernel_dim=4,
        ),
        "causal",
    ),
    ("state space, Mamba", "mamba", dict(hidden_size=64, num_hidden_layers=3, vocab_size=V, state_size=8), "causal"),
    (
        "Mamba-2 + attention, Bamba",
        "bamba",
        dict(BASE, num_key_value_heads=2, attn_layer_indices=[1, 3], **MAMBA2),
        "causal",
    ),
    (
        "Mamba-2 + attention + MoE, Granite 4 hybrid",
        "granitemoehybrid",
        dict(
            BASE,
            num_key_value_heads=2,
            layer_types=["mamba", "attention", "mamba", "attention"],
            num_local_experts=4,
            num_experts_per_tok=2,
            shared_intermediate_size=32,
            **MAMBA2,
        ),
        "causal",
    ),
    (
        "Mamba-2 + attention + MLP-only layers, Nemotron-H",
        "nemotron_h",
        dict(
            BASE,
            num_key_value_heads=2,
            hybrid_override_pattern="M*M-",
            mamba_num_heads=8,
            mamba_head_dim=16,
            n_groups=1,
            ssm_state_size=8,
            conv_kernel=4,
        ),
        "causal",
    ),
    (
        "parallel attention + Mamba-2, Falcon-H1",
        "falcon_h1",
        dict(BASE, num_key_value_heads=2, head_dim=16, mamba_d_ssm=None, **MAMBA2),
        "causal",
    ),
    (
        "Mamba-2 + shared hybrid blocks, Zamba2",
        "zamba2",
        dict(
            BASE,
            num_key_value_heads=4,
            mamba_headdim=16,
            mamba_ngroups=1,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            n_mamba_heads=8,
            layers_block_type=["mamba", "hybrid", "mamba", "mamba"],
        ),
        "causal",
    ),
    (
        "state space, Mamba-2",
        "mamba2",
        dict(
            hidden_size=64,
            num_hidden_layers=3,
            vocab_size=V,
            state_size=8,
            num_heads=8,
            head_dim=16,
            n_groups=1,
            expand=2,
        ),
        "causal",
    ),
    (
        "short convolutions + attention, LFM2",
        "lfm2",
        dict(BASE, num_key_value_heads=2, full_attn_idxs=[1, 3], conv_L_cache=3),
        "causal",
    ),
    (
        "lightning (linear) attention + MoE, MiniMax",
        "minimax",
        dict(
            BASE,
            num_key_value_heads=2,
            head_dim=16,
            num_local_experts=4,
            num_experts_per_tok=2,
            layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        ),
        "causal",
    ),
    (
        "chunked attention + MoE, Llama 4",
        "llama4_text",
        dict(
            BASE,
            num_key_value_heads=2,
            head_dim=16,
            attention_chunk_size=8,
            num_local_experts=4,
            num_experts_per_tok=1,
            intermediate_size_mlp=96,
            interleave_moe_layer_step=1,
        ),
        "causal",
    ),
    (
        "sliding + sinks + MoE, gpt-oss",
        "gpt_oss",
        dict(BASE, num_key_value_heads=2, head_dim=16, sliding_window=8, num_local_experts=4, num_experts_per_tok=2),
        "causal",
    ),
    (
        "vision-language, Qwen2-VL",
        "qwen2_vl",
        dict(
            text_config=dict(
                BASE,
                num_key_value_heads=2,
                rope_parameters={"rope_type": "default", "mrope_section": [2, 2, 4], "rope_theta": 10000.0},
            ),
            vision_config=dict(
                depth=2,
                embed_dim=32,
                hidden_size=64,
                num_heads=2,
                mlp_ratio=2,
                patch_size=4,
                spatial_merge_size=2,
                in_channels=3,
                temporal_patch_size=2,
            ),
        ),
        "vlm",
    ),
    (
        "vision-language with sliding layers, Gemma 3",
        "gemma3",
        dict(
            text_config=dict(BASE, num_key_value_heads=2, head_dim=16, sliding_window=8, num_hidden_layers=6),
            vision_config=dict(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                image_size=32,
                patch_size=8,
            ),
            mm_tokens_per_image=4,
        ),
        "vlm",
    ),
    (
        "vision-language, LLaVA",
        "llava",
        dict(
            text_config=dict(BASE, model_type="llama", num_key_value_heads=2),
            vision_config=dict(
                model_type="clip_vision_model",
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                image_size=32,
                patch_size=8,
            ),
            image_token_index=5,
        ),
        "vlm",
    ),
    (
        "vision-language with image cross-attention layers (text prompt), Mllama",
        "mllama",
        dict(
            text_config=dict(BASE, num_key_value_heads=2, cross_attention_layers=[1], pad_token_id=0),
            vision_config=dict(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_global_layers=1,
                attention_heads=2,
                image_size=32,
                patch_size=8,
                vision_output_dim=64,
            ),
        ),
        "vlm",
    ),
    (
        "MoE with clipped QKV, DBRX",
        "dbrx",
        dict(
            d_model=64,
            n_heads=4,
            n_layers=2,
            vocab_size=V,
            max_seq_len=256,
            attn_config={"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
            ffn_config={"moe_num_experts": 4, "moe_top_k": 2, "ffn_hidden_size": 64},
        ),
        "causal",
    ),
    (
        "encoder-decoder, T5",
        "t5",
        dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=V),
        "seq2seq",
    ),
    (
        "encoder-decoder, BART",
        "bart",
        dict(
            d_model=64,
            encoder_layers=2,
            decoder_layers=3,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=96,
            decoder_ffn_dim=96,
            vocab_size=V,
            max_position_embeddings=256,
        ),
        "seq2seq",
    ),
    (
        "speech encoder-decoder, Whisper",
        "whisper",
        dict(
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=96,
            decoder_ffn_dim=96,
            vocab_size=V,
            num_mel_bins=16,
            max_source_positions=24,
            max_target_positions=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            suppress_tokens=None,
            begin_suppress_tokens=None,
        ),
        "speech",
    ),
]


def cache_tensors(obj, seen=None, depth=0) -> list:
    """Every tensor (2 dims or more) reachable from a transformers cache object."""
    seen = set() if seen is None else seen
    found = []
    if depth > 6:
        return found
    if isinstance(obj, torch.Tensor):
        if obj.dim() >= 2 and id(obj) not in seen:
            seen.add(id(obj))
            found.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            found += cache_tensors(x, seen, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            found += cache_tensors(x, seen, depth + 1)
    elif type(obj).__module__.startswith("transformers") and hasattr(obj, "__dict__"):
        for x in vars(obj).values():
            found += cache_tensors(x, seen, depth + 1)
    return found


def build(model_type: str, kw: dict, kind: str, folder, dtype=None):
    """Save the config (what the estimator reads), build the model (what transformers runs), run it."""
    import transformers
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type, **kw)
    cfg.save_pretrained(folder)
    torch.manual_seed(0)
    auto = {
        "causal": transformers.AutoModelForCausalLM,
        "vlm": transformers.AutoModelForImageTextToText,
        "seq2seq": transformers.AutoModelForSeq2SeqLM,
        "speech": transformers.AutoModelForSpeechSeq2Seq,
    }[kind]
    model = auto.from_config(cfg).eval().to(dtype or torch.float32)
    S, T = 12, 5  # prompt (encoder) tokens, decoder tokens
    with torch.no_grad():
        ids = torch.randint(3, V, (1, S))
        if kind == "causal" or kind == "vlm":
            cache = model(input_ids=ids, use_cache=True).past_key_values
            return model, cache, S, S
        dec = torch.randint(3, V, (1, T))
        # `seq` as the estimator counts it: the encoder's S, then decoder tokens after the start token
        if kind == "seq2seq":
            cache = model(input_ids=ids, decoder_input_ids=dec, use_cache=True).past_key_values
            return model, cache, S, S + T - 1
        frames = 2 * cfg.max_source_positions  # the conv stem halves the mel frames
        feats = torch.randn(1, cfg.num_mel_bins, frames, dtype=dtype or torch.float32)
        cache = model(input_features=feats, decoder_input_ids=dec, use_cache=True).past_key_values
        return model, cache, S, S + T - 1


@pytest.mark.parametrize("label,model_type,kw,kind", CASES, ids=[c[0] for c in CASES])
def test_cache_and_weights_equal_what_transformers_holds(label, model_type, kw, kind, tmp_path, infertune_home):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, cache, prompt, seq = build(model_type, kw, kind, tmp_path)
        p = profile_model(tmp_path)
    held = sum(t.numel() * t.element_size() for t in cache_tensors(cache))
    s = EstimateSettings(dtype="float32", input_len=prompt, max_new_tokens=seq - prompt + 1)
    estimated = kv_cache_bytes(p, s, seq, 4)[0] + state_bytes(p, 4)[0]
    assert held > 0
    assert estimated == pytest.approx(held, rel=0.01), (label, p.cache_groups)
    assert p.num_parameters == model.num_parameters()  # tied tensors once, towers and encoders included
    assert estimate_memory(p, s).weights_bytes == 4 * model.num_parameters()


STATEFUL = [
    c
    for c in CASES
    if c[1]
    in (
        "jamba",
        "qwen3_next",
        "mamba",
        "bamba",
        "granitemoehybrid",
        "nemotron_h",
        "falcon_h1",
        "zamba2",
        "mamba2",
        "lfm2",
        "minimax",
    )
]


@pytest.mark.parametrize("label,model_type,kw,kind", STATEFUL, ids=[c[0] for c in STATEFUL])
def test_in_bfloat16_recurrent_states_stay_float32(label, model_type, kw, kind, tmp_path, infertune_home):
    """In bf16 the conv states and KV follow the dtype; the scans keep their recurrent state in float32."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, cache, prompt, seq = build(model_type, kw, kind, tmp_path, dtype=torch.bfloat16)
        p = profile_model(tmp_path)
    held = sum(t.numel() * t.element_size() for t in cache_tensors(cache))
    s = EstimateSettings(dtype="bfloat16", input_len=prompt, max_new_tokens=0)
    assert kv_cache_bytes(p, s, seq, 2)[0] + state_bytes(p, 2)[0] == pytest.approx(held, rel=0.01)
    assert estimate_memory(p, s).state_bytes == state_bytes(p, 2)[0] > 0


def test_the_latent_cache_is_what_multi_head_latent_attention_keeps(tmp_path, infertune_home):
    _, model_type, kw, kind = next(c for c in CASES if c[1] == "deepseek_v3")
    _, cache, _, _ = build(model_type, kw, kind, tmp_path)
    p = profile_model(tmp_path)
    first = cache.layers[0]
    assert first.keys.shape[1:] == (1, 12, kw["kv_lora_rank"])  # the compressed latent, one "head"
    assert first.values.shape[1:] == (1, 12, kw["qk_rope_head_dim"])  # the shared rope key
    assert p.kv_lora_rank == 32 and p.qk_rope_head_dim == 8
    assert [(g.kind, g.kv_per_token) for g in p.cache_groups] == [("full", 32 + 8)]


def test_sliding_layers_keep_one_token_less_than_the_window(tmp_path, infertune_home):
    _, model_type, kw, kind = next(c for c in CASES if c[1] == "gemma3_text")
    _, cache, _, _ = build(model_type, kw, kind, tmp_path)
    lengths = sorted({layer.keys.shape[2] for layer in cache.layers})
    assert lengths == [kw["sliding_window"] - 1, 12]
    p = profile_model(tmp_path)
    assert {g.kind: g.window for g in p.cache_groups} == {"sliding": 7, "full": None}


def test_moe_profile_counts_experts_and_the_active_parameters(tmp_path, infertune_home):
    _, model_type, kw, kind = next(c for c in CASES if c[1] == "mixtral")
    model, _, _, _ = build(model_type, kw, kind, tmp_path)
    p = profile_model(tmp_path)
    experts = sum(prm.numel() for n, prm in model.named_parameters() if ".experts." in n)
    assert p.expert_params == experts and p.experts_fused
    assert (p.num_experts, p.experts_per_token) == (4, 2)
    assert p.active_parameters == p.num_parameters - experts // 2  # 2 of 4 experts per token


def test_a_static_cache_allocates_its_length_and_whole_windows(tmp_path, infertune_home):
    from transformers import AutoConfig, AutoModelForCausalLM, StaticCache

    _, model_type, kw, _ = next(c for c in CASES if c[1] == "gemma3_text")
    cfg = AutoConfig.for_model(model_type, **kw)
    cfg.save_pretrained(tmp_path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    cache = StaticCache(config=cfg, max_cache_len=20)
    with torch.no_grad():
        # recent transformers name forward's cache argument `cache` (`past_key_values` warns until 5.40)
        name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        model(input_ids=torch.randint(3, V, (1, 12)), use_cache=True, **{name: cache})
    held = sum(t.numel() * t.element_size() for t in cache_tensors(cache))
    p = profile_model(tmp_path)
    s = EstimateSettings(dtype="float32", kv_cache="static", max_cache_len=20, input_len=12, max_new_tokens=0)
    assert kv_cache_bytes(p, s, 12, 4)[0] == held  # full layers: 20 tokens; sliding layers: the whole window, 8


GENERATED = [
    c
    for c in CASES
    if c[1] in ("llama", "gemma3_text", "jamba", "deepseek_v3", "qwen3_next", "gpt_bigcode", "t5", "bart")
]


@pytest.mark.parametrize("label,model_type,kw,kind", GENERATED, ids=[c[0] for c in GENERATED])
def test_after_generate_the_estimate_is_the_cache_generate_holds(label, model_type, kw, kind, tmp_path, infertune_home):
    """generate feeds back every new token but the last: S + T - 1 tokens (decoder: start + T - 1)."""
    import warnings

    import transformers
    from transformers import AutoConfig

    if model_type == "t5":  # generate sizes T5's cache by num_layers: uneven stacks fail there (transformers 5.24)
        kw = dict(kw, num_decoder_layers=kw["num_layers"])
    cfg = AutoConfig.for_model(model_type, **kw)
    cfg.update({"pad_token_id": 0, "eos_token_id": None, "bos_token_id": 1, "decoder_start_token_id": 1})
    cfg.save_pretrained(tmp_path)
    torch.manual_seed(0)
    auto = transformers.AutoModelForSeq2SeqLM if kind == "seq2seq" else transformers.AutoModelForCausalLM
    model = auto.from_config(cfg).eval()
    S, T = 11, 7
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        out = model.generate(
            torch.randint(3, V, (2, S)),
            max_new_tokens=T,
            min_new_tokens=T,
            do_sample=False,
            return_dict_in_generate=True,
        )
    held = sum(t.numel() * t.element_size() for t in cache_tensors(out.past_key_values))
    mem = estimate_memory(
        profile_model(tmp_path), EstimateSettings(dtype="float32", input_len=S, max_new_tokens=T, batch=2)
    )
    assert mem.kv_cache_bytes + mem.state_bytes == pytest.approx(held, rel=0.01)
