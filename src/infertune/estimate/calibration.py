"""This host, measured once and cached: what the expected-speed model needs beyond the datasheet.

Measured (~35 s on 2 cores, once per host, torch version and thread count; cached as JSON under
`$INFERTUNE_HOME/calibration/`):

- `linear_s_per_elem[dtype][rows]`: seconds per weight element of `F.linear` with `rows` activation rows,
  weights streamed from memory (a set of matrices larger than the caches, cycled). Decode at batch 1 is
  rows=1 (a GEMV: the effective weight-read bandwidth of that dtype's kernel), prefill is many rows
  (compute-bound). This is where CPU dtype emulation shows: fp16 on a CPU without AVX512-FP16, bf16
  without AVX512-BF16/AMX.
- `step_s[attn]` and `layer_s[attn]`: the fixed cost of one decoding step of `generate` (bookkeeping,
  logits processors, cache update) and of one decoder layer (Python and dispatch of its ~40 ops),
  measured by timing generate on two tiny Llama models (1 and 5 layers, hidden 64): their compute is
  negligible, so what remains is the per-step and per-layer overhead, by attention implementation.
- `attn_flops_per_s[phase][attn][dtype]`: attention as transformers runs it (eager: two matmuls and an fp32
  softmax; sdpa: `F.scaled_dot_product_attention`), timed on its own for one decode query over a 2,048-token
  cache and for a causal 1,024-token prefill, as FLOP/s counted the way the expected model counts them. The
  matmul rate does not carry over: on CPUs bf16 attention runs several times below the bf16 GEMM rate.
- `in_model_x`: on a CPU, a reference model's generate against what the figures above expect (anchor.py).
- on CUDA the same microbenchmarks on the device, synchronised.

`probe.host.cpu_flags()` reads /proc/cpuinfo: the defaults when no calibration exists (estimating for another CPU)
and the explanation of what the calibration measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from infertune.estimate.microbench import measure_attention, measure_linear, measure_overhead, time_calls
from infertune.estimate.rates import CAL_VERSION, SMALL_MATRIX, Calibration
from infertune.probe.host import cpu_flags, cpu_model_name, host_fingerprint


def _torch_host_key(device: str) -> str:
    import torch

    return f"{device}|{cpu_model_name()}|threads={torch.get_num_threads()}|torch={torch.__version__}"


def host_key(device: str = "cpu") -> str:
    """CPU model, torch's thread count and torch's version. Reading the last two imports torch (seconds), so
    the key is remembered per `host_fingerprint` in `calibration/host-keys.json`: a warm estimate reads it
    without torch. (The thread count is the one torch reported in the first process to meet this
    fingerprint; infertune never changes it in its own process.)"""
    from infertune.core.paths import home, write_json_atomic

    memo_file, fingerprint = home() / "calibration" / "host-keys.json", host_fingerprint(device)
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
        if isinstance(memo.get(fingerprint), str):
            return memo[fingerprint]
    except (OSError, ValueError, AttributeError):
        memo = {}
    key = _torch_host_key(device)
    with contextlib.suppress(OSError):  # a read-only home: torch is asked every time
        write_json_atomic(memo_file, {**dict(list(memo.items())[-15:]), fingerprint: key})
    return key


def cache_path(device: str = "cpu") -> Path:
    from infertune.core.paths import home

    safe = "".join(c if c.isalnum() else "-" for c in device.lower())
    return home() / "calibration" / f"{safe}.json"


def measure(device: str = "cpu") -> Calibration:
    """Measure this host (or the CUDA device `cuda:N`) now: ~35 s on a 2-core CPU (35.4 s at load 0.31 per core)."""
    import torch

    load = load_per_core()  # before our own threads add to it
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else None
    n = 64 * 2**20 // 4
    a, b = torch.ones(n, device=device), torch.empty(n, device=device)
    copy = 2 * n * 4 / time_calls(lambda: b.copy_(a), 0.2, sync, typical=True)
    lin = measure_linear(device, sync=sync)
    lin_small = measure_linear(device, sync=sync, elems_per_matrix=SMALL_MATRIX, matrices=64)
    step, layer = measure_overhead(device, sync=sync)
    attn = measure_attention(device, sync=sync)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    cal = Calibration(
        device=name,
        host_key=host_key(name),
        measured_at=time.time(),
        load_per_core=load,
        copy_Bps=copy,
        linear_s_per_elem=lin,
        linear_small_s_per_elem=lin_small,
        step_s=step,
        layer_s=layer,
        attn_flops_per_s=attn,
        cpu_flags=sorted(f for f in cpu_flags() if "avx" in f or "amx" in f or f in ("bf16", "asimdhp")),
    )
    if device == "cpu":  # a reference model's generate against what the figures above expect of it
        from infertune.estimate.anchor import measure_in_model

        cal.in_model_x = measure_in_model(cal, device)
    return cal


BUSY_LOAD = 1.0  # load average per core above which a calibration is taken again once the host is quieter


def load_per_core() -> float | None:
    return os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else None


def quieter_than(then: float | None) -> bool:
    """Whether a measurement taken at load/core `then` (busy: above BUSY_LOAD) should be taken again because the
    host is clearly quieter now (under BUSY_LOAD and under half of `then`)."""
    if then is None or then <= BUSY_LOAD:
        return False
    now = load_per_core()
    return now is not None and now < min(BUSY_LOAD, then / 2)


def _quieter_now(cal: Calibration) -> bool:
    """A calibration taken while other work shared the cores is replaced once the host is clearly quieter."""
    return cal.device == "cpu" and quieter_than(cal.load_per_core)


def cached(device: str = "cpu", *, measure_if_missing: bool = True, say: Any = None) -> Calibration | None:
    """This host's calibration: from the cache when its host key matches, else measured now and cached
    (None when `measure_if_missing` is False and none is cached). `INFERTUNE_NO_CALIBRATION=1` skips it."""
    from infertune.core.paths import write_json_atomic

    if os.environ.get("INFERTUNE_NO_CALIBRATION") == "1":
        return None
    path = cache_path("cpu" if device == "cpu" else "cuda")
    if path.is_file():
        try:
            cal = Calibration.model_validate(json.loads(path.read_text(encoding="utf-8")))
            if cal.version == CAL_VERSION and cal.host_key == host_key(cal.device) and not _quieter_now(cal):
                return cal
        except (ValueError, OSError):
            pass
    if not measure_if_missing:
        return None
    note = f"calibrating this host once (~35 s: kernel speeds, fixed costs, a reference model; cached in {path})"
    if say:
        say(note)
    else:  # half a minute of silence would look like a hang
        print(note, file=sys.stderr, flush=True)
    if device.startswith("cuda"):  # in a child: this process must not hold a CUDA context (trials need the memory)
        import subprocess

        done = subprocess.run(
            [sys.executable, "-m", "infertune.estimate.calibration", device],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not path.is_file():
            return None
        return Calibration.model_validate(json.loads(path.read_text(encoding="utf-8")))
    cal = measure(device)
    write_json_atomic(path, cal.model_dump(mode="json"))
    return cal


if __name__ == "__main__":  # python -m infertune.estimate.calibration [cpu|cuda|cuda:N]: measure now, cache, print
    from infertune.core.paths import write_json_atomic

    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    result = measure(dev)
    out = cache_path("cpu" if dev == "cpu" else "cuda")
    write_json_atomic(out, result.model_dump(mode="json"))
    print(out)
