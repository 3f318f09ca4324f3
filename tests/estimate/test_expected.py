"""The expected-speed model, how it uses the host calibration, and the GPU memory overheads, against hand
calculations (the calibration itself: test_calibration.py).

GPU paths run with injected hardware facts (datasheet entries and hand-made calibrations): no GPU here.
"""

import types

import pytest

from infertune.estimate import calibration, estimate, factors, microbench, overhead, rates
from infertune.estimate import expected as X
from infertune.estimate import library
from infertune.estimate.accelerators import Accelerator, find_accelerator
from infertune.estimate.memory import EstimateSettings, estimate_memory
from infertune.measure.memory import CudaMeter, nvml_used
from infertune.probe import host
from tests.estimate.test_estimate import llama

L = 30  # SmolLM2's layers


def cal(device="cpu", s_per_elem=1e-9, step=2e-3, layer=0.3e-3, copy=20e9) -> rates.Calibration:
    """A calibration where F.linear costs s_per_elem per weight element at 1 row and scales with rows beyond 16."""
    table = {r: s_per_elem * max(1, r / 16) for r in microbench.ROWS}
    return rates.Calibration(
        device=device,
        host_key="k",
        measured_at=0.0,
        copy_Bps=copy,
        linear_s_per_elem={d: dict(table) for d in ("float32", "bfloat16", "float16")},
        step_s={"eager": step, "sdpa": step},
        layer_s={"eager": layer, "sdpa": layer},
    )


def cpu_acc(c) -> Accelerator:
    return Accelerator(
        name="CPU",
        vendor="host",
        memory_bytes=64 * 2**30,
        bandwidth_Bps=20e9,
        flops={"float32": 1e11, "bfloat16": 1e11, "float16": 1e11},
        bf16=True,
        fp8=False,
        flash_attn_2=False,
        flash_attn_3=False,
        interconnect="host memory",
        interconnect_Bps=20e9,
        source="test",
        calibration=c,
    )


def test_cpu_decode_step_is_calibrated_matmuls_plus_kv_reads_plus_fixed_cost():
    c = cal()
    p, s = llama(), EstimateSettings(dtype="float32", platform="cpu", input_len=100, max_new_tokens=20)
    e = estimate(p, s, cpu_acc(c))
    x = e.speed.expected
    lm = 49152 * 576
    matmuls = p.linear_params * 1e-9 + lm * 1e-9  # 1 row: the calibrated rate
    kv = e.memory.kv_cache_bytes * (110 / 120) * (2 + 1) / c.copy_Bps  # torch.cat (read + write) + one read
    attn = 4 * L * 9 * 64 * 110 / (2 * 256 / c.linear_s_per_elem["float32"][256])
    assert x.tpot_s == pytest.approx(matmuls + kv + attn + 2e-3 + L * 0.3e-3, rel=1e-9)
    assert x.fixed_s_per_step == pytest.approx(2e-3 + L * 0.3e-3)
    assert x.tokens_per_s == pytest.approx(1 / x.tpot_s)
    assert "measured on this host" in " ".join(f.source for f in x.factors)
    # the roofline stays beside it, as a bound, under its own name; the old top-level fields are the bound
    assert e.speed.bound.tpot_s == e.speed.tpot_s and e.speed.bound.limited_by == e.speed.limited_by


