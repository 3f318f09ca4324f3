"""The observation against the estimate, where the two disagree: a later-phase out-of-memory on weights that do not
fit, a known problem of a version nobody stated, and a tensor-parallel move from continuous batching (real advisor
runs on Llama-3-8B's published config, tests/advisor/test_advise.py's facts)."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.advisor.observed import OBSERVED_GAP
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from infertune.techniques.parallel import TensorParallel
from tests.advisor.test_advise import LLAMA3_8B, facts


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b-ranking")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return profile_model(d)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_a_later_phase_oom_on_weights_that_do_not_fit_is_the_load(llama8b, phase):
    f = facts(llama8b, "T4")  # 8B in 16-bit: about 15 GiB of weights on a 15 GiB card
    f.observed = Observed(oom=phase)
    a = advise(f, Setup(dtype="float16"))
    assert a.diagnosis.bottleneck == "load-memory" and a.diagnosis.ranked[0].severity == "blocking"
    assert a.diagnosis.ranked[0].evidence[0].startswith(f"observed: out of memory in the {phase} phase")
    # where the weights fit, the same phase stays the generation's
    g = facts(llama8b, "A100 80GB", input_len=4096, max_new_tokens=1024)
    g.observed = Observed(oom="decode")
    assert advise(g, Setup(dtype="bfloat16")).diagnosis.bottleneck == "kv-cache-growth"


def test_tensor_parallel_is_refused_from_transformers_continuous_batching(llama8b):
    f = facts(llama8b, "RTX 3090", gpus=2)
    cb = Setup(dtype="float16", device_map="auto", batching="continuous")
    assert any("continuous batching" in b for b in TensorParallel().check(f, cb).blockers)
    assert not TensorParallel().check(f, cb.model_copy(update={"batching": "serial"})).blockers
    a = advise(f, cb)  # before: the tp move built an InferenceConfig that refuses tp with continuous batching
    assert all(r.technique != "tensor-parallel" for r in a.recommendations)
    assert any(r.technique == "tensor-parallel" for r in a.rejected)


def _unstated_transformers(f):
    f.packages_known = False  # another machine: its transformers is nobody's statement
    f.packages = {}
    return f


def test_an_unstated_version_problem_needs_a_speed_beyond_the_models_error(llama8b):
    """The Llama mask buffer of transformers 4.38-4.39 (a decode-speed problem): with the version unstated it is
    a candidate cause only when the observed time per token is beyond OBSERVED_GAP of the expected."""
    f = _unstated_transformers(facts(llama8b, "A100 80GB"))
    expected = advise(f, Setup(dtype="bfloat16")).diagnosis.evidence["expected_tpot_s"]
    f.observed = Observed(tpot_s=expected * OBSERVED_GAP * 0.8)
    within = advise(f, Setup(dtype="bfloat16"))
    ids = [r.technique for r in within.recommendations]
    assert "upgrade" not in ids[:1]
    if "upgrade" in ids:  # kept as a last resort only, after every other move
        assert ids.index("upgrade") == len(ids) - 1 or all(i == "upgrade" for i in ids[ids.index("upgrade") :])
    f.observed = Observed(tpot_s=expected * OBSERVED_GAP * 3)
    far = advise(f, Setup(dtype="bfloat16"))
    assert far.diagnosis.bottleneck == "decode-speed" and far.diagnosis.ranked[0].severity == "major"
    assert any("known-transformers-4.38.0" in e for e in far.diagnosis.ranked[0].evidence)


def test_an_observed_speed_within_error_never_ranks_above_graver_queueing(llama8b):
    """16 requests served one generate call at a time (a major queueing finding): a request time the user saw
    within the speed model's error is a minor finding, after it; the move stays batching or an engine."""
    f = facts(llama8b, "A100 80GB", concurrency=16)
    base = advise(f, Setup(dtype="bfloat16"))
    assert base.diagnosis.bottleneck == "concurrency"
    e2e = base.diagnosis.evidence["e2e_s"] + base.diagnosis.evidence["queue_wait_mean_s"]
    f.observed = Observed(e2e_s=e2e)
    a = advise(f, Setup(dtype="bfloat16"))
    assert [x.category for x in a.diagnosis.ranked[:2]] == ["concurrency", "decode-speed"]
    assert a.next.technique in ("continuous-batching", "static-batching", "serving-engine")


def test_requests_queueing_for_kv_room_get_a_move_that_lets_more_in(llama8b):
    """256 requests under continuous batching on a 24 GB card: the KV cache of all of them never fits, and the
    user saw a long first token; a move that frees memory for more sequences in flight helps, fitting all or not."""
    f = facts(llama8b, "A10G", input_len=1024, max_new_tokens=256, concurrency=256)
    f.observed = Observed(ttft_s=60.0)
    a = advise(f, Setup(dtype="bfloat16", batching="continuous"))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next is not None and a.next.family == "quantization"
    x = a.next.expected
    assert not x.fits_after and x.max_concurrency_after > x.max_concurrency_before


