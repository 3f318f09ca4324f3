"""Issue 30's eight patterns as a user states them, through the whole API path (intake, estimate, advisor): the most
important probes of benchmarks/corpora/advisor-patterns (the README there has each probe's reasoning and source).
Each test asserts the bottleneck and the move; the models are published configs (tests/scenario_models.py)."""

import json

import pytest

from infertune import api
from tests.scenario_models import LLAMA2_13B, LLAMA2_70B, LLAMA3_8B, QWEN3_8B

ATTENTION = {"attn-sdpa", "attn-flash2", "attn-flash3", "attn-flex", "attn-kernels-hub"}
# https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (the fields that shape memory and speed)
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4/blob/main/config.json (its quantization)
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for name, cfg in {
        "qwen3-8b": QWEN3_8B,
        "llama3-8b": LLAMA3_8B,
        "llama3-8b-awq": {**LLAMA3_8B, "torch_dtype": "float16", "quantization_config": AWQ},
        "llama2-13b": LLAMA2_13B,
        "llama2-70b": LLAMA2_70B,
        "qwen3-30b-a3b": QWEN3_30B_A3B,
    }.items():
        d = tmp_path_factory.mktemp(name)
        (d / "config.json").write_text(json.dumps(cfg))
        out[name] = str(d)
    return out


def test_eager_attention_at_4_x_32k_on_an_h100_gets_an_attention_move(models):
    """Pattern 8 (a regression against the earlier advisor): Qwen3-8B in bf16 with eager attention, 4 prompts of
    32k tokens on an H100 SXM. The eager score matrices (batch x heads x 32k x 32k) are the problem: sdpa or
    FlashAttention, https://huggingface.co/docs/transformers/main/en/perf_infer_gpu_one."""
    a = api.advise(
        model=models["qwen3-8b"], gpu="H100 SXM", dtype="bfloat16", attn="eager", input_len="32k",
        max_new_tokens=256, batch=4, concurrency=1,
    )  # fmt: skip
    assert a.diagnosis.bottleneck == "long-input-attention"
    assert a.diagnosis.evidence["attention_scratch_bytes"] > 1e12  # the terabyte of scores the issue names
    assert a.next.technique in ATTENTION


def test_a_sharding_batching_server_is_accepted_at_intake(models):
    """Pattern 8: TGI --num-shard 4 (or vLLM -tp 4) serving Llama-2-70B: --tp 4 with --batching continuous describes
    what the user runs, wherever it runs (transformers' own continuous batching does not shard); it was refused."""
    a = api.advise(
        model=models["llama2-70b"], gpu="A100 80GB", gpus=4, tp=4, batching="continuous", dtype="float16",
        input_len="1k", max_new_tokens=256, batch=1, concurrency=16,
    )  # fmt: skip
    assert a.current.engine != "transformers" and a.current.tp == 4
    assert any("engine = a serving engine" in x for x in a.assumptions)
    assert all(r.technique != "serving-engine" for r in a.recommendations)  # it is one already


def test_cpu_flags_pasted_from_cpuinfo_describe_the_target_and_price_bf16_as_emulated(models):
    """Pattern 3: a Cascade Lake server described by its /proc/cpuinfo flags (AVX-512 with VNNI, no avx512_bf16, no
    AMX), bf16 decoding at 1.8 s per token. The flags the estimate has no term for (avx512bw, sse4_2) are dropped,
    not refused; bf16 there is emulated (https://github.com/intel/intel-extension-for-pytorch/issues/637): fp32 or
    int8 weights, never this host's flags."""
    a = api.advise(
        model=models["llama3-8b"], cpu_flags="fpu,sse4_2,avx2,fma,avx512f,avx512bw,avx512vl,avx512_vnni", cores=24,
        cpu_ram="192GiB", dtype="bfloat16", input_len=256, max_new_tokens=128, batch=1, concurrency=1,
        observed=["tpot=1.8s"],
    )  # fmt: skip
    assert "stated" in a.hardware["source"] and a.hardware["cpu_ram_bytes"] == 192 * 2**30
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.technique in ("dtype", "quant-torchao", "quant-quanto")
    assert any("bf16-on-cpu-without-native-bf16" in line for line in a.diagnosis.ranked[0].evidence)


def test_awq_in_bf16_that_ran_slowly_moves_to_fp16_not_blocked_as_a_crash(models):
    """Pattern 2: an AWQ checkpoint in bf16 on an A10G decoding at 2x the expected time. AWQ kernels are built for
    fp16 activations (https://github.com/vllm-project/vllm/issues/1941): fp16, lossless for them. The user ran it,
    so the entry's crash symptom is not a blocking incompatibility."""
    a = api.advise(
        model=models["llama3-8b-awq"], gpu="A10G", dtype="bfloat16", input_len=512, max_new_tokens=256, batch=1,
        concurrency=1, observed=["tpot=80ms"],
    )  # fmt: skip
    assert a.current.quantization == "awq"
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.technique == "dtype" and a.next.settings == {"dtype": "float16"} and a.next.quality_risk == "none"


