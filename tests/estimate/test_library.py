"""The target's transformers version prices its slow paths in the expected speed (estimate/library.py)."""

from __future__ import annotations

import pytest

from infertune.estimate import estimate, library
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.factors import MOE_EXPERT_ITER_S
from infertune.estimate.memory import EstimateSettings
from tests.estimate.test_estimate import llama


def moe(**kw):
    """A Qwen3-30B-A3B-like shape, scaled down: 48 layers, 128 experts, top 8."""
    experts = 48 * 128 * 3 * 2048 * 768
    base = dict(
        model_type="qwen3_moe",
        architecture="Qwen3MoeForCausalLM",
        num_layers=48,
        hidden_size=2048,
        intermediate_size=6144,
        num_attention_heads=32,
        num_kv_heads=4,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=False,
        layer_types=["full_attention"] * 48,
        num_experts=128,
        experts_per_token=8,
        num_parameters=experts + 1_500_000_000,
        param_groups={"embedding": 311_164_928, "lm_head": 311_164_928, "experts": experts, "linear": 800_000_000},
    )
    base.update(kw)
    return llama(**base)


def tpot(p, version: str | None, **kw) -> float:
    s = EstimateSettings(**{"dtype": "bfloat16", "input_len": 512, "max_new_tokens": 128, **kw})
    s = s.model_copy(update={"transformers_version": version})
    x = estimate(p, s, find_accelerator("H100 SXM")).speed.expected
    assert x is not None
    return x.tpot_s


def test_an_expert_loop_over_every_expert_is_priced_before_the_grouped_kernels():
    p = moe()
    old, skip, grouped = tpot(p, "4.51.0"), tpot(p, "4.53.0"), tpot(p, None)
    # every expert, every layer, every token: 48 x 128 iterations of the Python loop
    assert old - grouped == pytest.approx(48 * 128 * MOE_EXPERT_ITER_S, rel=0.05)
    # from 4.53 only the experts a token picked (8 of 128 at batch 1): an eighth... of the loop's cost at most
    assert grouped < skip < grouped + 48 * 8 * MOE_EXPERT_ITER_S * 1.05
    assert tpot(p, "5.0.0") == grouped


def test_the_expert_loop_is_named_among_the_expected_figures_factors():
    s = EstimateSettings(dtype="bfloat16", transformers_version="4.51.0")
    x = estimate(moe(), s, find_accelerator("H100 SXM")).speed.expected
    assert x is not None and any("MoE expert loop" in f.name for f in x.factors)
    dense = estimate(llama(), s, find_accelerator("H100 SXM")).speed.expected
    assert dense is not None and not any("MoE" in f.name for f in dense.factors)


def test_sdpa_copies_kv_to_every_query_head_before_4_54():
    """A long prompt's decode pays the copy per step: grouped-query models only, before enable_gqa (4.54)."""
    p = llama(num_layers=28, hidden_size=3584, num_attention_heads=28, num_kv_heads=4, head_dim=128)
    long = dict(input_len=30_000)
    s = EstimateSettings(attn="sdpa", transformers_version="4.46.3")
    assert library.sdpa_repeats_kv(p, s)
    assert library.kv_traffic(p, s) == 2 + 1 + 2 * 7  # the cache's growth, read, 7 copies written and read
    assert not library.sdpa_repeats_kv(p, s.model_copy(update={"transformers_version": "4.54.0"}))
    assert not library.sdpa_repeats_kv(p, s.model_copy(update={"transformers_version": None}))
    assert not library.sdpa_repeats_kv(llama(num_kv_heads=9), s)  # no grouped heads: nothing to copy
    assert tpot(p, "4.46.3", **long) > 1.3 * tpot(p, "4.54.0", **long)
    assert tpot(p, "4.46.3", input_len=128) == pytest.approx(tpot(p, "4.54.0", input_len=128), rel=0.05)


def quantized(method: str, version: str | None, **q) -> tuple[float, list[str]]:
    """(expected TPOT, factor names) of SmolLM2's shape, quantized, on an H100 at a stated transformers."""
    from infertune.estimate.quant import Quantization

    s = EstimateSettings(dtype="bfloat16", quantization=Quantization(method=method, **q), transformers_version=version)
    x = estimate(llama(), s, find_accelerator("H100 SXM")).speed.expected
    assert x is not None
    return x.tpot_s, [f.name for f in x.factors]


