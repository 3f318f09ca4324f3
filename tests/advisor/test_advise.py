"""Advisor scenarios on published model configs and named GPUs: the right bottleneck, a compatible
`next`, and nothing the hardware cannot run."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.estimate.accelerators import find_accelerator
from infertune.probe.model import profile_model
from infertune.techniques import REGISTRY, Facts, Setup

# meta-llama/Meta-Llama-3-8B's published config.json (the fields that shape memory and speed)
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 128000,
    "eos_token_id": 128001,
}
CUDA_ONLY = {
    "attn-flash2",
    "attn-flash3",
    "attn-kernels-hub",
    "quant-bnb-8bit",
    "quant-bnb-4bit",
    "kv-offloaded",
    "static-cache-compile",
    "device-map",
    "tensor-parallel",
    "serving-engine",
    "quant-prequantized",
}
HOST = {"torch": "2.13.0", "transformers": "5.24.0", "accelerate": "1.10.0"}


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    p = profile_model(d)
    assert p.num_parameters == 8_030_261_248  # the published count: the advice starts from the real model
    return p


def facts(profile, gpu, *, input_len=512, max_new_tokens=256, batch=1, concurrency=1, gpus=1, platform="cuda"):
    acc = (
        find_accelerator(gpu)
        if gpu
        else find_accelerator("L4").model_copy(
            update={
                "name": "CPU",
                "vendor": "host",
                "memory_bytes": 24 * 2**30,
                "compute_capability": None,
                "flash_attn_2": False,
                "flash_attn_3": False,
            }
        )
    )
    return Facts(
        profile=profile,
        model="meta-llama/Meta-Llama-3-8B",
        input_len=input_len,
        max_new_tokens=max_new_tokens,
        batch=batch,
        concurrency=concurrency,
        accelerator=acc,
        gpus=gpus,
        platform=platform,
        cpu_ram_bytes=64 * 2**30,
        packages=dict(HOST),
        packages_known=True,
    )


def proposed(a):
    return {r.technique for r in a.recommendations}


def test_8b_in_fp32_on_a_24gb_card_is_load_memory_and_bf16_fixes_it(llama8b):
    a = advise(facts(llama8b, "RTX 4090"), Setup(dtype="float32"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.diagnosis.ranked[0].severity == "blocking"
    assert a.next.technique == "dtype" and a.next.settings == {"dtype": "bfloat16"}
    assert a.next.expected.kind == "estimate"
    assert not a.next.expected.fits_before and a.next.expected.fits_after
    assert "--dtype bfloat16" in a.next.validate_cmd
    assert "dtype='bfloat16'" in a.next.snippet.python and "--dtype bfloat16" in a.next.snippet.serve


def test_the_same_model_on_a_t4_never_gets_bf16_or_flash_attention(llama8b):
    a = advise(facts(llama8b, "T4"), Setup(dtype="float32"))
    assert a.diagnosis.bottleneck == "load-memory"
    assert a.next.family == "quantization" and a.next.expected.fits_after  # fp16 (16 GB) does not fit 15 GiB
    assert len(a.next.settings) == 1  # one change: the quantization alone
    for r in a.recommendations:
        assert r.settings.get("dtype") != "bfloat16"
        assert not r.technique.startswith("attn-flash")
    rejected = {r.technique: " ".join(r.reasons) for r in a.rejected}
    assert "compute capability" in rejected["attn-flash2"] and "Hopper" in rejected["attn-flash3"]
    if "quant-bnb-4bit" in proposed(a):
        r = next(r for r in a.recommendations if r.technique == "quant-bnb-4bit")
        assert "float16" in r.snippet.python and "bfloat16" not in r.snippet.python  # T4 computes in fp16


def test_32k_prompts_with_eager_attention_point_at_attention(llama8b):
    a = advise(facts(llama8b, "A100 80GB", input_len=32768), Setup(dtype="bfloat16", attn="eager"))
    assert a.diagnosis.bottleneck == "long-input-attention"
    assert a.next.technique == "attn-sdpa" and a.next.expected.fits_after
    assert a.next.expected.peak_bytes_after < a.next.expected.peak_bytes_before / 5


def test_64_concurrent_requests_served_serially_need_batching(llama8b):
    a = advise(facts(llama8b, "A100 80GB", concurrency=64), Setup(dtype="bfloat16"))
    assert a.diagnosis.bottleneck == "concurrency"
    assert a.next.technique == "continuous-batching"
    assert a.next.expected.tokens_per_s_after > 10 * a.next.expected.tokens_per_s_before
    assert "--continuous-batching" in a.next.snippet.serve and "generate_batch" in a.next.snippet.python
    assert "serving-engine" in proposed(a)  # 64 is past the point where vLLM pays off
    engine = next(r for r in a.recommendations if r.technique == "serving-engine")
    assert engine.snippet.serve.startswith("vllm serve") and "--max-num-seqs 64" in engine.snippet.serve


def test_generation_that_grows_the_kv_cache_past_memory(llama8b):
    a = advise(facts(llama8b, "L4", input_len=8192, max_new_tokens=24576, batch=2), Setup(dtype="bfloat16"))
    top = a.diagnosis.ranked[0]
    assert a.diagnosis.bottleneck == "kv-cache-growth" and top.severity == "blocking"
    assert any("runs out as generation grows" in e for e in top.evidence)
    assert a.next.family == "kv-cache" and a.next.expected.peak_bytes_after < a.next.expected.peak_bytes_before
    assert any(t.change == "max_new_tokens" for t in a.workload_tradeoffs)  # a trade-off, never `next`


def test_cpu_target_gets_nothing_that_needs_cuda(llama8b):
    a = advise(facts(llama8b, None, platform="cpu"), Setup(dtype="float32"))
    assert not proposed(a) & CUDA_ONLY
    assert {"quant-bnb-4bit", "attn-flash2", "static-cache-compile"} <= {r.technique for r in a.rejected}


def test_every_technique_is_either_proposed_rejected_or_already_applied(llama8b):
    s = Setup(dtype="float32")
    a = advise(facts(llama8b, "H100 SXM", concurrency=32, gpus=2), s)
    seen = proposed(a) | {r.technique for r in a.rejected}
    considered = {t for t, tech in REGISTRY.items() if not tech.applied(s)}
    # candidates that do not help any diagnosed problem are left out of recommendations, not hidden as rejected
    assert seen <= considered
    assert {r.technique for r in a.rejected}.isdisjoint(proposed(a))


def test_tensor_parallel_needs_dividing_heads(llama8b):
    f = facts(llama8b, "H100 SXM", gpus=4)
    tp = REGISTRY["tensor-parallel"]
    assert tp.check(f, Setup()).blockers == [] and tp.apply(f, Setup()).tp == 4
    odd = llama8b.model_copy(update={"num_attention_heads": 9, "num_kv_heads": 3})
    assert "divides" in " ".join(tp.check(facts(odd, "H100 SXM", gpus=4), Setup()).blockers)


def test_missing_packages_are_open_issues_not_rejections(llama8b):
    f = facts(llama8b, "A100 80GB")
    c = REGISTRY["attn-flash2"].check(f, Setup(dtype="bfloat16"))
    assert c.blockers == [] and any("pip install flash-attn" in i for i in c.issues)
    f.packages["torch"] = "2.4.1"
    assert "torch >= 2.5" in " ".join(REGISTRY["attn-flex"].check(f, Setup()).blockers)


def test_intake_asks_when_a_person_is_there_and_states_assumptions_otherwise(llama8b):
    from infertune.advisor import intake

    acc = find_accelerator("L4")
    asked = []

    def ask(question, default):
        asked.append((question, default))
        return 2048 if "prompts" in question else default

    i = intake.build(llama8b, "m", acc, False, gpu_given=True, ask=ask)
    assert i.facts.input_len == 2048 and len(asked) == 3 and all("--lib" in q for q in i.questions)
    quiet = intake.build(llama8b, "m", acc, False, gpu_given=True)
    assert quiet.facts.input_len == 512 and len(quiet.questions) == 4
    assert any("--lib NAME=VERSION" in q for q in quiet.questions)  # another machine's versions: an open question
    assert any(a.startswith("input_len = 512") for a in quiet.assumptions)
    assert quiet.current.dtype == "bfloat16"  # transformers 5 loads the checkpoint's dtype by default
    assert not quiet.facts.packages_known  # a named GPU is another machine: packages are open questions


def test_the_advisor_doc_lists_every_technique():
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "advisor.md").read_text()
    assert [t for t in REGISTRY if f"| `{t}` |" not in doc] == []


def test_a_measured_trial_joins_the_evidence_and_a_measured_oom_overrides_the_estimate(llama8b):
    from infertune.core.workload import Workload
    from infertune.measure.results import TrialResult

    oom = TrialResult(status="oom", error="CUDA out of memory", config={}, workload=Workload(), model_path="-")
    a = advise(facts(llama8b, "H100 SXM"), Setup(dtype="bfloat16"), measured=oom)
    top = a.diagnosis.ranked[0]
    assert top.severity == "blocking" and a.diagnosis.bottleneck in ("kv-cache-growth", "load-memory")
    assert any(e.startswith("measured: the trial ended oom") for e in top.evidence)
    assert a.diagnosis.evidence["measured_status"] == "oom"


def test_a_model_beyond_one_machine_gets_a_multi_machine_serving_engine(llama8b):
    """~70B (Llama-3-70B's shape) on 2 x L4 (48 GB): 141 GB of bf16 weights need 4 such machines."""
    big = llama8b.model_copy(
        update={
            "num_parameters": 70_553_706_496,
            "num_layers": 80,
            "hidden_size": 8192,
            "num_attention_heads": 64,
            "num_kv_heads": 8,
        }
    )
    a = advise(facts(big, "L4", gpus=2), Setup(dtype="bfloat16"))
    engine = next(r for r in a.recommendations if r.technique == "serving-engine")
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 4" in engine.snippet.serve
    assert any("4 machines" in i for i in engine.compatibility.issues)
    one_machine = advise(facts(llama8b, "L4", gpus=2), Setup(dtype="bfloat16"))
    assert "serving-engine" not in proposed(one_machine) | {r.technique for r in one_machine.recommendations}


def _engine_evidence(better: bool):
    """vLLM against transformers serve as a tune run's serve stage records it (report.json `serving_engine`); the
    figures are issue 22's measurement on this project's CPU (2.45x the throughput at concurrency 4)."""
    from infertune.techniques.base import EngineEvidence

    ratio = 2.45 if better else 0.8
    return EngineEvidence(
        engine="vllm",
        against="transformers serve, continuous batching",
        concurrency=4,
        objective="throughput",
        objective_ratio=ratio,
        band=0.12,
        clear=True,
        better=better,
        throughput_ratio=ratio,
        ttft_p50_ratio=0.6,
        startup_s=240.0,
        peak_memory_bytes=3_700 * 2**20,
        reference_peak_memory_bytes=700 * 2**20,
        source="runs/tune-1",
    )


def test_the_serving_engine_move_carries_what_a_tune_run_measured(llama8b):
    """On a CPU at concurrency 4 the rule of thumb rejects an engine (CUDA, concurrency < 16); a serve stage that
    measured vLLM clearly better on this workload outranks it: the move is proposed first for concurrency, with
    its evidence; measured clearly worse, it is rejected with the measurement as the reason."""
    plain = facts(llama8b, None, concurrency=4, platform="cpu")
    assert "serving-engine" not in proposed(advise(plain, Setup(dtype="bfloat16")))
    won = facts(llama8b, None, concurrency=4, platform="cpu")
    won.engines_measured = [_engine_evidence(True)]
    a = advise(won, Setup(dtype="bfloat16"))
    engine = next(r for r in a.recommendations if r.technique == "serving-engine")
    assert engine.settings["engine"] == "vllm" and engine.measured == [_engine_evidence(True)]
    assert "2.45x" in engine.measured[0].line() and "clearly better" in engine.measured[0].line()
    concurrency = [r for r in a.recommendations if "concurrency" in r.addresses]
    assert concurrency[0].technique == "serving-engine"
    assert json.loads(engine.model_dump_json())["measured"][0]["kind"] == "measured"
    lost = facts(llama8b, None, concurrency=4, platform="cpu")
    lost.engines_measured = [_engine_evidence(False)]
    b = advise(lost, Setup(dtype="bfloat16"))
    assert "serving-engine" not in proposed(b)
    why = next(r for r in b.rejected if r.technique == "serving-engine").reasons
    assert why[0].startswith("measured here: vllm") and "clearly worse" in why[0]


def test_flex_attention_is_never_proposed_under_continuous_batching(llama8b):
    """Continuous batching runs a paged attention backend and FlexAttention has none: the move is rejected with
    that reason, and no recommendation carries an attention name transformers would refuse."""
    from infertune.core.config import ATTN_IMPLEMENTATIONS

    f = facts(llama8b, "A100 80GB", input_len=8192, concurrency=8)
    advice = advise(f, Setup(dtype="bfloat16", attn="paged|eager", batching="continuous"))
    flex = [r for r in advice.rejected if r.technique == "attn-flex"]
    assert flex and "paged" in flex[0].reasons[0]
    assert all(r.setup.attn in ATTN_IMPLEMENTATIONS or "/" in r.setup.attn for r in advice.recommendations)