def test_measured_attention_rates_replace_the_matmul_rate_for_attention():
    """bf16 attention on a CPU runs far below the bf16 GEMM rate: with the host's measured attention FLOP/s the
    decode step pays attention FLOPs / that rate (K/V reads included), the prefill its causal FLOPs / the prefill
    rate; a phase or dtype the calibration did not measure keeps the matmul-rate model."""
    p = llama()
    s = EstimateSettings(dtype="bfloat16", platform="cpu", attn="sdpa", input_len=1000, max_new_tokens=20, batch=4)
    plain, measured = cal(), cal()
    measured.attn_flops_per_s = {"decode": {"sdpa": {"bfloat16": 5e9}}, "prefill": {"sdpa": {"bfloat16": 1e11}}}
    eb = estimate(p, s, cpu_acc(measured))
    a, b = estimate(p, s, cpu_acc(plain)).speed.expected, eb.speed.expected
    short = s.model_copy(update={"input_len": 1, "max_new_tokens": 2})
    ebase = estimate(p, short, cpu_acc(measured))
    base = ebase.speed.expected
    # attention FLOPs at the measured rate, and the dynamic cache's torch.cat (read + write) at the copy rate
    kv_read = eb.memory.kv_cache_bytes * (1000 + 10) / 1020 - ebase.memory.kv_cache_bytes * (1 + 1) / 3
    grown = 4 * L * 9 * 64 * (1010 - 2) * 4 / 5e9 + 2 * kv_read / measured.copy_Bps
    assert b.tpot_s > a.tpot_s and b.tpot_s - base.tpot_s == pytest.approx(grown, rel=1e-6)
    assert b.prefill_s - a.prefill_s != 0 and "decode attention" in " ".join(f.name for f in b.factors)
    other = estimate(p, s.model_copy(update={"dtype": "float32"}), cpu_acc(measured)).speed.expected
    assert other.tpot_s == estimate(p, s.model_copy(update={"dtype": "float32"}), cpu_acc(plain)).speed.expected.tpot_s


def test_eager_pays_for_copying_the_cache_to_every_query_head():
    """With the same measured kernel rate, eager decode also reads the cache and writes one copy per query head
    (repeat_kv: 1 + n_rep bytes per cache byte); sdpa does GQA in the kernel."""
    p, c = llama(), cal()
    c.attn_flops_per_s = {"decode": {"sdpa": {"float32": 1e10}, "eager": {"float32": 1e10}}}
    s = EstimateSettings(dtype="float32", platform="cpu", attn="sdpa", input_len=1000, max_new_tokens=20)
    e = estimate(p, s, cpu_acc(c))
    eager = estimate(p, s.model_copy(update={"attn": "eager"}), cpu_acc(c)).speed.expected
    n_rep = p.num_attention_heads / p.num_kv_heads
    kv_read = e.memory.kv_cache_bytes * 1010 / 1020
    fixed = eager.fixed_s_per_step - e.speed.expected.fixed_s_per_step
    assert eager.tpot_s - e.speed.expected.tpot_s - fixed == pytest.approx((1 + n_rep) * kv_read / c.copy_Bps, rel=1e-6)


def test_small_matrices_run_at_the_rate_measured_for_small_matrices():
    """A model of small Linears (hidden 576) runs at the small matrices' measured rate per element, a large one at
    the large matrices' rate, sizes between at a log-interpolation of the two."""
    c = cal()
    c.linear_small_s_per_elem = {d: {r: 2 * v for r, v in t.items()} for d, t in c.linear_s_per_elem.items()}
    assert c.linear_s("float32", 1, 10, matrix=rates.SMALL_MATRIX) == pytest.approx(2e-8)
    assert c.linear_s("float32", 1, 10, matrix=rates.SMALL_MATRIX / 4) == pytest.approx(2e-8)  # clamped
    assert c.linear_s("float32", 1, 10, matrix=rates.LARGE_MATRIX * 4) == pytest.approx(1e-8)
    mid = (rates.SMALL_MATRIX * rates.LARGE_MATRIX) ** 0.5
    assert c.linear_s("float32", 1, 10, matrix=mid) == pytest.approx(10 * 2**0.5 * 1e-9)
    s = EstimateSettings(dtype="float32", platform="cpu", input_len=100, max_new_tokens=20)
    p = llama()
    slow, fast = estimate(p, s, cpu_acc(c)).speed.expected, estimate(p, s, cpu_acc(cal())).speed.expected
    from infertune.estimate.expected import matrix_mix

    mix = matrix_mix(p)
    assert sum(share for _, share in mix) == pytest.approx(1.0)
    assert all(m < rates.LARGE_MATRIX for m, _ in mix)  # SmolLM2's shapes: all below 2048 x 2048
    per_elem = sum(share * c.linear_s("float32", 1, 1.0, matrix=m) for m, share in mix)
    lm_head = p.vocab_size * p.hidden_size * (c.linear_s("float32", 1, 1.0, matrix=p.hidden_size**2) - 1e-9)
    assert lm_head > 0  # at its inner dimension's rate: a hidden x hidden matrix's
    assert slow.tpot_s - fast.tpot_s == pytest.approx(p.linear_params * (per_elem - 1e-9) + lm_head, rel=1e-6)


