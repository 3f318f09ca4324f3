"""CPU targets from the datasheet table: names matched exactly or by alias, FLOP/s derived once, and a stated CPU's
speed from its own rates and flags, never this host's."""

import json

import pytest

from infertune.core.errors import UserError
from infertune.estimate import EstimateSettings, estimate
from infertune.estimate.cpus import CPUS, as_accelerator, described, find_cpu, flop_rates, parse_flags
from infertune.probe.model import profile_model

LLAMA_1B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def test_the_table_has_sources_and_plausible_figures():
    assert 15 <= len(CPUS) <= 25
    for cpu in CPUS:
        acc = as_accelerator(cpu)
        assert cpu.source.startswith("https://"), cpu.name
        assert 20e9 < acc.bandwidth_Bps < 1e12 and acc.flops["float32"] > 1e11, cpu.name
        assert acc.platform == "cpu" and acc.calibration is None


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Xeon Platinum 8480+", "Xeon Platinum 8480+"),
        ("intel xeon platinum 8480+", "Xeon Platinum 8480+"),
        ("sapphire rapids", "Xeon Platinum 8480+"),
        ("AMD EPYC 9654", "EPYC 9654"),
        ("genoa", "EPYC 9654"),
        ("graviton 3", "Graviton3"),
        ("Ryzen 9 7950X", "Ryzen 9 7950X"),
    ],
)
def test_names_and_aliases(name, expected):
    assert find_cpu(name).name == expected


@pytest.mark.parametrize("name", ["EPYC", "Xeon Platinum", "Ryzen 9", "Graviton"])
def test_a_prefix_is_never_picked(name):
    with pytest.raises(UserError, match="unknown CPU"):
        find_cpu(name)


def test_an_unknown_name_lists_the_closest():
    with pytest.raises(UserError) as e:
        find_cpu("EPYC 9655")
    closest = str(e.value).split("closest: ")[1].split(" (")[0]
    assert "EPYC 9654" in closest.split(", ") and "\n" not in str(e.value)


def test_the_derivation():
    # Sapphire Rapids: 56 cores x 2.0 GHz x 64 FP32 FLOP per cycle (AVX-512, two FMA pipes); AMX-BF16 1024
    spr = as_accelerator(find_cpu("Xeon Platinum 8480+")).flops
    assert spr["float32"] == pytest.approx(56 * 2.0e9 * 64)
    assert spr["bfloat16"] == pytest.approx(56 * 2.0e9 * 1024)
    # Milan: AVX2 only, no native bf16: bf16 below half of fp32 (what techniques.factors reads as "no bf16")
    milan = as_accelerator(find_cpu("EPYC 7763")).flops
    assert milan["bfloat16"] < 0.5 * milan["float32"]
    # Genoa: AVX512_BF16 dot products, twice fp32
    genoa = as_accelerator(find_cpu("EPYC 9654")).flops
    assert genoa["bfloat16"] == pytest.approx(2 * genoa["float32"])
    # a hybrid desktop part: P-cores and E-cores at their own clocks and widths
    i9 = as_accelerator(find_cpu("Core i9-13900K")).flops
    assert i9["float32"] == pytest.approx(8 * 3.0e9 * 32 + 16 * 2.2e9 * 16)
    assert flop_rates(((1, 1.0, 64),), {"amx_int8"})["int8"] == pytest.approx(2048e9)


def test_flags_and_cores_replace_what_they_state():
    assert parse_flags("avx512,AVX512_BF16, amx") == {"avx512f", "avx512_bf16", "amx_bf16"}
    base = as_accelerator(find_cpu("EPYC 7763"))
    more = described(base, {"avx2", "avx512_bf16"}, 32, 64 * 2**30)
    assert more.cores == 32 and more.memory_bytes == 64 * 2**30
    assert more.flops["bfloat16"] == pytest.approx(2 * more.flops["float32"])
    assert more.flops["float32"] == pytest.approx(base.flops["float32"] / 2)
    generic = described(None, {"avx512f"}, 8, None)
    assert generic.platform == "cpu" and generic.cores == 8 and generic.cpu_flags == ["avx512f"]


def test_a_stated_cpu_prices_bf16_by_its_own_flags(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_1B))
    p = profile_model(tmp_path)
    s = EstimateSettings(dtype="bfloat16", input_len=512, max_new_tokens=64, platform="cpu")
    same_memory = 8 * 3200 * 1e6 * 8  # both: 8 channels of DDR4-3200
    milan = as_accelerator(find_cpu("EPYC 7763"))  # no native bf16
    with_bf16 = described(milan, {"avx2", "avx512f", "avx512_bf16"}, None, None)
    assert milan.bandwidth_Bps == with_bf16.bandwidth_Bps == same_memory
    slow, fast = estimate(p, s, milan), estimate(p, s, with_bf16)
    assert slow.speed.expected.tpot_s > 3 * fast.speed.expected.tpot_s  # the emulated dtype, priced
    fp32 = estimate(p, s.model_copy(update={"dtype": "float32"}), milan)
    assert fp32.speed.expected.tpot_s < slow.speed.expected.tpot_s  # bf16 without bf16: slower than fp32
