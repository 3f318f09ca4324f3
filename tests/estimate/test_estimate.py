"""Each estimator formula pinned against a hand calculation on published configs."""

import pytest

from infertune.core.errors import UserError
from infertune.estimate import estimate
from infertune.estimate.accelerators import ACCELERATORS, find_accelerator
from infertune.estimate.memory import (
    CPU_RUNTIME_BYTES,
    CUDA_ALLOCATOR_SLACK,
    CUDA_CONTEXT_BYTES,
    EstimateSettings,
    Quantization,
    estimate_memory,
    kv_bytes_per_token,
)
from infertune.probe.model import ModelProfile


def llama(**kw) -> ModelProfile:
    """SmolLM2-135M's published config (30 layers, hidden 576, 9 heads, 3 KV heads, head_dim 64)."""
    base = dict(
        path="-",
        model_type="llama",
        architecture="LlamaForCausalLM",
        num_layers=30,
        hidden_size=576,
        intermediate_size=1536,
        num_attention_heads=9,
        num_kv_heads=3,
        head_dim=64,
        vocab_size=49152,
        tie_word_embeddings=True,
        max_position_embeddings=8192,
        sliding_window=None,
        layer_types=["full_attention"] * 30,
        native_dtype="bfloat16",
        quantization=None,
        num_parameters=134_515_008,
        parameter_count_source="meta-device",
        param_groups={"embedding": 28_311_552, "lm_head": 0, "linear": 106_168_320, "other": 35_136},
        linear_rows=30 * (576 + 2 * 192 + 576 + 2 * 1536 + 576),
        checkpoint_format="safetensors",
        checkpoint_bytes=269_060_552,
    )
    base.update(kw)
    return ModelProfile(**base)


def test_kv_bytes_per_token_uses_kv_heads_not_hidden_size():
    # Llama-3-8B: 32 layers, 8 KV heads, head_dim 128, bf16 -> 131,072 B/token (GQA), not 2x32x4096x2.
    p = llama(num_layers=32, num_kv_heads=8, head_dim=128, layer_types=["full_attention"] * 32)
    assert kv_bytes_per_token(p, 2) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_token(llama(), 2) == 2 * 30 * 3 * 64 * 2


def test_dynamic_kv_grows_to_input_plus_output_times_sequences():
    s = EstimateSettings(dtype="bfloat16", input_len=1000, max_new_tokens=24, batch=2, concurrency=3)
    m = estimate_memory(llama(), s)
    # generate feeds back every new token but the last: 1000 + 23 tokens end in the cache
    assert m.kv_cache_bytes == 6 * 1023 * (2 * 30 * 3 * 64 * 2)


def test_static_cache_is_preallocated_to_max_cache_len():
    s = EstimateSettings(dtype="float32", kv_cache="static", max_cache_len=4096, input_len=100, max_new_tokens=10)
    assert estimate_memory(llama(), s).kv_cache_bytes == 4096 * 2 * 30 * 3 * 64 * 4


def test_static_cache_is_already_full_during_the_prefill():
    s = EstimateSettings(
        dtype="float32", kv_cache="static", input_len=2048, max_new_tokens=512, attn="eager", platform="cpu"
    )
    static, dynamic = (
        estimate_memory(llama(), s),
        estimate_memory(llama(), s.model_copy(update={"kv_cache": "dynamic"})),
    )
    # The prefill transient sits on top of the whole preallocated cache, not of the prompt's share.
    assert static.total_bytes - dynamic.total_bytes == 512 * 2 * 30 * 3 * 64 * 4


def test_sliding_window_layers_keep_only_their_window():
    # Gemma-3-like: 5 of every 6 layers slide over 512 tokens.
    types = (["sliding_attention"] * 5 + ["full_attention"]) * 5
    p = llama(layer_types=types, sliding_window=512)
    s = EstimateSettings(dtype="bfloat16", input_len=8000, max_new_tokens=192)
    per = 2 * 3 * 64 * 2
    # transformers' dynamic sliding layer keeps W - 1 tokens (the newest query brings the W-th)
    assert estimate_memory(p, s).kv_cache_bytes == (5 * 8191 + 25 * 511) * per
    static = s.model_copy(update={"kv_cache": "static"})  # a static sliding layer allocates the whole window
    assert estimate_memory(p, static).kv_cache_bytes == (5 * 8192 + 25 * 512) * per
    short = EstimateSettings(dtype="bfloat16", input_len=100, max_new_tokens=28)
    assert estimate_memory(p, short).kv_cache_bytes == 30 * 127 * per  # window not reached