def test_emulated_dtype_is_as_slow_as_the_host_measured_it():
    fast, slow = cal(), cal()
    slow.linear_s_per_elem["float16"] = {r: v * 10 for r, v in slow.linear_s_per_elem["float16"].items()}
    s = EstimateSettings(dtype="float16", platform="cpu", input_len=16, max_new_tokens=8)
    t_fast = estimate(llama(), s, cpu_acc(fast)).speed.expected.tpot_s
    t_slow = estimate(llama(), s, cpu_acc(slow)).speed.expected.tpot_s
    assert t_slow > 5 * t_fast  # the emulated fp16 matmuls dominate the step


def test_eager_prefill_pays_for_the_full_score_matrix_sdpa_for_half():
    c = cal()
    s = EstimateSettings(dtype="float32", platform="cpu", input_len=2048, max_new_tokens=8, attn="sdpa")
    sdpa = estimate(llama(), s, cpu_acc(c)).speed.expected
    eager = estimate(llama(), s.model_copy(update={"attn": "eager"}), cpu_acc(c)).speed.expected
    rate = 2 * 256 / c.linear_s_per_elem["float32"][256]
    half = 4 * L * 9 * 64 * 2048 * 2048 / 2 / rate
    scores = L * 9 * 2048 * 2048 * (6 * 4 + 8) / c.copy_Bps  # scores, mask, fp32 softmax, read back
    assert eager.prefill_s - sdpa.prefill_s == pytest.approx(half + scores, rel=1e-6)
    # decode: eager repeats the 3 KV heads to 9 query heads (read 1, write 3) and reads the copy (3)
    assert library.kv_traffic(llama(), s.model_copy(update={"attn": "eager"})) == 2 + 1 + 2 * 3
    assert library.kv_traffic(llama(), s.model_copy(update={"kv_cache": "static"})) == 1


def test_small_model_on_a_gpu_is_host_bound_and_compiling_removes_it():
    h100 = find_accelerator("H100 SXM")
    s = EstimateSettings(dtype="bfloat16", input_len=64, max_new_tokens=64)
    eager = estimate(llama(), s, h100).speed
    compiled = estimate(llama(), s.model_copy(update={"compile": True}), h100).speed
    host = factors.CUDA_STEP_S + L * factors.CUDA_LAYER_S["sdpa"]
    # launches, not bytes, set the pace; a dynamic cache's attention adds to it (estimate/library.py)
    assert eager.expected.tpot_s == pytest.approx(host + factors.SYNC_S + eager.expected.attention_s_per_step)
    assert eager.expected.attention_s_per_step < 0.01 * host
    assert eager.expected.tpot_s > 5 * eager.bound.tpot_s
    assert compiled.expected.tpot_s < eager.expected.tpot_s / 3
    assert compiled.expected.tpot_s >= compiled.bound.tpot_s  # never faster than the roofline


def big_llama(**kw):
    """Llama-3-70B's shape (80 layers, hidden 8192, GQA 64/8)."""
    return llama(
        num_layers=80,
        hidden_size=8192,
        intermediate_size=28672,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        vocab_size=128256,
        tie_word_embeddings=False,
        layer_types=["full_attention"] * 80,
        num_parameters=70_553_706_496,
        param_groups={
            "embedding": 1_050_673_152,
            "lm_head": 1_050_673_152,
            "linear": 68_451_041_280,
            "other": 1_318_912,
        },
        linear_rows=None,
        **kw,
    )


