"""Four general rules of issue 30, through the real advisor on published configs (tests/scenario_models.py):

1. what the user saw leads the diagnosis: within the speed model's error and with no move that addresses it, the
   answer is no change (measure), never a move for an estimate-only memory item ranked after it;
2. bf16 on a stated CPU whose stated torch runs it slowly: back to float32;
3. GPTQ whose auto-gptq kernels were built for another torch: the matching build (an upgrade) or no quantization,
   never `kernels`;
4. tensor parallelism over PCIe for a model one GPU holds: `single-device`.
"""

import pytest

from infertune.advisor.advise import NO_CHANGE, advise
from infertune.estimate.cpus import as_accelerator, find_cpu
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from tests.scenario_models import LLAMA2_7B, LLAMA2_13B, LLAMA2_70B, facts, profile


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cfgs = {"7b": LLAMA2_7B, "13b": LLAMA2_13B, "70b": LLAMA2_70B}
    return {k: profile(tmp_path_factory, v) for k, v in cfgs.items()}


def _expected(f, s, key):
    f.observed = None
    return advise(f, s).diagnosis.evidence[key]


def test_an_observed_speed_within_error_with_no_move_leads_and_answers_no_change(models):
    """A 70B AWQ model behind a continuous-batching server on one 48 GB card, 16k-token prompts: the estimate alone
    leads with a memory item; the TTFT the user saw (within the model's error) leads instead, with no move."""
    f = facts(models["70b"], "RTX A6000", input_len=16384, max_new_tokens=256)
    s = Setup(dtype="float16", quantization="awq", batching="continuous")
    before = advise(f, s)
    assert before.diagnosis.bottleneck in ("kv-cache-growth", "load-memory", "long-input-attention")
    f.observed = Observed(ttft_s=1.3 * _expected(f, s, "expected_ttft_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "prefill-speed" and a.next is None
    assert NO_CHANGE in a.diagnosis.ranked[0].evidence
    assert a.diagnosis.ranked[0].evidence[0].startswith("observed 1.3x the expected")


def test_an_observed_speed_with_a_move_that_addresses_it_keeps_the_move(models):
    """The rule only withholds a move where none addresses what the user saw: bnb 8-bit where fp16 fits still
    gets its cure."""
    f = facts(models["7b"], "A100 80GB")
    s = Setup(dtype="float16", quantization="bnb-8bit")
    f.observed = Observed(tpot_s=_expected(f, s, "expected_tpot_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "decode-speed" and a.next is not None
    assert NO_CHANGE not in a.diagnosis.ranked[0].evidence


def test_bf16_on_a_stated_amx_cpu_with_an_old_torch_goes_back_to_float32(models):
    spr = as_accelerator(find_cpu("Xeon Platinum 8480+"))
    f = facts(models["7b"], spr, input_len=40, max_new_tokens=186, known=False, stated={"torch": "2.1.1"})
    s = Setup(dtype="bfloat16")
    f.observed = Observed(e2e_s=5 * _expected(f, s, "e2e_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next is not None and a.next.technique == "dtype" and a.next.settings == {"dtype": "float32"}
    # the same CPU with a torch nobody stated: the entry is a candidate cause of the slow run, still cured by fp32
    g = facts(models["7b"], spr, input_len=40, max_new_tokens=186, known=False)
    g.observed = Observed(e2e_s=5 * _expected(g, s, "e2e_s"))
    b = advise(g, s)
    assert any("bf16-cpu-eager-torch" in e for e in b.diagnosis.ranked[0].evidence)
    assert b.next is not None and b.next.settings == {"dtype": "float32"}


def test_gptq_whose_kernels_were_built_for_another_torch_gets_the_build_or_fp16(models):
    f = facts(models["7b"], "T4", known=False, stated={"auto-gptq": "0.6.0", "torch": "2.3.0"})
    s = Setup(dtype="float16", quantization="gptq")
    f.observed = Observed(tokens_per_s=0.2 * _expected(f, s, "tokens_per_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next is not None and a.next.technique in ("upgrade", "quant-none")
    assert a.next.technique != "kernels"


def test_gptq_that_fp16_cannot_hold_gets_the_matching_build(models):
    """A 13B GPTQ model on a 24 GB card (26 GB in fp16), auto-gptq unstated, decode far below the expected: the
    candidate cause is the kernel build, and its cure is the upgrade (a build for the target's torch)."""
    f = facts(models["13b"], "RTX 4090", input_len=512, max_new_tokens=512, known=False, stated={"torch": "2.0.0"})
    s = Setup(dtype="float16", quantization="gptq")
    f.observed = Observed(tokens_per_s=0.1 * _expected(f, s, "tokens_per_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "decode-speed"
    assert any("gptq-kernel-unbuilt" in e for e in a.diagnosis.ranked[0].evidence)
    assert a.next is not None and a.next.technique == "upgrade"
    assert a.next.settings["packages"] == {"auto-gptq": "a build for the target's torch"}


def test_tensor_parallel_over_pcie_for_a_model_one_gpu_holds_goes_to_one_gpu(models):
    f = facts(models["7b"], "RTX A6000", gpus=2, input_len=32, max_new_tokens=168)
    s = Setup(dtype="float16", tp=2)
    f.observed = Observed(e2e_s=1.5 * _expected(f, s, "e2e_s"))
    a = advise(f, s)
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next is not None and a.next.technique == "single-device"
    # where the model needs both cards (13B in fp16, 26 GB, over two 24 GB cards) one GPU is not the cure
    g = facts(models["13b"], "RTX 4090", gpus=2, input_len=32, max_new_tokens=168)
    g.observed = Observed(e2e_s=1.5 * _expected(g, s, "e2e_s"))
    b = advise(g, s)
    assert all(r.technique != "single-device" for r in b.recommendations)
