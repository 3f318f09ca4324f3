"""The feature -> first-version table, applied: the checks read the stated version (--lib), the structure rules
too (which modules a quantization covers), and one answer never contradicts itself about a version."""

import pytest

from infertune.advisor.advise import advise, assess
from infertune.techniques import REGISTRY, Setup, versions
from infertune.techniques.render import estimate_setup
from tests.scenario_models import LLAMA2_7B, LLAMA3_8B, profile
from tests.scenario_models import facts as scenario_facts
from tests.techniques.test_slow_paths import MIXTRAL

GiB = 2**30


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {
        n: profile(tmp_path_factory, c)
        for n, c in {"llama2-7b": LLAMA2_7B, "llama3-8b": LLAMA3_8B, "mixtral": MIXTRAL}.items()
    }


def facts(prof, gpu, **kw):
    return scenario_facts(prof, gpu, **kw)


def test_every_row_has_a_source_and_a_parsable_version():
    assert len({x.id for x in versions.FEATURES}) == len(versions.FEATURES)
    for x in versions.FEATURES:
        assert x.source.startswith("https://") and x.version > (0, 0, 0)


def test_sdpa_on_transformers_4_30_is_flagged_with_the_upgrade_it_needs(models):
    f = facts(models["llama2-7b"], "A10G", stated={"transformers": "4.30.0"})
    c = REGISTRY["attn-sdpa"].check(f, Setup(dtype="float16", attn="eager"))
    assert not c.blockers and c.requires == {"transformers": ">=4.36.0"}
    assert any("4.36.0" in i for i in c.issues)
    a = assess(f, Setup(dtype="float16", attn="eager"))
    sdpa = [r for r in a.compatible if r.technique == "attn-sdpa"]
    assert sdpa and sdpa[0].setup.packages == {"transformers": ">=4.36.0"}
    # on a version that has it: nothing to add
    now = REGISTRY["attn-sdpa"].check(facts(models["llama2-7b"], "A10G", stated={"transformers": "4.36.0"}), Setup())
    assert not now.blockers and not now.requires


def test_a_tensor_parallel_plan_needs_its_transformers(models):
    s = Setup(dtype="bfloat16")
    old = REGISTRY["tensor-parallel"].check(
        facts(models["llama3-8b"], "A100 80GB", gpus=2, stated={"transformers": "4.46.0"}), s
    )
    assert any("4.47.0" in b for b in old.blockers)
    new = REGISTRY["tensor-parallel"].check(
        facts(models["llama3-8b"], "A100 80GB", gpus=2, stated={"transformers": "4.47.0"}), s
    )
    assert not any("tp_plan" in b for b in new.blockers)


def test_continuous_batching_and_the_engine_never_contradict_each_other(models):
    f = facts(models["llama3-8b"], "A100 80GB", concurrency=8, stated={"transformers": "4.45.0"})
    a = advise(f, Setup(dtype="bfloat16"))
    rejected = {r.technique: " ".join(r.reasons) for r in a.rejected}
    assert "continuous-batching" in rejected and "4.56.0" in rejected["continuous-batching"]
    assert "continuous batching is enough" not in rejected.get("serving-engine", "")
    assert "serving-engine" not in rejected  # concurrent requests and no batching in this transformers: an engine
    # with a transformers that batches, the rule of thumb stands
    b = advise(
        facts(models["llama3-8b"], "A100 80GB", concurrency=8, stated={"transformers": "4.56.0"}),
        Setup(dtype="bfloat16"),
    )
    assert "continuous-batching" not in {r.technique for r in b.rejected}


def test_mixtral_bnb_4bit_quantizes_its_experts_under_a_4x_transformers(models):
    m, s = models["mixtral"], Setup(dtype="float16", quantization="bnb-4bit")
    old = estimate_setup(facts(m, "A100 80GB", stated={"transformers": "4.37.0"}), s).memory.weights_bytes
    fused = estimate_setup(facts(m, "A100 80GB", stated={"transformers": "5.1.0"}), s).memory.weights_bytes
    assert 21 * GiB < old < 26 * GiB  # every Linear in 4 bits, experts included (reported: ~24-26 GB)
    assert fused > 80 * GiB  # stacked 3D experts stay in 16-bit under bitsandbytes
    assert versions.experts_fused(facts(m, "A100 80GB", known=False)) is None  # unknown: as probed here


def test_an_offloaded_model_with_concurrent_requests_is_not_told_continuous_batching_is_enough(models):
    f = facts(models["llama3-8b"], "RTX 4090", vram_gib=12, concurrency=4)
    a = advise(f, Setup(dtype="bfloat16", device_map="auto"))
    rejected = {r.technique: " ".join(r.reasons) for r in a.rejected}
    assert "continuous-batching" in rejected
    assert "continuous batching is enough" not in rejected.get("serving-engine", "")


def test_bitsandbytes_4bit_brings_the_versions_that_have_it(models):
    f = facts(models["llama2-7b"], "A10G", stated={"transformers": "4.29.0", "bitsandbytes": "0.38.1"})
    c = REGISTRY["quant-bnb-4bit"].check(f, Setup(dtype="float16"))
    assert not c.blockers and c.requires == {"transformers": ">=4.30.0", "bitsandbytes": ">=0.39.0"}