def test_large_model_on_a_gpu_is_bandwidth_bound_at_the_kernel_efficiency():
    big = big_llama()
    a100 = find_accelerator("A100 80GB")
    s = EstimateSettings(dtype="bfloat16", input_len=64, max_new_tokens=64, compile=True)
    e = estimate(big, s, a100)
    weights_only = e.memory.weights_bytes / (a100.bandwidth_Bps * factors.GPU_BW_EFF)
    assert e.speed.expected.tpot_s == pytest.approx(weights_only, rel=0.03)


def test_bitsandbytes_4bit_batch_one_kernel_and_dequantizing_batches():
    h100 = find_accelerator("H100 SXM")
    from infertune.estimate.memory import Quantization

    s = EstimateSettings(dtype="bfloat16", input_len=64, max_new_tokens=64, quantization=Quantization.parse("bnb-nf4"))
    one = estimate(llama(), s, h100).speed.expected
    dq = estimate(llama(), s.model_copy(update={"quantization": Quantization.parse("bnb-nf4-dq")}), h100).speed.expected
    eight = estimate(llama(), s.model_copy(update={"batch": 8}), h100).speed.expected
    k = factors.QUANT_KERNELS["bnb-nf4"]
    per_layer = factors.CUDA_LAYER_S["sdpa"] + factors.LINEARS_PER_LAYER * k["linear_s"]
    assert one.tpot_s == pytest.approx(factors.CUDA_STEP_S + L * per_layer + factors.SYNC_S + one.attention_s_per_step)
    assert dq.tpot_s - one.tpot_s == pytest.approx(L * factors.LINEARS_PER_LAYER * k["dq_linear_s"])
    assert eight.tpot_s - eight.attention_s_per_step - (one.tpot_s - one.attention_s_per_step) == pytest.approx(
        L * factors.LINEARS_PER_LAYER * (k["dequant_linear_s"] - k["linear_s"])
    )


def test_a_gpu_calibration_replaces_the_published_factors():
    h100 = find_accelerator("H100 SXM").model_copy(update={"calibration": cal("NVIDIA H100", step=1e-3, layer=0.1e-3)})
    s = EstimateSettings(dtype="bfloat16", input_len=64, max_new_tokens=64)
    x = estimate(llama(), s, h100).speed.expected
    assert x.fixed_s_per_step == pytest.approx(1e-3 + L * 0.1e-3)
    assert x.basis == "calibrated on this host (NVIDIA H100)"


def test_cuda_context_by_generation_torch_version_and_backend():
    base = EstimateSettings(platform="cuda", compute_capability="8.0", torch_version="2.5.1")
    a100, _ = overhead.cuda_context_bytes(base)
    old, _ = overhead.cuda_context_bytes(base.model_copy(update={"torch_version": "1.12.1"}))
    h100, _ = overhead.cuda_context_bytes(base.model_copy(update={"compute_capability": "9.0"}))
    from infertune.estimate.memory import Quantization

    bnb, f = overhead.cuda_context_bytes(base.model_copy(update={"quantization": Quantization.parse("bnb-nf4")}))
    assert 0.8e9 <= a100 <= 1.7e9 and old > a100 and h100 > a100 and bnb > a100 and "bnb-nf4 kernels" in f
    m = estimate_memory(llama(), base)
    assert m.overhead_bytes + m.kv_growth_reserve_bytes == m.cuda_context_bytes + m.allocator_reserve_bytes
    assert m.cuda_context_bytes == a100