def test_quantized_kv_keeps_the_residual_in_full_precision():
    s = EstimateSettings(
        dtype="bfloat16", kv_cache="quantized", kv_nbits=4, kv_residual_len=128, input_len=1000, max_new_tokens=24
    )
    elems = 2 * 3 * 64
    full = 128 * 30 * elems * 2
    quant = (1023 - 128) * 30 * elems * (4 / 8 + 4 / 64)
    assert estimate_memory(llama(), s).kv_cache_bytes == int(full + quant)


def test_offloaded_kv_keeps_two_layers_on_device_and_the_rest_in_cpu_ram():
    s = EstimateSettings(dtype="bfloat16", kv_cache="offloaded", input_len=1000, max_new_tokens=24)
    m = estimate_memory(llama(), s)
    whole = 1023 * 2 * 30 * 3 * 64 * 2
    assert m.kv_cache_cpu_bytes == whole and m.kv_cache_bytes == whole * 2 // 30


@pytest.mark.parametrize(
    "quant, linear_bytes",
    [
        ("none", 106_168_320 * 2),
        ("bnb-int8", 106_168_320 + 4 * 155_520),
        ("bnb-nf4", 106_168_320 * (0.5 + 4 / 64)),
        ("bnb-nf4-dq", 106_168_320 * (0.5 + 1 / 64 + 4 / (64 * 256))),
        ("gptq-4bit-g128", 106_168_320 * (0.5 + (2 + 0.5) / 128)),
        ("awq-4bit-g64", 106_168_320 * (0.5 + (2 + 0.5) / 64)),
        ("int8", 106_168_320 + 2 * 155_520),
        ("int4-g128", 106_168_320 * (0.5 + 4 / 128)),
    ],
)
def test_weight_bytes_by_quantization_keep_embeddings_in_dtype(quant, linear_bytes):
    s = EstimateSettings(dtype="bfloat16", quantization=Quantization.parse(quant))
    others = (134_515_008 - 106_168_320) * 2  # tied embedding + norms stay bf16, counted once
    assert estimate_memory(llama(), s).weights_bytes == int(linear_bytes + others)


def test_unknown_quantization_is_a_user_error():
    with pytest.raises(UserError, match="unknown quantization"):
        Quantization.parse("magic-2bit")


def test_eager_materialises_scores_sdpa_does_not():
    s = EstimateSettings(dtype="float32", attn="eager", input_len=4096, max_new_tokens=8)
    m = estimate_memory(llama(), s)
    assert m.attention_scratch_bytes == 9 * 4096 * 4096 * 8 + 4096 * 4096 * 4  # fp32: 2 live score copies + mask
    bf = estimate_memory(llama(), s.model_copy(update={"dtype": "bfloat16"}))
    # bf16: scores + fp32 upcast copy + fp32 softmax output
    assert bf.attention_scratch_bytes == 9 * 4096 * 4096 * (2 + 4 + 4) + 4096 * 4096 * 2
    assert estimate_memory(llama(), s.model_copy(update={"attn": "sdpa"})).attention_scratch_bytes == 0


def test_peak_is_the_larger_phase_not_the_sum():
    s = EstimateSettings(dtype="float32", attn="eager", input_len=2048, max_new_tokens=8, platform="cpu")
    m = estimate_memory(llama(), s)
    kv_prompt = 2048 * 2 * 30 * 3 * 64 * 4
    mlp = 2048 * (2 * 576 + 3 * 1536) * 4  # attention and MLP activations never coexist
    attn = 2048 * (2 * 576 + (2 * 9 + 3 * 3) * 64 + 9 * 64) * 4
    expected = (
        m.weights_bytes
        + m.logits_bytes
        + CPU_RUNTIME_BYTES
        + (49152 - 32768) * 1150  # the tokenizer (estimate/overhead.py)
        + max(m.kv_cache_bytes, kv_prompt + max(mlp, attn + m.attention_scratch_bytes))
    )
    assert m.total_bytes == expected
    assert m.logits_bytes == 49152 * (4 + 4)
    assert m.activations_bytes == 2048 * (2 * 576 + 3 * 1536) * 4


