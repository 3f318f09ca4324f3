"""Published models, from their config.json values (written here as minimal dicts, only the fields that
shape the model), against their published parameter counts and checkpoint sizes.

Sources (config.json of each repository on the Hugging Face Hub, and the count its model card or hub page
publishes; values corroborated by the public repositories named beside them):
- Llama 3.1 8B: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json (8.03B on the hub page)
- Llama 3.1 8B AWQ: https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 (5.73 GB of
  safetensors; quantization_config: awq, 4 bits, group 128)
- Mixtral 8x7B: https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json (46.7B total,
  12.9B active: https://mistral.ai/news/mixtral-of-experts/)
- Qwen3-30B-A3B: https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (model card: 30.5B in
  total, 3.3B activated; github.com/zyzshishui/slime scripts/models/qwen3-30B-A3B.sh has the same shape)
- DeepSeek-V3: https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json (671B main model, 37B
  activated; github.com/tenstorrent/tt-metal models/demos/deepseek_v3/reference/README_WEIGHTS.md; the FP8
  repository holds 688.6 GB with its 11.5B-parameter MTP module, which transformers does not build)
- gpt-oss-20b / 120b: https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json and
  https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json (OpenAI's model card: 20.91B / 116.83B
  total, 3.61B / 5.13B active without the embedding, checkpoints 12.8 GiB / 60.8 GiB in MXFP4;
  github.com/EchoCog/gpt-oss-20b docs/gpt-oss-20b-architecture.md lists the same config)
- Jamba v0.1: https://huggingface.co/ai21labs/Jamba-v0.1/blob/main/config.json (51.6B on the hub page; 12B
  active, 52B total in transformers' docs/source/en/model_doc/jamba.md)
- Falcon-7B: https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json (6.92B; multi_query, 71 heads;
  github.com/kimborgen/falcon-llm README prints the module shapes)
- StarCoder: https://huggingface.co/bigcode/starcoder/blob/main/config.json (15.5B, multi-query)
- Gemma 3 27B: https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json (27.4B on the hub page)
- Qwen2-VL-7B: https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct/blob/main/config.json (8.29B on the hub page)
- T5-base: https://huggingface.co/google-t5/t5-base/blob/main/config.json (222.9M)
- BART-large: https://huggingface.co/facebook/bart-large/blob/main/config.json (406M)
- Whisper large-v3: https://huggingface.co/openai/whisper-large-v3/blob/main/config.json (1.54B)
- Mamba 2.8B: https://huggingface.co/state-spaces/mamba-2.8b-hf/blob/main/config.json (2.77B)
- OPT-1.3B: https://huggingface.co/facebook/opt-1.3b/blob/main/config.json (1.32B on the hub page; ffn_dim spelling)
- GPT-2: https://huggingface.co/openai-community/gpt2/blob/main/config.json (124M; n_inner null = 4 x n_embd)
"""

from __future__ import annotations

import functools

import pytest

from infertune.estimate import estimate
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.memory import EstimateSettings, Quantization, estimate_memory
from infertune.probe.model import profile_model

