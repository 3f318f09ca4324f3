"""The advisor against real users' reports: each scenario restates, in our own words, a public report where
someone ran a model, hit a memory or speed wall, and a change helped; the test checks that the advisor's
`next` is that change (or one as good, named in the test), on the published config of the model.

Where the report does not name a detail (the GPU, the prompt length), the test says what it assumes."""

import pytest

from infertune.advisor.advise import advise
from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.measure.results import TrialResult
from infertune.techniques import Setup
from tests.scenario_models import (
    FALCON_7B,
    FALCON_40B,
    LLAMA2_7B,
    LLAMA2_13B,
    LLAMA2_70B,
    LLAMA3_8B,
    LLAMA3_70B,
    MISTRAL_7B,
    QWEN3_8B,
    SMOLLM2_1B7,
    cpu,
    facts,
    profile,
)

OOM = TrialResult(status="oom", error="CUDA out of memory", config={}, workload=Workload(), model_path="-")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cfgs = {
        "llama3-8b": LLAMA3_8B,
        "llama3-70b": LLAMA3_70B,
        "llama2-7b": LLAMA2_7B,
        "llama2-13b": LLAMA2_13B,
        "llama2-70b": LLAMA2_70B,
        "qwen3-8b": QWEN3_8B,
        "mistral-7b": MISTRAL_7B,
        "falcon-7b": FALCON_7B,
        "falcon-40b": FALCON_40B,
        "smollm2-1.7b": SMOLLM2_1B7,
    }
    return {name: profile(tmp_path_factory, cfg) for name, cfg in cfgs.items()}


def on_stated_hardware(a):
    """`next` never needs hardware the user has not stated, and pp > 1 only where a move says it needs more."""
    assert a.next is not None and a.next.needs_hardware is None and a.next.settings.get("pp", 1) == 1
    for r in a.recommendations:
        assert r.settings.get("pp", 1) == 1 or r.needs_hardware


# --- quantization: to none, to another method, to a pre-quantized checkpoint, an upgrade ---------------------