def test_cuda_overhead_and_the_load_peak_of_a_dtype_conversion():
    s = EstimateSettings(dtype="float32", input_len=16, max_new_tokens=16)
    m = estimate_memory(llama(), s, checkpoint_dtype="bfloat16")
    tensors = m.total_bytes - m.overhead_bytes
    tensors -= m.kv_growth_reserve_bytes  # the dynamic cache's fragmentation reserve: the cache's, not overhead
    assert m.kv_growth_reserve_bytes == int(0.8 * m.kv_cache_bytes)
    assert m.overhead_bytes == int(m.cuda_context_bytes + CUDA_ALLOCATOR_SLACK * tensors)
    assert m.cuda_context_bytes >= CUDA_CONTEXT_BYTES  # a plain run; backends and compile add their kernels
    assert m.load_peak_bytes == m.weights_bytes + 134_515_008 * 2 + m.overhead_bytes  # both copies at once
    same = estimate_memory(llama(), s.model_copy(update={"dtype": "bfloat16"}), checkpoint_dtype="bfloat16")
    assert same.load_peak_bytes == same.weights_bytes + same.overhead_bytes


def test_does_not_fit_is_a_normal_answer_with_the_largest_context():
    p = llama(
        num_parameters=70_000_000_000,
        param_groups=None,
        num_layers=80,
        num_kv_heads=8,
        head_dim=128,
        layer_types=["full_attention"] * 80,
        max_position_embeddings=131072,
    )
    e = estimate(p, EstimateSettings(dtype="bfloat16", input_len=4096, max_new_tokens=256), find_accelerator("L4"))
    assert e.fits == {"cuda:0": False}
    assert e.fit_details[0].headroom_bytes < 0 and e.max_input_len is None and e.max_concurrency is None
    e2 = estimate(
        llama(), EstimateSettings(dtype="bfloat16", input_len=4096, max_new_tokens=256), find_accelerator("T4")
    )
    assert e2.fits == {"cuda:0": True} and e2.max_input_len == 8192 - 256  # bounded by the model's context
    assert e2.max_concurrency > 1


def test_several_gpus_share_layers_and_each_pays_overhead():
    p = llama(
        num_parameters=70_000_000_000,
        param_groups=None,
        num_layers=80,
        num_kv_heads=8,
        head_dim=128,
        layer_types=["full_attention"] * 80,
    )
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=256)
    one = estimate(p, s, find_accelerator("H100 SXM"))
    four = estimate(p, s, find_accelerator("H100 SXM"), gpus=4)
    assert not all(one.fits.values()) and all(four.fits.values())
    per = four.memory.per_device
    assert sorted(per) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert per["cuda:0"] == int((four.memory.total_bytes - four.memory.overhead_bytes) / 4 + four.memory.overhead_bytes)


def test_roofline_decode_is_bandwidth_bound_at_batch_one_and_turns_compute_bound():
    h100 = find_accelerator("H100 SXM")
    e = estimate(llama(), EstimateSettings(dtype="bfloat16", input_len=512, max_new_tokens=128), h100)
    sp = e.speed
    assert sp.limited_by == "memory-bandwidth"
    kv_mean = e.memory.kv_cache_bytes * (512 + 64) / (512 + 128)
    assert sp.tpot_s == pytest.approx((e.memory.weights_bytes + kv_mean) / 3.35e12)
    prefill_flops = 2 * 106_168_320 * 512 + 2 * 30 * 9 * 64 * 512 * 512 + 2 * 49152 * 576
    assert sp.prefill_s == pytest.approx(prefill_flops / 989e12)
    # A 135M model with GQA reads more KV than weights per extra sequence at 640 tokens: never compute-bound.
    assert sp.crossover_batch is None and all(pt.bound == "memory-bandwidth" for pt in sp.per_batch)
    # An 8B model at short context turns compute-bound once the batch amortises the weight reads.
    big = llama(
        num_parameters=8_000_000_000,
        param_groups={"linear": 7_000_000_000, "embedding": 1_000_000_000},
        num_layers=32,
        num_kv_heads=8,
        head_dim=128,
        num_attention_heads=32,
        hidden_size=4096,
        layer_types=["full_attention"] * 32,
    )
    sp = estimate(big, EstimateSettings(dtype="bfloat16", input_len=128, max_new_tokens=128), h100).speed
    points = {pt.batch: pt for pt in sp.per_batch}
    assert points[1].bound == "memory-bandwidth" and sp.crossover_batch is not None
    assert points[sp.crossover_batch].bound == "compute"
    assert all(pt.bound == "memory-bandwidth" for b, pt in points.items() if b < sp.crossover_batch)
    assert points[64].tokens_per_s > 30 * points[1].tokens_per_s  # batching is nearly free while memory-bound


