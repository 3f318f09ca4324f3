"""The advisor from where the user stands: what they saw (Facts.observed) against the expected, the known slow
paths of their setup (techniques.slow_paths) and the moves that leave them, on published configs."""

import pytest

from infertune.advisor.advise import advise
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from tests.scenario_models import FALCON_40B, LLAMA2_7B, facts, profile
from tests.techniques.test_slow_paths import MIXTRAL


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cfgs = {"llama2-7b": LLAMA2_7B, "falcon-40b": FALCON_40B, "mixtral": MIXTRAL}
    return {name: profile(tmp_path_factory, cfg) for name, cfg in cfgs.items()}


def seen(f, **observed):
    f.observed = Observed(**observed)
    return f


@pytest.mark.parametrize("gpu", ["V100", "T4"])
def test_bf16_without_bf16_tensor_cores_moves_to_fp16(models, gpu):
    a = advise(facts(models["llama2-7b"], gpu), Setup(dtype="bfloat16"))
    assert a.next is not None and a.next.technique == "dtype" and a.next.settings == {"dtype": "float16"}
    assert any("bf16-pre-ampere" in x for x in a.next.expected.factors_before)
    assert not a.next.expected.factors_after  # the fp16 estimate is free of the slow path it leaves


def test_awq_with_bf16_activations_is_offered_fp16(models):
    a = advise(facts(models["llama2-7b"], "A100 80GB"), Setup(dtype="bfloat16", quantization="awq"))
    fp16 = [r for r in a.recommendations if r.technique == "dtype" and r.settings == {"dtype": "float16"}]
    assert fp16 and any("awq-bf16-activations" in i for i in fp16[0].compatibility.issues)


def test_a_spread_model_that_fits_one_gpu_goes_back_to_one(models):
    spread = Setup(dtype="float16", device_map="auto")
    a = advise(facts(models["llama2-7b"], "A100 80GB", gpus=2), spread)
    assert a.next is not None and a.next.technique == "single-device"
    assert a.next.expected.tpot_s_after < a.next.expected.tpot_s_before / 1.5


def test_an_observed_slow_decode_names_its_cause_and_cures_it_first(models):
    f = seen(facts(models["llama2-7b"], "A100 80GB", gpus=2), tpot_s=0.220)
    a = advise(f, Setup(dtype="float16", device_map="auto"))
    first = a.diagnosis.ranked[0]
    assert first.category == "decode-speed" and first.severity == "major"
    assert first.evidence[0].startswith("observed ") and any("device-map-pipeline" in e for e in first.evidence)
    assert a.next.technique == "single-device"
    assert any("device-map-pipeline" in i for i in a.next.compatibility.issues)


def test_an_engine_at_concurrency_1_leaves_the_moe_expert_loop(models):
    f = facts(models["mixtral"], "H100 SXM", gpus=2, stated={"transformers": "4.40.0"})
    current = Setup(dtype="bfloat16", tp=2)
    a = advise(seen(f, e2e_s=40.0), current)
    assert "serving-engine" not in {r.technique for r in a.rejected}
    assert a.diagnosis.bottleneck == "decode-speed"
    assert any("moe-expert-loop" in e for e in a.diagnosis.ranked[0].evidence)
    assert a.next.technique in ("serving-engine", "upgrade")
    assert {"serving-engine", "upgrade"} <= {r.technique for r in a.recommendations}
    # with transformers 5 (grouped experts) the loop is gone: nothing to leave
    b = advise(
        seen(facts(models["mixtral"], "H100 SXM", gpus=2, stated={"transformers": "5.1.0"}), e2e_s=40.0), current
    )
    assert not any("moe-expert-loop" in e for k in b.diagnosis.ranked for e in k.evidence)
    assert "upgrade" not in {r.technique for r in b.recommendations}


def test_an_engine_at_concurrency_1_on_one_gpu_only_for_a_known_slow_path(models):
    f = facts(models["llama2-7b"], "A100 80GB")
    assert "serving-engine" in {r.technique for r in advise(f, Setup(dtype="float16")).rejected}
    fp8 = advise(f, Setup(dtype="bfloat16", quantization="fp8"))
    assert "serving-engine" not in {r.technique for r in fp8.rejected}


def test_an_estimated_memory_finding_does_not_hide_an_observed_speed_symptom(models):
    # Falcon-40B in bf16 on one 80 GB card: the estimate says it does not fit; the user ran it and saw 1 s a token
    f = seen(facts(models["falcon-40b"], "A100 80GB"), tpot_s=1.0)
    a = advise(f, Setup(dtype="bfloat16"))
    assert a.diagnosis.ranked[0].category == "decode-speed"
    assert a.diagnosis.ranked[0].evidence[0].startswith("observed ")
    # an out-of-memory they saw keeps memory first
    b = advise(seen(facts(models["falcon-40b"], "A100 80GB"), tpot_s=1.0, oom="load"), Setup(dtype="bfloat16"))
    assert b.diagnosis.ranked[0].category == "load-memory"


def test_no_unmodelled_or_lossy_move_without_evidence(models):
    # a 7B in fp16 that fits a 16 GB card, one request: nothing says decode is slow beyond the roofline
    a = advise(facts(models["llama2-7b"], "RTX 3090", vram_gib=16), Setup(dtype="float16"))
    assert a.next is None and a.diagnosis.bottleneck == "none"


def test_a_known_incompatibility_is_fixed_first(models):
    a = advise(facts(models["llama2-7b"], "V100"), Setup(dtype="float16", quantization="awq"))
    assert a.diagnosis.ranked[0].severity == "blocking"
    assert any("awq-needs-turing" in e for e in a.diagnosis.ranked[0].evidence)
    assert a.next.technique == "quant-none"


def test_an_unstated_version_with_the_symptom_seen_gets_the_upgrade_as_a_question(models):
    f = facts(models["mixtral"], "H100 SXM", gpus=2, known=False)  # another machine, no --lib
    current = Setup(dtype="bfloat16", tp=2)
    assert "upgrade" not in {r.technique for r in advise(f, current).recommendations}  # nothing seen
    a = advise(seen(f, e2e_s=60.0), current)
    up = [r for r in a.recommendations if r.technique == "upgrade"]
    assert up and up[0].setup.packages == {"transformers": ">=5.0.0"}
    assert any("Which transformers version" in i for i in up[0].compatibility.issues)


def test_a_long_first_token_under_many_requests_is_queueing_not_prefill(models):
    f = seen(facts(models["llama2-7b"], "A10G", concurrency=64), ttft_s=60.0)
    a = advise(f, Setup(dtype="float16", batching="continuous"))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.diagnosis.ranked[0].evidence[0].startswith("observed ")
    assert "prefill-speed" not in {k.category for k in a.diagnosis.ranked}