def test_fine_grained_fp8_syncs_after_every_linear_from_4_49_until_5_4():
    """Host and GPU take turns: the host's work per Linear (two Triton launches, a sync) plus the device's."""
    from infertune.estimate.factors import FP8_SYNC_S, FP8_TRITON_LINEAR_S

    block = dict(block=[128, 128])
    synced, names = quantized("fp8", "4.51.3", **block)
    two = quantized("fp8", "4.50.0", **block)[0]  # 4.49-4.50: a sync after the activation quantization too
    assert two - synced == pytest.approx(30 * 7 * FP8_SYNC_S, rel=0.05)
    for free in ("4.48.0", "5.4.0", None):  # before the integration (no such path), after the sync's removal
        unsynced, other = quantized("fp8", free, **block)
        assert not any("fine-grained FP8" in n for n in other)
        # at least the launches and syncs of 30 layers x 7 Linears
        assert synced - unsynced >= 30 * 7 * (FP8_TRITON_LINEAR_S + FP8_SYNC_S)
    assert any("fine-grained FP8" in n for n in names)
    # its Triton matmul's 64-row tile at decode's single row: the kernel's bandwidth share halves
    from infertune.estimate.factors import FP8_TRITON_SMALL_M_EFF, QUANT_KERNELS
    from infertune.estimate.quant import Quantization

    old = EstimateSettings(quantization=Quantization(method="fp8", block=[128, 128]), transformers_version="4.51.3")
    assert library.quant_eff(old, 1) == FP8_TRITON_SMALL_M_EFF < QUANT_KERNELS["fp8"]["eff"]
    assert library.quant_eff(old, 64) == QUANT_KERNELS["fp8"]["eff"]
    assert library.quant_eff(old.model_copy(update={"transformers_version": "5.4.0"}), 1) == QUANT_KERNELS["fp8"]["eff"]
    # per-row fp8 (fbgemm, compressed-tensors per channel) never ran through the fine-grained FP8Linear
    per_row, names = quantized("fp8", "4.51.3")
    assert not any("fine-grained FP8" in n for n in names) and per_row < synced - 30 * 7 * FP8_TRITON_LINEAR_S


def test_gptq_8bit_runs_autogptqs_cuda_kernel_before_gptqmodel():
    from infertune.estimate.factors import GPTQ_CUDA_LINEAR_S

    int8_old, names = quantized("gptq", "4.38.2", bits=8)
    int8_new, _ = quantized("gptq", "4.49.0", bits=8)
    assert int8_old > int8_new
    assert int8_old - int8_new == pytest.approx(30 * 7 * GPTQ_CUDA_LINEAR_S, rel=0.02)  # host-bound at batch 1
    assert any("GPTQ 8-bit CUDA kernel" in n for n in names)
    # 4-bit takes the ExLlama kernels whatever the version
    assert quantized("gptq", "4.38.2", bits=4)[0] == quantized("gptq", "4.49.0", bits=4)[0]


def test_flash_attention_2_of_mistral_derived_classes_repeats_kv_before_4_48():
    """Qwen2's FA2 forward called repeat_kv (Llama's did not): the unpadding then gathers the repeated copy."""
    qwen2 = llama(
        model_type="qwen2", num_layers=28, hidden_size=3584, num_attention_heads=28, num_kv_heads=4, head_dim=128
    )
    s = EstimateSettings(attn="flash_attention_2", transformers_version="4.38.2")
    assert library.fa2_repeats_kv(qwen2, s)
    # growth 2, unpadding gathers 7 copies (read, write), repeat (read 1, write 7), the kernel reads 7
    assert library.kv_traffic(qwen2, s) == 2 + 2 * 7 + 1 + 2 * 7
    assert not library.fa2_repeats_kv(qwen2, s.model_copy(update={"transformers_version": "4.48.0"}))
    assert not library.fa2_repeats_kv(qwen2.model_copy(update={"model_type": "llama"}), s)
    assert not library.fa2_repeats_kv(qwen2, s.model_copy(update={"attn": "sdpa"}))

    def attention(version: str) -> float:
        s = EstimateSettings(attn="flash_attention_2", dtype="bfloat16", input_len=30_000, transformers_version=version)
        x = estimate(qwen2, s, find_accelerator("A100 80GB")).speed.expected
        assert x is not None
        return x.attention_s_per_step

    # 31 bytes moved per byte of cache against 5 (growth, unpadding, the kernel's read) from 4.48
    assert attention("4.38.2") > 5 * attention("4.48.0")
    named = estimate(qwen2, s.model_copy(update={"input_len": 30_000}), find_accelerator("A100 80GB")).speed.expected
    assert named is not None and any("FlashAttention-2 copies K/V" in f.name for f in named.factors)