@pytest.mark.parametrize(
    "name, expect",
    [
        ("nvidia h100 sxm5", "H100 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("geforce rtx 4090", "RTX 4090"),
        ("Tesla T4", "T4"),
        ("mi300x", "MI300X"),
    ],
)
def test_gpu_names_are_forgiving(name, expect):
    assert find_accelerator(name).name == expect


@pytest.mark.parametrize(
    "name, candidates",
    [
        ("nvidia a100", "A100 40GB, A100 80GB"),
        ("H100", "H100 PCIe, H100 SXM"),
        ("rtx 30", "RTX 3060, RTX 3070, RTX 3090"),
    ],
)
def test_a_name_of_several_gpus_is_answered_with_them_never_picked(name, candidates):
    """'A100' is a 40 GB and an 80 GB card: which one decides whether a model fits."""
    with pytest.raises(UserError, match=f"names {candidates.count(',') + 1} GPUs: {candidates}; give one of them"):
        find_accelerator(name)


@pytest.mark.parametrize("name, card", [("H20", "H200"), ("L2", "L20"), ("B20", "B200"), ("RTX 309", "RTX 3090")])
def test_a_name_is_never_resolved_by_prefix(name, card):
    """`--gpu H20` once resolved to the H200 (6.7x the compute). Now each is its own card, and a name that only
    starts a card's name is refused with that card as the candidate."""
    if name in ("H20",):
        assert find_accelerator(name).name == "H20" and find_accelerator(card).name == card
        assert find_accelerator(name).flops["bfloat16"] < find_accelerator(card).flops["bfloat16"] / 6
    else:
        with pytest.raises(UserError, match=f"unknown GPU .*closest: {card}"):
            find_accelerator(name)


def test_every_card_states_its_datasheet():
    for a in ACCELERATORS:
        assert a.source.startswith("datasheet: http"), a.name


@pytest.mark.parametrize(
    "reported, card",
    [
        ("Tesla V100-SXM2-16GB", "V100 16GB"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA GeForce RTX 3070", "RTX 3070"),
    ],
)
def test_a_driver_reported_name_finds_its_card(reported, card):
    from infertune.estimate.accelerators import detected_accelerator

    assert detected_accelerator(reported).name == card


def test_unknown_gpu_suggests_close_names():
    with pytest.raises(UserError, match="closest: .*H100"):
        find_accelerator("H1000")


def test_table_is_internally_consistent():
    for a in ACCELERATORS:
        assert a.memory_bytes > 0 and a.bandwidth_Bps > 0 and a.flops["float32"] > 0
        assert a.fp8 == ("fp8" in a.flops)
        assert not a.flash_attn_3 or a.flash_attn_2
    assert not find_accelerator("T4").bf16 and find_accelerator("A100 80GB").bf16
    assert find_accelerator("H100 SXM").flash_attn_3 and not find_accelerator("A100 40GB").flash_attn_3


def test_prefill_chunking_bounds_the_query_length():
    s = EstimateSettings(dtype="float32", attn="eager", input_len=4096, max_new_tokens=8, prefill_chunk=512)
    m = estimate_memory(llama(), s)
    assert m.attention_scratch_bytes == 9 * 512 * 4096 * 8 + 512 * 4096 * 4
    assert m.activations_bytes == 512 * (2 * 576 + 3 * 1536) * 4


def test_apple_unified_memory_is_checked_against_its_capacity():
    m3 = find_accelerator("M3 Max")
    big = llama(
        num_parameters=70_000_000_000,
        param_groups=None,
        num_layers=80,
        num_kv_heads=8,
        head_dim=128,
        layer_types=["full_attention"] * 80,
    )
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=128, platform="mps")
    e = estimate(big, s, m3)
    assert e.fits == {"mps": False} and e.fit_details[0].headroom_bytes < 0  # 140 GB of weights > 128 GB
    assert e.max_input_len is None
    assert estimate(llama(), s, m3).fits == {"mps": True}


@pytest.mark.parametrize(
    "name, gtype, per, size",
    [
        ("gguf-q4_k_m", "Q4_K", 256, 144),
        ("gguf-Q8_0", "Q8_0", 32, 34),
        ("gguf-q6_k", "Q6_K", 256, 210),
        ("gguf-f16", "F16", 1, 2),
    ],
)
def test_gguf_types_store_every_matrix_in_blocks_and_norms_in_f32(name, gtype, per, size):
    q = Quantization.parse(name)
    assert (q.method, q.gguf_type) == ("gguf", gtype)
    m = estimate_memory(llama(), EstimateSettings(quantization=q))
    matrices = 28_311_552 + 106_168_320  # embedding (tied: stored once) + linear
    assert m.weights_bytes == int(matrices * size / per + 35_136 * 4)


def test_unknown_gguf_type_is_one_clear_error():
    with pytest.raises(UserError, match="unknown GGUF type 'q9_z'"):
        Quantization.parse("gguf-q9_z")


def test_tensor_parallel_splits_the_linear_weights_kv_and_transients_not_the_replicated_parts():
    from infertune.estimate import estimate, tp_rank_bytes
    from infertune.estimate.accelerators import find_accelerator

    acc, p = find_accelerator("H100 SXM"), llama()
    s = EstimateSettings(dtype="bfloat16", input_len=4096, max_new_tokens=512, concurrency=8)
    one, four = estimate(p, s, acc), estimate(p, s.model_copy(update={"tp": 4}), acc, gpus=4)
    m = one.memory
    rank = tp_rank_bytes(m, 4)
    assert four.memory.per_device == {f"cuda:{i}": rank for i in range(4)}
    replicated = m.weights_bytes - m.sharded_weights_bytes
    assert 0 < replicated < m.weights_bytes
    # every rank: the replicated weights, logits and overhead whole, a quarter of everything else
    split = m.total_bytes - replicated - m.logits_bytes - m.overhead_bytes
    assert rank == pytest.approx(replicated + m.logits_bytes + m.overhead_bytes + split / 4, abs=2)
    # decode: a quarter of the sharded reads per rank, plus two all-reduces per layer (which, for a model
    # this small, cost more than the reads they save: the estimate says so)
    from infertune.estimate.speed import ALLREDUCE_LATENCY_S, allreduce_s

    comm = allreduce_s(p, four.settings, acc, 8)
    assert comm > 2 * p.num_layers * ALLREDUCE_LATENCY_S
    assert four.speed.tpot_s - comm < one.speed.tpot_s


def test_mlp_only_tensor_parallel_splits_the_mlp_weights_and_keeps_attention_and_kv_whole():
    from infertune.estimate import estimate, tp_rank_bytes
    from infertune.estimate.accelerators import find_accelerator
    from infertune.estimate.speed import ALLREDUCE_LATENCY_S, allreduce_s

    acc, p = find_accelerator("H100 SXM"), llama()
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=64, tp=2, tp_plan="mlp")
    two = estimate(p, s, acc, gpus=2)
    m = two.memory
    mlp = 30 * 3 * 576 * 1536  # gate, up, down per layer: 79,626,240 of the 106,168,320 linear parameters
    assert m.sharded_weights_bytes == mlp * 2
    # a rank holds everything but half the MLP: KV cache (attention replicated) and transients whole
    assert tp_rank_bytes(m, 2, "mlp") == m.total_bytes - mlp
    assert two.memory.per_device == {"cuda:0": m.total_bytes - mlp, "cuda:1": m.total_bytes - mlp}
    # one all-reduce per layer (after the MLP) instead of two
    full = s.model_copy(update={"tp_plan": "auto"})
    assert allreduce_s(p, s, acc, 1) == pytest.approx(allreduce_s(p, full, acc, 1) / 2)
    assert allreduce_s(p, s, acc, 1) > p.num_layers * ALLREDUCE_LATENCY_S