GEMMA2_9B = {  # https://huggingface.co/google/gemma-2-9b/blob/main/config.json (shape fields)
    "model_type": "gemma2",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_hidden_layers": 42,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 256000,
    "sliding_window": 4096,
    "max_position_embeddings": 8192,
}


def test_a_stated_vllm_that_caps_gemma2_at_its_window_is_cured_by_the_upgrade(tmp_path):
    """vLLM 0.5.1 to 0.6.4 capped Gemma 2 at its 4096-token sliding window (vllm-project/vllm#10584): 7k + 1k
    tokens are refused however much memory there is; the upgrade is the move. Below the window, or with no vLLM
    stated, nothing is said."""
    (tmp_path / "config.json").write_text(json.dumps(GEMMA2_9B))
    gemma = profile_model(tmp_path)
    f = facts(gemma, "A100 80GB", input_len=7168, max_new_tokens=1024)
    f.stated = {"vllm": "0.5.1"}
    a = advise(f, Setup(dtype="bfloat16", batching="continuous"))
    assert a.diagnosis.bottleneck == "none" and a.diagnosis.ranked[0].severity == "blocking"
    assert "known-vllm-0.5.1-0.6.5" in a.diagnosis.ranked[0].evidence[0]
    assert a.next.technique == "upgrade" and a.next.setup.packages["vllm"] == ">=0.6.5"
    short = facts(gemma, "A100 80GB", input_len=2048, max_new_tokens=1024)
    short.stated = {"vllm": "0.5.1"}
    assert all(
        r.technique != "upgrade" for r in advise(short, Setup(dtype="bfloat16", batching="continuous")).recommendations
    )
    f.stated = {"vllm": "0.6.5"}
    assert all(
        r.technique != "upgrade" for r in advise(f, Setup(dtype="bfloat16", batching="continuous")).recommendations
    )


DEEPSEEK_V2_LITE = {  # https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json (shape fields)
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
}


def test_slow_mla_decode_on_a_stated_old_sglang_gets_the_upgrade(tmp_path):
    """SGLang 0.3.0 ran MLA's Triton kernels without CUDA graphs (sgl-project/sglang#1401: 4x at batch 1): a user
    who saw slow decode on it is pointed at the upgrade; without an observed speed, or on 0.3.1, nothing is said."""
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V2_LITE))
    mla = profile_model(tmp_path)
    f = facts(mla, "A100 80GB")
    f.stated = {"sglang": "0.3.0"}
    f.observed = Observed(tpot_s=0.031)
    a = advise(f, Setup(dtype="bfloat16", batching="continuous"))
    assert a.diagnosis.bottleneck == "decode-speed"
    assert a.next.technique == "upgrade" and a.next.setup.packages["sglang"] == ">=0.3.1"
    for stated, observed in (({"sglang": "0.3.1"}, Observed(tpot_s=0.031)), ({"sglang": "0.3.0"}, None)):
        f.stated, f.observed = stated, observed
        recs = advise(f, Setup(dtype="bfloat16", batching="continuous")).recommendations
        assert all("sglang" not in (r.setup.packages or {}) for r in recs)


def test_a_hundred_prompts_one_at_a_time_get_batching_even_where_all_of_them_never_fit(llama8b):
    """100 requests served one generate call at a time on a 24 GB card: the KV cache of all 100 never fits at
    once, yet a batching scheduler admits as many as fit and queues the rest: batching or an engine is the move,
    not a faster single stream (before: a pre-quantized checkpoint, every batching move dropped as not fitting)."""
    f = facts(llama8b, "A10G", concurrency=100)
    f.observed = Observed(e2e_s=600.0)
    a = advise(f, Setup(dtype="float16"))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next.technique in ("continuous-batching", "serving-engine")
    assert not a.next.expected.fits_after and a.next.expected.max_concurrency_after >= 2


MIXTRAL = {  # https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json (shape fields)
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
}


def test_an_moe_speed_inside_its_validated_band_is_the_models_error(tmp_path):
    """An observed MoE decode inside the error its kind of row was validated to (data/speed_bands.toml: the band's
    top, or 2x where the band is narrower) is the model's error, not a slow path; 20x is beyond it."""
    from infertune.estimate.bands import band

    (tmp_path / "config.json").write_text(json.dumps(MIXTRAL))
    f = facts(profile_model(tmp_path), "H100 SXM", gpus=2)
    s = Setup(dtype="bfloat16", tp=2)
    base = advise(f, s).diagnosis.evidence
    assert "gpu/decode/moe" in str(base["expected_tpot_band"])
    moe = band("gpu/decode/moe")
    assert moe is not None
    f.observed = Observed(tpot_s=0.9 * max(2.0, moe.high) * base["expected_tpot_s"])
    within = advise(f, s).diagnosis.ranked[0]
    assert within.category == "decode-speed" and within.severity == "minor"
    assert "within the speed model's error" in within.evidence[0]
    f.observed = Observed(tpot_s=20 * base["expected_tpot_s"])
    far = advise(f, s).diagnosis.ranked[0]
    assert far.category == "decode-speed" and far.severity == "major"