def test_autoawq_dequantizes_for_long_prefills_with_a_stated_transformers():
    """AutoAWQ >= 0.2 runs inputs of 1024+ rows as dequantize + fp16 matmul, not its GEMM kernel's slow path."""
    from infertune.estimate.quant import Quantization

    def call(version: str | None, input_len: int):
        s = EstimateSettings(
            dtype="float16", input_len=input_len, quantization=Quantization(method="awq"), transformers_version=version
        )
        linear = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)  # a Mistral-7B shape
        groups = {"embedding": 131_072_000, "lm_head": 131_072_000, "linear": linear}
        p = llama(
            num_layers=32,
            hidden_size=4096,
            intermediate_size=14336,
            num_attention_heads=32,
            num_kv_heads=8,
            head_dim=128,
            vocab_size=32000,
            tie_word_embeddings=False,
            layer_types=["full_attention"] * 32,
            param_groups=groups,
            num_parameters=sum(groups.values()),
        )
        x = estimate(p, s, find_accelerator("A100 80GB")).speed.expected
        assert x is not None
        return x

    assert library.dequant_rows(EstimateSettings(quantization=Quantization(method="awq"))) > 1 << 20
    # 4.37: AutoAWQ 0.1's GEMM kernel at every size (the transformers AWQ docs' table)
    assert call("4.38.2", 4096).prefill_s < 0.5 * call("4.37.0", 4096).prefill_s
    assert call("4.38.2", 512).prefill_s == call("4.37.0", 512).prefill_s  # under 1024 rows: the GEMM kernel
    assert call("4.38.2", 4096).tpot_s == call("4.37.0", 4096).tpot_s
    assert any("AWQ prefill" in f.name for f in call("4.38.2", 4096).factors)
    assert not any("AWQ prefill" in f.name for f in call("4.37.0", 4096).factors + call("4.38.2", 512).factors)


def test_flash_attention_2_reads_hide_under_the_host_only_the_caches_growth_waits():
    """published-gpu-2 dev: FA2 rows decode at a 30k-token prompt about as fast as at 1 token on small models;
    sdpa and eager (GLM-4's rows) pay their attention in series."""

    def expected(attn: str):
        s = EstimateSettings(attn=attn, dtype="bfloat16", input_len=30_000)
        x = estimate(llama(), s, find_accelerator("H100 SXM")).speed.expected
        assert x is not None
        return x

    sdpa, fa2 = expected("sdpa"), expected("flash_attention_2")
    assert sdpa.attention_s_per_step == pytest.approx(fa2.attention_s_per_step)  # 3 bytes per byte of cache
    # sdpa: the whole attention in series; FA2: the growth's 2 of those 3 bytes
    assert sdpa.tpot_s - fa2.tpot_s == pytest.approx(sdpa.attention_s_per_step / 3, rel=0.05)


def test_fine_grained_fp8_on_a_gpu_without_fp8_tensor_cores_is_loaded_as_bf16_from_5_0():
    """Below compute capability 8.9 transformers 5 dequantizes fine-grained FP8 weights at load (4.x refused)."""
    from infertune.estimate.quant import Quantization

    def run(gpu: str, version: str | None):
        fp8 = Quantization(method="fp8", block=[128, 128])
        s = EstimateSettings(dtype="bfloat16", quantization=fp8, transformers_version=version)
        return estimate(llama(), s, find_accelerator(gpu))

    bf16 = estimate(llama(), EstimateSettings(dtype="bfloat16"), find_accelerator("A100 80GB"))
    on_a100 = run("A100 80GB", None)
    assert on_a100.memory.weights_bytes == bf16.memory.weights_bytes  # 2 bytes per weight, as bf16
    assert run("A100 80GB", "5.0.0").memory.weights_bytes == bf16.memory.weights_bytes
    assert on_a100.speed.expected is not None and bf16.speed.expected is not None
    assert on_a100.speed.expected.tpot_s == bf16.speed.expected.tpot_s
    assert any("dequantized to bf16 at load" in f.name for f in on_a100.speed.expected.factors)
    # an H100 (9.0) keeps the fp8 weights; so does 4.57 anywhere (which refuses to load them below 8.9)
    for gpu, version in (("H100 SXM", None), ("A100 80GB", "4.57.3")):
        kept = run(gpu, version)
        assert kept.memory.weights_bytes < 0.75 * bf16.memory.weights_bytes