@pytest.mark.parametrize(
    "qc,method,detail",
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", {"bits": 4, "group_size": 128}),
        (
            {"quant_method": "gptq", "bits": 8, "group_size": 32, "desc_act": False},
            "gptq",
            {"bits": 8, "group_size": 32},
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": True,
            },
            "bnb-nf4",
            {"double_quant": True},
        ),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bnb-int8", {}),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", {"block": [128, 128]}),
        ({"quant_method": "mxfp4"}, "mxfp4", {}),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
                    }
                },
            },
            "gptq",
            {"bits": 4, "group_size": 128},
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    }
                },
            },
            "fp8",
            {"block": None},
        ),
    ],
)
def test_a_checkpoint_s_quantization_config_says_how_its_weights_are_stored(qc, method, detail):
    q = Quantization.from_config(qc)
    assert q.method == method and q.from_checkpoint
    assert {k: getattr(q, k) for k in detail} == detail
    p = llama(quantization=qc)
    stored = estimate_memory(p, EstimateSettings()).weights_bytes  # default: as stored
    unquantized = estimate_memory(p, EstimateSettings(quantization=Quantization.parse("none"))).weights_bytes
    assert unquantized == 2 * p.num_parameters  # --quantization none overrides
    if method == "mxfp4":  # MXFP4 quantizes the experts only: a dense model keeps its size
        assert stored == unquantized
    else:
        assert stored < 0.75 * unquantized


def test_an_unknown_checkpoint_quantization_is_refused_in_one_line():
    with pytest.raises(UserError, match="give --quantization"):
        estimate_memory(llama(quantization={"quant_method": "vptq"}), EstimateSettings())