def test_llama3_8b_fp16_on_one_t4_gets_a_quantization_that_fits_not_a_second_machine(models):
    """https://theneuralbase.pages.dev/llama/qna/fix-llama-out-of-memory-error and
    https://taourl.com/read-2396624.html: Llama-3 8B in 16-bit does not fit a 16 GB card (Colab's T4); loading
    it quantized does. One request at a time."""
    a = advise(facts(models["llama3-8b"], "T4"), Setup(dtype="float16"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.family == "quantization" and a.next.expected.fits_after and list(a.next.settings) == ["quantization"]
    on_stated_hardware(a)
    assert all(
        r.family == "quantization" or r.technique != "serving-engine" or r.needs_hardware for r in a.recommendations
    )


def test_llama3_8b_in_bnb_8bit_on_an_a100_40gb_decoding_slowly_drops_the_quantization(models):
    """https://github.com/bitsandbytes-foundation/bitsandbytes/issues/490: on A100 40GB cards, 8-bit loading of a
    7B model decoded about 5x slower than bf16; the maintainer says the int8 kernels were built for training,
    not inference. 16-bit weights fit the card: drop the quantization."""
    a = advise(facts(models["llama3-8b"], "A100 40GB"), Setup(dtype="bfloat16", quantization="bnb-8bit"))
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.settings == {"quantization": "none"} and a.next.quality_risk == "none"
    x = a.next.expected
    assert x.fits_after and x.tpot_s_after < x.tpot_s_before / 2
    assert any("bnb-int8-decode" in f and "issues/347" in f for f in x.factors_before)  # labelled, with sources
    assert not x.factors_after
    assert any("documented factor bnb-int8-decode" in e for e in a.diagnosis.ranked[0].evidence)


def test_llama_7b_int8_on_an_rtx_3090_is_several_times_slower_than_fp16(models):
    """https://github.com/bitsandbytes-foundation/bitsandbytes/issues/347: llama-7b on an RTX 3090, 33 ms per
    step in fp16 against 155 ms with LLM.int8. fp16 fits the 24 GB card."""
    a = advise(facts(models["llama2-7b"], "RTX 3090"), Setup(dtype="float16", quantization="bnb-8bit"))
    assert a.next.settings == {"quantization": "none"}
    assert "--dtype float16" in a.next.validate_cmd or "quantization" not in (a.next.run_file or "")


def test_vicuna_13b_load_8bit_on_a_48gb_card(models):
    """https://github.com/lm-sys/FastChat/issues/1698: Vicuna 7B/13B with --load-8bit ran about twice slower than
    fp16 on an A40 (48 GB, Ampere). The A40 is not in the table: an L40S has the same 48 GB."""
    a = advise(facts(models["llama2-13b"], "L40S"), Setup(dtype="float16", quantization="bnb-8bit"))
    assert a.next.settings == {"quantization": "none"} and a.next.expected.fits_after


def test_old_bitsandbytes_4bit_at_batch_1_gets_an_upgrade(models):
    """https://github.com/bitsandbytes-foundation/bitsandbytes/issues/518: falcon-7b-instruct in 4-bit on a 12 GB
    RTX 3060 decoded 3.5x slower than 8-bit; fixed by bitsandbytes 0.40.0's batch-1 kernels. fp16 (14 GB) does
    not fit 12 GB. The 3060 is modelled as a 3090 with 12 GB."""
    f = facts(models["falcon-7b"], "RTX 3090", vram_gib=12, stated={"bitsandbytes": "0.39.1"})
    a = advise(f, Setup(dtype="bfloat16", quantization="bnb-4bit"))
    assert a.next.technique == "upgrade" and a.next.settings == {"packages": {"bitsandbytes": ">=0.40.0"}}
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before / 3
    assert any("releases/tag/0.40.0" in i for i in a.next.compatibility.issues)
    none = [r for r in a.recommendations if r.settings == {"quantization": "none"}]
    assert not none  # 16-bit weights do not fit: not a candidate for speed


def test_falcon_40b_in_4bit_with_bitsandbytes_0_39(models):
    """https://github.com/huggingface/transformers/issues/24502: falcon-40b-instruct with load_in_4bit and
    bitsandbytes 0.39.1 was extremely slow. The GPU is not named: an A100 80GB is assumed (16-bit weights, 84 GB,
    do not fit it). Upgrade, or switch to a pre-quantized checkpoint."""
    f = facts(models["falcon-40b"], "A100 80GB", stated={"bitsandbytes": "0.39.1"})
    a = advise(f, Setup(dtype="bfloat16", quantization="bnb-4bit"))
    assert a.next.technique == "upgrade"
    assert {"quant-prequantized", "quant-torchao"} <= {r.technique for r in a.recommendations}


def test_unknown_bitsandbytes_version_on_another_machine_is_a_question(models):
    """The same falcon-7b case on a named GPU without --lib: the version is an open question, not a guess."""
    f = facts(models["falcon-7b"], "RTX 3090", vram_gib=12, known=False)
    a = advise(f, Setup(dtype="bfloat16", quantization="bnb-4bit"))
    assert a.next is None or a.next.technique != "upgrade"
    assert any("bitsandbytes version" in q and "--lib bitsandbytes=VERSION" in q for q in a.questions)


def test_llama3_70b_on_one_a100_80gb_is_quantized_on_that_card(models):
    """https://github.com/vllm-project/vllm/issues/5711: Llama 3 70B in bf16 needs ~140 GB; on a single A100 the
    maintainer points to a 4-bit GPTQ checkpoint (~40 GB), not a second card."""
    a = advise(facts(models["llama3-70b"], "A100 80GB"), Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.family == "quantization" and a.next.expected.fits_after
    on_stated_hardware(a)
    assert "quant-prequantized" in {r.technique for r in a.recommendations}


def test_torchao_int4_without_compile_is_slower_than_bf16(models):
    """https://github.com/huggingface/transformers/issues/34310: Llama-3.1-8B with torchao int4 weight-only on an
    RTX 3090 generated slower than bf16; torchao's speed comes with torch.compile (static cache)."""
    a = advise(facts(models["llama3-8b"], "RTX 3090"), Setup(dtype="bfloat16", quantization="torchao-int4"))
    assert a.next.technique == "static-cache-compile"
    assert any("torchao-eager" in f for f in a.next.expected.factors_before) and not a.next.expected.factors_after


def test_bnb_8bit_where_16bit_does_not_fit_switches_to_a_faster_method(models):
    """https://github.com/bitsandbytes-foundation/bitsandbytes/issues/490 (8-bit slower than 4-bit) and
    https://github.com/bigscience-workshop/petals/pull/340 (NF4 inference ~2x faster than int8): Llama-2-13B in
    8-bit on a 16 GB T4, where 16-bit weights (26 GB) do not fit: another method, not "none". Assumed: short
    chat turns (128 + 128 tokens; the report gives no lengths). At 512 + 256 tokens the estimate, with the CUDA
    context, library workspaces and the growing cache's allocator reserve, puts 8-bit at the card's edge and the
    advice turns to the KV cache instead."""
    a = advise(
        facts(models["llama2-13b"], "T4", input_len=128, max_new_tokens=128),
        Setup(dtype="float16", quantization="bnb-8bit"),
    )
    assert a.next.family == "quantization" and a.next.settings["quantization"] not in ("none", "bnb-8bit")
    assert list(a.next.settings) == ["quantization"] and a.next.expected.fits_after
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before / 2
    assert all(r.settings != {"quantization": "none"} for r in a.recommendations)


def test_bnb_4bit_decoding_slower_than_fp16_moves_to_a_prequantized_checkpoint(models):
    """https://github.com/bitsandbytes-foundation/bitsandbytes/issues/611: with a current bitsandbytes, NF4 decoding
    was still slower than fp16 (36.5 vs 48.6 tokens/s). Llama-2-13B on an L4 (24 GB: 16-bit does not fit): an
    AWQ/GPTQ checkpoint with fast 4-bit kernels, asking whether one exists."""
    a = advise(
        facts(models["llama2-13b"], "L4", stated={"bitsandbytes": "0.45.0"}),
        Setup(dtype="bfloat16", quantization="bnb-4bit"),
    )
    assert a.next.technique == "quant-prequantized" and a.next.settings == {"quantization": "awq"}
    assert any("AWQ or GPTQ checkpoint" in i for i in a.next.compatibility.issues)
    assert all(r.technique != "upgrade" for r in a.recommendations)  # 0.45 has the fast kernels


# --- dtype -------------------------------------------------------------------------------------------------


def test_qwen3_8b_in_fp16_on_a_cpu_moves_to_bf16_or_fp32(models):
    """https://github.com/huggingface/transformers/issues/34692: on a CPU, a model loaded in float16 took ~5x
    longer per prompt than float32 (CPUs emulate fp16 matmuls)."""
    a = advise(facts(models["qwen3-8b"], cpu(64)), Setup(dtype="float16"))
    assert a.next.technique == "dtype" and a.next.settings["dtype"] in ("bfloat16", "float32")
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before / 2
    assert any("fp16-on-cpu" in f for f in a.next.expected.factors_before)


def test_bf16_on_a_cpu_without_native_bf16_moves_to_fp32(models):
    """https://github.com/huggingface/transformers/issues/30588: in bf16 a CPU generated at half the speed of fp32
    (20 s against 10 s); https://github.com/pytorch/pytorch/issues/146508 shows why on CPUs without native bf16.
    The host's probe (bf16 matmuls at a tenth of fp32's rate) says which CPU this is."""
    host = cpu(64)
    slow_bf16 = host.model_copy(update={"flops": {**host.flops, "bfloat16": host.flops["float32"] / 10}})
    a = advise(facts(models["llama2-7b"], slow_bf16), Setup(dtype="bfloat16"))
    assert a.next.settings == {"dtype": "float32"} and a.next.quality_risk == "none"
    assert any("bf16-on-cpu-without-native-bf16" in f for f in a.next.expected.factors_before)
    native = advise(facts(models["llama2-7b"], host), Setup(dtype="bfloat16"))
    assert native.next is None or native.next.settings != {"dtype": "float32"}


def test_fp32_by_default_on_a_t4_loads_in_fp16(models):
    """https://discuss.huggingface.co/t/llama-7b-gpu-memory-requirement/34323: a 7B model in full precision needs
    ~28 GB; torch_dtype=float16 halves it and fits a T4 (which has no bf16)."""
    a = advise(facts(models["llama2-7b"], "T4"), Setup(dtype="float32"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.settings == {"dtype": "float16"} and a.next.expected.fits_after


# --- attention, KV cache, batching, compile ----------------------------------------------------------------


def test_eager_attention_at_long_prompts_moves_to_sdpa(models):
    """https://github.com/vllm-project/speculators/pull/881: eager attention materialised the score matrix at
    8k tokens and ran out of memory; SDPA, numerically the same, cut the peak. Here: Mistral-7B, 16k prompts, a
    24 GB card."""
    a = advise(facts(models["mistral-7b"], "RTX 4090", input_len=16384), Setup(dtype="bfloat16", attn="eager"))
    assert a.diagnosis.bottleneck == "long-input-attention"
    assert a.next.settings == {"attn": "sdpa"} and a.next.expected.fits_after


def test_serving_oom_on_large_prompts_with_eager_attention_on_a_t4(models):
    """https://github.com/lm-sys/FastChat/pull/3052: serving ran out of memory on large prompts until the attention
    implementation could be chosen. On a T4 (no FlashAttention), 3k-token prompts: sdpa."""
    f = facts(models["llama2-7b"], "T4", input_len=3000, max_new_tokens=16)
    a = advise(f, Setup(dtype="float16", attn="eager"))
    assert a.next.settings == {"attn": "sdpa"}
    assert "attn-flash2" in {r.technique for r in a.rejected}


def test_generation_that_outgrows_memory_gets_a_kv_cache_move(models):
    """https://github.com/huggingface/blog/pull/2045 (the KV-cache quantization post): long generations run out of
    memory as the cache grows; a quantized or offloaded cache trades speed for room. 8k in + 24k out, batch 2, L4."""
    a = advise(facts(models["llama3-8b"], "L4", input_len=8192, max_new_tokens=24576, batch=2), Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "kv-cache-growth"
    assert a.next.family == "kv-cache" and a.next.expected.fits_after
    assert any(t.change == "max_new_tokens" for t in a.workload_tradeoffs)


def test_an_offloaded_kv_cache_that_fits_is_not_a_memory_problem(models):
    """https://github.com/huggingface/transformers/pull/31325: the offloaded cache keeps the KV in CPU RAM (more CPU
    memory, a small increase in generation time). The CPU RAM holding it is listed, not checked as the GPU is:
    Llama-3-8B with 8k prompts and an offloaded cache on an A100 80GB fits."""
    a = advise(
        facts(models["llama3-8b"], "A100 80GB", input_len=8192, max_new_tokens=512),
        Setup(dtype="bfloat16", kv_cache="offloaded"),
    )
    assert a.diagnosis.bottleneck not in ("load-memory", "kv-cache-growth") and a.diagnosis.evidence["fits"]


def test_static_batching_of_many_requests_runs_out_and_continuous_batching_fits(models):
    """https://github.com/huggingface/transformers/pull/13724: batching many requests into one call runs out of
    memory (padding to the longest, all at once); the continuous-batching blog
    (https://huggingface.co/blog/continuous_batching) schedules them into a paged cache. 32 requests, L4."""
    f = facts(models["llama3-8b"], "L4", input_len=2048, concurrency=32)
    a = advise(f, Setup(dtype="bfloat16", batching="static"))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next.technique == "continuous-batching" and a.next.settings["batching"] == "continuous"


def test_generate_at_batch_1_on_an_a100_gets_static_cache_and_compile(models):
    """https://github.com/huggingface/transformers/pull/34923: on an A100, generate took 27 s without and 6.5 s with
    a static cache + torch.compile (after the compile run)."""
    a = advise(facts(models["llama2-7b"], "A100 80GB"), Setup(dtype="float16"))
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.settings == {"kv_cache": "static", "compile": True} and a.next.expected.note


def test_many_concurrent_requests_served_one_by_one_on_one_gpu(models):
    """https://github.com/sgl-project/sglang/issues/4516: one request decodes at a fixed rate, two at twice the
    throughput: batching concurrent requests raises throughput. 64 requests, H100, each its own generate call."""
    a = advise(facts(models["llama3-8b"], "H100 SXM", concurrency=64), Setup(dtype="bfloat16"))
    assert a.next.technique == "continuous-batching"
    engines = {r.settings.get("engine") for r in a.recommendations if r.technique == "serving-engine"}
    assert engines == {"vllm", "sglang"}
    sglang = next(r for r in a.recommendations if r.settings.get("engine") == "sglang")
    assert sglang.snippet.serve.startswith("python -m sglang.launch_server")


# --- placement: device_map, tensor parallel, single device, engines over several GPUs ----------------------


def test_a_model_on_8_gpus_with_device_map_serving_16_requests_serially(models):
    """https://discuss.pytorch.org/t/how-to-deploy-multiple-instances-pytorch-model-api-for-inference-on-a-single-gpu/196044
    (requests behind a plain API handler are processed one after another) and
    https://github.com/huggingface/text-generation-inference/issues/439 (on 8 A100s, shard the model and let the
    server batch). Llama-3-70B spread with device_map="auto" over 8 x A100 80GB, 16 requests at once."""
    f = facts(models["llama3-70b"], "A100 80GB", gpus=8, concurrency=16)
    a = advise(f, Setup(dtype="bfloat16", device_map="auto"))
    assert a.diagnosis.bottleneck == "concurrency"  # not "load-memory on one card": it is spread over 8
    assert a.next.technique in ("continuous-batching", "serving-engine")
    on_stated_hardware(a)
    assert a.next.settings.get("tp", 1) <= 8
    cb = next(r for r in a.rejected if r.technique == "continuous-batching")
    assert "device_map" in " ".join(cb.reasons)


def test_70b_spread_over_two_a100s_runs_the_layers_one_after_another(models):
    """https://github.com/huggingface/text-generation-inference/issues/734: Llama-2-70B loads over two A100 80GB
    with device_map, but sharded serving is what uses both cards at once. Tensor parallelism over the two."""
    a = advise(facts(models["llama2-70b"], "A100 80GB", gpus=2), Setup(dtype="float16", device_map="auto"))
    assert a.next.settings in ({"device_map": None, "tp": 2},) or a.next.technique == "serving-engine"
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before * 0.7


def test_falcon_40b_spread_over_four_gpus_is_slow(models):
    """https://github.com/huggingface/text-generation-inference/issues/417 and
    https://github.com/artidoro/qlora/issues/120: falcon-40b over 4 GPUs with device_map ran very slowly; the answer
    was a sharded server (--num-shard). Falcon has no transformers tensor-parallel plan: a serving engine's."""
    a = advise(facts(models["falcon-40b"], "A100 80GB", gpus=4), Setup(dtype="bfloat16", device_map="auto"))
    assert a.next.technique == "serving-engine" and a.next.settings["tp"] == 4 and a.next.settings["device_map"] is None
    assert "--tensor-parallel-size 4" in a.next.snippet.serve
    on_stated_hardware(a)


def test_falcon_40b_on_two_gpus_that_it_does_not_fit_one_of_gets_device_map_budgets(models):
    """https://github.com/huggingface/accelerate/issues/1730: Falcon-40B over several GPUs; the maintainer's answer
    is device_map="auto" with max_memory in from_pretrained. 2 x A100 80GB, the model on one of them now. Falcon
    has no transformers tensor-parallel plan, so the layers are spread."""
    a = advise(facts(models["falcon-40b"], "A100 80GB", gpus=2), Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.technique == "device-map" and a.next.settings["device_map"] == "auto"
    assert set(a.next.settings["max_memory"]) == {"0", "1", "cpu"} and a.next.expected.fits_after
    assert "tensor-parallel" in {r.technique for r in a.rejected}


def test_a_long_prompt_on_a_70b_model_is_prefill_bound(models):
    """https://github.com/IBM/text-generation-inference/issues/13 (the first token of a 3k prompt on a large Llama
    costs as much as the next 35; the MLP dominates) and https://github.com/InternLM/lmdeploy/issues/2728
    (prefill is compute-bound). Llama-2-70B spread with device_map over 4 x A100 80GB, 2.7k prompts, 8 tokens
    out: the ranks of tensor parallelism split the prefill's matmuls."""
    f = facts(models["llama2-70b"], "A100 80GB", gpus=4, input_len=2712, max_new_tokens=8)
    a = advise(f, Setup(dtype="float16", device_map="auto"))
    assert a.diagnosis.bottleneck == "prefill-speed"
    assert a.next.settings.get("tp") == 4 and a.next.expected.ttft_s_after < a.next.expected.ttft_s_before / 2


def test_a_40b_model_in_8bit_on_four_16gb_gpus_stays_on_one_machine(models):
    """https://github.com/h2oai/h2ogpt/issues/364: Falcon 40B runs on 2 GPUs in 8-bit. On 4 x 16 GB (T4) its 8-bit
    weights (~42 GB) fit one machine: the machine count reads the quantization in use."""
    from infertune.techniques.serving import machines_needed

    f = facts(models["falcon-40b"], "T4", gpus=4)
    s = Setup(dtype="float16", quantization="bnb-8bit", device_map="auto")
    assert machines_needed(f, s) == 1 and machines_needed(f, Setup(dtype="float16")) == 2
    a = advise(f, s)
    on_stated_hardware(a)
    assert all(r.settings.get("pp", 1) == 1 for r in a.recommendations)


def test_tensor_parallel_already_in_use_with_queued_requests(models):
    """https://github.com/vllm-project/vllm/issues/1954: a model sharded over several GPUs with concurrent
    requests; the scheduler that batches them is the engine's. --tp 4 on 4 x H100, 8 requests served serially."""
    a = advise(facts(models["llama3-70b"], "H100 SXM", gpus=4, concurrency=8), Setup(dtype="bfloat16", tp=4))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next.technique == "serving-engine" and "tp" not in a.next.settings  # it keeps the current 4 ranks
    assert "--tensor-parallel-size 4" in a.next.snippet.serve


def test_weights_offloaded_to_the_cpu_though_the_model_fits_the_gpu(models):
    """https://github.com/deepspeedai/DeepSpeed/issues/3764 (offloaded generation is bound by PCIe; a 7B model that
    fits the GPU should not offload) and https://github.com/oobabooga/textgen/issues/2216. Mistral-7B with a
    device_map budget of 6 GiB on a 24 GB card: back to one device."""
    s = Setup(dtype="bfloat16", device_map="auto", max_memory={"0": "6GiB", "cpu": "64GiB"})
    a = advise(facts(models["mistral-7b"], "RTX 4090"), s)
    assert a.next.technique == "single-device" and a.next.settings == {"device_map": None, "max_memory": None}
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before / 10


def test_a_model_beyond_one_machine_is_an_alternative_that_says_so(models):
    """https://github.com/huggingface/text-generation-inference/issues/734 (70B needs several A100s in 16-bit):
    on 2 x L4, bf16 weights need more machines; quantization on the stated machine comes first, the multi-machine
    engine is listed with what it needs."""
    a = advise(facts(models["llama3-70b"], "L4", gpus=2), Setup(dtype="bfloat16"))
    on_stated_hardware(a)
    multi = [r for r in a.recommendations if r.settings.get("pp", 1) > 1]
    assert multi and all("machines" in r.needs_hardware for r in multi)


# --- library upgrades for memory, the "none" answer, and refusing to guess -------------------------------


def test_oom_on_long_prompts_with_transformers_4_46_is_a_known_logits_copy(models):
    """https://github.com/huggingface/transformers/issues/34796: from 4.45, the first generate call copied the whole
    prompt's logits before slicing (fixed in 4.47). Measured OOM at 7k-token prompts, Llama-3-8B, RTX 4090."""
    f = facts(models["llama3-8b"], "RTX 4090", input_len=7000, stated={"transformers": "4.46.2"})
    a = advise(f, Setup(dtype="bfloat16"), measured=OOM)
    assert a.diagnosis.ranked[0].severity == "blocking"
    assert a.next.technique == "upgrade" and a.next.settings == {"packages": {"transformers": ">=4.47.0"}}
    assert "does not model" in a.next.expected.note


def test_llama_oom_after_upgrading_to_transformers_4_38(models):
    """https://github.com/huggingface/transformers/issues/29484: the same code ran out of memory after moving from
    4.37.2 to 4.38.2 (Llama's causal-mask buffer); the fix shipped later. A100 40GB, 2k prompts."""
    f = facts(models["llama2-7b"], "A100 40GB", input_len=2048, stated={"transformers": "4.38.2"})
    a = advise(f, Setup(dtype="bfloat16"), measured=OOM)
    assert a.next.technique == "upgrade" and a.next.settings == {"packages": {"transformers": ">=4.40.0"}}
    fine = advise(
        facts(models["llama2-7b"], "A100 40GB", input_len=2048, stated={"transformers": "4.40.1"}),
        Setup(dtype="bfloat16"),
        measured=OOM,
    )
    assert all(r.technique != "upgrade" for r in fine.recommendations)


def test_a_known_memory_bug_is_not_blamed_for_a_model_that_cannot_fit_anyway(models):
    """https://github.com/huggingface/transformers/issues/34796 again, the other way round: with transformers 4.46
    stated, Llama-3-70B in bf16 on one A100 80GB does not fit whatever the version; quantization comes first."""
    f = facts(models["llama3-70b"], "A100 80GB", stated={"transformers": "4.46.2"})
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.next.family == "quantization"
    assert all(r.technique != "upgrade" for r in a.recommendations)


def test_nothing_left_to_change_says_none(models):
    """https://github.com/sgl-project/sglang/issues/4516: a single stream is bounded by the hardware; with the
    fastest attention kernel and fused kernels already on, a long prefill on an H100 has no move left."""
    s = Setup(dtype="bfloat16", attn="flash_attention_3", kernels=True)
    a = advise(facts(models["smollm2-1.7b"], "H100 SXM", input_len=8192, max_new_tokens=1), s)
    assert a.diagnosis.bottleneck == "none" and a.next is None


def test_an_unreadable_parameter_count_is_refused_not_taken_as_zero(models):
    """https://github.com/gpustack/gpustack/issues/364: a remote-code vision-language model (InternVL2) whose
    size a tool misjudged. A model whose parameters cannot be counted must not be advised on 0 bytes."""
    blind = models["llama3-8b"].model_copy(update={"num_parameters": None, "param_groups": None})
    with pytest.raises(UserError, match="parameter count could not be read"):
        advise(facts(blind, "T4"), Setup(dtype="float16"))


def test_the_run_file_config_describes_the_current_placement(models, tmp_path):
    """The DeepSpeed #3764 case again (https://github.com/deepspeedai/DeepSpeed/issues/3764), told the way a user
    has it: a run file whose config: offloads Mistral-7B with a 6 GiB GPU budget. advise reads it as the current
    setup (validated as measure validates it) and moves it back to one device."""
    from infertune import api

    run = tmp_path / "run.yaml"
    run.write_text(
        f"model: {models['mistral-7b'].path}\ninput_len: 512\nmax_new_tokens: 256\nconcurrency: 1\n"
        "config:\n  dtype: bfloat16\n  device_map: auto\n  max_memory: {'0': 6GiB, cpu: 64GiB}\n"
    )
    a = api.advise(run, gpu="RTX 4090", lib=["bitsandbytes=0.45.0"])
    assert a.current.device_map == "auto" and a.current.max_memory == {"0": "6GiB", "cpu": "64GiB"}
    assert a.next.technique == "single-device"
