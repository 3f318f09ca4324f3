"""What the user saw, and the target as stated, in the diagnosis: real advisor runs on Llama-3-8B's published
config (tests/advisor/test_advise.py's facts)."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.advisor.observed import OBSERVED_GAP
from infertune.estimate.cpus import as_accelerator, find_cpu
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from tests.advisor.test_advise import LLAMA3_8B, facts


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b-observed")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return profile_model(d)


def test_an_observed_10x_tpot_is_a_major_speed_finding_first(llama8b):
    f = facts(llama8b, "A100 80GB")
    base = advise(f, Setup(dtype="bfloat16"))
    expected = base.diagnosis.evidence["expected_tpot_s"]
    assert "rows of this kind (gpu/decode/dense)" in str(base.diagnosis.evidence["expected_tpot_band"])
    f.observed = Observed(tpot_s=10 * expected, peak_bytes=2 * base.diagnosis.evidence["peak_bytes"])
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.diagnosis.evidence["observed_vs_expected_peak"] == pytest.approx(2)
    top = a.diagnosis.ranked[0]
    assert a.diagnosis.bottleneck == "decode-speed" and top.severity == "major"
    assert "10.0x the expected" in top.evidence[0] and "slow path the estimate does not price" in top.evidence[0]
    assert a.diagnosis.evidence["observed_tpot_s"] == pytest.approx(10 * expected)
    assert a.diagnosis.evidence["observed_vs_expected_tpot"] == pytest.approx(10, rel=1e-3)


def test_an_observed_speed_within_the_models_error_is_no_finding(llama8b):
    f = facts(llama8b, "A100 80GB")
    expected = advise(f, Setup(dtype="bfloat16")).diagnosis.evidence["expected_tpot_s"]
    f.observed = Observed(tpot_s=expected * OBSERVED_GAP * 0.9)
    a = advise(f, Setup(dtype="bfloat16"))
    assert all(x.severity != "major" or x.category != "decode-speed" for x in a.diagnosis.ranked)
    assert a.diagnosis.evidence["observed_vs_expected_tpot"] < OBSERVED_GAP


def test_an_observed_oom_at_load_flips_a_setup_the_estimate_says_fits(llama8b):
    f = facts(llama8b, "A100 80GB")
    assert advise(f, Setup(dtype="bfloat16")).diagnosis.evidence["fits"]
    f.observed = Observed(oom="load")
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "load-memory" and a.diagnosis.ranked[0].severity == "blocking"
    assert a.diagnosis.ranked[0].evidence[0].startswith("observed: out of memory while loading")


def test_an_observed_oom_while_generating_is_the_kv_cache(llama8b):
    f = facts(llama8b, "A100 80GB", input_len=4096, max_new_tokens=1024)
    f.observed = Observed(oom="decode")
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "kv-cache-growth" and a.diagnosis.ranked[0].severity == "blocking"


def test_a_user_who_ran_it_is_not_blocked_by_an_estimated_memory_item(llama8b):
    f = facts(llama8b, "RTX 4090")  # fp32 8B on 24 GB: the estimate says it does not load
    blocked = advise(f, Setup(dtype="float32"))
    assert blocked.diagnosis.ranked[0].severity == "blocking"
    expected = blocked.diagnosis.evidence["expected_tpot_s"]
    f.observed = Observed(tpot_s=10 * expected)
    a = advise(f, Setup(dtype="float32"))
    assert a.diagnosis.ranked[0].category == "decode-speed"
    assert all(x.severity != "blocking" for x in a.diagnosis.ranked)
    memory = [x for x in a.diagnosis.ranked if x.category == "load-memory"]
    assert memory and "estimate only: you ran this setup" in memory[0].evidence[-1]


def test_no_device_blocker_for_a_dtype_conversion(llama8b):
    # bf16 weights (15 GiB) converted to fp16 on a 16 GB card: loaded tensor by tensor, the device never holds both
    f = facts(llama8b, "T4")
    a = advise(f, Setup(dtype="float16"))
    assert not any("both copies" in line for x in a.diagnosis.ranked for line in x.evidence)


def test_host_ram_at_load_with_bin_shards_on_a_small_ram(tmp_path):
    d = tmp_path / "bin-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    (d / "pytorch_model-00001-of-00002.bin").write_bytes(b"\0" * 1024)  # the format, as a folder shows it
    p = profile_model(d)
    assert p.checkpoint_format == "pytorch"
    f = facts(p, "A100 80GB")
    f.cpu_ram_bytes = int(12.7 * 2**30)  # a notebook
    f.stated = {"transformers": "4.30.2", "torch": "2.0.1"}  # before meta-device loading and mmapped .bin
    a = advise(f, Setup(dtype="float16"))
    top = a.diagnosis.ranked[0]
    assert a.diagnosis.bottleneck == "load-memory" and top.severity == "blocking"
    assert top.evidence[0].startswith("host RAM at load: .bin shards") and "safetensors" in top.evidence[1]
    f.stated = {"transformers": "4.51.0", "torch": "2.6.0"}  # built on meta, .bin mapped: it loads
    assert not advise(f, Setup(dtype="float16")).diagnosis.ranked[0].evidence[0].startswith("host RAM")
    f.cpu_ram_bytes, f.stated = 64 * 2**30, {"transformers": "4.30.2", "torch": "2.0.1"}  # enough RAM
    assert not advise(f, Setup(dtype="float16")).diagnosis.ranked[0].evidence[0].startswith("host RAM")


def test_a_stated_cpu_target_sets_ram_and_speed(llama8b):
    def on(cpu, ram=None):
        f = facts(llama8b, None, platform="cpu")
        f.accelerator = as_accelerator(find_cpu(cpu), ram)
        f.cpu_ram_bytes = f.accelerator.memory_bytes
        return advise(f, Setup(dtype="bfloat16"))

    small, big = on("Ryzen 9 7950X", 12 * 2**30), on("Ryzen 9 7950X", 64 * 2**30)
    assert small.hardware["memory_bytes"] == 12 * 2**30 and small.diagnosis.bottleneck == "load-memory"
    assert big.diagnosis.evidence["fits"]
    spr, milan = on("Xeon Platinum 8480+", 256 * 2**30), on("EPYC 7763", 256 * 2**30)
    assert spr.hardware["accelerator"] == "Xeon Platinum 8480+"
    # same model, dtype and workload: SPR (AMX-BF16, 8 x DDR5-4800) against Milan (bf16 emulated, 8 x DDR4-3200)
    assert milan.diagnosis.evidence["expected_tpot_s"] > 3 * spr.diagnosis.evidence["expected_tpot_s"]


def test_intake_takes_the_stated_cpu_never_this_host(llama8b, monkeypatch):
    from infertune.advisor import intake
    from infertune.estimate import accelerators

    def no_probe(*a, **k):
        raise AssertionError("a stated CPU target must not probe this host")

    monkeypatch.setattr(accelerators, "probe_cpu", no_probe)
    monkeypatch.setattr(intake, "probe_cpu", no_probe)
    acc, here = intake.target_hardware(None, None, "EPYC 9654", None, None, "64GiB")
    assert not here and acc.name == "EPYC 9654" and acc.memory_bytes == 64 * 2**30 and acc.calibration is None
    i = intake.build(llama8b, "m", acc, here, cpu_ram="64GiB")
    assert i.facts.platform == "cpu" and i.facts.cpu_ram_bytes == 64 * 2**30
    assert not any("this host" in line for line in i.assumptions)
    acc, _ = intake.target_hardware(None, None, "EPYC 9654", None, None, None)
    i = intake.build(llama8b, "m", acc, False)
    assert any(line.startswith("RAM of the target EPYC 9654 = 192 GiB") for line in i.assumptions)
    flags, _ = intake.target_hardware(None, None, None, "avx512f,avx512_bf16", 32, None)
    assert flags.cores == 32 and flags.platform == "cpu"


def test_an_observed_prefill_oom_at_long_prompts_is_the_long_input(llama8b):
    f = facts(llama8b, "A100 80GB", input_len=65536, max_new_tokens=1024)
    f.observed = Observed(oom="prefill")
    a = advise(f, Setup(dtype="bfloat16", attn="eager"))
    assert a.diagnosis.bottleneck == "long-input-attention" and a.diagnosis.ranked[0].severity == "blocking"
    assert a.diagnosis.ranked[0].evidence[0].startswith("observed: out of memory in the prefill")


def test_the_bf16_factor_reads_the_stated_cpu_not_this_host(llama8b):
    from infertune.techniques.factors import applicable

    def factors_on(cpu):
        f = facts(llama8b, None, platform="cpu")
        f.accelerator = as_accelerator(find_cpu(cpu), 256 * 2**30)
        return {x.id for x in applicable(f, Setup(dtype="bfloat16"))}

    assert "bf16-on-cpu-without-native-bf16" in factors_on("EPYC 7763")  # Milan: AVX2, no bf16
    assert "bf16-on-cpu-without-native-bf16" not in factors_on("Xeon Platinum 8480+")  # AMX-BF16
    assert "bf16-on-cpu-without-native-bf16" not in factors_on("Graviton3")  # ARM BF16


def test_host_ram_moves_read_the_checkpoint_differently(tmp_path):
    d = tmp_path / "bin-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    for name, size in (("pytorch_model-00001-of-00002.bin", 9_950_000_000), ("pytorch_model-00002-of-00002.bin", 6e9)):
        with open(d / name, "wb") as shard:  # sparse: the sizes a listing shows, no disk used
            shard.truncate(int(size))
    f = facts(profile_model(d), "A100 80GB")
    f.cpu_ram_bytes = int(12.7 * 2**30)
    # transformers 4.30 builds the 15 GiB model on the CPU: low_cpu_mem_usage alone leaves the 9.95 GB shard (fits)
    f.stated = {"transformers": "4.30.2", "torch": "2.0.1", "accelerate": "0.20.3"}
    a = advise(f, Setup(dtype="float16"))
    assert a.next.technique == "checkpoint-loading" and a.next.settings == {"low_cpu_mem_usage": True}
    assert "low_cpu_mem_usage: true" in a.next.run_file
    # on 8 GiB neither alone is enough: safetensors and the meta device together
    f.cpu_ram_bytes = 8 * 2**30
    a = advise(f, Setup(dtype="float16"))
    assert a.next.technique == "checkpoint-loading"
    assert a.next.settings == {"checkpoint": "safetensors", "low_cpu_mem_usage": True}
    assert "save_pretrained(DIR, safe_serialization=True)" in a.next.snippet.python
    # with the RAM to spare the move is not offered at all (nor listed as rejected)
    f.cpu_ram_bytes = 64 * 2**30
    a = advise(f, Setup(dtype="float16"))
    assert "checkpoint-loading" not in {r.technique for r in a.recommendations} | {r.technique for r in a.rejected}