def test_quantization_workspace_and_cache_growth_are_counted():
    from infertune.estimate.memory import Quantization

    s = EstimateSettings(dtype="bfloat16", input_len=512, max_new_tokens=512, platform="cpu")
    nf4 = estimate_memory(llama(), s.model_copy(update={"quantization": Quantization.parse("bnb-nf4")}))
    ws = next(c for c in nf4.components if c.name == "quantization_workspace")
    assert ws.bytes == 576 * 1536 * 2  # one dequantized MLP weight in bf16
    static = estimate_memory(llama(), s.model_copy(update={"kv_cache": "static"}))
    dynamic = estimate_memory(llama(), s)
    assert overhead.cache_growth_bytes(dynamic.kv_cache_bytes, llama(), s) == dynamic.kv_cache_bytes / 60
    assert overhead.cache_growth_bytes(static.kv_cache_bytes, llama(), s.model_copy(update={"kv_cache": "static"})) == 0


class FakeNvml:
    def __init__(self, pid):
        self.pid, self.by = pid, None

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.by = uuid
        return "h"

    def nvmlDeviceGetHandleByIndex(self, i):
        self.by = i
        return "h"

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=5 * 2**30)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [
            types.SimpleNamespace(pid=1, usedGpuMemory=2**30),
            types.SimpleNamespace(pid=self.pid, usedGpuMemory=3 * 2**30),
        ]


def test_nvml_reports_this_process_and_the_device_found_by_uuid():
    nv = FakeNvml(pid=4242)
    assert nvml_used("abc", 0, 4242, nv) == (3 * 2**30, 5 * 2**30) and nv.by == "GPU-abc"
    assert nvml_used(None, 1, 7, nv) == (None, 5 * 2**30) and nv.by == 1


def test_cuda_meter_reads_allocated_reserved_and_nvml_after_generation():
    import os

    class FakeCuda:
        def synchronize(self, d):
            pass

        def reset_peak_memory_stats(self, d):
            pass

        def max_memory_allocated(self, d):
            return 100

        def max_memory_reserved(self, d):
            return 150

        def memory_allocated(self, d):
            return 50

        def get_device_properties(self, i):
            return types.SimpleNamespace(uuid="GPU-xyz")

    meter = CudaMeter("cuda:0", FakeCuda(), FakeNvml(pid=os.getpid()))
    with meter.generate_phase() as phase:
        pass
    assert phase.peak == 100 and meter.reserved_peak() == 150
    assert meter.process_used == 3 * 2**30 and meter.device_used == 5 * 2**30


def test_uncalibrated_cpu_slows_half_types_it_cannot_compute_natively(monkeypatch):
    s = EstimateSettings(dtype="float16", platform="cpu", input_len=16, max_new_tokens=8)
    no_fp16 = lambda path="/proc/cpuinfo": {"avx2", "avx512f", "avx512_bf16"}  # noqa: E731
    monkeypatch.setattr(calibration, "cpu_flags", no_fp16)
    monkeypatch.setattr(host, "cpu_flags", no_fp16)  # expected.cpu_emulation_slowdown reads the host's flags here
    emulated = estimate(llama(), s, cpu_acc(None)).speed.expected
    native = estimate(llama(), s.model_copy(update={"dtype": "bfloat16"}), cpu_acc(None)).speed.expected
    assert (
        X.cpu_emulation_slowdown("float16") == factors.CPU_EMULATED_SLOWDOWN
        and X.cpu_emulation_slowdown("bfloat16") == 1
    )
    assert emulated.tpot_s > 2 * native.tpot_s
    assert emulated.basis.startswith("probed CPU rates")


def test_a_growing_dynamic_cache_reserves_about_its_size_beside_the_tensors():
    s = EstimateSettings(dtype="float16", input_len=512, max_new_tokens=512, batch=8, platform="cuda")
    dynamic = estimate_memory(llama(), s)
    static = estimate_memory(llama(), s.model_copy(update={"kv_cache": "static"}))
    prefill_only = estimate_memory(llama(), s.model_copy(update={"max_new_tokens": 1}))
    assert (
        overhead.growth_reserve_bytes(dynamic.kv_cache_bytes, s)
        == overhead.CACHE_GROWTH_RESERVE * dynamic.kv_cache_bytes
    )
    tensors = dynamic.total_bytes - dynamic.overhead_bytes - dynamic.kv_growth_reserve_bytes
    assert dynamic.allocator_reserve_bytes == int(0.05 * tensors + 0.8 * dynamic.kv_cache_bytes)
    assert any(c.name == "kv_growth_reserve" for c in dynamic.components)
    assert static.allocator_reserve_bytes == int(0.05 * (static.total_bytes - static.overhead_bytes))
    assert prefill_only.allocator_reserve_bytes < 0.06 * prefill_only.total_bytes


