"""The host calibration itself (estimate/calibration.py): its cache and key, the rates' interpolation and the
microbenchmarks' code at toy sizes. How the expected model uses a calibration: tests/test_expected.py."""

import json

import pytest

from infertune.estimate import calibration, microbench, rates
from infertune.probe import host
from tests.estimate.test_expected import cal


def test_cpu_flags_and_native_half_types(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    flags = host.cpu_flags(str(info))
    assert {"avx512_bf16", "avx2"} <= flags
    assert host.native_cpu_dtypes(flags) == {"bfloat16": True, "float16": False}
    assert host.native_cpu_dtypes({"avx2", "amx_bf16", "amx_fp16"}) == {"bfloat16": True, "float16": True}
    assert host.cpu_flags(str(tmp_path / "missing")) == set()


def test_calibration_is_measured_once_and_cached(infertune_home, monkeypatch):
    calls = []

    def fake_measure(device="cpu"):
        calls.append(device)
        return cal().model_copy(update={"host_key": calibration.host_key("cpu")})

    monkeypatch.delenv("INFERTUNE_NO_CALIBRATION", raising=False)
    monkeypatch.setattr(calibration, "measure", fake_measure)
    first = calibration.cached("cpu")
    second = calibration.cached("cpu")
    assert calls == ["cpu"] and first == second
    path = calibration.cache_path("cpu")
    assert path.is_relative_to(infertune_home) and json.loads(path.read_text())["kind"] == "calibration"
    data = json.loads(path.read_text())
    data["host_key"] = "another machine"
    path.write_text(json.dumps(data))
    calibration.cached("cpu")
    assert calls == ["cpu", "cpu"]  # a different host (or torch, or thread count) measures again
    assert calibration.cached("cpu", measure_if_missing=False) is not None


def test_the_host_key_is_read_without_torch_once_remembered(infertune_home):
    """A warm estimate checks its cached calibration without importing torch (seconds): the key torch gives is
    remembered per fingerprint of what decides it, and a change there (here the thread variable) asks torch."""
    import os
    import subprocess
    import sys

    code = (
        "import json, sys; from infertune.estimate import calibration; "
        "print(json.dumps([calibration.host_key('cpu'), 'torch' in sys.modules]))"
    )

    def child(**env):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return json.loads(out.stdout)

    key, asked_torch = child()
    import torch

    assert asked_torch and key.startswith("cpu|") and key.endswith(f"|torch={torch.__version__}")
    assert child() == [key, False]
    one_thread = child(OMP_NUM_THREADS="1")
    assert one_thread[1] and "|threads=1|" in one_thread[0]
    assert child(OMP_NUM_THREADS="1") == [one_thread[0], False] and child() == [key, False]


def test_linear_time_interpolates_between_measured_rows():
    c = cal(s_per_elem=1e-9)
    assert c.linear_s("float32", 1, 100) == pytest.approx(1e-7)
    assert c.linear_s("float32", 512, 100) == pytest.approx(100 * 1e-9 * 16 * 2)  # beyond 256: linear in rows
    assert c.linear_s("float32", 32, 100) == pytest.approx(100 * 1e-9 * 2, rel=1e-9)  # log-interpolated 16..64


def test_the_real_microbenchmarks_measure_every_cell(monkeypatch):
    """The calibration's own code on this CPU, at toy sizes (values depend on the machine: only shape and sign)."""
    lin = microbench.measure_linear(seconds=0.001, elems_per_matrix=64 * 64, matrices=2, rounds=1)
    assert set(lin) == set(microbench.DTYPES)
    assert all(set(v) == set(microbench.ROWS) and all(x > 0 for x in v.values()) for v in lin.values())
    step, layer = microbench.measure_overhead(seconds=0.001, rounds=1, lengths=(1, 3), calls=1)
    assert set(step) == set(layer) == set(microbench.ATTNS)
    assert all(v >= 0 for v in (*step.values(), *layer.values()))
    attn = microbench.measure_attention(seconds=0.001, heads=1, head_dim=8, rows=2)
    assert set(attn) == {"decode", "prefill", "prefill_one"}
    assert all(
        set(v) == (set(microbench.ATTNS) if phase != "prefill_one" else {"eager"})
        and all(set(d) == set(microbench.DTYPES) for d in v.values())
        for phase, v in attn.items()
    )
    assert all(r > 0 for v in attn.values() for d in v.values() for r in d.values())


def test_the_calibration_keeps_the_typical_call_and_the_probe_the_fastest(monkeypatch):
    """`time_calls` on a clock the calls themselves advance: the fastest call for the probe's bound, the median call
    for the calibration (what a run meets on average), after one warm-up call that is never counted."""
    clock = {"now": 0.0}
    durations = iter([9.0, 0.3, 0.1, 0.5, 0.2, 0.4] * 50)  # the first is the warm-up

    def call():
        clock["now"] += next(durations)

    monkeypatch.setattr(microbench.time, "perf_counter", lambda: clock["now"])
    assert microbench.time_calls(call, seconds=1.4, calls=5) == pytest.approx(0.1)
    durations = iter([9.0, 0.3, 0.1, 0.5, 0.2, 0.4] * 50)
    assert microbench.time_calls(call, seconds=1.4, calls=5, typical=True) == pytest.approx(0.3)
    # a warm-up slower than `slow_s` (an emulated dtype) is the figure, and nothing more is called
    durations = iter([9.0, 0.3])
    assert microbench.time_calls(call, seconds=1.4, calls=5, typical=True, slow_s=0.5) == pytest.approx(9.0)
    durations = iter([0.4, 0.3, 0.1, 0.5, 0.2, 0.4] * 50)
    assert microbench.time_calls(call, seconds=1.4, calls=5, typical=True, slow_s=0.5) == pytest.approx(0.3)
    # `before` runs ahead of every call (the warm-up included) and its time is not the call's
    durations, calls = iter([9.0, 0.3, 0.1, 0.5, 0.2, 0.4] * 50), []

    def before():
        calls.append(clock["now"])
        clock["now"] += 100.0

    assert microbench.time_calls(call, seconds=1.4, calls=5, before=before) == pytest.approx(0.1)
    assert len(calls) == 6


def test_eager_prefill_attention_runs_faster_while_its_scores_fit_the_caches():
    """measure_attention times eager prefill over one sequence (32 MB of fp32 scores) and over four (128 MB); the
    rate for a model's score matrix is log-interpolated between them by its size, clamped beyond."""
    c = cal()
    c.attn_flops_per_s = {"prefill": {"eager": {"bfloat16": 1e10}}, "prefill_one": {"eager": {"bfloat16": 4e10}}}
    lo = rates.EAGER_SCORES_BYTES
    assert c.eager_prefill_rate("bfloat16", lo) == pytest.approx(4e10)
    assert c.eager_prefill_rate("bfloat16", lo / 10) == pytest.approx(4e10)
    assert c.eager_prefill_rate("bfloat16", 4 * lo) == pytest.approx(1e10)
    assert c.eager_prefill_rate("bfloat16", 40 * lo) == pytest.approx(1e10)
    assert c.eager_prefill_rate("bfloat16", 2 * lo) == pytest.approx(2e10)  # halfway in log size: geometric mean
    assert c.eager_prefill_rate("float32", lo) is None  # not measured: the matmul-rate model
    del c.attn_flops_per_s["prefill_one"]
    assert c.eager_prefill_rate("bfloat16", lo) == 1e10  # an older calibration: the 4-sequence rate


def test_freed_heap_pages_go_back_to_the_os(monkeypatch):
    """The eager-attention microbenchmark starts each call on fresh pages, as a trial's fresh process does:
    pages freed in the middle of the heap (a live block after them keeps glibc from trimming on free) stay in
    the process until `release_freed_memory` hands them back."""
    psutil = pytest.importorskip("psutil")
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc_trim")
    rss = psutil.Process().memory_info
    blocks = [bytearray(64 * 1024) for _ in range(2000)]  # 128 MB of heap blocks (below the mmap threshold)
    pin = bytearray(64 * 1024)
    del blocks
    held = rss().rss
    assert host.release_freed_memory()
    assert rss().rss < held - 64 * 2**20
    del pin
    # without glibc: False, nothing raised
    monkeypatch.setattr("ctypes.CDLL", lambda *a, **k: (_ for _ in ()).throw(OSError("no libc")))
    assert host.release_freed_memory() is False
