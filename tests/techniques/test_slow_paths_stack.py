"""The software-stack slow paths (techniques/slow_paths_stack.py): each holds on the target as stated (a stated CPU's
flags and torch, a stated auto-gptq and torch, the GPUs' link and memory), never on what this host happens to have;
an unstated version makes a candidate (None), and the moves that leave each entry are its cures."""

import pytest

from infertune.advisor.moves import effective
from infertune.estimate.cpus import as_accelerator, find_cpu
from infertune.techniques import Setup, slow_paths
from infertune.techniques.slow_paths_stack import STACK_ENTRIES
from infertune.techniques.upgrade import Upgrade
from tests.scenario_models import LLAMA2_7B, LLAMA2_70B, facts, profile

ENTRY = {p.id: p for p in STACK_ENTRIES}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {"7b": profile(tmp_path_factory, LLAMA2_7B), "70b": profile(tmp_path_factory, LLAMA2_70B)}


def spr():
    """A stated Sapphire Rapids Xeon (AMX-BF16): another machine, nothing of this host applies."""
    return as_accelerator(find_cpu("Xeon Platinum 8480+"))


def test_bf16_on_a_cpu_with_amx_holds_for_the_stated_old_torch_only(models):
    bf16 = Setup(dtype="bfloat16")
    holds = ENTRY["bf16-cpu-eager-torch"].holds
    assert holds(facts(models["7b"], spr(), known=False, stated={"torch": "2.1.1"}), bf16) is True
    assert holds(facts(models["7b"], spr(), known=False, stated={"torch": "2.4.0"}), bf16) is False
    assert holds(facts(models["7b"], spr(), known=False), bf16) is None  # torch unstated: a candidate cause
    # this host's torch (2.13 in the scenario host) is the target's only when the target is this host
    assert holds(facts(models["7b"], spr(), known=True), bf16) is False
    assert holds(facts(models["7b"], spr(), known=False, stated={"torch": "2.1.1"}), Setup(dtype="float32")) is False
    # a CPU without native bf16 is the documented factor's (bf16-on-cpu-without-native-bf16), not this entry's
    ice = as_accelerator(find_cpu("Xeon Platinum 8380"))
    f = facts(models["7b"], ice, known=False, stated={"torch": "2.1.1"})
    assert holds(f, bf16) is False and "bf16-on-cpu-without-native-bf16" in {p.id for p in slow_paths.matching(f, bf16)}


def test_the_bf16_cpu_factor_prices_bf16_over_float32_and_the_dtype_move_leaves_it(models):
    f = facts(models["7b"], spr(), known=False, stated={"torch": "2.1.1"})
    slow, labels = effective(f, Setup(dtype="bfloat16"))
    fp32, none = effective(f, Setup(dtype="float32"))
    assert any("bf16-cpu-eager-torch" in x for x in labels) and not none
    assert (slow.speed.expected or slow.speed).tpot_s > (fp32.speed.expected or fp32.speed).tpot_s


@pytest.mark.parametrize(
    "stated,holds",
    [
        ({"auto-gptq": "0.6.0", "torch": "2.3.0"}, True),  # 0.6.0's wheels were built for torch 2.1.1
        ({"auto-gptq": "0.7.1", "torch": "2.3.1"}, True),  # 0.7.1's for 2.2.1
        ({"auto-gptq": "0.6.0", "torch": "2.1.2"}, False),
        ({"auto-gptq": "0.7.1", "torch": "2.2.1"}, False),
        ({"torch": "2.0.0"}, None),  # auto-gptq unstated
        ({"auto-gptq": "0.4.2", "torch": "2.0.1"}, None),  # a release the installation table does not list
    ],
)
def test_a_gptq_kernel_built_for_another_torch(models, stated, holds):
    gptq = Setup(dtype="float16", quantization="gptq")
    f = facts(models["7b"], "RTX 4090", known=False, stated=stated)
    assert ENTRY["gptq-kernel-unbuilt"].holds(f, gptq) is holds
    assert ENTRY["gptq-kernel-unbuilt"].holds(f, gptq.model_copy(update={"engine": "vllm"})) is False


def test_the_matching_build_is_an_upgrade_that_leaves_the_slow_path(models):
    gptq = Setup(dtype="float16", quantization="gptq")
    f = facts(models["7b"], "T4", known=False, stated={"auto-gptq": "0.6.0", "torch": "2.3.0"})
    [after] = [s for s in Upgrade().moves(f, gptq) if "auto-gptq" in (s.packages or {})]
    assert ENTRY["gptq-kernel-unbuilt"].holds(f, after) is False
    assert Upgrade().fixes(gptq, after).package == "auto-gptq"
    _, labels = effective(f, gptq)
    assert any("gptq-kernel-unbuilt" in x for x in labels)  # priced where it holds as stated


def test_gptq_with_bf16_activations_is_cured_by_fp16(models):
    f = facts(models["7b"], "A100 80GB")
    assert ENTRY["gptq-bf16-activations"].holds(f, Setup(dtype="bfloat16", quantization="gptq"))
    assert not ENTRY["gptq-bf16-activations"].holds(f, Setup(dtype="float16", quantization="gptq"))


def test_tensor_parallel_collectives_hold_over_pcie_for_a_model_one_gpu_holds(models):
    tp2 = Setup(dtype="float16", tp=2)
    holds = ENTRY["tp-collectives-small-model"].holds
    assert holds(facts(models["7b"], "RTX A6000", gpus=2), tp2)
    assert not holds(facts(models["7b"], "A100 80GB", gpus=2), tp2)  # NVLink
    assert not holds(facts(models["70b"], "RTX A6000", gpus=2), tp2)  # 70B in 16-bit needs both cards
    assert not holds(facts(models["7b"], "RTX A6000", gpus=2), Setup(dtype="float16"))
    assert not holds(facts(models["7b"], "RTX A6000", gpus=2), tp2.model_copy(update={"batching": "continuous"}))
    ratio = ENTRY["tp-collectives-small-model"].factor(facts(models["7b"], "RTX A6000", gpus=2), tp2).ratio
    assert 1.5 < ratio <= 6.0