def test_moe_reads_only_the_experts_the_step_picks():
    """With the profile's expert facts (issue 18's ModelProfile.expert_params / expert_fraction), a decode step
    reads the shared weights and 1 - (1 - k/E)^tokens of the routed experts."""
    from infertune.probe.model import ModelProfile

    class MoE(ModelProfile):
        @property
        def expert_params(self) -> int:
            return int(0.9 * (self.num_parameters or 0))

        def expert_fraction(self, tokens: int = 1) -> float:
            return 1 - (1 - 2 / 8) ** max(tokens, 1)

    base = big_llama()
    moe = MoE(**base.model_dump())
    assert X._active_weights(moe, 1000.0, 1) == pytest.approx(1000 - 900 * (1 - 0.25), rel=1e-6)
    assert X._active_weights(moe, 1000.0, 64) == pytest.approx(1000.0, rel=1e-6)  # a big batch touches them all
    assert X._active_weights(base, 1000.0, 1) == 1000.0  # a dense profile: everything
    h100 = find_accelerator("H100 SXM")
    s = EstimateSettings(dtype="bfloat16", input_len=64, max_new_tokens=64, compile=True)
    assert estimate(moe, s, h100).speed.expected.tpot_s < estimate(base, s, h100).speed.expected.tpot_s


def test_an_attention_the_calibration_did_not_time_says_so():
    """flex_attention on a calibrated CPU is timed with sdpa's figures, and the basis says it (the demo measured
    flex_attention at 7x sdpa's TTFT on this CPU, 322 ms against 45 ms)."""
    p = llama()
    s = EstimateSettings(dtype="bfloat16", platform="cpu", input_len=100, max_new_tokens=20)
    flex, sdpa = (
        estimate(p, s.model_copy(update={"attn": a}), cpu_acc(cal())).speed.expected for a in ("flex_attention", "sdpa")
    )
    assert "flex_attention is not calibrated here" in flex.basis and "not calibrated" not in sdpa.basis
    assert flex.tpot_s == sdpa.tpot_s


def test_cpu_overhead_holds_the_tokenizer_by_vocabulary_size():
    # measured here: SmolLM2's 49k-token tokenizer ~18 MiB resident, Gemma 3's 262k ~251 MiB, a tiny one ~0
    s = EstimateSettings(dtype="bfloat16", platform="cpu", input_len=128, max_new_tokens=32)
    small, big, tiny = llama(), llama(vocab_size=262144), llama(vocab_size=500)
    assert overhead.tokenizer_bytes(tiny) == 0
    assert overhead.tokenizer_bytes(small) == (49152 - 32768) * 1150  # 18.0 MiB
    assert overhead.tokenizer_bytes(big) == (262144 - 32768) * 1150  # 251.6 MiB
    m_small, m_big = estimate_memory(small, s), estimate_memory(big, s)
    assert m_small.overhead_bytes == 107 * 2**20 + overhead.tokenizer_bytes(small)  # 125 MiB, as before
    assert m_big.overhead_bytes - m_small.overhead_bytes == (262144 - 49152) * 1150
    assert "tokenizer 251 MiB" in next(c.formula for c in m_big.components if c.name == "overhead")
    # on CUDA the tokenizer is host memory: the device's overhead does not change with the vocabulary
    g = s.model_copy(update={"platform": "cuda"})
    assert estimate_memory(big, g).cuda_context_bytes == estimate_memory(small, g).cuda_context_bytes