GB, GiB = 1e9, 2**30
LLAMA31_8B = dict(
    model_type="llama",
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=131072,
)
GPT_OSS = dict(
    model_type="gpt_oss",
    hidden_size=2880,
    intermediate_size=2880,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=201088,
    num_experts_per_tok=4,
    sliding_window=128,
    max_position_embeddings=131072,
    quantization_config={"quant_method": "mxfp4"},
)
CONFIGS = {
    "llama-3.1-8b": LLAMA31_8B,
    "llama-3.1-8b-awq": dict(
        LLAMA31_8B,
        quantization_config={
            "quant_method": "awq",
            "bits": 4,
            "group_size": 128,
            "version": "gemm",
            "zero_point": True,
        },
    ),
    "mixtral-8x7b": dict(
        model_type="mixtral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=32768,
    ),
    "qwen3-30b-a3b": dict(
        model_type="qwen3_moe",
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        vocab_size=151936,
        num_experts=128,
        num_experts_per_tok=8,
        max_position_embeddings=40960,
    ),
    "deepseek-v3": dict(
        model_type="deepseek_v3",
        hidden_size=7168,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        vocab_size=129280,
        max_position_embeddings=163840,
        n_group=8,
        topk_group=4,
        quantization_config={
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": [128, 128],
        },
    ),
    "gpt-oss-20b": dict(GPT_OSS, num_hidden_layers=24, num_local_experts=32),
    "gpt-oss-120b": dict(GPT_OSS, num_hidden_layers=36, num_local_experts=128),
    "jamba-v0.1": dict(
        model_type="jamba",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=65536,
        num_experts=16,
        num_experts_per_tok=2,
        attn_layer_period=8,
        attn_layer_offset=4,
        expert_layer_period=2,
        expert_layer_offset=1,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        max_position_embeddings=262144,
    ),
    "falcon-7b": dict(
        model_type="falcon",
        hidden_size=4544,
        num_hidden_layers=32,
        num_attention_heads=71,
        vocab_size=65024,
        multi_query=True,
        parallel_attn=True,
        new_decoder_architecture=False,
        bias=False,
    ),
    "starcoder": dict(
        model_type="gpt_bigcode",
        n_embd=6144,
        n_layer=40,
        n_head=48,
        n_inner=24576,
        n_positions=8192,
        vocab_size=49152,
        multi_query=True,
    ),
    "gemma-3-27b": dict(
        model_type="gemma3",
        mm_tokens_per_image=256,
        text_config=dict(
            model_type="gemma3_text",
            hidden_size=5376,
            intermediate_size=21504,
            num_hidden_layers=62,
            num_attention_heads=32,
            num_key_value_heads=16,
            head_dim=128,
            vocab_size=262208,
            sliding_window=1024,
            max_position_embeddings=131072,
        ),
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=1152,
            intermediate_size=4304,
            num_hidden_layers=27,
            num_attention_heads=16,
            image_size=896,
            patch_size=14,
            vision_use_head=False,
        ),
    ),
    "qwen2-vl-7b": dict(
        model_type="qwen2_vl",
        tie_word_embeddings=False,
        text_config=dict(
            model_type="qwen2_vl_text",
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            vocab_size=152064,
            max_position_embeddings=32768,
            rope_parameters={"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1000000.0},
        ),
        vision_config=dict(
            depth=32,
            embed_dim=1280,
            hidden_size=3584,
            mlp_ratio=4,
            num_heads=16,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
    ),
    "t5-base": dict(model_type="t5", d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, vocab_size=32128),
    "bart-large": dict(
        model_type="bart",
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        vocab_size=50265,
        max_position_embeddings=1024,
    ),
    "whisper-large-v3": dict(
        model_type="whisper",
        d_model=1280,
        encoder_layers=32,
        decoder_layers=32,
        encoder_attention_heads=20,
        decoder_attention_heads=20,
        encoder_ffn_dim=5120,
        decoder_ffn_dim=5120,
        vocab_size=51866,
        num_mel_bins=128,
        max_source_positions=1500,
        max_target_positions=448,
    ),
    "mamba-2.8b": dict(
        model_type="mamba",
        hidden_size=2560,
        num_hidden_layers=64,
        vocab_size=50280,
        state_size=16,
        expand=2,
        conv_kernel=4,
    ),
    "opt-1.3b": dict(
        model_type="opt",
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=32,
        ffn_dim=8192,
        vocab_size=50272,
        max_position_embeddings=2048,
        word_embed_proj_dim=2048,
    ),
    "gpt2": dict(model_type="gpt2", n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024),
}
PUBLISHED = {  # total parameters as published
    "llama-3.1-8b": 8.03e9,
    "mixtral-8x7b": 46.7e9,
    "qwen3-30b-a3b": 30.5e9,
    "deepseek-v3": 671e9,
    "gpt-oss-20b": 20.91e9,
    "gpt-oss-120b": 116.83e9,
    "jamba-v0.1": 51.6e9,
    "falcon-7b": 6.92e9,
    "starcoder": 15.5e9,
    "gemma-3-27b": 27.4e9,
    "qwen2-vl-7b": 8.29e9,
    "t5-base": 222.9e6,
    "bart-large": 406e6,
    "whisper-large-v3": 1.54e9,
    "mamba-2.8b": 2.77e9,
    "opt-1.3b": 1.32e9,
    "gpt2": 124e6,
}


@pytest.fixture(scope="module", autouse=True)
def _home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as m:
        m.setenv("INFERTUNE_HOME", str(tmp_path_factory.mktemp("home")))
        yield


@functools.cache
def prof(name: str):
    return profile_model(CONFIGS[name])


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_ones(name):
    assert prof(name).num_parameters == pytest.approx(PUBLISHED[name], rel=0.01)


@pytest.mark.parametrize(
    "name,active", [("mixtral-8x7b", 12.9e9), ("qwen3-30b-a3b", 3.3e9), ("deepseek-v3", 37e9), ("jamba-v0.1", 12e9)]
)
def test_active_parameters_of_mixtures_of_experts(name, active):
    assert prof(name).active_parameters == pytest.approx(active, rel=0.02)


@pytest.mark.parametrize("name,active", [("gpt-oss-20b", 3.61e9), ("gpt-oss-120b", 5.13e9)])
def test_gpt_oss_active_parameters_without_the_embedding_as_openai_counts_them(name, active):
    p = prof(name)
    assert p.active_parameters - p.param_groups["embedding"] == pytest.approx(active, rel=0.015)


@pytest.mark.parametrize(
    "name,stored",
    [
        ("llama-3.1-8b-awq", 5.73 * GB),
        ("gpt-oss-20b", 12.8 * GiB),
        ("gpt-oss-120b", 60.8 * GiB),
        ("deepseek-v3", 688.6 * GB),
    ],
)
def test_pre_quantized_checkpoints_are_estimated_as_stored(name, stored):
    mem = estimate_memory(prof(name), EstimateSettings(dtype="bfloat16"))
    assert mem.weights_bytes == pytest.approx(stored, rel=0.10)


def test_bitsandbytes_4bit_leaves_fused_experts_at_full_size_and_awq_does_not():
    p = prof("mixtral-8x7b")
    experts = p.param_groups["experts"]
    bnb = estimate_memory(p, EstimateSettings(quantization=Quantization.parse("bnb-nf4")))
    awq = estimate_memory(p, EstimateSettings(quantization=Quantization.parse("awq")))
    assert bnb.expert_weights_bytes == 2 * experts  # 3D expert tensors are not Linear layers: bf16
    assert awq.expert_weights_bytes < 0.3 * 2 * experts
    assert bnb.weights_bytes > 2.5 * awq.weights_bytes


def test_latent_attention_caches_the_latent_and_the_rope_key():
    p = prof("deepseek-v3")
    assert (p.kv_lora_rank, p.qk_rope_head_dim) == (512, 64)
    mem = estimate_memory(p, EstimateSettings(dtype="bfloat16", input_len=4096, max_new_tokens=0))
    assert mem.kv_cache_bytes == 61 * (512 + 64) * 4096 * 2  # not 128 heads x (192 + 128)


@pytest.mark.parametrize("name,per_token", [("falcon-7b", 32 * 2 * 64), ("starcoder", 40 * 2 * 128)])
def test_multi_query_attention_caches_one_kv_head(name, per_token):
    assert sum(g.layers * g.kv_per_token for g in prof(name).cache_groups) == per_token


def test_hybrid_mamba_layers_hold_a_fixed_state_and_only_attention_layers_grow():
    p = prof("jamba-v0.1")
    short, long = (
        estimate_memory(p, EstimateSettings(dtype="bfloat16", input_len=n, max_new_tokens=0)) for n in (1024, 8192)
    )
    assert short.state_bytes == long.state_bytes == 28 * (8192 * 4 * 2 + 8192 * 16 * 4)  # conv bf16, ssm fp32
    assert long.kv_cache_bytes == 8 * short.kv_cache_bytes == 4 * 2 * 8 * 128 * 8192 * 2  # 4 attention layers


def test_whisper_is_estimated_with_encoder_decoder_and_cross_attention():
    p = prof("whisper-large-v3")
    assert p.is_encoder_decoder and p.encoder_length == 1500 and p.tower_parameters > 0.5 * p.num_parameters
    mem = estimate_memory(p, EstimateSettings(dtype="float16", input_len=1500, max_new_tokens=100))
    assert mem.kv_cache_bytes == 32 * 2 * 1280 * (100 + 1500) * 2  # self-attention over 100 tokens, cross over 1500
    assert mem.weights_bytes == 2 * p.num_parameters


def test_moe_decode_at_batch_one_reads_about_the_active_parameters():
    p, h100 = prof("mixtral-8x7b"), find_accelerator("H100 SXM")
    e = estimate(p, EstimateSettings(dtype="bfloat16", input_len=128, max_new_tokens=16), h100)
    reading_active = 2 * p.active_parameters / h100.bandwidth_Bps
    assert e.speed.tpot_s == pytest.approx(reading_active, rel=0.25)
    b64 = next(pt for pt in e.speed.per_batch if pt.batch == 64)
    assert b64.tpot_s > 3 * e.speed.tpot_s  # 64 tokens activate nearly every expert


def test_a_prompt_beyond_the_context_does_not_fit_and_the_sweep_agrees():
    p, h100 = prof("opt-1.3b"), find_accelerator("H100 SXM")
    s = EstimateSettings(dtype="bfloat16", input_len=4096, max_new_tokens=64)
    e = estimate(p, s, h100)
    assert e.fits["context"] is False and not e.within_context and e.context_length == 2048
    assert e.max_input_len == 2048 - 64
    at = estimate(p, s.model_copy(update={"input_len": e.max_input_len}), h100)
    past = estimate(p, s.model_copy(update={"input_len": e.max_input_len + 1}), h100)
    assert all(at.fits.values()) and not all(past.fits.values())


@pytest.mark.parametrize(
    "name,inter",
    [("opt-1.3b", 8192), ("starcoder", 24576), ("gpt2", None), ("whisper-large-v3", 5120), ("t5-base", 3072)],
)
def test_the_mlp_width_is_read_under_each_architecture_s_own_name(name, inter):
    assert prof(name).intermediate_size == inter  # GPT-2's n_inner null means 4 x n_embd in its own code


def test_a_model_nobody_can_count_is_refused_in_one_line_not_estimated_at_zero(tmp_path, monkeypatch):
    import json

    from infertune.core.errors import UserError
    from infertune.probe import count

    (tmp_path / "config.json").write_text(json.dumps(CONFIGS["gpt2"]))
    monkeypatch.setattr(count, "meta_model", lambda cfg, trust: None)  # as for an architecture no class builds
    p = profile_model(tmp_path)
    assert p.num_parameters is None
    with pytest.raises(UserError, match="cannot count the parameters"):
        estimate_memory(p, EstimateSettings())


def test_a_pre_quantized_vision_language_checkpoint_keeps_its_tower_in_the_dtype():
    stored = profile_model(
        dict(CONFIGS["qwen2-vl-7b"], quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    )
    awq = estimate_memory(stored, EstimateSettings(dtype="float16"))
    at_load = estimate_memory(
        prof("qwen2-vl-7b"), EstimateSettings(dtype="float16", quantization=Quantization.parse("awq"))
    )
    assert awq.tower_weights_bytes == 2 * stored.tower_parameters  # AWQ/GPTQ recipes leave the tower out
    tower_linear_at_4bit = stored.tower_parameters * (0.5 + 2.5 / 128)
    assert awq.weights_bytes - at_load.weights_bytes == pytest.approx(
        2 * stored.tower_parameters - tower_linear_at_4bit, rel=0.02
    )


def test_encoder_decoders_are_bounded_by_their_own_positions():
    h100 = find_accelerator("H100 SXM")
    whisper = estimate(
        prof("whisper-large-v3"), EstimateSettings(dtype="float16", input_len=1500, max_new_tokens=500), h100
    )
    assert whisper.fits["context"] is False  # the decoder has 448 positions
    ok = estimate(prof("whisper-large-v3"), EstimateSettings(dtype="float16", input_len=1500, max_new_tokens=440), h100)
    assert ok.within_context and ok.max_input_len == 1500  # the encoder's length is fixed: 30 s of audio
    bart = estimate(prof("bart-large"), EstimateSettings(dtype="float16", input_len=2048, max_new_tokens=64), h100)
    assert not bart.within_context and bart.max_input_len == 1024  # learned positions for encoder and decoder
    t5 = estimate(prof("t5-base"), EstimateSettings(dtype="float16", input_len=16384, max_new_tokens=64), h100)
    assert t5.within_context  # relative positions: no limit but memory
