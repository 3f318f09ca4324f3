"""The slow-path entries: each one's conditions hold where the report says and not elsewhere, their factors fold
into the estimate, and the moves that leave them are the cures they name."""

import pytest

from infertune.advisor.moves import effective
from infertune.techniques import REGISTRY, Setup, slow_paths
from tests.scenario_models import LLAMA2_7B, LLAMA2_70B, MISTRAL_7B, cpu, facts, profile

# https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
MIXTRAL = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cfgs = {"llama2-7b": LLAMA2_7B, "llama2-70b": LLAMA2_70B, "mistral-7b": MISTRAL_7B, "mixtral": MIXTRAL}
    return {name: profile(tmp_path_factory, cfg) for name, cfg in cfgs.items()}


def ids(f, s, maybe=False):
    return {p.id for p in slow_paths.matching(f, s, maybe)}


def test_every_entry_names_sources_and_cures_that_exist():
    seen = set()
    for p in slow_paths.ALL:
        assert p.id not in seen and p.sources and p.symptoms and p.where
        assert all(src.startswith("https://") for src in p.sources)
        assert set(p.cures) <= set(REGISTRY), p.id
        seen.add(p.id)


def test_device_map_over_gpus_holds_only_when_spread(models):
    m = models["llama2-7b"]
    spread = Setup(dtype="float16", device_map="auto")
    assert "device-map-pipeline" in ids(facts(m, "A100 80GB", gpus=2), spread)
    assert "device-map-pipeline" not in ids(facts(m, "A100 80GB", gpus=1), spread)
    assert "device-map-pipeline" not in ids(facts(m, "A100 80GB", gpus=2), Setup(dtype="float16"))
    assert "device-map-pipeline" not in ids(facts(m, "A100 80GB", gpus=2), spread.model_copy(update={"tp": 2}))


def test_the_spread_costs_more_on_a_small_model_than_on_a_large_one(models):
    [small] = [p for p in slow_paths.ENTRIES if p.id == "device-map-pipeline"]
    spread = Setup(dtype="float16", device_map="auto")
    r7 = small.factor(facts(models["llama2-7b"], "A100 80GB", gpus=2), spread).ratio
    r70 = small.factor(facts(models["llama2-70b"], "A100 80GB", gpus=2), spread).ratio
    assert r7 > 1.5 > r70 > 1.0


def test_the_moe_expert_loop_follows_the_transformers_version(models):
    m, s = models["mixtral"], Setup(dtype="bfloat16")
    assert "moe-expert-loop" in ids(facts(m, "A100 80GB", stated={"transformers": "4.40.0"}), s)
    assert "moe-expert-loop" not in ids(facts(m, "A100 80GB", stated={"transformers": "5.1.0"}), s)
    other = facts(m, "A100 80GB", known=False)  # another machine, nothing stated: a candidate cause only
    assert "moe-expert-loop" not in ids(other, s) and "moe-expert-loop" in ids(other, s, maybe=True)
    assert "moe-expert-loop" not in ids(facts(models["mistral-7b"], "A100 80GB", stated={"transformers": "4.40"}), s)
    # an engine leaves it; so does the upgrade (the move's own version requirement)
    old = facts(m, "A100 80GB", stated={"transformers": "4.40.0"})
    assert "moe-expert-loop" not in ids(old, s.model_copy(update={"engine": "vllm"}))
    assert "moe-expert-loop" not in ids(old, s.model_copy(update={"packages": {"transformers": ">=5.0.0"}}))


@pytest.mark.parametrize(
    "entry,gpu,setup,holds",
    [
        ("gptq-pre-ampere", "V100", {"quantization": "gptq", "dtype": "float16"}, True),
        ("gptq-pre-ampere", "T4", {"quantization": "gptq", "dtype": "float16"}, True),
        ("gptq-pre-ampere", "A100 80GB", {"quantization": "gptq", "dtype": "float16"}, False),
        ("awq-needs-turing", "V100", {"quantization": "awq", "dtype": "float16"}, True),
        ("awq-needs-turing", "T4", {"quantization": "awq", "dtype": "float16"}, False),
        ("awq-bf16-activations", "A100 80GB", {"quantization": "awq", "dtype": "bfloat16"}, True),
        ("awq-bf16-activations", "A100 80GB", {"quantization": "awq", "dtype": "float16"}, False),
        ("bf16-pre-ampere", "V100", {"dtype": "bfloat16"}, True),
        ("bf16-pre-ampere", "T4", {"dtype": "bfloat16"}, True),
        ("bf16-pre-ampere", "T4", {"dtype": "float16"}, False),
        ("bf16-pre-ampere", "A10G", {"dtype": "bfloat16"}, False),
        ("fp8-in-transformers", "H100 SXM", {"quantization": "fp8", "dtype": "bfloat16"}, True),
        ("fp8-in-transformers", "H100 SXM", {"quantization": "fp8", "dtype": "bfloat16", "engine": "vllm"}, False),
        ("flash-attn2-pre-ampere", "T4", {"dtype": "float16", "attn": "flash_attention_2"}, True),
        ("flash-attn2-pre-ampere", "A10G", {"dtype": "float16", "attn": "flash_attention_2"}, False),
        ("bnb-int8-decode", "A100 80GB", {"quantization": "bnb-8bit", "dtype": "float16"}, True),
        ("bnb-4bit-decode", "A100 80GB", {"quantization": "bnb-4bit", "dtype": "float16"}, True),
    ],
)
def test_where_each_entry_applies(models, entry, gpu, setup, holds):
    f = facts(models["llama2-7b"], gpu)
    assert (entry in ids(f, Setup(**setup))) is holds


def test_a_dynamic_cache_at_long_prompts(models):
    m = models["llama2-7b"]
    assert "dynamic-cache-long-prompt" in ids(facts(m, "A100 80GB", input_len=16384), Setup(dtype="float16"))
    assert "dynamic-cache-long-prompt" not in ids(facts(m, "A100 80GB", input_len=512), Setup(dtype="float16"))
    static = Setup(dtype="float16", kv_cache="static", compile=True)
    assert "dynamic-cache-long-prompt" not in ids(facts(m, "A100 80GB", input_len=16384), static)


def test_cpu_entries_come_from_the_documented_factors(models):
    f = facts(models["llama2-7b"], cpu())
    assert "fp16-on-cpu" in ids(f, Setup(dtype="float16"))
    assert "fp16-on-cpu" not in ids(f, Setup(dtype="float32"))


def test_the_llama_mask_release_is_a_known_problem_of_memory_and_speed(models):
    f = facts(models["llama2-7b"], cpu(), stated={"transformers": "4.38.2"})
    [p] = [p for p in slow_paths.matching(f, Setup(dtype="float32")) if p.id.startswith("known-transformers-4.38")]
    assert {"memory", "decode-speed", "prefill-speed"} <= set(p.symptoms) and p.cures == ("upgrade",)
    assert not [
        p
        for p in slow_paths.matching(facts(models["llama2-7b"], cpu(), stated={"transformers": "4.40.0"}), Setup())
        if p.id.startswith("known-transformers-4.38")
    ]


def test_a_holding_factor_slows_the_estimate_and_its_cure_removes_it(models):
    f = facts(models["llama2-7b"], "T4")
    bf16, fp16 = Setup(dtype="bfloat16"), Setup(dtype="float16")
    slow, labels = effective(f, bf16)
    fast, none = effective(f, fp16)
    assert any("bf16-pre-ampere" in x for x in labels) and not none
    assert (slow.speed.expected or slow.speed).tpot_s >= 1.9 * (fast.speed.expected or fast.speed).tpot_s