def test_a_hundred_prompts_one_at_a_time_is_queueing_not_decode(models):
    """Pattern 6: 100 prompts generated one at a time on an RTX 4090 (a bf16 checkpoint loaded as fp16 on the GPU,
    which converts tensor by tensor), each taking 10 minutes end to end. Most of that is waiting behind the others:
    batch them (https://huggingface.co/docs/transformers/main/en/continuous_batching)."""
    a = api.advise(
        model=models["llama3-8b"], gpu="RTX 4090", dtype="float16", input_len="1k", max_new_tokens=256, batch=1,
        concurrency=100, batching="serial", observed=["e2e=600s"],
    )  # fmt: skip
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next.technique in ("continuous-batching", "serving-engine")
    assert not any("both copies" in line for x in a.diagnosis.ranked for line in x.evidence)


def test_a_slow_first_token_of_one_batched_call_is_its_prefill_not_queueing(models):
    """Pattern 8, as a TTFT: 8 prompts of 8k tokens in one generate call with eager attention. Nothing queues in
    one call: the first token is the prefill's, and the eager scores are why."""
    a = api.advise(
        model=models["qwen3-8b"], gpu="H100 SXM", dtype="bfloat16", attn="eager", input_len="8k",
        max_new_tokens=256, batch=8, concurrency=1, observed=["ttft=4s"],
    )  # fmt: skip
    assert a.diagnosis.bottleneck in ("long-input-attention", "prefill-speed")
    assert a.next.technique in ATTENTION


def test_a_moe_decoding_4x_slower_with_an_unstated_transformers_gets_an_engine_or_the_upgrade(models):
    """Pattern 7: Qwen3-30B-A3B at batch 1 on an H100, 120 ms per token, transformers version not stated. Inside
    the MoE band of the speed model, but beyond 2x: the expert loop of transformers < 5
    (https://github.com/huggingface/transformers/pull/42697) may be why, and an engine leaves it at concurrency 1."""
    a = api.advise(
        model=models["qwen3-30b-a3b"], gpu="H100 SXM", dtype="bfloat16", input_len=512, max_new_tokens=256, batch=1,
        concurrency=1, observed=["tpot=120ms"],
    )  # fmt: skip
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.technique in ("serving-engine", "upgrade")
    assert "serving-engine" in {r.technique for r in a.recommendations}


def test_old_transformers_host_ram_at_load_with_bin_shards_on_a_gpu_target(models, tmp_path):
    """Pattern 6: a 12.7 GiB notebook loading Llama-2-13B's .bin shards for an A100 with transformers 4.35 (the
    model built on the CPU, each shard read whole): host RAM at load, cured by safetensors / low_cpu_mem_usage."""
    d = tmp_path / "bin"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA2_13B))
    for i in range(3):  # sparse files: their size, no disk
        with open(d / f"pytorch_model-0000{i + 1}-of-00003.bin", "wb") as fh:
            fh.truncate(9_900_000_000)
    a = api.advise(
        model=str(d), gpu="A100 40GB", dtype="float16", input_len=512, max_new_tokens=256, batch=1, concurrency=1,
        cpu_ram="12.7GiB", lib=["transformers=4.35.2", "torch=2.1.0"],
    )  # fmt: skip
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.diagnosis.ranked[0].evidence[0].startswith("host RAM at load")
    assert a.next.technique == "checkpoint-loading"


def test_dropping_a_shipped_quantization_is_priced_as_the_unquantized_model(models):
    """Found by the sixth round of probes (DeepSeek-V3's FP8 checkpoint over 8 H200): `quant-none` from a checkpoint
    that ships AWQ/GPTQ/FP8 weights loads the model's unquantized checkpoint, so its weights are 16-bit, not the
    stored 4-bit ones. Llama-3-8B AWQ on an A100 80GB: the move's peak is above 16-bit weights (15 GiB)."""
    a = api.advise(
        model=models["llama3-8b-awq"], gpu="A100 80GB", dtype="float16", input_len=512, max_new_tokens=256, batch=1,
        concurrency=1, observed=["tpot=60ms"],
    )  # fmt: skip
    none = [r for r in a.recommendations if r.technique == "quant-none"]
    assert none and none[0].expected.peak_bytes_after > 15 * 2**30 > none[0].expected.peak_bytes_before
    on_t4 = api.advise(
        model=models["llama3-8b-awq"], gpu="T4", dtype="float16", input_len=512, max_new_tokens=256, batch=1,
        concurrency=1, observed=["tpot=200ms"],
    )  # fmt: skip
    assert all(r.technique != "quant-none" for r in on_t4.recommendations)  # 16-bit weights do not fit 15 GiB


def test_an_oom_while_loading_is_no_evidence_for_a_problem_of_the_first_generate_call(models):
    """Found by exploring the probes' flags: a described 16 GiB CPU that ran out of host memory loading Qwen3-8B in
    bf16 got an upgrade past transformers 4.45's logits copy (https://github.com/huggingface/transformers/issues/34796),
    a spike of the first generate call, never of the load. An OOM is evidence for problems of its own phase."""
    a = api.advise(
        model=models["qwen3-8b"], cpu_flags="avx2,fma", cores=8, cpu_ram="16GiB", dtype="bfloat16", input_len="1k",
        max_new_tokens=256, batch=1, concurrency=1, oom="host-ram",
    )  # fmt: skip
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.technique != "upgrade" and a.next.expected.fits_after
