"""The in-model factors (estimate/anchor.py): a reference model's generate on this host against its expected
figures, and how the expected model applies them (only to what is not attention, only on a calibrated CPU)."""

import pytest

from infertune.estimate import anchor, estimate
from infertune.estimate.memory import EstimateSettings
from tests.estimate.test_estimate import llama
from tests.estimate.test_expected import cal, cpu_acc

TINY = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}


def test_the_factor_is_measured_over_expected_of_what_is_not_attention():
    assert anchor.factor(measured=0.030, expected=0.022, attention=0.002) == pytest.approx(1.4)
    assert anchor.factor(measured=0.012, expected=0.012, attention=0.011) == pytest.approx(1.0)
    assert anchor.factor(measured=1.0, expected=0.01, attention=0.0) == anchor.LIMITS[1]  # clamped: a broken run
    assert anchor.factor(measured=0.001, expected=1.0, attention=0.0) == anchor.LIMITS[0]
    assert anchor.factor(measured=0.5, expected=0.1, attention=0.1) == 1.0  # nothing but attention: no factor


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_the_expected_model_scales_everything_but_attention_by_the_in_model_factor(platform):
    p = llama()
    s = EstimateSettings(dtype="bfloat16", platform=platform, attn="sdpa", input_len=300, max_new_tokens=20, batch=2)
    plain, scaled = cal(), cal()
    for c in (plain, scaled):
        c.attn_flops_per_s = {"decode": {"sdpa": {"bfloat16": 5e9}}, "prefill": {"sdpa": {"bfloat16": 5e10}}}
    scaled.in_model_x = {"decode": {"sdpa": {"bfloat16": 1.5}}, "prefill": {"sdpa": {"bfloat16": 0.8}}}
    a, b = (estimate(p, s, cpu_acc(c)).speed.expected for c in (plain, scaled))
    assert a.attention_s_per_step > 0 and a.prefill_attention_s > 0
    assert (b.attention_s_per_step, b.prefill_attention_s) == (a.attention_s_per_step, a.prefill_attention_s)
    if platform == "cuda":  # a GPU's step overlaps host and device: no CPU factor applies
        assert (b.tpot_s, b.ttft_s) == (a.tpot_s, a.ttft_s)
        return
    assert b.tpot_s - b.attention_s_per_step == pytest.approx(1.5 * (a.tpot_s - a.attention_s_per_step))
    assert b.ttft_s - b.prefill_attention_s == pytest.approx(0.8 * (a.ttft_s - a.prefill_attention_s))
    assert {f.name: f.value for f in b.factors}["in-model factor, decode (sdpa, bfloat16)"] == 1.5
    # another implementation or dtype keeps 1
    other = estimate(p, s.model_copy(update={"attn": "eager"}), cpu_acc(scaled)).speed.expected
    assert other.tpot_s == estimate(p, s.model_copy(update={"attn": "eager"}), cpu_acc(plain)).speed.expected.tpot_s


def test_the_reference_run_sets_every_cell_against_the_calibration_it_was_given(infertune_home):
    """A real generate on a tiny reference: a calibration that expects it far too slow gets the lower limit in
    every phase, implementation and dtype; one that expects it far too fast gets the upper limit."""
    run = dict(reference=TINY, calls=1, rounds=1, prompt=8, new_tokens=3)
    slow = anchor.measure_in_model(cal(s_per_elem=1e-3, step=1.0, layer=1.0), **run)
    fast = anchor.measure_in_model(cal(s_per_elem=1e-18, step=1e-12, layer=1e-12), **run)
    cells = {(ph, at, dt) for ph in ("prefill", "decode") for at in ("eager", "sdpa") for dt in anchor.DTYPES}
    for got, limit in ((slow, anchor.LIMITS[0]), (fast, anchor.LIMITS[1])):
        flat = {(ph, at, dt): x for ph, a in got.items() for at, d in a.items() for dt, x in d.items()}
        assert set(flat) == cells and set(flat.values()) == {limit}
